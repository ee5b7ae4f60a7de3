package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/client"
)

func TestACLUsageMistakes(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	must(t, addr, "create", "/app")
	runSteps(t, addr, []step{
		{"a bad ACL is a usage error", []string{"setacl", "/app", "world:anyone:x"}, 2, "", `unknown permission 'x'`},
		{"an unknown scheme is a usage error", []string{"setacl", "/app", "kerberos:bob:r"}, 2, "", `unknown scheme "kerberos"`},
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
	t.Parallel()
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"", []string{"world:anyone:", "digest:", "ip:", "auth::", "x509:", "sasl:"}},
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

func TestACLCommands(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	alice := client.DigestID("alice", "secret")
	aliceHash := alice[len("alice:"):]
	bob := client.DigestID("bob", "pw")
	runSteps(t, addr, []step{
		{"create -a gives the node the ACL", []string{"create", "-a", "digest:" + alice + ":cdrwa,world:anyone:r", "/private", "v1"}, 0, "/private\n", ""},
		{"getacl without admin masks the digest", []string{"getacl", "/private"}, 0, "digest:alice:x:cdrwa\nworld:anyone:r\n", ""},
		{"getacl with admin shows it", []string{"--auth", "digest:alice:secret", "getacl", "/private"}, 0,
			"digest:alice:" + aliceHash + ":cdrwa\nworld:anyone:r\n", ""},
		{"a write without the identity is not allowed", []string{"set", "/private", "v2"}, 1, "", "arbor: /private: not allowed by the ACL"},
		{"nor with another identity", []string{"--auth", "digest:bob:pw", "set", "/private", "v2"}, 1, "", "not allowed by the ACL"},
		{"--auth gives the identity", []string{"--auth", "digest:alice:secret", "set", "/private", "v2"}, 0, "", ""},
		{"--auth may be repeated", []string{"--auth", "digest:bob:pw", "--auth", "digest:alice:secret", "set", "/private", "v3"}, 0, "", ""},
		{"whoami lists the identities", []string{"--auth", "digest:alice:secret", "whoami"}, 0, "ip:127.0.0.1\ndigest:alice\n", ""},
		{"setacl at the wrong aclVersion fails", []string{"--auth", "digest:alice:secret", "setacl", "-v", "3", "/private", "world:anyone:cdrwa"}, 1, "",
			"/private is not at the expected version"},
		{"setacl without admin is not allowed", []string{"setacl", "/private", "world:anyone:cdrwa"}, 1, "", "not allowed by the ACL"},
		{"create -a auth:: takes the creator's identities", []string{"--auth", "digest:bob:pw", "create", "-a", "auth::cdrwa", "/bobs"}, 0, "/bobs\n", ""},
		{"getacl shows them", []string{"--auth", "digest:bob:pw", "getacl", "/bobs"}, 0, "digest:" + bob + ":cdrwa\n", ""},
		{"auth:: without an identity is an invalid ACL", []string{"create", "-a", "auth::cdrwa", "/nobody"}, 1, "", "invalid ACL"},
		{"a credential the servers refuse fails the command", []string{"--auth", "kerberos:x", "ls", "/"}, 1, "", "the servers refused the credentials"},
	})
	t.Run("ARBOR_AUTH gives the identity when --auth does not", func(t *testing.T) {
		env := []string{"ARBOR_AUTH=digest:alice:secret"}
		if r := runArbor(t, "", env, "--servers", addr, "setacl", "-v", "0", "/private", "digest:"+alice+":cdrwa"); r.code != 0 {
			t.Fatalf("setacl with ARBOR_AUTH: %v", r)
		}
		r := runArbor(t, "", env, "--servers", addr, "getacl", "-s", "/private")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "digest:"+alice+":cdrwa\nczxid = ") || !strings.Contains(r.stdout, "aclVersion = 1\n") {
			t.Fatalf("getacl -s: %v", r)
		}
		if r := runArbor(t, "", env, "--servers", addr, "--auth", "digest:bob:pw", "get", "/private"); r.code != 1 {
			t.Fatalf("--auth replaces ARBOR_AUTH: %v", r)
		}
	})
	t.Run("setacl -R sets the whole subtree", func(t *testing.T) {
		must(t, addr, "create", "/tree")
		must(t, addr, "create", "/tree/a")
		must(t, addr, "create", "/tree/a/b")
		must(t, addr, "setacl", "-R", "/tree", "world:anyone:cdra")
		for _, p := range []string{"/tree", "/tree/a", "/tree/a/b"} {
			if got := must(t, addr, "getacl", p); got != "world:anyone:cdra\n" {
				t.Errorf("getacl %s = %q after setacl -R", p, got)
			}
		}
		if r := arbor(t, addr, "set", "/tree/a/b", "x"); r.code != 1 || !strings.Contains(r.stderr, "not allowed") {
			t.Errorf("set after taking w away: %v", r)
		}
	})
	t.Run("a command over a subtree names the node a request was refused on", func(t *testing.T) {
		must(t, addr, "create", "/walls")
		must(t, addr, "create", "/walls/open")
		must(t, addr, "create", "-a", "digest:"+alice+":cdrwa,world:anyone:r", "/walls/open/readonly")
		must(t, addr, "create", "-a", "digest:"+alice+":cdrwa", "/walls/shut")
		must(t, addr, "--auth", "digest:alice:secret", "create", "/walls/shut/in")
		for _, tc := range []struct {
			args []string
			node string
		}{
			{[]string{"setacl", "-R", "/walls/open", "world:anyone:cdrwa"}, "/walls/open/readonly"}, // its setACL
			{[]string{"ls", "-R", "/walls"}, "/walls/shut"},                                         // its children
			{[]string{"ephemerals", "/walls"}, "/walls/shut"},
			{[]string{"deleteall", "/walls"}, "/walls/shut"},
		} {
			want := "arbor: " + tc.node + ": not allowed by the ACL"
			if r := arbor(t, addr, tc.args...); r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("%v: %v, want exit status 1 and %q", tc.args, r, want)
			}
		}
	})
	t.Run("JSON", func(t *testing.T) {
		got := decode[jGetACL](t, must(t, addr, "-o", "json", "--auth", "digest:alice:secret", "getacl", "/private"))
		if got.Path != "/private" || len(got.ACL) != 1 || got.ACL[0] != (jACL{"digest", alice, "cdrwa"}) || got.Stat.Aversion != 1 {
			t.Errorf("getacl -o json = %+v", got)
		}
		who := decode[jWhoAmI](t, must(t, addr, "-o", "json", "--auth", "digest:alice:secret", "whoami"))
		if want := []jIdentity{{"ip", "127.0.0.1"}, {"digest", "alice"}}; !slices.Equal(who.Identities, want) {
			t.Errorf("whoami -o json = %+v, want %+v", who, want)
		}
		set := decode[jPath](t, must(t, addr, "-o", "json", "--auth", "digest:alice:secret", "setacl", "/private", "world:anyone:cdrwa"))
		if set.Path != "/private" || set.Stat == nil || set.Stat.Aversion != 2 {
			t.Errorf("setacl -o json = %+v", set)
		}
	})
	t.Run("addauth lasts for the shell's session", func(t *testing.T) {
		must(t, addr, "create", "-a", "digest:"+alice+":cdrwa", "/shell")
		script := "set /shell a\naddauth digest alice:secret\nset /shell b\nget /shell\nwhoami\n" +
			"addauth -o json digest bob:pw\naddauth kerberos x\nget /shell\n"
		r := runArbor(t, script, nil, "--servers", addr, "shell")
		want := "b\nip:127.0.0.1\ndigest:alice\n{\"scheme\":\"digest\"}\nb\n"
		if r.stdout != want || !strings.Contains(r.stderr, "arbor: /shell: not allowed by the ACL") ||
			!strings.Contains(r.stderr, "the servers refused the kerberos credential") || r.code != 0 {
			t.Fatalf("got %v, want stdout %q, the first set not allowed and kerberos refused", r, want)
		}
	})
}

type jACL struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
	Perms  string `json:"perms"`
}

type jGetACL struct {
	Path string `json:"path"`
	ACL  []jACL `json:"acl"`
	Stat jStat  `json:"stat"`
}

type jIdentity struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

type jWhoAmI struct {
	Identities []jIdentity `json:"identities"`
}
