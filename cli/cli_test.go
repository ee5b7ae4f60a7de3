package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/shardtest"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

// The tests run the real arbor binary, built once by TestMain (with -race
// when the tests are), against servers started in the test process on
// loopback ports.

// arborBin is the path of the binary TestMain built.
var arborBin string

// raceBuild is set by race_test.go when the tests are built with -race.
var raceBuild bool

func TestMain(m *testing.M) {
	if spec := os.Getenv(lockChildEnv); spec != "" {
		os.Exit(lockChild(spec)) // the test binary run as a locked command
	}
	dir, err := os.MkdirTemp("", "arbor-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	arborBin = filepath.Join(dir, "arbor")
	args := []string{"build", "-o", arborBin}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/arbor")...)
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building arbor: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what a run of the binary left.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// arbor runs the binary against the server at addr and waits for it.
func arbor(t *testing.T, addr string, args ...string) result {
	t.Helper()
	return runArbor(t, "", nil, append([]string{"--servers", addr}, args...)...)
}

// runArbor runs the binary with stdin and extra environment variables.
func runArbor(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, arborBin, args...)
	cmd.Env = append(testEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
	default:
		t.Fatalf("arbor %v: %v (stderr %q)", args, err, errOut.String())
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

// testEnv is the environment without ARBOR_SERVERS and ARBOR_TLS_*, so
// that only what a test says picks the servers and TLS, and without the
// race detector's default second of sleep at exit (a race still fails the
// run: exit status 66).
func testEnv() []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "ARBOR_SERVERS="), strings.HasPrefix(kv, "ARBOR_TLS_"):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			env = append(env, kv)
		}
	}
	return append(env, "GORACE="+gorace)
}

// must runs the binary and fails the test unless it exits 0.
func must(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := arbor(t, addr, args...)
	if r.code != 0 {
		t.Fatalf("arbor %v: %v", args, r)
	}
	return r.stdout
}

// background is a run of the binary that the test ends.
type background struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
}

func start(t *testing.T, addr string, args ...string) *background {
	t.Helper()
	return startEnv(t, addr, nil, args...)
}

// startEnv is start with extra environment variables.
func startEnv(t *testing.T, addr string, env []string, args ...string) *background {
	t.Helper()
	b := &background{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	b.cmd = exec.Command(arborBin, append([]string{"--servers", addr}, args...)...)
	b.cmd.Env = append(testEnv(), env...)
	b.cmd.Stdout, b.cmd.Stderr = b.stdout, b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// stop sends sig and returns the exit status.
func (b *background) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return b.wait(t)
}

// wait waits for the process to exit and returns its status.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
		return b.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		t.Fatalf("arbor %v did not exit; stdout %q, stderr %q", b.cmd.Args, b.stdout, b.stderr)
		return -1
	}
}

// startServer runs a server and returns its client address and metrics URL.
func startServer(t *testing.T) (addr, metrics string) {
	t.Helper()
	s := newServer(t, server.Config{
		Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
	})
	return s.Addr().String(), "http://" + s.HTTPAddr().String() + "/metrics"
}

// flagShards runs the tests' servers sharded: their top-level names split
// over this many shards at start (docs/scale-out.md), so that the CLI is
// checked against a sharded cluster too: go test ./cli -cli.shards=4.
var flagShards = flag.Int("cli.shards", 0, "split every test's server's top-level names over this many shards at start")

// mapNode and mapPaths are the map's node of a sharded server
// (shardtest.MapNodes), when -cli.shards splits the tests' servers.
func mapNode() int       { return shardtest.MapNodes(*flagShards) }
func mapPaths() []string { return shardtest.MapPaths(*flagShards) }

// newServer starts a server with cfg, stopped when the test ends, and
// sharded as -cli.shards asks.
func newServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	return shardtest.NewServer(t, cfg, *flagShards)
}

// dial opens a session of the test's own, for what the binary cannot do
// alone (hold an ephemeral node while another command runs).
func dial(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// decode unmarshals one JSON value and fails the test if it is not one.
func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", s)
	}
	return v
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
