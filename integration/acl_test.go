package integration

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/server"
)

// These tests run the client's ACL API (and a recipe with an ACL) against
// real servers.

var (
	aliceAuth = client.WithAuth("digest", client.DigestCredential("alice", "secret"))
	aliceACL  = []client.ACL{client.DigestACL(client.PermAll, "alice", "secret")}
)

// denied checks that every op on the protected node /secure (and its child
// x) fails with ErrNoAuth for c.
func denied(t *testing.T, c *client.Client, who string) {
	t.Helper()
	ctx := testCtx(t)
	ops := map[string]error{}
	_, _, ops["get"] = c.Get(ctx, "/secure")
	_, _, ops["children"] = c.Children(ctx, "/secure")
	_, ops["set"] = c.Set(ctx, "/secure", []byte("x"), -1)
	_, ops["create"] = c.Create(ctx, "/secure/y", nil, client.Persistent)
	ops["delete"] = c.Delete(ctx, "/secure/x", -1)
	_, ops["setACL"] = c.SetACL(ctx, "/secure", []client.ACL{client.WorldACL(client.PermAll)}, -1)
	_, _, ops["getACL"] = c.GetACL(ctx, "/secure")
	for name, err := range ops {
		if !errors.Is(err, client.ErrNoAuth) {
			t.Errorf("%s: %s /secure: %v, want ErrNoAuth", who, name, err)
		}
	}
}

// allowed checks that c may read, write, create and delete in /secure.
func allowed(t *testing.T, c *client.Client, who string) {
	t.Helper()
	ctx := testCtx(t)
	if _, _, err := c.Get(ctx, "/secure"); err != nil {
		t.Fatalf("%s: get: %v", who, err)
	}
	if _, err := c.Set(ctx, "/secure", []byte(who), -1); err != nil {
		t.Fatalf("%s: set: %v", who, err)
	}
	if _, err := c.Create(ctx, "/secure/by-"+who, nil, client.Persistent, client.WithACL(aliceACL...)); err != nil {
		t.Fatalf("%s: create: %v", who, err)
	}
	if err := c.Delete(ctx, "/secure/by-"+who, -1); err != nil {
		t.Fatalf("%s: delete: %v", who, err)
	}
}

// protect makes /secure and /secure/x with alice's digest ACL, as owner.
func protect(t *testing.T, owner *client.Client) {
	t.Helper()
	ctx := testCtx(t)
	for _, p := range []string{"/secure", "/secure/x"} {
		if _, err := owner.Create(ctx, p, nil, client.Persistent, client.WithACL(aliceACL...)); err != nil {
			t.Fatal(err)
		}
	}
	got, st, err := owner.GetACL(ctx, "/secure")
	if err != nil || !slices.Equal(got, aliceACL) || st.Aversion != 0 {
		t.Fatalf("GetACL /secure = %v, %+v, %v; want %v", got, st, err, aliceACL)
	}
}

func TestADigestProtectedSubtreeDeniesOthersAndAllowsItsOwner(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	addr := s.Addr().String()
	owner := dial(t, addr, aliceAuth)
	protect(t, owner)
	allowed(t, owner, "owner")
	denied(t, dial(t, addr), "anonymous")
	denied(t, dial(t, addr, client.WithAuth("digest", client.DigestCredential("bob", "pw"))), "bob")
	denied(t, dial(t, addr, client.WithAuth("digest", client.DigestCredential("alice", "wrong"))), "alice with a wrong password")

	late := dial(t, addr)
	ctx := testCtx(t)
	if err := late.AddAuth(ctx, "digest", client.DigestCredential("alice", "secret")); err != nil {
		t.Fatal(err)
	}
	allowed(t, late, "late")
	ids, err := late.WhoAmI(ctx)
	if err != nil || !slices.Contains(ids, client.Identity{Scheme: "digest", ID: "alice"}) {
		t.Errorf("WhoAmI = %v, %v; want digest alice", ids, err)
	}
	if err := late.AddAuth(ctx, "kerberos", []byte("x")); !errors.Is(err, client.ErrAuthFailed) {
		t.Errorf("AddAuth of an unknown scheme: %v, want ErrAuthFailed", err)
	}
	if late.State() != client.StateConnected {
		t.Errorf("state %v after a refused AddAuth, want connected", late.State())
	}

	// setACL checks the ACL's version, and opening the node lets everyone in.
	if _, err := owner.SetACL(ctx, "/secure", []client.ACL{client.WorldACL(client.PermAll)}, 5); !errors.Is(err, client.ErrBadVersion) {
		t.Errorf("SetACL at a wrong version: %v, want ErrBadVersion", err)
	}
	if st, err := owner.SetACL(ctx, "/secure", []client.ACL{client.WorldACL(client.PermRead)}, 0); err != nil || st.Aversion != 1 {
		t.Fatalf("SetACL = %+v, %v; want aversion 1", st, err)
	}
	if _, _, err := dial(t, addr).Get(ctx, "/secure"); err != nil {
		t.Errorf("get of a world-readable node: %v", err)
	}
}

