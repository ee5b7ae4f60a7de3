package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

// step is one run of the binary and what it must print: stdout exactly,
// stderr containing a substring.
type step struct {
	name   string
	args   []string
	code   int
	stdout string
	stderr string
}

func runSteps(t *testing.T, addr string, steps []step) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := arbor(t, addr, s.args...)
			if r.code != s.code || r.stdout != s.stdout || !strings.Contains(r.stderr, s.stderr) {
				t.Fatalf("arbor %v = %v; want exit %d, stdout %q, stderr with %q", s.args, r, s.code, s.stdout, s.stderr)
			}
			if s.code == 0 && r.stderr != "" {
				t.Fatalf("arbor %v succeeded but wrote to stderr: %q", s.args, r.stderr)
			}
		})
	}
}

func TestCommandsPrintText(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	runSteps(t, addr, []step{
		{"create prints the path", []string{"create", "/app", "cfg"}, 0, "/app\n", ""},
		{"create -s prints the numbered path", []string{"create", "-s", "/app/job-"}, 0, "/app/job-0000000000\n", ""},
		{"create -s of a path ending in / names the node by its number", []string{"create", "-s", "/app/"}, 0, "/app/0000000001\n", ""},
		{"create -e -s makes an ephemeral sequential node", []string{"create", "-e", "-s", "/app/e-"}, 0, "/app/e-0000000002\n", ""},
		{"ls lists children, one per line (the ephemeral went with its session)", []string{"ls", "/app"}, 0, "0000000001\njob-0000000000\n", ""},
		{"create -c makes a container", []string{"create", "-c", "/queues"}, 0, "/queues\n", ""},
		{"create -t makes a TTL node", []string{"create", "-t", "1h", "/app/cache", "c"}, 0, "/app/cache\n", ""},
		{"create -t -s makes a sequential TTL node", []string{"create", "-t", "1h", "-s", "/app/t-"}, 0, "/app/t-0000000005\n", ""},
		{"set replaces the data and prints nothing", []string{"set", "/app", "v2"}, 0, "", ""},
		{"get prints the data", []string{"get", "/app"}, 0, "v2\n", ""},
		{"set at the current version succeeds", []string{"set", "-v", "1", "/app", "v3"}, 0, "", ""},
		{"set at a stale version fails", []string{"set", "-v", "0", "/app", "v4"}, 1, "", "arbor: /app is not at the expected version"},
		{"ls -R lists the subtree as full paths, parents first", []string{"ls", "-R", "/app"}, 0,
			"/app\n/app/0000000001\n/app/cache\n/app/job-0000000000\n/app/t-0000000005\n", ""},
		{"count counts every node below, the system nodes too", []string{"count", "/"}, 0, fmt.Sprintln(9 + mapNode()), ""},
		{"count of a leaf is 0", []string{"count", "/app/cache"}, 0, "0\n", ""},
		{"sync prints nothing", []string{"sync", "/app"}, 0, "", ""},
		{"get of a missing node says so", []string{"get", "/x"}, 1, "", "arbor: no node at /x\n"},
		{"delete of a node with children fails", []string{"delete", "/app"}, 1, "", "arbor: /app has children"},
		{"delete at a stale version fails", []string{"delete", "-v", "3", "/app/cache"}, 1, "", "not at the expected version"},
		{"delete removes a node", []string{"delete", "/app/job-0000000000"}, 0, "", ""},
		{"an invalid path is refused", []string{"get", "app"}, 1, "", `invalid path "app"`},
		{"a fresh session has no ephemerals", []string{"ephemerals"}, 0, "", ""},
		{"deleteall removes the subtree", []string{"deleteall", "/app"}, 0, "", ""},
		{"deleteall of a missing node fails", []string{"deleteall", "/app"}, 1, "", "no node at /app"},
		{"deleteall / keeps the root", []string{"deleteall", "/"}, 0, "", ""},
		{"after deleteall / only the root and the system nodes are left", []string{"ls", "-R", "/"}, 0, "/\n/zookeeper\n/zookeeper/config\n/zookeeper/quota\n" + strings.Repeat("/zookeeper/shards\n", mapNode()), ""},
	})
}

func TestStatAndGetWithStat(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	must(t, addr, "create", "/app", "cfg")
	must(t, addr, "set", "/app", "v2")
	must(t, addr, "create", "/app/a")
	stat := must(t, addr, "stat", "/app")
	for _, want := range []string{"czxid = 0x", "ctime = 20", "dataVersion = 1\n", "cversion = 1\n",
		"aclVersion = 0\n", "ephemeralOwner = 0x0\n", "dataLength = 2\n", "numChildren = 1\n"} {
		if !strings.Contains(stat, want) {
			t.Errorf("stat lacks %q:\n%s", want, stat)
		}
	}
	if got := must(t, addr, "get", "-s", "/app"); got != "v2\n"+stat {
		t.Errorf("get -s = %q, want the data then the Stat %q", got, stat)
	}
	if got := must(t, addr, "ls", "-s", "/app"); got != "a\n"+stat {
		t.Errorf("ls -s = %q, want the children then the Stat %q", got, stat)
	}
	if r := arbor(t, addr, "stat", "/missing"); r.code != 1 || !strings.Contains(r.stderr, "no node at /missing") {
		t.Errorf("stat of a missing node: %v", r)
	}
}

