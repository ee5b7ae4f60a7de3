package server

import (
	"crypto/x509/pkix"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/internal/testcerts"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// opsCert is the subject of the admin certificate in these tests.
var opsCert = wire.Identity{Scheme: "x509", ID: "CN=ops,O=Arbor"}

// memberChanges are the three changes, made so that each one that gets
// past the rights check has an answer of its own: the learner is added,
// the unknown member is not found.
var memberChanges = []struct {
	name  string
	req   wire.Request
	right wire.Code // the answer when the rights check lets it through
}{
	{"memberAdd", wire.Request{Op: wire.OpMemberAdd, Member: wire.Member{ID: 7, Addr: "127.0.0.1:1", Learner: true}}, wire.CodeOK},
	{"memberPromote", wire.Request{Op: wire.OpMemberPromote, Member: wire.Member{ID: 9}}, wire.CodeNoNode},
	{"memberRemove", wire.Request{Op: wire.OpMemberRemove, Member: wire.Member{ID: 9}}, wire.CodeNoNode},
}

func TestMembershipChangesNeedTheSuperuserOrAnAdminCertificateOnceEitherIsConfigured(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	serverCert := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	withCerts := func(c *Config) {
		c.TLSCert, c.TLSKey, c.TLSCA = serverCert.Cert, serverCert.Key, ca.File
		c.AdminIdentities = []wire.Identity{opsCert}
	}
	withSuper := func(c *Config) { c.SuperDigest = rootDigest }
	withCertsNoAdmin := func(c *Config) { withCerts(c); c.AdminIdentities = nil }
	// session opens a session on s with a certificate for cn (none for a
	// plaintext port) and the digest credentials creds.
	session := func(t *testing.T, s *Server, cn string, creds ...string) *rawConn {
		c := dialRaw(t, s)
		if cn != "" {
			c = dialTLS(t, s.Addr().String(), clientTLS(t, ca, ca, pkix.Name{CommonName: cn, Organization: []string{"Arbor"}}))
		}
		if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
			t.Fatalf("connect: %s", resp.Err)
		}
		for _, cred := range creds {
			c.must(wire.Request{Op: wire.OpAuth, AuthScheme: "digest", AuthData: []byte(cred)})
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		config  []func(*Config)
		cert    string   // the client's certificate's CN, if any
		creds   []string // its digest credentials
		allowed bool
	}{
		{"with nothing configured, a loopback client changes the members as before", nil, "", nil, true},
		{"with a superuser, a loopback client without auth is refused", []func(*Config){withSuper}, "", nil, false},
		{"with a superuser, a client authenticated as another user is refused", []func(*Config){withSuper}, "", []string{"alice:secret"}, false},
		{"with a superuser, the superuser changes the members", []func(*Config){withSuper}, "", []string{"root:rootpw"}, true},
		{"with client certificates, an admin certificate changes the members", []func(*Config){withCerts}, "ops", nil, true},
		{"with client certificates, another certificate is refused", []func(*Config){withCerts}, "bob", nil, false},
		{"with client certificates, another certificate with a digest that is no superuser is refused", []func(*Config){withCerts}, "bob", []string{"root:rootpw"}, false},
		{"with both, the superuser on another certificate changes the members", []func(*Config){withCerts, withSuper}, "bob", []string{"root:rootpw"}, true},
		{"with client certificates and no admin named, every certificate is refused", []func(*Config){withCertsNoAdmin}, "ops", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			mods := append(slices.Clone(tc.config), func(c *Config) {
				c.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
			})
			s := startServer(t, "", mods...)
			c := session(t, s, tc.cert, tc.creds...)
			for _, ch := range memberChanges {
				want := ch.right
				if !tc.allowed {
					want = wire.CodeNoAuth
				}
				if r := c.answer(ch.req); r.Err != want {
					t.Errorf("%s: %s, want %s", ch.name, r.Err, want)
				}
			}
			// Reads stay open to all.
			c.must(wire.Request{Op: wire.OpStatus})
			members := c.must(wire.Request{Op: wire.OpMembers}).Members
			if added := slices.ContainsFunc(members, func(m wire.Member) bool { return m.ID == 7 }); added != tc.allowed {
				t.Errorf("members after the changes: %v", members)
			}
			if !tc.allowed {
				refused := logs.FilterMessage("membership change refused").All()
				if len(refused) != len(memberChanges) || !strings.Contains(refused[0].ContextMap()["error"].(string), "need") {
					t.Errorf("the refusals logged: %v", refused)
				}
				if line := metricLine(t, s, "arbor_no_auth_total"); line != "arbor_no_auth_total 3" {
					t.Errorf("NoAuth refusals in /metrics: %q", line)
				}
			}
		})
	}
}