func TestIdentitiesSurviveReconnectsAndRestarts(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freePort(t)
	s := startServer(t, dir, addr)
	p := newProxy(t, addr)
	owner := dial(t, addr, aliceAuth)
	protect(t, owner)

	// A client authenticated WithAuth, and one with AddAuth, both through
	// the proxy, which drops their connections.
	byOption := dial(t, p.addr(), aliceAuth, client.WithSessionTimeout(10*time.Second))
	byAdd := dial(t, p.addr(), client.WithSessionTimeout(10*time.Second))
	if err := byAdd.AddAuth(testCtx(t), "digest", client.DigestCredential("alice", "secret")); err != nil {
		t.Fatal(err)
	}
	ids := []int64{byOption.SessionID(), byAdd.SessionID()}
	for round := range 2 {
		for _, c := range []*client.Client{byOption, byAdd} {
			drainStates(c)
		}
		p.cut(false)
		for i, c := range []*client.Client{byOption, byAdd} {
			waitReconnect(t, c)
			if c.SessionID() != ids[i] {
				t.Fatalf("round %d: a new session", round)
			}
			allowed(t, c, "reconnected")
		}
	}

	// A restart of the server: the session survives, and the identities
	// are sent again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	startServer(t, dir, addr)
	for _, c := range []*client.Client{byOption, byAdd} {
		waitState(t, c, client.StateConnected, 10*time.Second)
		allowed(t, c, "restarted")
	}
}

func TestASuperuserPassesEveryACL(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", func(cfg *server.Config) { cfg.SuperDigest = client.DigestID("super", "test") })
	addr := s.Addr().String()
	protect(t, dial(t, addr, aliceAuth))
	root := dial(t, addr, client.WithAuth("digest", client.DigestCredential("super", "test")))
	allowed(t, root, "super")
	ctx := testCtx(t)
	acl, _, err := root.GetACL(ctx, "/secure")
	if err != nil || !slices.Equal(acl, aliceACL) {
		t.Errorf("the superuser's GetACL = %v, %v; want the digest unmasked", acl, err)
	}
	if _, err := root.SetACL(ctx, "/secure/x", []client.ACL{client.WorldACL(client.PermAll)}, -1); err != nil {
		t.Fatal(err)
	}
	if err := dial(t, addr).Delete(ctx, "/secure/x", -1); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("delete under /secure by another: %v, want ErrNoAuth (the parent's ACL decides)", err)
	}
	// A wrong password for the super user is just another digest identity.
	denied(t, dial(t, addr, client.WithAuth("digest", client.DigestCredential("super", "guess"))), "super with a wrong password")
}

func TestALockWithADigestACL(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	addr := s.Addr().String()
	ctx := testCtx(t)
	opt := recipes.WithACL(aliceACL...)
	a := recipes.NewMutex(dial(t, addr, aliceAuth), "/locks/orders", opt)
	b := recipes.NewMutex(dial(t, addr, aliceAuth), "/locks/orders", opt)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock while a holds the lock: %v, %v", ok, err)
	}
	if err := recipes.NewMutex(dial(t, addr), "/locks/orders").Lock(ctx); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("Lock without alice's identity: %v, want ErrNoAuth", err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("b took the lock while a held it: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitEvent(t, got, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if a.Token() >= b.Token() {
		t.Errorf("tokens %d then %d, want increasing", a.Token(), b.Token())
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// drainStates empties c's StateChanges.
func drainStates(c *client.Client) {
	for {
		select {
		case <-c.StateChanges():
		default:
			return
		}
	}
}

// waitReconnect waits until c reports StateDisconnected and then
// StateConnected.
func waitReconnect(t *testing.T, c *client.Client) {
	t.Helper()
	lost := false
	for {
		switch s := waitEvent(t, c.StateChanges(), 10*time.Second); {
		case s == client.StateDisconnected:
			lost = true
		case s == client.StateConnected && lost:
			return
		case s != client.StateConnected:
			t.Fatalf("state %v while reconnecting", s)
		}
	}
}
