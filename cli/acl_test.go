package cli

import (
	"slices"
	"strings"
	"testing"
)

func TestACLUsageMistakes(t *testing.T) {
	addr, _ := startServer(t)
	must(t, addr, "create", "/app")
	runSteps(t, addr, []step{
		{"a bad ACL is a usage error", []string{"setacl", "/app", "world:anyone:x"}, 2, "", `unknown permission 'x'`},
		{"an unknown scheme is a usage error", []string{"setacl", "/app", "sasl:bob:r"}, 2, "", `unknown scheme "sasl"`},
		{"create -a takes an ACL", []string{"create", "-a", "world", "/b"}, 2, "", "not scheme:id:perms"},
		{"setacl -R and -v do not go together", []string{"setacl", "-R", "-v", "1", "/app", "world:anyone:r"}, 2, "", "do not go together"},
		{"addauth on the command line says to use --auth", []string{"addauth", "digest", "alice:pw"}, 2, "", "use --auth"},
		{"an --auth without a scheme is a usage error", []string{"--auth", "alicepw", "ls", "/"}, 2, "", "not SCHEME:CREDENTIAL"},
	})
	t.Run("a malformed $ARBOR_AUTH is a usage error that does not repeat it", func(t *testing.T) {
		r := runArbor(t, "", []string{"ARBOR_AUTH=secretword"}, "--servers", addr, "ls", "/")
		if r.code != 2 || !strings.Contains(r.stderr, "not SCHEME:CREDENTIAL") || strings.Contains(r.stderr, "secretword") {
			t.Fatalf("got %v", r)
		}
	})
	t.Run("the shell refuses --auth on a line", func(t *testing.T) {
		r := runArbor(t, "ls --auth digest:a:b /\n", nil, "--servers", addr, "shell")
		if r.code != 2 || !strings.Contains(r.stderr, "addauth") {
			t.Fatalf("got %v", r)
		}
	})
}

func TestCompleteACL(t *testing.T) {
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"", []string{"world:anyone:", "digest:", "ip:", "auth::", "x509:"}},
		{"d", []string{"digest:"}},
		{"world:anyone:r,i", []string{"world:anyone:r,ip:"}},
		{"digest:alice:", nil},
	} {
		got, _ := completeACL(nil, nil, tc.word)
		if !slices.Equal(got, tc.want) {
			t.Errorf("completeACL(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}