func TestEphemeralsUnderAPathShowEveryOwner(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	a, b := dial(t, addr), dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"/locks", "/locks/sub"} {
		if _, err := a.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		c    *client.Client
		path string
	}{{a, "/locks/a"}, {b, "/locks/sub/b"}, {a, "/elsewhere"}} {
		if _, err := step.c.Create(ctx, step.path, nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	want := "/locks/a      " + sessionHex(a.SessionID()) + "\n" +
		"/locks/sub/b  " + sessionHex(b.SessionID()) + "\n"
	if got := must(t, addr, "ephemerals", "/locks"); got != want {
		t.Errorf("ephemerals /locks =\n%s\nwant\n%s", got, want)
	}
	if got := must(t, addr, "ephemerals", "/locks/a"); !strings.HasPrefix(got, "/locks/a ") {
		t.Errorf("ephemerals of an ephemeral node lists itself: %q", got)
	}
	if r := arbor(t, addr, "ephemerals", "/nope"); r.code != 1 || !strings.Contains(r.stderr, "no node at /nope") {
		t.Errorf("ephemerals of a missing path: %v", r)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	must(t, addr, "create", "/app")
	runSteps(t, addr, []step{
		{"success is 0", []string{"ls", "/"}, 0, "app\nzookeeper\n", ""},
		{"a missing argument is a usage error", []string{"get"}, 2, "", "accepts 1 arg"},
		{"too many arguments is a usage error", []string{"set", "/app", "a", "b"}, 2, "", "accepts 2 arg"},
		{"an unknown command is a usage error", []string{"frobnicate"}, 2, "", "unknown command"},
		{"an unknown subcommand is a usage error", []string{"member", "frobnicate"}, 2, "", "unknown command"},
		{"an unknown flag is a usage error", []string{"get", "--bogus", "/app"}, 2, "", "unknown flag"},
		{"a bad flag value is a usage error", []string{"set", "-v", "x", "/app", "d"}, 2, "", "invalid argument"},
		{"an unknown output format is a usage error", []string{"-o", "yaml", "ls", "/"}, 2, "", `"yaml" is neither text nor json`},
		{"a container cannot be ephemeral", []string{"create", "-c", "-e", "/c"}, 2, "", "container"},
		{"an ephemeral node cannot have a TTL", []string{"create", "-e", "-t", "1s", "/c"}, 2, "", "TTL"},
		{"a TTL must be positive", []string{"create", "-t", "0s", "/c"}, 2, "", "out of range"},
		{"ls -R -w is a usage error", []string{"ls", "-R", "-w", "/"}, 2, "", "do not go together"},
		{"a usage error says where the help is", []string{"get"}, 2, "", "Run 'arbor get --help' for usage."},
		{"a missing node is an error", []string{"get", "/nope"}, 1, "", "no node at /nope"},
	})
	t.Run("no server to reach is an error", func(t *testing.T) {
		r := arbor(t, "127.0.0.1:1", "--timeout", "300ms", "ls", "/")
		if r.code != 1 || !strings.Contains(r.stderr, "arbor: cannot reach 127.0.0.1:1") {
			t.Fatalf("got %v", r)
		}
	})
	t.Run("ARBOR_SERVERS names the servers when --servers does not", func(t *testing.T) {
		r := runArbor(t, "", []string{"ARBOR_SERVERS=" + addr}, "ls", "/")
		if r.code != 0 || r.stdout != "app\nzookeeper\n" {
			t.Fatalf("with ARBOR_SERVERS: %v", r)
		}
		r = runArbor(t, "", []string{"ARBOR_SERVERS=127.0.0.1:1"}, "--servers", addr, "ls", "/")
		if r.code != 0 || r.stdout != "app\nzookeeper\n" {
			t.Fatalf("--servers over ARBOR_SERVERS: %v", r)
		}
	})
}

func TestClusterCommandsPrintText(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	status := must(t, addr, "status")
	for _, want := range []string{"id = 1\n", "leader = 1\n", "term = ", "applied = ", "zxid = 0x", "digest = ", "sessions = 1\n", fmt.Sprintf("znodes = %d\n", 4+mapNode())} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	members := lines(must(t, addr, "member", "list"))
	if len(members) != 2 || strings.Fields(members[0])[0] != "ID" || strings.Fields(members[1])[0] != "1" ||
		!strings.HasSuffix(members[1], "voter") {
		t.Errorf("member list = %q", members)
	}
	if r := arbor(t, addr, "member", "remove", "x"); r.code != 2 || !strings.Contains(r.stderr, `member id "x"`) {
		t.Errorf("member remove x: %v", r)
	}
}

func TestMemberChangesOnServersWithASuperuserTakeItsAuth(t *testing.T) {
	t.Parallel()
	s := newServer(t, server.Config{
		Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
		SuperDigest: client.DigestID("root", "rootpw"),
	})
	addr := s.Addr().String()
	runSteps(t, addr, []step{
		{"a change without auth is refused, saying what it takes", []string{"member", "add", "--learner", "2", "127.0.0.1:1"}, 1, "",
			"arbor: not allowed to change the members: that takes the superuser (--auth digest:USER:PASSWORD"},
		{"so is one by another user", []string{"--auth", "digest:alice:secret", "member", "remove", "9"}, 1, "", "not allowed to change the members"},
	})
	if members := lines(must(t, addr, "member", "list")); len(members) != 2 {
		t.Fatalf("member list without auth = %q", members)
	}
	added := lines(must(t, addr, "--auth", "digest:root:rootpw", "member", "add", "--learner", "2", "127.0.0.1:1"))
	if len(added) != 3 || !strings.HasPrefix(added[2], "2 ") || !strings.HasSuffix(added[2], "learner") {
		t.Fatalf("member add as the superuser = %q", added)
	}
	r := runArbor(t, "", []string{"ARBOR_AUTH=digest:root:rootpw"}, "--servers", addr, "member", "remove", "2")
	if r.code != 0 || len(lines(r.stdout)) != 2 {
		t.Fatalf("member remove with ARBOR_AUTH as the superuser: %v", r)
	}
}
