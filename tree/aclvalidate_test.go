package tree_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestValidateACL(t *testing.T) {
	entry := func(scheme, id string) []wire.ACL { return []wire.ACL{{Perms: wire.PermRead, Scheme: scheme, ID: id}} }
	for _, tc := range []struct {
		name string
		acl  []wire.ACL
		ok   bool
	}{
		{"world:anyone is valid", entry("world", "anyone"), true},
		{"world takes no other id", entry("world", "someone"), false},
		{"a digest id of user and a 20-byte hash is valid", entry("digest", aliceID), true},
		{"a digest id without a hash is refused", entry("digest", "alice"), false},
		{"a digest id with a short hash is refused", entry("digest", "alice:AAAA"), false},
		{"a digest id without a user is refused", entry("digest", ":AAAAAAAAAAAAAAAAAAAAAAAAAAA="), false},
		{"an ip address is valid", entry("ip", "10.0.0.1"), true},
		{"an IPv6 address is valid", entry("ip", "::1"), true},
		{"a CIDR network is valid", entry("ip", "10.0.0.0/8"), true},
		{"a bad ip is refused", entry("ip", "10.0.0"), false},
		{"a bad prefix length is refused", entry("ip", "10.0.0.0/33"), false},
		{"an x509 subject is valid", entry("x509", "CN=alice,O=example"), true},
		{"an empty x509 subject is refused", entry("x509", ""), false},
		{"scheme auth is never stored", entry("auth", ""), false},
		{"a sasl user is valid", entry("sasl", "alice"), true},
		{"a sasl Kerberos principal is valid", entry("sasl", "zookeeper/zk1.example.com@EXAMPLE.COM"), true},
		{"a sasl principal without a host is valid", entry("sasl", "alice@EXAMPLE.COM"), true},
		{"an empty sasl id is refused", entry("sasl", ""), false},
		{"a sasl id with two @ is refused", entry("sasl", "alice@A@B"), false},
		{"a sasl id with two hosts is refused", entry("sasl", "a/b/c@R"), false},
		{"a sasl id with a newline is refused", entry("sasl", "alice\nbob"), false},
		{"an unknown scheme is refused", entry("kerberos", "alice"), false},
		{"an empty ACL is refused", nil, false},
		{"permission bits beyond cdrwa are refused", []wire.ACL{{Perms: 1 << 5, Scheme: "world", ID: "anyone"}}, false},
		{"too many entries are refused", make([]wire.ACL, tree.MaxACLEntries+1), false},
		{"ids over the byte limit together are refused", []wire.ACL{
			{Perms: wire.PermRead, Scheme: "x509", ID: strings.Repeat("a", tree.MaxACLBytes/2)},
			{Perms: wire.PermRead, Scheme: "x509", ID: strings.Repeat("b", tree.MaxACLBytes/2)},
		}, false},
		{"an x509 id with a NUL is refused", entry("x509", "CN=a\x00x509"), false},
		{"an x509 id with a newline is refused", entry("x509", "CN=a\nCN=b"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tree.ValidateACL(tc.acl)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, wire.ErrInvalidACL) {
				t.Fatalf("err = %v, want InvalidACL", err)
			}
		})
	}
}

