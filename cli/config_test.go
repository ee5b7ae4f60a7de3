package cli

import (
	"context"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// jConfig is the JSON of config get and config watch, as docs/cli.md
// documents it.
type jConfig struct {
	Path     string  `json:"path"`
	Data     *string `json:"data"`
	Encoding *string `json:"encoding"`
	Version  *int32  `json:"version"`
}

func TestConfigGetAndSet(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	runSteps(t, addr, []step{
		{"get of a missing value fails", []string{"config", "get", "/cfg/app/db"}, 1, "", "arbor: no node at /cfg/app/db\n"},
		{"set -v of a missing value fails", []string{"config", "set", "-v", "0", "/cfg/app/db", "v1"}, 1, "", "arbor: no node at /cfg/app/db\n"},
		{"set creates the node and its parents", []string{"config", "set", "/cfg/app/db", "v1"}, 0, "", ""},
		{"the parents are there", []string{"ls", "-R", "/cfg"}, 0, "/cfg\n/cfg/app\n/cfg/app/db\n", ""},
		{"get prints the value", []string{"config", "get", "/cfg/app/db"}, 0, "v1\n", ""},
		{"get -o json gives the value and its version", []string{"config", "get", "-o", "json", "/cfg/app/db"}, 0,
			`{"path":"/cfg/app/db","data":"v1","encoding":"utf8","version":0}` + "\n", ""},
		{"set -v at the current version writes", []string{"config", "set", "-v", "0", "/cfg/app/db", "v2"}, 0, "", ""},
		{"set -v at a stale version fails", []string{"config", "set", "-v", "0", "/cfg/app/db", "v3"}, 1, "", "arbor: /cfg/app/db is not at the expected version\n"},
		{"set without -v writes any version", []string{"config", "set", "-o", "json", "/cfg/app/db", "v3"}, 0, `{"path":"/cfg/app/db"}` + "\n", ""},
		{"get sees the last write", []string{"config", "get", "/cfg/app/db"}, 0, "v3\n", ""},
	})
	// The parents are containers: the server removes them once their
	// last child is gone (a persistent /cfg/app would stay).
	must(t, addr, "delete", "/cfg/app/db")
	waitFor(t, "the containers removed", func() bool { return arbor(t, addr, "stat", "/cfg/app").code == 1 })
}

func TestConfigWatchPrintsEveryValueInOrder(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	must(t, addr, "create", "/cfg")
	text := start(t, addr, "config", "watch", "/cfg/w")
	js := start(t, addr, "config", "watch", "-o", "json", "/cfg/w")
	waitFor(t, "the missing node printed", func() bool {
		return text.stdout.String() == "\n" && len(lines(js.stdout.String())) == 1
	})
	// Back to back, with no wait: each write is one line.
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	changes := []func() error{
		func() error { _, err := c.Create(ctx, "/cfg/w", []byte("v1"), client.Persistent); return err },
		func() error { _, err := c.Set(ctx, "/cfg/w", []byte("v2"), -1); return err },
		func() error { _, err := c.Create(ctx, "/cfg/w/kid", nil, client.Persistent); return err }, // not a value
		func() error { _, err := c.Set(ctx, "/cfg/w", []byte("v3"), -1); return err },
		func() error { _, err := c.Set(ctx, "/cfg/w", []byte("v3"), -1); return err }, // the same value again
		func() error { return c.Delete(ctx, "/cfg/w/kid", -1) },
		func() error { return c.Delete(ctx, "/cfg/w", -1) },
		func() error { _, err := c.Create(ctx, "/cfg/w", nil, client.Persistent); return err }, // empty, not missing
		func() error { _, err := c.Set(ctx, "/cfg/w", []byte("\xff"), -1); return err },
		func() error { _, err := c.Set(ctx, "/cfg/w", []byte("v4"), -1); return err },
	}
	for i, change := range changes {
		if err := change(); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	wantText := "\nv1\nv2\nv3\nv3\n\n\n\xff\nv4\n"
	waitFor(t, "every value", func() bool {
		return text.stdout.String() == wantText && len(lines(js.stdout.String())) == 9
	})
	for _, w := range []*background{text, js} {
		if code := w.stop(t, syscall.SIGINT); code != 0 || w.stderr.String() != "" {
			t.Fatalf("config watch: exit %d, stderr %q", code, w.stderr)
		}
	}
	if text.stdout.String() != wantText {
		t.Fatalf("config watch printed %q, want %q", text.stdout, wantText)
	}
	value := func(data, encoding string, version int32) jConfig {
		return jConfig{"/cfg/w", &data, &encoding, &version}
	}
	none := jConfig{Path: "/cfg/w"}
	want := []jConfig{none, value("v1", "utf8", 0), value("v2", "utf8", 1), value("v3", "utf8", 2), value("v3", "utf8", 3),
		none, value("", "utf8", 0), value("/w==", "base64", 1), value("v4", "utf8", 2)}
	got := lines(js.stdout.String())
	for i, l := range got {
		if i >= len(want) || !reflect.DeepEqual(decode[jConfig](t, l), want[i]) {
			t.Fatalf("config watch -o json printed\n%s", js.stdout)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("config watch -o json printed %d values, want %d", len(got), len(want))
	}
	if !strings.Contains(got[0], `"data":null,"encoding":null,"version":null`) {
		t.Errorf("a missing node prints %s", got[0])
	}
}

func TestConfigUsage(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	for _, args := range [][]string{
		{"config", "frobnicate"}, {"config", "get"}, {"config", "set", "/a"}, {"config", "watch", "/a", "/b"},
		{"config", "set", "-v", "x", "/a", "v"},
	} {
		if r := arbor(t, addr, args...); r.code != 2 || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("arbor %v: %v, want exit 2 with a hint", args, r)
		}
	}
}