func TestTheMembershipRuleAsksWhereFromAndThenWho(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	loopback6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 5000}
	remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 5000}
	open := Config{}
	remoteAdmin := Config{RemoteAdmin: true}
	super := Config{SuperDigest: rootDigest}
	superRemote := Config{SuperDigest: rootDigest, RemoteAdmin: true}
	certs := Config{TLSCA: "ca.pem", AdminIdentities: []wire.Identity{opsCert}, RemoteAdmin: true}
	certsOnly := Config{TLSCA: "ca.pem"}
	root := []wire.Identity{{Scheme: "ip", ID: "10.0.0.7"}, {Scheme: "digest", ID: rootDigest}, {Scheme: "super", ID: "root"}}
	alice := []wire.Identity{{Scheme: "ip", ID: "10.0.0.7"}, {Scheme: "digest", ID: aliceDigest}}
	ops := []wire.Identity{{Scheme: "ip", ID: "10.0.0.7"}, opsCert}
	bob := []wire.Identity{{Scheme: "ip", ID: "10.0.0.7"}, {Scheme: "x509", ID: "CN=bob,O=Arbor"}}
	// A digest identity whose id is the admin subject is not the certificate.
	fake := []wire.Identity{{Scheme: "digest", ID: opsCert.ID}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		from    net.Addr
		ids     []wire.Identity
		allowed bool
	}{
		{"with nothing configured, a loopback client may", open, loopback, nil, true},
		{"with nothing configured, an IPv6 loopback client may", open, loopback6, nil, true},
		{"with nothing configured, a remote client may not", open, remote, nil, false},
		{"with nothing configured, a remote client may with remote admin", remoteAdmin, remote, nil, true},
		{"with a superuser, loopback alone is not enough", super, loopback, nil, false},
		{"with a superuser, the superuser on loopback may", super, loopback, root, true},
		{"with a superuser, the superuser from afar may not without remote admin", super, remote, root, false},
		{"remote admin does not let a remote client past the superuser", superRemote, remote, alice, false},
		{"with remote admin, the superuser from afar may", superRemote, remote, root, true},
		{"with certificates, an admin certificate from afar may with remote admin", certs, remote, ops, true},
		{"with certificates, another certificate may not", certs, remote, bob, false},
		{"with certificates, a digest that spells the admin subject may not", certs, loopback, fake, false},
		{"with certificates and no admin named, nobody may", certsOnly, loopback, ops, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := memberRights(&tc.cfg, "membership changes", tc.from, tc.ids)
			if tc.allowed && err != nil || !tc.allowed && wire.CodeOf(err) != wire.CodeNoAuth {
				t.Fatalf("memberRights = %v, want allowed: %v", err, tc.allowed)
			}
		})
	}
}

func TestAdminIdentitiesParseAndCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want []wire.Identity
	}{
		{"an empty list is none", "", nil},
		{"one subject keeps its commas", "x509:CN=ops,O=Arbor", []wire.Identity{opsCert}},
		{"a part with a scheme starts the next entry", "x509:CN=ops,O=Arbor,x509:CN=alice,OU=db,O=Arbor",
			[]wire.Identity{opsCert, {Scheme: "x509", ID: "CN=alice,OU=db,O=Arbor"}}},
		{"a colon inside a value does not", "x509:CN=a:b,O=Arbor", []wire.Identity{{Scheme: "x509", ID: "CN=a:b,O=Arbor"}}},
		{"an escaped comma does not end a subject", `x509:CN=a\,x509:b,O=Arbor`, []wire.Identity{{Scheme: "x509", ID: `CN=a\,x509:b,O=Arbor`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAdminIdentities(tc.in)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseAdminIdentities(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"CN=ops,O=Arbor", "x509:", ":CN=ops"} {
		if got, err := ParseAdminIdentities(bad); err == nil {
			t.Errorf("ParseAdminIdentities(%q) = %v, want an error", bad, got)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"x509 identities with a CA are fine", Config{TLSCA: "ca.pem", AdminIdentities: []wire.Identity{opsCert}}, true},
		{"without a CA no certificate can match", Config{AdminIdentities: []wire.Identity{opsCert}}, false},
		{"a digest identity is not an admin identity", Config{TLSCA: "ca.pem", AdminIdentities: []wire.Identity{{Scheme: "digest", ID: aliceDigest}}}, false},
		{"a subject with spaces after its commas would never match", Config{TLSCA: "ca.pem", AdminIdentities: []wire.Identity{{Scheme: "x509", ID: "CN=ops, O=Arbor"}}}, false},
		{"an escaped comma may be followed by a space", Config{TLSCA: "ca.pem", AdminIdentities: []wire.Identity{{Scheme: "x509", ID: `CN=Ops\, Inc,O=Arbor`}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkAdminIdentities(&tc.cfg); (err == nil) != tc.ok {
				t.Fatalf("checkAdminIdentities = %v, want ok: %v", err, tc.ok)
			}
		})
	}
}

func TestAServerThatNamesNoAdminSaysAtStartThatNobodyMayChangeTheMembers(t *testing.T) {
	t.Parallel()
	ca := testcerts.NewCA(t, "arbor CA")
	serverCert := ca.Issue(t, pkix.Name{CommonName: "localhost"})
	const warning = "membership changes are refused to every client: clients need certificates, and neither a superuser nor an admin identity is configured"
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		warn bool
	}{
		{"certificates alone leave no admin", func(c *Config) {}, true},
		{"a superuser is one", func(c *Config) { c.SuperDigest = rootDigest }, false},
		{"an admin certificate is one", func(c *Config) { c.AdminIdentities = []wire.Identity{opsCert} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			startServer(t, "", func(c *Config) {
				c.TLSCert, c.TLSKey, c.TLSCA = serverCert.Cert, serverCert.Key, ca.File
				c.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
				tc.mod(c)
			})
			if warned := logs.FilterMessage(warning).Len() == 1; warned != tc.warn {
				t.Fatalf("warned: %v, want %v", warned, tc.warn)
			}
		})
	}
}
