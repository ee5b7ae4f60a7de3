package wire_test

import (
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
