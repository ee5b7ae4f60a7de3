package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

var (
	buildOnce sync.Once
	arbordBin string
	buildErr  error
)

// arbord builds the arbord binary once per test run.
func arbord(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "arbord-bin")
		if err != nil {
			buildErr = err
			return
		}
		arbordBin = filepath.Join(dir, "arbord")
		out, err := exec.Command("go", "build", "-o", arbordBin, "github.com/arbor-coord/arbor/cmd/arbord").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return arbordBin
}

// process is an arbord run as a child process.
type process struct {
	cmd            *exec.Cmd
	addr, httpAddr string
}

func startProcess(t *testing.T, dir, addr, httpAddr string, args ...string) *process {
	t.Helper()
	p := spawnProcess(t, dir, addr, httpAddr, args...)
	p.waitHealthy(t)
	return p
}

// spawnProcess starts arbord without waiting for it.
func spawnProcess(t *testing.T, dir, addr, httpAddr string, args ...string) *process {
	t.Helper()
	args = append([]string{"--data", dir, "--listen", addr, "--http", httpAddr, "--log-level", "warn"}, args...)
	cmd := exec.Command(arbord(t), args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, addr: addr, httpAddr: httpAddr}
	t.Cleanup(func() { p.kill() })
	return p
}

// waitHealthy waits until the process's /healthz says ok (it knows a
// leader).
func (p *process) waitHealthy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + p.httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("arbord on %s not healthy: %v", p.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL: no shutdown, no flush, nothing but what is on disk.
func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

func TestKill9LosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	dir, addr, httpAddr := t.TempDir(), freePort(t), freePort(t)
	p := startProcess(t, dir, addr, httpAddr, "--snapshot-every", "300")
	c := dial(t, addr)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/d", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	// 1,000 acknowledged writes from 8 writers, then a kill -9 while more
	// are in flight: every acknowledged one must survive.
	const writers, each = 8, 125
	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				path := fmt.Sprintf("/d/w%d-%d", w, i)
				val := fmt.Sprintf("v%d", i)
				if _, err := c.Create(ctx, path, []byte(val), client.Persistent); err != nil {
					t.Errorf("create %s: %v", path, err)
					return
				}
				mu.Lock()
				acked[path] = val
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	inflight, cancel := context.WithCancel(ctx)
	go func() {
		for i := 0; inflight.Err() == nil; i++ {
			path := fmt.Sprintf("/d/late-%d", i)
			if _, err := c.Create(inflight, path, []byte("late"), client.Persistent); err == nil {
				mu.Lock()
				acked[path] = "late"
				mu.Unlock()
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	p.kill()
	cancel()
	c.Close()

	startProcess(t, dir, addr, httpAddr, "--snapshot-every", "300")
	c2 := dial(t, addr)
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < writers*each {
		t.Fatalf("only %d writes acknowledged", len(acked))
	}
	for path, want := range acked {
		data, _, err := c2.Get(ctx, path)
		if err != nil || string(data) != want {
			t.Fatalf("after kill -9: %s = %q, %v; want %q", path, data, err, want)
		}
	}
	t.Logf("%d acknowledged writes survived kill -9", len(acked))
}

func TestSnapshotCompactionAndRestart(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freePort(t)
	every := func(c *server.Config) { c.SnapshotEvery = 50 }
	s := startServer(t, dir, addr, every)
	c := dial(t, addr)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/snap", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 230; i++ {
		if _, err := c.Set(ctx, "/snap", []byte(fmt.Sprint(i)), int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	startServer(t, dir, addr, every)
	c = dial(t, addr)
	data, st, err := c.Get(ctx, "/snap")
	if err != nil || string(data) != "229" || st.Version != 230 {
		t.Fatalf("after restart /snap = %q version %d, %v; want \"229\" version 230", data, st.Version, err)
	}
}

func TestSIGTERMShutsDownGracefully(t *testing.T) {
	t.Parallel()
	dir, addr, httpAddr := t.TempDir(), freePort(t), freePort(t)
	p := startProcess(t, dir, addr, httpAddr)
	c := dial(t, addr)
	if _, err := c.Create(testCtx(t), "/before-term", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("arbord exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("arbord still running 10s after SIGTERM")
	}
	startProcess(t, dir, addr, httpAddr)
	if ok, _, err := dial(t, addr).Exists(testCtx(t), "/before-term"); !ok || err != nil {
		t.Fatalf("after a graceful restart: %v %v", ok, err)
	}
}
