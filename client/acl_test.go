package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

func TestDigestIDIsZooKeepers(t *testing.T) {
	// Values published by ZooKeeper and its users: ZooKeeper's own tests
	// configure the superuser "super:D/InIHSb7yEEbrWz8b9l71RjZJU=" with the
	// comment that its password is "test", and its access control
	// documentation derives user1:12345 with openssl.
	for _, tc := range []struct{ user, password, want string }{
		{"super", "test", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="},
		{"user1", "12345", "user1:+owfoSBn/am19roBPzR1/MfCblE="},
	} {
		if got := DigestID(tc.user, tc.password); got != tc.want {
			t.Errorf("DigestID(%q, %q) = %q, want %q", tc.user, tc.password, got, tc.want)
		}
	}
	want := ACL{Perms: PermRead | PermAdmin, Scheme: "digest", ID: "super:D/InIHSb7yEEbrWz8b9l71RjZJU="}
	if got := DigestACL(PermRead|PermAdmin, "super", "test"); got != want {
		t.Errorf("DigestACL = %v, want %v", got, want)
	}
}

func TestACLHelpers(t *testing.T) {
	for _, tc := range []struct {
		got  ACL
		want string
	}{
		{WorldACL(PermAll), "world:anyone:cdrwa"},
		{WorldACL(PermRead), "world:anyone:r"},
		{IPACL(PermRead|PermWrite, "10.0.0.0/8"), "ip:10.0.0.0/8:rw"},
		{AuthACL(PermAll), "auth::cdrwa"},
		{X509ACL(PermAdmin, "CN=alice,O=Acme"), "x509:CN=alice,O=Acme:a"},
		{SASLACL(PermAll, "alice"), "sasl:alice:cdrwa"},
	} {
		if tc.got.String() != tc.want {
			t.Errorf("%v, want %s", tc.got, tc.want)
		}
		back, err := ParseACL(tc.want)
		if err != nil || len(back) != 1 || back[0] != tc.got {
			t.Errorf("ParseACL(%q) = %v, %v; want [%v]", tc.want, back, err, tc.got)
		}
	}
}

func TestParseACL(t *testing.T) {
	hash := "alice:" + strings.Split(DigestID("alice", "pw"), ":")[1]
	for _, tc := range []struct {
		in   string
		want []ACL
		bad  string // a part of the error, for bad input
	}{
		{in: "world:anyone:cdrwa", want: []ACL{WorldACL(PermAll)}},
		{in: "digest:" + hash + ":cdrwa,ip:10.0.0.0/8:r", want: []ACL{
			{Perms: PermAll, Scheme: "digest", ID: hash}, IPACL(PermRead, "10.0.0.0/8")}},
		{in: " world:anyone:r , auth::rw", want: []ACL{WorldACL(PermRead), AuthACL(PermRead | PermWrite)}},
		{in: "ip:::1:a", want: []ACL{IPACL(PermAdmin, "::1")}},
		{in: "ip:127.0.0.1:rwcda", want: []ACL{IPACL(PermAll, "127.0.0.1")}},
		{in: "x509:CN=alice,O=Acme:r,world:anyone:r", want: []ACL{X509ACL(PermRead, "CN=alice,O=Acme"), WorldACL(PermRead)}},
		{in: "world:anyone:", want: []ACL{WorldACL(0)}},
		{in: "sasl:alice:cdrwa,world:anyone:r", want: []ACL{SASLACL(PermAll, "alice"), WorldACL(PermRead)}},

		{in: "", bad: "not scheme:id:perms"},
		{in: "world", bad: "not scheme:id:perms"},
		{in: "world:cdrwa", bad: "not scheme:id:perms"},
		{in: "world:anyone:cdrwx", bad: `unknown permission 'x'`},
		{in: "world:everyone:r", bad: "world's only id is anyone"},
		{in: "digest:alice:r", bad: "a digest id is user:base64"},
		{in: "digest::hash:r", bad: "a digest id is user:base64"},
		{in: "ip:10.0.0.300:r", bad: "an ip id is an address or a CIDR block"},
		{in: "ip:10.0.0.0/33:r", bad: "an ip id is an address or a CIDR block"},
		{in: "x509::r", bad: "an x509 id is a certificate subject"},
		{in: "sasl::r", bad: "a sasl id is a user name"},
		{in: "kerberos:bob:r", bad: `unknown scheme "kerberos"`},
		{in: "world:anyone:r,", bad: `unknown permission ','`},
	} {
		got, err := ParseACL(tc.in)
		if tc.bad != "" {
			if err == nil || !errors.Is(err, ErrInvalidACL) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseACL(%q) = %v, %v; want an ErrInvalidACL saying %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseACL(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if again, err := ParseACL(FormatACL(got)); err != nil || !slices.Equal(again, got) {
			t.Errorf("ParseACL(FormatACL(%v)) = %v, %v", got, again, err)
		}
	}
}

func TestCreateGetACLAndSetACL(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	acl := []ACL{DigestACL(PermAll, "alice", "pw"), WorldACL(PermRead)}
	if _, err := c.Create(ctx, "/a", nil, Persistent, WithACL(acl...)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, "/open", nil, Persistent)
	got, st, err := c.GetACL(ctx, "/a")
	if err != nil || !slices.Equal(got, acl) || st.Aversion != 0 {
		t.Fatalf("GetACL /a = %v, %+v, %v; want %v at aversion 0", got, st, err, acl)
	}
	if got, _, err := c.GetACL(ctx, "/open"); err != nil || !slices.Equal(got, []ACL{WorldACL(PermAll)}) {
		t.Errorf("GetACL of a node created without an ACL = %v, %v; want the default", got, err)
	}
	if reqs := s.received(); len(reqs[1].ACL) != 0 {
		t.Errorf("a create without WithACL sent ACL %v; want none (the server's default)", reqs[1].ACL)
	}

	if _, err := c.SetACL(ctx, "/a", []ACL{WorldACL(PermAll)}, 1); !errors.Is(err, ErrBadVersion) {
		t.Errorf("SetACL at the wrong aversion: %v, want ErrBadVersion", err)
	}
	st, err = c.SetACL(ctx, "/a", []ACL{WorldACL(PermAll)}, 0)
	if err != nil || st.Aversion != 1 {
		t.Fatalf("SetACL = %+v, %v; want aversion 1", st, err)
	}
	if _, err := c.SetACL(ctx, "/a", nil, -1); !errors.Is(err, ErrInvalidACL) {
		t.Errorf("SetACL with no entries: %v, want ErrInvalidACL", err)
	}
	if _, err := c.Create(ctx, "/b", nil, Persistent, WithACL()); !errors.Is(err, ErrInvalidACL) {
		t.Errorf("Create WithACL of no entries: %v, want ErrInvalidACL", err)
	}
	if _, _, err := c.GetACL(ctx, "/missing"); !errors.Is(err, ErrNoNode) {
		t.Errorf("GetACL of a missing node: %v, want ErrNoNode", err)
	}
	if _, _, err := c.GetACL(ctx, "bad"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("GetACL of a bad path: %v, want ErrInvalidPath", err)
	}
}

func TestMultiCreatesCarryTheirACL(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	acl := []ACL{IPACL(PermAll, "127.0.0.1")}
	if _, err := c.Multi(ctx, CreateOp("/m", nil, Persistent, WithACL(acl...)), CreateOp("/n", nil, Persistent)); err != nil {
		t.Fatal(err)
	}
	if got := s.node("/m").acl; !slices.Equal(got, acl) {
		t.Errorf("/m has ACL %v, want %v", got, acl)
	}
	if got := s.node("/n").acl; !slices.Equal(got, wire.OpenACL) {
		t.Errorf("/n has ACL %v, want the default", got)
	}
	_, err := c.Multi(ctx, CreateOp("/o", nil, Persistent, WithACL()))
	if me := (*MultiError)(nil); !errors.As(err, &me) || me.Index != 0 || !errors.Is(err, ErrInvalidACL) {
		t.Errorf("a multi create WithACL of no entries: %v, want a MultiError of op 0 matching ErrInvalidACL", err)
	}
}

// hasDigest reports whether ids has the digest identity of user.
func hasDigest(ids []Identity, user string) bool {
	return slices.Contains(ids, Identity{Scheme: "digest", ID: user})
}

func TestAuthIsSentAgainOnEveryConnectionBeforeAnythingElse(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen(), s.listen()}, WithAuth("digest", DigestCredential("alice", "pw")))
	ctx := context.Background()
	must(t, c.AddAuth(ctx, "digest", DigestCredential("bob", "pw")))
	mustCreate(t, c, "/w", nil, Persistent)
	_, _, changed, err := c.GetW(ctx, "/w")
	must(t, err)
	ids, err := c.WhoAmI(ctx)
	if err != nil || !hasDigest(ids, "alice") || !hasDigest(ids, "bob") {
		t.Fatalf("WhoAmI = %v, %v; want alice and bob", ids, err)
	}

	for range 2 {
		old := currentConn(c)
		before := len(s.received())
		s.dropConns()
		waitNewConn(t, c, old)
		ids, err = c.WhoAmI(ctx)
		if err != nil || !hasDigest(ids, "alice") || !hasDigest(ids, "bob") {
			t.Fatalf("WhoAmI after a reconnect = %v, %v; want alice and bob", ids, err)
		}
		// The new connection's first frames: the two credentials, in
		// order, then the watches, then the WhoAmI.
		var ops []string
		for _, r := range s.received()[before:] {
			ops = append(ops, r.Op.String()+" "+string(r.AuthData))
		}
		want := []string{"auth alice:pw", "auth bob:pw", "setWatches2 ", "whoAmI "}
		if !slices.Equal(ops, want) {
			t.Errorf("requests on the new connection: %q, want %q", ops, want)
		}
	}
	s.write(wire.Request{Op: wire.OpSetData, Path: "/w", Version: -1})
	expectEvent(t, changed, EventNodeDataChanged, "/w")
}

func TestARefusedAddAuthFailsAndIsNotSentAgain(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	s.refuseCred("mallory:pw")
	old := currentConn(c)
	err := c.AddAuth(ctx, "digest", DigestCredential("mallory", "pw"))
	if !errors.Is(err, ErrAuthFailed) || errors.Is(err, ErrSessionExpired) {
		t.Fatalf("AddAuth of a refused credential: %v, want ErrAuthFailed alone", err)
	}
	// The fake server, like ZooKeeper, closed the connection: the client
	// reconnects with its session and without the refused credential.
	waitNewConn(t, c, old)
	ids, err := c.WhoAmI(ctx)
	if err != nil || hasDigest(ids, "mallory") {
		t.Errorf("WhoAmI = %v, %v; want no mallory", ids, err)
	}
	if c.State() != StateConnected || c.Err() != nil {
		t.Errorf("state %v, err %v after a refused AddAuth; want connected", c.State(), c.Err())
	}
	if err := c.AddAuth(ctx, "", nil); !errors.Is(err, ErrBadArguments) {
		t.Errorf("AddAuth with no scheme: %v, want ErrBadArguments", err)
	}
}

func TestDialFailsWhenACredentialIsRefused(t *testing.T) {
	s := newFakeServer(t)
	addr := s.listen()
	s.refuseCred("mallory:pw")
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	c, err := Dial(ctx, []string{addr}, WithAuth("digest", DigestCredential("alice", "pw")),
		WithAuth("digest", DigestCredential("mallory", "pw")))
	if err == nil {
		c.Close()
		t.Fatal("Dial succeeded with a refused credential")
	}
	if !errors.Is(err, ErrAuthFailed) {
		t.Errorf("Dial: %v, want ErrAuthFailed", err)
	}
}

func TestACredentialRefusedOnReconnectEndsTheClient(t *testing.T) {
	for _, keepConn := range []bool{false, true} {
		name := map[bool]string{false: "the server closes the connection", true: "the server keeps the connection"}[keepConn]
		t.Run(name, func(t *testing.T) { testRefusedOnReconnect(t, keepConn) })
	}
}

func testRefusedOnReconnect(t *testing.T, keepConn bool) {
	s := newFakeServer(t)
	s.keepConn = keepConn
	c := dialFake(t, []string{s.listen()}, WithSessionRenewal())
	ctx := context.Background()
	must(t, c.AddAuth(ctx, "digest", DigestCredential("alice", "pw")))
	mustCreate(t, c, "/eph", nil, Ephemeral)
	_, _, watch, err := c.ExistsW(ctx, "/x")
	must(t, err)
	done := c.Done()

	s.refuseCred("alice:pw")
	s.dropConns()
	waitState(t, c, StateAuthFailed)
	wait(t, done)
	ev := wait(t, watch)
	if ev.Type != EventSession || ev.State != StateAuthFailed || !errors.Is(ev.Err, ErrAuthFailed) {
		t.Errorf("watch event %v, want a session event of StateAuthFailed matching ErrAuthFailed", ev)
	}
	for _, err := range []error{c.Err(), func() error { _, _, err := c.Get(ctx, "/"); return err }()} {
		if !errors.Is(err, ErrAuthFailed) || !errors.Is(err, ErrSessionExpired) {
			t.Errorf("after the refusal: %v, want ErrAuthFailed and ErrSessionExpired", err)
		}
	}
	if s.node("/eph") != nil {
		t.Error("the given up session's ephemeral is still there; the client should have closed the session")
	}
	if c.State() != StateAuthFailed {
		t.Errorf("state %v, want %v (no renewal after a refused credential)", c.State(), StateAuthFailed)
	}
}
