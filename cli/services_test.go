package cli

import (
	"context"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/recipes"
)

// The JSON of services, spelled out as docs/cli.md documents it.

type jServices struct {
	Services []struct {
		Name      string `json:"name"`
		Instances int    `json:"instances"`
	} `json:"services"`
}

type jInstance struct {
	ID       string            `json:"id"`
	Address  string            `json:"address"`
	Port     int               `json:"port"`
	Metadata map[string]string `json:"metadata"`
}

type jInstances struct {
	Service   string      `json:"service"`
	Instances []jInstance `json:"instances"`
}

type jRegistration struct {
	Path  string `json:"path"`
	Event string `json:"event"`
}

func TestServicesListAndWatchFollowRegistrations(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	runSteps(t, addr, []step{
		{"list without services prints the header", []string{"services", "list"}, 0, "SERVICE  INSTANCES\n", ""},
		{"list -o json without services is empty", []string{"services", "list", "-o", "json"}, 0, `{"services":[]}` + "\n", ""},
		{"list of an unknown service has no instances", []string{"services", "list", "web"}, 0, "ID  ADDRESS  PORT  METADATA\n", ""},
	})
	text := start(t, addr, "services", "watch", "web")
	js := start(t, addr, "services", "watch", "-o", "json", "web")
	// After each change, wait for both watchers to print its list: a
	// ServiceCache passes on only the latest of lists that come quickly.
	printed := 0
	next := func(what string) {
		t.Helper()
		printed++
		waitFor(t, what, func() bool {
			return len(lines(js.stdout.String())) == printed && strings.Count(text.stdout.String(), "ID  ") == printed
		})
	}
	next("the first list")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c1, c2 := dial(t, addr), dial(t, addr)
	web1 := recipes.Instance{ID: "web-1", Address: "127.0.0.1", Port: 8080, Metadata: map[string]string{"zone": "eu", "v": "2"}}
	if _, err := recipes.Register(ctx, c1, "web", web1); err != nil {
		t.Fatal(err)
	}
	next("web-1 registered")
	r2, err := recipes.Register(ctx, c2, "web", recipes.Instance{ID: "web-2", Address: "127.0.0.2", Port: 8081})
	if err != nil {
		t.Fatal(err)
	}
	next("web-2 registered")

	runSteps(t, addr, []step{
		{"list counts the instances", []string{"services", "list"}, 0, "SERVICE  INSTANCES\nweb      2\n", ""},
		{"list SERVICE prints a table sorted by ID", []string{"services", "list", "web"}, 0,
			"ID     ADDRESS    PORT  METADATA\nweb-1  127.0.0.1  8080  v=2,zone=eu\nweb-2  127.0.0.2  8081  -\n", ""},
	})
	if got := decode[jServices](t, must(t, addr, "services", "list", "-o", "json")); len(got.Services) != 1 ||
		got.Services[0].Name != "web" || got.Services[0].Instances != 2 {
		t.Errorf("services list -o json = %+v", got)
	}
	i1 := jInstance{"web-1", "127.0.0.1", 8080, map[string]string{"zone": "eu", "v": "2"}}
	i2 := jInstance{"web-2", "127.0.0.2", 8081, map[string]string{}}
	if got := decode[jInstances](t, must(t, addr, "services", "list", "-o", "json", "web")); !reflect.DeepEqual(got, jInstances{"web", []jInstance{i1, i2}}) {
		t.Errorf("services list -o json web = %+v", got)
	}

	if err := r2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	next("web-2 deregistered")
	c1.Close() // web-1's ephemeral node goes with the session
	next("web-1's session closed")

	for _, w := range []*background{text, js} {
		if code := w.stop(t, syscall.SIGINT); code != 0 || w.stderr.String() != "" {
			t.Fatalf("services watch: exit %d, stderr %q", code, w.stderr)
		}
	}
	want := []jInstances{
		{"web", []jInstance{}}, {"web", []jInstance{i1}}, {"web", []jInstance{i1, i2}},
		{"web", []jInstance{i1}}, {"web", []jInstance{}},
	}
	out := lines(js.stdout.String())
	for i, l := range out {
		if got := decode[jInstances](t, l); i >= len(want) || !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("services watch -o json printed\n%s\nwant %+v", js.stdout, want)
		}
	}
	const empty = "ID  ADDRESS  PORT  METADATA\n"
	const one = "ID     ADDRESS    PORT  METADATA\nweb-1  127.0.0.1  8080  v=2,zone=eu\n"
	const two = one + "web-2  127.0.0.2  8081  -\n"
	if wantText := strings.Join([]string{empty, one, two, one, empty}, "\n"); text.stdout.String() != wantText {
		t.Fatalf("services watch printed\n%s\nwant\n%s", text.stdout, wantText)
	}
}

