package wire_test

import (
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

func TestPermsLetters(t *testing.T) {
	tests := []struct {
		letters string
		perms   wire.Perms
		canon   string
	}{
		{"cdrwa", wire.PermAll, "cdrwa"},
		{"awrdc", wire.PermAll, "cdrwa"},
		{"r", wire.PermRead, "r"},
		{"ra", wire.PermRead | wire.PermAdmin, "ra"},
		{"", 0, ""},
	}
	for _, tt := range tests {
		got, err := wire.ParsePerms(tt.letters)
		if err != nil || got != tt.perms {
			t.Errorf("ParsePerms(%q) = %v, %v; want %v", tt.letters, got, err, tt.perms)
		}
		if s := got.String(); s != tt.canon {
			t.Errorf("%v.String() = %q, want %q", got, s, tt.canon)
		}
	}
	if _, err := wire.ParsePerms("rx"); err == nil {
		t.Error(`ParsePerms("rx") took an unknown letter`)
	}
	if s := (wire.ACL{Perms: wire.PermRead, Scheme: "ip", ID: "10.0.0.0/8"}).String(); s != "ip:10.0.0.0/8:r" {
		t.Errorf("ACL.String() = %q", s)
	}
}

func TestParseACLReadsZooKeepersTextForm(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []wire.ACL
	}{
		{"world:anyone:cdrwa", wire.OpenACL},
		{"digest:alice:X/NSthOYBg8A1Yyh2DbzQgqqgvU=:ra, ip:::1:r", []wire.ACL{
			{Perms: wire.PermRead | wire.PermAdmin, Scheme: "digest", ID: "alice:X/NSthOYBg8A1Yyh2DbzQgqqgvU="},
			{Perms: wire.PermRead, Scheme: "ip", ID: "::1"},
		}},
		{"x509:CN=alice,O=Acme:r,auth::cdrwa", []wire.ACL{
			{Perms: wire.PermRead, Scheme: "x509", ID: "CN=alice,O=Acme"},
			{Perms: wire.PermAll, Scheme: "auth"},
		}},
		{"ip:10.0.0.0/8:", []wire.ACL{{Scheme: "ip", ID: "10.0.0.0/8"}}},
	} {
		got, err := wire.ParseACL(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseACL(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if again, err := wire.ParseACL(wire.FormatACL(got)); err != nil || !slices.Equal(again, got) {
			t.Errorf("ParseACL(FormatACL(%v)) = %v, %v", got, again, err)
		}
	}
	for _, bad := range []string{"", "world", "world:anyone", ":anyone:r", "world:anyone:rx", "world:anyone:r,", "world:anyone:r,,ip:1.2.3.4:r"} {
		if got, err := wire.ParseACL(bad); err == nil {
			t.Errorf("ParseACL(%q) = %v, want an error", bad, got)
		}
	}
}

// FuzzParseACL: ParseACL never panics, and what it reads is entries of a
// named scheme whose permissions are cdrwa letters, which read back the
// same when written again unless an id itself looks like an entry's end.
func FuzzParseACL(f *testing.F) {
	for _, s := range []string{"world:anyone:cdrwa", "x509:CN=alice,O=Acme:r,auth::cdrwa", "ip:::1:rw, digest:a:b=:a", "a:b:c:d,e:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		acl, err := wire.ParseACL(s)
		if err != nil {
			return
		}
		for _, a := range acl {
			if a.Scheme == "" || a.Perms&^wire.PermAll != 0 {
				t.Fatalf("ParseACL(%q) read %+v", s, a)
			}
		}
		if again, err := wire.ParseACL(wire.FormatACL(acl)); err != nil || len(again) != len(acl) {
			t.Fatalf("ParseACL(%q) = %v, but its text %q reads back as %v, %v", s, acl, wire.FormatACL(acl), again, err)
		}
	})
}

func TestDigestIDIsZooKeepers(t *testing.T) {
	// ZooKeeper's own tests configure the superuser
	// "super:D/InIHSb7yEEbrWz8b9l71RjZJU=" with the comment that its
	// password is "test", and its access control documentation derives
	// user1:12345 with openssl; bob's, whose password has a colon, was
	// derived with openssl too (printf 'bob:pa:ss' | openssl dgst -sha1
	// -binary | base64).
	for _, tc := range []struct{ user, password, want string }{
		{"super", "test", "super:D/InIHSb7yEEbrWz8b9l71RjZJU="},
		{"user1", "12345", "user1:+owfoSBn/am19roBPzR1/MfCblE="},
		{"bob", "pa:ss", "bob:ZLnpyJBWh1VZxyRoQkI2cRg/9PM="},
	} {
		if got := wire.DigestID(tc.user, tc.password); got != tc.want {
			t.Errorf("DigestID(%q, %q) = %q, want %q", tc.user, tc.password, got, tc.want)
		}
	}
}
