package server

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// metricLine returns the line of /metrics that starts with name and a
// space, or "".
func metricLine(t *testing.T, s *Server, name string) string {
	t.Helper()
	_, body := get(t, "http://"+s.HTTPAddr().String()+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

// The digests were computed apart from the code under test, as
// `printf %s user:password | openssl dgst -binary -sha1 | base64` does.
const (
	aliceDigest = "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=" // alice:secret
	rootDigest  = "root:NAT1tTH69JdUHxWSdThqAfhdMW0="  // root:rootpw
)

// aclServer runs a server whose superuser is root:rootpw.
func aclServer(t *testing.T, mod ...func(*Config)) *Server {
	return startServer(t, "", append([]func(*Config){func(c *Config) { c.SuperDigest = rootDigest }}, mod...)...)
}

// authedSession opens a session on s, authenticated with each digest
// credential given ("user:password").
func authedSession(t *testing.T, s *Server, creds ...string) *rawConn {
	t.Helper()
	c := dialRaw(t, s)
	if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("connect: %s", resp.Err)
	}
	for _, cred := range creds {
		if r := c.call(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte(cred)}); r.Err != wire.CodeOK {
			t.Fatalf("auth %s: %s", cred, r.Err)
		}
	}
	return c
}

// answer sends req and returns its reply, skipping notifications.
func (c *rawConn) answer(req wire.Request) wire.Reply {
	c.t.Helper()
	c.write(wire.AppendRequest(nil, &req))
	for {
		r, err := c.reply(req.Op)
		if err != nil {
			c.t.Fatalf("%s %s: %v", req.Op, req.Path, err)
		}
		if r.Xid != wire.XidNotification {
			return r
		}
	}
}

// must calls req and fails the test unless it succeeds.
func (c *rawConn) must(req wire.Request) wire.Reply {
	c.t.Helper()
	r := c.answer(req)
	if r.Err != wire.CodeOK {
		c.t.Fatalf("%s %s: %s", req.Op, req.Path, r.Err)
	}
	return r
}

func TestDigestIdentityIsZooKeepers(t *testing.T) {
	t.Parallel()
	for cred, want := range map[string]string{"alice:secret": aliceDigest, "root:rootpw": rootDigest,
		"bob:pa:ss": "bob:ZLnpyJBWh1VZxyRoQkI2cRg/9PM="} { // the password is all after the first colon
		if got, err := digestID(cred); err != nil || got != want {
			t.Errorf("digestID(%q) = %q, %v; want %q", cred, got, err, want)
		}
	}
	for _, bad := range []string{"", "nocolon", ":password"} {
		if _, err := digestID(bad); wire.CodeOf(err) != wire.CodeAuthFailed {
			t.Errorf("digestID(%q): %v, want AuthFailed", bad, err)
		}
	}
}

// aclOp is one client op against a node n that has the child n/child.
type aclOp struct {
	name  string
	needs wire.Perms // any of these permissions lets it through
	req   func(n string) wire.Request
}

// aclOps are ordered so that the ones that change the node come last.
var aclOps = []aclOp{
	{"getData", wire.PermRead, func(n string) wire.Request { return wire.Request{Op: wire.OpGetData, Path: n} }},
	{"exists", wire.PermRead, func(n string) wire.Request { return wire.Request{Op: wire.OpExists, Path: n} }},
	{"getChildren", wire.PermRead, func(n string) wire.Request { return wire.Request{Op: wire.OpGetChildren, Path: n} }},
	{"getAllChildrenNumber", wire.PermRead, func(n string) wire.Request { return wire.Request{Op: wire.OpGetAllChildrenNumber, Path: n} }},
	{"getACL", wire.PermRead | wire.PermAdmin, func(n string) wire.Request { return wire.Request{Op: wire.OpGetACL, Path: n} }},
	{"addWatch", wire.PermRead, func(n string) wire.Request {
		return wire.Request{Op: wire.OpAddWatch, Path: n, AddWatchMode: wire.AddWatchPersistent}
	}},
	{"check in a multi", wire.PermRead, func(n string) wire.Request {
		return wire.Request{Op: wire.OpMulti, Ops: []wire.Request{{Op: wire.OpCheck, Path: n, Version: -1}}}
	}},
	{"setData", wire.PermWrite, func(n string) wire.Request {
		return wire.Request{Op: wire.OpSetData, Path: n, Data: []byte("w"), Version: -1}
	}},
	{"create a child", wire.PermCreate, func(n string) wire.Request { return wire.Request{Op: wire.OpCreate, Path: n + "/new"} }},
	{"delete a child", wire.PermDelete, func(n string) wire.Request { return wire.Request{Op: wire.OpDelete, Path: n + "/child", Version: -1} }},
	{"setACL", wire.PermAdmin, func(n string) wire.Request {
		return wire.Request{Op: wire.OpSetACL, Path: n, Version: -1, ACL: wire.OpenACL}
	}},
}