func TestResolveACL(t *testing.T) {
	def := []wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}}
	authed := []wire.Identity{{Scheme: "ip", ID: "10.1.2.3"}, {Scheme: "digest", ID: aliceID}, {Scheme: "x509", ID: "CN=a"}, {Scheme: "sasl", ID: "alice"}, {Scheme: tree.SuperScheme, ID: "root"}}
	ipOnly := []wire.Identity{{Scheme: "ip", ID: "10.1.2.3"}}
	for _, tc := range []struct {
		name   string
		acl    []wire.ACL
		ids    []wire.Identity
		setACL bool
		want   []wire.ACL
		ok     bool
	}{
		{"an empty create ACL is the default", nil, nil, false, def, true},
		{"an empty setACL is refused", nil, authed, true, nil, false},
		{"a valid ACL is kept as it is", aliceACL(wire.PermAll), nil, false, aliceACL(wire.PermAll), true},
		{"auth stands for the digest, x509 and sasl identities", []wire.ACL{{Perms: wire.PermRead | wire.PermWrite, Scheme: "auth"}}, authed, false,
			[]wire.ACL{{Perms: wire.PermRead | wire.PermWrite, Scheme: "digest", ID: aliceID}, {Perms: wire.PermRead | wire.PermWrite, Scheme: "x509", ID: "CN=a"},
				{Perms: wire.PermRead | wire.PermWrite, Scheme: "sasl", ID: "alice"}}, true},
		{"auth without an authenticated identity is refused", []wire.ACL{{Perms: wire.PermAll, Scheme: "auth"}}, ipOnly, false, nil, false},
		{"duplicates are dropped", append(aliceACL(wire.PermAll), aliceACL(wire.PermAll)...), nil, false, aliceACL(wire.PermAll), true},
		{"auth and an equal entry give one", append([]wire.ACL{{Perms: wire.PermAll, Scheme: "auth"}}, aliceACL(wire.PermAll)...), authed[:2], false, aliceACL(wire.PermAll), true},
		{"a bad entry is refused", []wire.ACL{{Perms: wire.PermAll, Scheme: "ip", ID: "nope"}}, nil, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tree.ResolveACL(tc.acl, def, tc.ids, tc.setACL)
			if !tc.ok {
				if !errors.Is(err, wire.ErrInvalidACL) {
					t.Fatalf("err = %v, want InvalidACL", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestResolveACLDoesNotAllocateForAPlainACL(t *testing.T) {
	acl := aliceACL(wire.PermAll)
	if n := testing.AllocsPerRun(100, func() { _, _ = tree.ResolveACL(acl, nil, alice, false) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestParseACL(t *testing.T) {
	got, err := tree.ParseACL("world:anyone:r, digest:" + aliceID + ":cdrwa,ip:::1:rw,ip:10.0.0.0/8:a,x509:CN=admin,O=Acme:cdrwa,sasl:alice:cdrwa")
	want := []wire.ACL{
		{Perms: wire.PermRead, Scheme: "world", ID: "anyone"},
		{Perms: wire.PermAll, Scheme: "digest", ID: aliceID},
		{Perms: wire.PermRead | wire.PermWrite, Scheme: "ip", ID: "::1"},
		{Perms: wire.PermAdmin, Scheme: "ip", ID: "10.0.0.0/8"},
		{Perms: wire.PermAll, Scheme: "x509", ID: "CN=admin,O=Acme"},
		{Perms: wire.PermAll, Scheme: "sasl", ID: "alice"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "world:anyone", "world:anyone:x", "nope:x:r", "world:anyone:r,"} {
		if _, err := tree.ParseACL(bad); !errors.Is(err, wire.ErrInvalidACL) {
			t.Errorf("ParseACL(%q) = %v, want InvalidACL", bad, err)
		}
	}
}

func TestIPMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, addr string
		want          bool
	}{
		{"10.1.2.3", "10.1.2.3", true},
		{"10.1.2.3", "10.1.2.4", false},
		{"10.0.0.0/8", "10.255.0.1", true},
		{"10.0.0.0/8", "11.0.0.1", false},
		{"0.0.0.0/0", "192.0.2.1", true},
		{"127.0.0.1", "::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.0/104", "10.2.3.4", true},
		{"::1", "::1", true},
		{"2001:db8::/32", "2001:db8::5", true},
		{"2001:db8::/32", "10.0.0.1", false},
		{"10.0.0", "10.0.0.0", false},
		{"10.0.0.0/40", "10.0.0.0", false},
		{"10.0.0.1", "not an address", false},
	} {
		if got := tree.IPMatches(tc.pattern, tc.addr); got != tc.want {
			t.Errorf("IPMatches(%q, %q) = %v, want %v", tc.pattern, tc.addr, got, tc.want)
		}
	}
}
