package cli

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/spf13/cobra"
)

func TestShellRunsAScriptOnOneSession(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	script := `# set up
pwd
create /app cfg
cd app
pwd
create job- "with  spaces"
create -s ./seq-
create -e eph 'single "quoted"'
get job-
get ./eph
ls
ephemerals
cd ..
pwd
ls app/..
get app/../app/job-
cd /nope
get "unterminated
frobnicate

cd /app/seq-0000000001
pwd
cd
tree -d 1 app
count app
`
	r := runArbor(t, script, nil, "--servers", addr, "shell")
	wantOut := `/
/app
/app
/app/job-
/app/seq-0000000001
/app/eph
with  spaces
single "quoted"
eph
job-
seq-0000000001
/app/eph
/
app
zookeeper
with  spaces
/app/seq-0000000001
/app "cfg"
├── eph [e] "single \"quoted\""
├── job- "with  spaces"
└── seq-0000000001 [s]
3
`
	if r.code != 0 || r.stdout != wantOut {
		t.Fatalf("shell = %v\nwant stdout\n%s", r, wantOut)
	}
	for _, want := range []string{"arbor: no node at /nope\n", "arbor: unterminated \" quote\n",
		"arbor: unknown command \"frobnicate\""} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, r.stderr)
		}
	}
	t.Run("the shell's ephemeral went with its session", func(t *testing.T) {
		if got := arbor(t, addr, "ls", "/app"); got.stdout != "job-\nseq-0000000001\n" {
			t.Fatalf("ls /app after the shell: %v", got)
		}
	})
}

func TestShellEphemeralsAreTheShellSessions(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	r := runArbor(t, "create -e /mine\nstat -o json /mine\nephemerals -o json\ncd /mine\npwd -o json\n", nil, "--servers", addr, "shell")
	out := lines(r.stdout)
	if r.code != 0 || len(out) != 4 {
		t.Fatalf("shell = %v", r)
	}
	if pwd := decode[jPath](t, out[3]); pwd != (jPath{Path: "/mine"}) {
		t.Errorf("pwd -o json = %+v", pwd)
	}
	st := decode[jPath](t, out[1])
	eph := decode[jEphemerals](t, out[2])
	if st.Stat == nil || st.Stat.EphemeralOwner == "0x0" ||
		!reflect.DeepEqual(eph, jEphemerals{[]jEphemeral{{"/mine", st.Stat.EphemeralOwner}}}) {
		t.Fatalf("stat %+v, ephemerals %+v: want the shell's session to own /mine", st, eph)
	}
}

func TestShellExitStatusIsTheLastCommands(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	for _, tc := range []struct {
		script string
		code   int
	}{
		{"ls /\n", 0},
		{"get /nope\n", 1},
		{"get /nope\nls /\n", 0},
		{"ls /\nset /a\n", 2},
		{"get /nope\nexit\nls /\n", 1}, // exit leaves at once
		{"", 0},
	} {
		if r := runArbor(t, tc.script, nil, "--servers", addr, "shell"); r.code != tc.code {
			t.Errorf("script %q: %v, want exit %d", tc.script, r, tc.code)
		}
	}
	if r := runArbor(t, "", nil, "--servers", addr, "shell", "extra"); r.code != 2 {
		t.Errorf("shell with an argument: %v", r)
	}
}

func TestSplitLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		want []string
		bad  bool
	}{
		{"ls /", []string{"ls", "/"}, false},
		{"  set\t/a   b  ", []string{"set", "/a", "b"}, false},
		{`set /a "two words"`, []string{"set", "/a", "two words"}, false},
		{`set /a 'it is "x"'`, []string{"set", "/a", `it is "x"`}, false},
		{`set /a "say \"hi\" \\ \n"`, []string{"set", "/a", `say "hi" \ \n`}, false},
		{`set /a ""`, []string{"set", "/a", ""}, false},
		{`set /a pre"mid dle"post`, []string{"set", "/a", "premid dlepost"}, false},
		{`set /a "open`, nil, true},
		{`set /a 'open`, nil, true},
		{"", nil, false},
	} {
		got, err := splitLine(tc.line)
		if (err != nil) != tc.bad || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitLine(%q) = %q, %v; want %q (error %v)", tc.line, got, err, tc.want, tc.bad)
		}
	}
}

func TestResolvePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cwd, p, want string }{
		{"/", "app", "/app"},
		{"/app", "job", "/app/job"},
		{"/app", "/other", "/other"},
		{"/app/sub", "..", "/app"},
		{"/app/sub", "../..", "/"},
		{"/app", "../../..", "/"},
		{"/app", ".", "/app"},
		{"/app", "./a/./b/../c", "/app/a/c"},
		{"/app", "", "/app"},
		{"/app", "x/", "/app/x"},
	} {
		if got := resolvePath(tc.cwd, tc.p); got != tc.want {
			t.Errorf("resolvePath(%q, %q) = %q, want %q", tc.cwd, tc.p, got, tc.want)
		}
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"/app", "/apple", "/b", "/app/job-1", "/app/jobs", "/app/x"} {
		if _, err := c.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("paths complete from the children of the parent", func(t *testing.T) {
		for _, tc := range []struct {
			cwd, word string
			want      []string
		}{
			{"/", "/ap", []string{"/app", "/apple"}},
			{"/", "/app", []string{"/app", "/apple"}},
			{"/", "/app/j", []string{"/app/job-1", "/app/jobs"}},
			{"/", "/app/", []string{"/app/job-1", "/app/jobs", "/app/x"}},
			{"/", "/", []string{"/app", "/apple", "/b", "/zookeeper"}},
			{"/", "", []string{"app", "apple", "b", "zookeeper"}},
			{"/app", "j", []string{"job-1", "jobs"}},
			{"/app", "../ap", []string{"../app", "../apple"}},
			{"/app", "./x", []string{"./x"}},
			{"/app", "/b", []string{"/b"}},
			{"/", "/nope/", nil},
			{"/", "/app/z", nil},
		} {
			if got := completePath(ctx, c, tc.cwd, tc.word); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("completePath(cwd %s, %q) = %q, want %q", tc.cwd, tc.word, got, tc.want)
			}
		}
	})
	t.Run("the shell completes command names first, then paths at the cursor", func(t *testing.T) {
		sh := &shell{c: c, cwd: "/app", timeout: time.Second}
		for _, tc := range []struct {
			line            string
			pos             int
			head, tail      string
			wantCompletions []string
		}{
			{"ge", 2, "", "", []string{"get", "getacl"}},
			{"getacl /ap", 10, "getacl ", "", []string{"/app", "/apple"}},
			{"e", 1, "", "", []string{"elect", "ephemerals", "exit"}},
			{"  cd", 4, "  ", "", []string{"cd"}},
			{"get j", 5, "get ", "", []string{"job-1", "jobs"}},
			{"get /ap x", 7, "get ", " x", []string{"/app", "/apple"}},
			{"set -v 1 ../b", 13, "set -v 1 ", "", []string{"../b"}},
			{"ls -", 4, "ls ", "", nil},
			{"é /ap", 5, "é ", "", []string{"/app", "/apple"}}, // pos counts runes
		} {
			head, got, tail := sh.complete(tc.line, tc.pos)
			if head != tc.head || tail != tc.tail || !reflect.DeepEqual(got, tc.wantCompletions) {
				t.Errorf("complete(%q, %d) = %q, %q, %q; want %q, %q, %q",
					tc.line, tc.pos, head, got, tail, tc.head, tc.wantCompletions, tc.tail)
			}
		}
		_, all, _ := sh.complete("", 0)
		for _, name := range []string{"cd", "pwd", "ls", "tree", "watch", "help", "exit", "quit",
			"getacl", "setacl", "addauth", "whoami"} {
			if !strings.Contains(" "+strings.Join(all, " ")+" ", " "+name+" ") {
				t.Errorf("command names %q lack %s", all, name)
			}
		}
		for _, name := range all {
			if name == "shell" || name == "completion" {
				t.Errorf("the shell offers %s inside itself", name)
			}
		}
	})
	t.Run("the completion scripts complete paths through the binary", func(t *testing.T) {
		r := arbor(t, addr, "__complete", "get", "/ap")
		if r.code != 0 || r.stdout != "/app\n/apple\n:6\n" {
			t.Fatalf("__complete get /ap: %v", r)
		}
	})
}

func TestCompletionScriptsAndHelp(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "bash completion V2 for arbor", "zsh": "#compdef arbor"} {
		r := runArbor(t, "", nil, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, stderr %q, script without %q", shell, r.code, r.stderr, want)
		}
	}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if cmd.Name() == "arbor" {
			return
		}
		path := strings.Fields(strings.TrimPrefix(cmd.CommandPath(), "arbor "))
		r := runArbor(t, "", nil, append([]string{"help"}, path...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:\n  ") || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("help %v: %v", path, r)
		}
	}
	walk((&env{}).rootCommand())
	shellEnv := &env{sh: &shell{cwd: "/"}}
	for _, cmd := range shellEnv.rootCommand().Commands() {
		if cmd.Example == "" {
			t.Errorf("the shell's %s has no example", cmd.Name())
		}
	}
}