func TestACLsAcrossEveryOpAndScheme(t *testing.T) {
	t.Parallel()
	s := aclServer(t)
	root := authedSession(t, s, "root:rootpw")
	anon := authedSession(t, s)
	alice := authedSession(t, s, "alice:secret")
	bob := authedSession(t, s, "bob:secret")
	conns := map[string]*rawConn{"root": root, "anon": anon, "alice": alice, "bob": bob}
	grants := []struct {
		name    string
		acl     func(p wire.Perms) wire.ACL
		granted []string // the connections the entry matches
		refused []string
	}{
		{"digest", func(p wire.Perms) wire.ACL { return wire.ACL{Perms: p, Scheme: "digest", ID: aliceDigest} }, []string{"alice", "root"}, []string{"anon", "bob"}},
		{"ip of loopback", func(p wire.Perms) wire.ACL { return wire.ACL{Perms: p, Scheme: "ip", ID: "127.0.0.0/8"} }, []string{"anon", "bob"}, nil},
		{"ip of another network", func(p wire.Perms) wire.ACL { return wire.ACL{Perms: p, Scheme: "ip", ID: "10.0.0.0/8"} }, []string{"root"}, []string{"anon", "alice"}},
		{"world", func(p wire.Perms) wire.ACL { return wire.ACL{Perms: p, Scheme: "world", ID: "anyone"} }, []string{"anon", "bob"}, nil},
	}
	perms := []wire.Perms{wire.PermRead, wire.PermWrite, wire.PermCreate, wire.PermDelete, wire.PermAdmin}
	i := 0
	for _, g := range grants {
		for _, p := range perms {
			for _, who := range append(append([]string{}, g.granted...), g.refused...) {
				i++
				n := fmt.Sprintf("/n%d", i)
				acl := []wire.ACL{g.acl(p)}
				root.must(wire.Request{Op: wire.OpCreate, Path: n, ACL: acl})
				root.must(wire.Request{Op: wire.OpCreate, Path: n + "/child"})
				granted := who == "root"
				for _, gw := range g.granted {
					granted = granted || gw == who
				}
				for _, op := range aclOps {
					t.Run(fmt.Sprintf("%s %s: %s %s", g.name, p, who, op.name), func(t *testing.T) {
						want := wire.CodeNoAuth
						if granted && op.needs&p != 0 || who == "root" {
							want = wire.CodeOK
						}
						req := op.req(n)
						if op.name == "setACL" {
							req.ACL = acl // the same list: the next ops see the same ACL
						}
						if r := conns[who].answer(req); r.Err != want {
							t.Errorf("%s: %s, want %s", req.Op, r.Err, want)
						}
					})
				}
			}
		}
	}
	if line := metricLine(t, s, "arbor_no_auth_total"); line == "" || line == "arbor_no_auth_total 0" {
		t.Errorf("NoAuth refusals in /metrics: %q", line)
	}
}

func TestExistsOfAMissingNodeIsNoNodeWhateverTheParentsACL(t *testing.T) {
	t.Parallel()
	s := aclServer(t)
	root := authedSession(t, s, "root:rootpw")
	root.must(wire.Request{Op: wire.OpCreate, Path: "/closed", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: rootDigest}}})
	anon := authedSession(t, s)
	if r := anon.call(wire.Request{Op: wire.OpExists, Path: "/closed/none"}); r.Err != wire.CodeNoNode {
		t.Errorf("exists of a missing node: %s, want NoNode", r.Err)
	}
	if r := anon.call(wire.Request{Op: wire.OpExists, Path: "/closed"}); r.Err != wire.CodeNoAuth {
		t.Errorf("exists of a node without READ: %s, want NoAuth", r.Err)
	}
	// getEphemerals and sync need nothing.
	for _, req := range []wire.Request{{Op: wire.OpGetEphemerals, Path: "/closed"}, {Op: wire.OpSync, Path: "/closed"}} {
		if r := anon.call(req); r.Err != wire.CodeOK {
			t.Errorf("%s: %s", req.Op, r.Err)
		}
	}
}