func TestServicesRegisterHoldsUntilInterrupted(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	first := start(t, addr, "services", "register", "api", "api-1", "127.0.0.1", "9000", "--meta", "zone=test", "-m", "v=1")
	waitFor(t, "the registration", func() bool { return first.stdout.String() == "registered /services/api/api-1\n" })
	want := jInstances{"api", []jInstance{{"api-1", "127.0.0.1", 9000, map[string]string{"zone": "test", "v": "1"}}}}
	if got := decode[jInstances](t, must(t, addr, "services", "list", "-o", "json", "api")); !reflect.DeepEqual(got, want) {
		t.Fatalf("services list -o json api = %+v, want %+v", got, want)
	}
	if r := arbor(t, addr, "__complete", "services", "watch", "a"); r.code != 0 || r.stdout != "api\n:4\n" {
		t.Errorf("completing a service name: %v", r)
	}

	// The same ID from another session waits for the first to go.
	if n := watches(t, metrics); n != 0 {
		t.Fatalf("%d watches before the second registers", n)
	}
	second := start(t, addr, "services", "register", "-o", "json", "api", "api-1", "127.0.0.2", "9001")
	waitFor(t, "the second to wait", func() bool { return watches(t, metrics) == 1 }) // on the first's node
	if code := first.stop(t, syscall.SIGINT); code != 0 ||
		first.stdout.String() != "registered /services/api/api-1\nderegistered /services/api/api-1\n" {
		t.Fatalf("first: exit %d, stdout %q, stderr %q", code, first.stdout, first.stderr)
	}
	waitFor(t, "the second registration", func() bool { return strings.Contains(second.stdout.String(), "registered") })
	if got := decode[jRegistration](t, second.stdout.String()); got != (jRegistration{"/services/api/api-1", "registered"}) {
		t.Errorf("second printed %+v", got)
	}
	if out := must(t, addr, "services", "list", "api"); !strings.Contains(out, "api-1  127.0.0.2  9001  -\n") {
		t.Errorf("after the second registered, list printed\n%s", out)
	}
	if code := second.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("second: exit %d, stderr %q", code, second.stderr)
	}
	if out := must(t, addr, "services", "list", "api"); out != "ID  ADDRESS  PORT  METADATA\n" {
		t.Errorf("after both left, list printed\n%s", out)
	}
}

func TestServicesUsage(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	for _, args := range [][]string{
		{"services", "frobnicate"}, {"services", "list", "a/b"}, {"services", "list", "a", "b"},
		{"services", "watch"}, {"services", "watch", ".."},
		{"services", "register", "web", "id", "127.0.0.1"},
		{"services", "register", "web", "id", "127.0.0.1", "http"},
		{"services", "register", "web", "id", "127.0.0.1", "70000"},
		{"services", "register", "web", "id", "127.0.0.1", "80", "--meta", "novalue"},
		{"services", "register", "web", "a/b", "127.0.0.1", "80"},
	} {
		if r := arbor(t, addr, args...); r.code != 2 || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("arbor %v: %v, want exit 2 with a hint", args, r)
		}
	}
}
