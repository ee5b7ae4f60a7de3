package cli

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

// arbor runs the command and returns its exit status, stdout and stderr.
func arbor(addr string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Main(append([]string{"--servers", addr}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCommands(t *testing.T) {
	addr, _ := startServer(t)
	steps := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string // a substring
	}{
		{"create prints the path", []string{"create", "/app", "cfg"}, 0, "/app\n", ""},
		{"create -s prints the numbered path", []string{"create", "-s", "/app/job-"}, 0, "/app/job-0000000000\n", ""},
		{"create -e -s makes an ephemeral sequential node", []string{"create", "-e", "-s", "/app/e-"}, 0, "/app/e-0000000001\n", ""},
		{"ls lists children, one per line (the ephemeral went with its session)", []string{"ls", "/app"}, 0, "job-0000000000\n", ""},
		{"set replaces the data", []string{"set", "/app", "v2"}, 0, "", ""},
		{"get prints the data", []string{"get", "/app"}, 0, "v2\n", ""},
		{"set at a stale version fails", []string{"set", "-v", "0", "/app", "v3"}, 1, "", "arbor: /app is not at the expected version"},
		{"get of a missing node says so", []string{"get", "/x"}, 1, "", "arbor: no node at /x\n"},
		{"delete of a node with children fails", []string{"delete", "/app"}, 1, "", "arbor: /app has children"},
		{"an invalid path is refused", []string{"get", "app"}, 1, "", `invalid path "app"`},
		{"a missing argument is a usage error", []string{"get"}, 2, "", "accepts 1 arg"},
		{"an unknown command is a usage error", []string{"frobnicate"}, 2, "", "unknown command"},
		{"an unknown flag is a usage error", []string{"get", "--bogus", "/app"}, 2, "", "unknown flag"},
		{"delete removes a node", []string{"delete", "/app/job-0000000000"}, 0, "", ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			code, out, errOut := arbor(addr, s.args...)
			if code != s.code || out != s.stdout || !strings.Contains(errOut, s.stderr) {
				t.Fatalf("arbor %v = %d, stdout %q, stderr %q; want %d, %q, %q",
					s.args, code, out, errOut, s.code, s.stdout, s.stderr)
			}
		})
	}
	t.Run("stat prints the Stat fields", func(t *testing.T) {
		code, out, _ := arbor(addr, "stat", "/app")
		if code != 0 || !strings.Contains(out, "dataVersion = 1\n") || !strings.Contains(out, "numChildren = 0\n") {
			t.Fatalf("stat: %d %q", code, out)
		}
	})
	t.Run("ARBOR_SERVERS names the servers", func(t *testing.T) {
		t.Setenv("ARBOR_SERVERS", addr)
		var out, errOut bytes.Buffer
		if code := Main([]string{"get", "/app"}, &out, &errOut); code != 0 || out.String() != "v2\n" {
			t.Fatalf("with ARBOR_SERVERS: %d %q %q", code, out.String(), errOut.String())
		}
	})
}

func TestWatchPrintsEachChange(t *testing.T) {
	addr, metrics := startServer(t)
	arbor(addr, "create", "/w")
	var out, errOut syncBuffer
	done := make(chan int)
	go func() { done <- Main([]string{"--servers", addr, "watch", "-n", "3", "/w"}, &out, &errOut) }()
	// Before each change, wait until the watch printed the previous event and
	// re-armed both its watches: a one-shot watch armed late would merge two
	// changes into one event.
	for i, args := range [][]string{{"set", "/w", "a"}, {"create", "/w/kid"}, {"delete", "/w/kid"}} {
		waitFor(t, func() bool { return strings.Count(out.String(), "\n") == i && watches(t, metrics) == 2 })
		if code, _, e := arbor(addr, args...); code != 0 {
			t.Fatalf("arbor %v: %s", args, e)
		}
	}
	select {
	case code := <-done:
		want := "NodeDataChanged /w\nNodeChildrenChanged /w\nNodeChildrenChanged /w\n"
		if code != 0 || out.String() != want {
			t.Fatalf("watch = %d, %q (stderr %q); want %q", code, out.String(), errOut.String(), want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("watch did not stop after 3 events; printed %q", out.String())
	}
}

// startServer runs a server and returns its client address and metrics URL.
func startServer(t *testing.T) (addr, metrics string) {
	t.Helper()
	s, err := server.New(server.Config{
		Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.Addr().String(), "http://" + s.HTTPAddr().String() + "/metrics"
}

// watches reads arbor_watches from the server's metrics.
func watches(t *testing.T, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "arbor_watches "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