func TestGetACLMasksDigestsWithoutAdmin(t *testing.T) {
	t.Parallel()
	s := aclServer(t)
	root := authedSession(t, s, "root:rootpw")
	acl := []wire.ACL{
		{Perms: wire.PermRead, Scheme: "digest", ID: aliceDigest},
		{Perms: wire.PermAll, Scheme: "digest", ID: rootDigest},
		{Perms: wire.PermRead, Scheme: "ip", ID: "10.0.0.0/8"},
	}
	root.must(wire.Request{Op: wire.OpCreate, Path: "/m", ACL: acl})
	if r := root.must(wire.Request{Op: wire.OpGetACL, Path: "/m"}); !reflect.DeepEqual(r.ACL, acl) {
		t.Errorf("getACL with ADMIN: %v, want %v", r.ACL, acl)
	}
	alice := authedSession(t, s, "alice:secret")
	masked := []wire.ACL{
		{Perms: wire.PermRead, Scheme: "digest", ID: "alice:x"},
		{Perms: wire.PermAll, Scheme: "digest", ID: "root:x"},
		{Perms: wire.PermRead, Scheme: "ip", ID: "10.0.0.0/8"},
	}
	r := alice.must(wire.Request{Op: wire.OpGetACL, Path: "/m"})
	if !reflect.DeepEqual(r.ACL, masked) || r.Stat.Czxid == 0 {
		t.Errorf("getACL with READ only: %v %+v, want %v", r.ACL, r.Stat, masked)
	}
}

func TestAuthAndWhoAmI(t *testing.T) {
	t.Parallel()
	s := aclServer(t)
	c := authedSession(t, s)
	ip := wire.Identity{Scheme: "ip", ID: "127.0.0.1"}
	whoAmI := func() []wire.Identity {
		t.Helper()
		return c.must(wire.Request{Op: wire.OpWhoAmI}).Identities
	}
	if got := whoAmI(); !reflect.DeepEqual(got, []wire.Identity{ip}) {
		t.Fatalf("whoAmI before auth: %v", got)
	}
	c.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("alice:secret")})
	c.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("alice:secret")}) // again: nothing new
	c.must(wire.Request{Op: wire.OpAuth, AuthScheme: "ip", AuthData: []byte("10.0.0.1")})         // ip: what the connection has
	want := []wire.Identity{ip, {Scheme: "digest", ID: "alice"}}
	if got := whoAmI(); !reflect.DeepEqual(got, want) {
		t.Fatalf("whoAmI after auth: %v, want %v", got, want)
	}
	for _, bad := range []wire.Request{
		{Op: wire.OpAuth, AuthScheme: "kerberos", AuthData: []byte("x")},
		{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("no colon")},
		{Op: wire.OpAuth, AuthScheme: "x509", AuthData: []byte("CN=me")},
	} {
		if r := c.call(bad); r.Err != wire.CodeAuthFailed {
			t.Errorf("auth %s %q: %s, want AuthFailed", bad.AuthScheme, bad.AuthData, r.Err)
		}
	}
	if line := metricLine(t, s, "arbor_auth_failures_total"); line != "arbor_auth_failures_total 3" {
		t.Errorf("auth failures in /metrics: %q, want 3", line)
	}
	// The connection carries on with what it had.
	if got := whoAmI(); !reflect.DeepEqual(got, want) {
		t.Fatalf("whoAmI after failed auths: %v, want %v", got, want)
	}
	c.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("root:rootpw")})
	want = append(want, wire.Identity{Scheme: "digest", ID: "root"}, wire.Identity{Scheme: "super", ID: "root"})
	if got := whoAmI(); !reflect.DeepEqual(got, want) {
		t.Fatalf("whoAmI as the superuser: %v, want %v", got, want)
	}
	// A wrong password is another digest, not the superuser.
	d := authedSession(t, s, "root:wrong")
	if got := d.must(wire.Request{Op: wire.OpWhoAmI}).Identities; len(got) != 2 || got[1].Scheme != "digest" {
		t.Errorf("whoAmI with the superuser's name and a wrong password: %v", got)
	}
}

func TestIdentitiesBelongToTheConnection(t *testing.T) {
	t.Parallel()
	s := aclServer(t)
	a := dialRaw(t, s)
	sess := a.connect(wire.ConnectRequest{})
	a.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("alice:secret")})
	a.must(wire.Request{Op: wire.OpCreate, Path: "/mine", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "auth"}}})
	// The session moves to a new connection, which has not authenticated.
	b := dialRaw(t, s)
	if r := b.connect(wire.ConnectRequest{SessionID: sess.SessionID, Password: sess.Password}); r.Err != wire.CodeOK {
		t.Fatalf("reattach: %s", r.Err)
	}
	if r := b.call(wire.Request{Op: wire.OpSetData, Path: "/mine", Version: -1}); r.Err != wire.CodeNoAuth {
		t.Errorf("setData after reattaching without auth: %s, want NoAuth", r.Err)
	}
	b.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte("alice:secret")})
	b.must(wire.Request{Op: wire.OpSetData, Path: "/mine", Version: -1})
}

func TestCreateAndSetACLValidation(t *testing.T) {
	t.Parallel()
	readOnly := []wire.ACL{{Perms: wire.PermRead | wire.PermCreate, Scheme: "world", ID: "anyone"}}
	s := aclServer(t, func(c *Config) { c.DefaultACL = readOnly })
	alice := authedSession(t, s, "alice:secret")
	anon := authedSession(t, s)

	alice.must(wire.Request{Op: wire.OpCreate, Path: "/default"})
	if r := alice.must(wire.Request{Op: wire.OpGetACL, Path: "/default"}); !reflect.DeepEqual(r.ACL, readOnly) {
		t.Errorf("ACL of a create without one: %v, want the default %v", r.ACL, readOnly)
	}
	alice.must(wire.Request{Op: wire.OpCreate, Path: "/auth", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "auth"}}})
	if r := alice.must(wire.Request{Op: wire.OpGetACL, Path: "/auth"}); !reflect.DeepEqual(r.ACL, []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: aliceDigest}}) {
		t.Errorf("ACL auth expanded to %v", r.ACL)
	}
	for _, tc := range []struct {
		name string
		c    *rawConn
		req  wire.Request
	}{
		{"auth without an authenticated identity", anon, wire.Request{Op: wire.OpCreate, Path: "/x", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "auth"}}}},
		{"a digest id that is no digest", alice, wire.Request{Op: wire.OpCreate, Path: "/x", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: "alice:secret"}}}},
		{"an unknown scheme", alice, wire.Request{Op: wire.OpCreate, Path: "/x", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "kerberos", ID: "alice"}}}},
		{"a sasl id that is no Kerberos name", alice, wire.Request{Op: wire.OpCreate, Path: "/x", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "sasl", ID: "a@b@c"}}}},
		{"a bad ACL in a multi's create", alice, wire.Request{Op: wire.OpMulti, Ops: []wire.Request{{Op: wire.OpCreate, Path: "/x", ACL: []wire.ACL{{Perms: wire.PermAll, Scheme: "ip", ID: "x"}}}}}},
		{"an empty setACL", alice, wire.Request{Op: wire.OpSetACL, Path: "/auth", Version: -1}},
	} {
		if r := tc.c.call(tc.req); r.Err != wire.CodeInvalidACL {
			t.Errorf("%s: %s, want InvalidACL", tc.name, r.Err)
		}
	}
	t.Run("setACL checks the aversion and moves it", func(t *testing.T) {
		open := wire.OpenACL
		if r := alice.call(wire.Request{Op: wire.OpSetACL, Path: "/auth", Version: 1, ACL: open}); r.Err != wire.CodeBadVersion {
			t.Fatalf("setACL with a wrong aversion: %s", r.Err)
		}
		r := alice.must(wire.Request{Op: wire.OpSetACL, Path: "/auth", Version: 0, ACL: open})
		if r.Stat.Aversion != 1 || r.Stat.Version != 0 {
			t.Fatalf("Stat after setACL: %+v", r.Stat)
		}
		if r := anon.call(wire.Request{Op: wire.OpSetData, Path: "/auth", Version: -1}); r.Err != wire.CodeOK {
			t.Fatalf("setData once the ACL is open: %s", r.Err)
		}
	})
}

func TestLastingWatchesSkipNodesTheWatcherCannotRead(t *testing.T) {
	t.Parallel()
	s := aclServer(t)
	root := authedSession(t, s, "root:rootpw")
	root.must(wire.Request{Op: wire.OpCreate, Path: "/w"})
	alice := authedSession(t, s, "alice:secret")
	alice.must(wire.Request{Op: wire.OpAddWatch, Path: "/w", AddWatchMode: wire.AddWatchPersistentRecursive})
	secret := []wire.ACL{{Perms: wire.PermAll, Scheme: "digest", ID: rootDigest}}
	root.must(wire.Request{Op: wire.OpCreate, Path: "/w/secret", Data: []byte("hidden"), ACL: secret})
	root.must(wire.Request{Op: wire.OpSetData, Path: "/w/secret", Data: []byte("hidden2"), Version: -1})
	root.must(wire.Request{Op: wire.OpCreate, Path: "/w/open", Data: []byte("seen")})
	// The next notification is /w/open's: none came for /w/secret.
	r, err := alice.reply(wire.OpPing)
	if err != nil {
		t.Fatal(err)
	}
	if r.Xid != wire.XidNotification || r.Path != "/w/open" || string(r.Data) != "seen" {
		t.Fatalf("first notification %+v, want NodeCreated of /w/open", r)
	}
}
