package recipes

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/shardtest"
	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/server"
)

// The tests run the recipes against a real server on loopback.

const testWait = 20 * time.Second

type testServer struct {
	addr    string
	metrics string
}

func startServer(t *testing.T, mod ...func(*server.Config)) *testServer {
	t.Helper()
	cfg := server.Config{
		Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, MinSessionTimeout: 200 * time.Millisecond,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	shardLocks(t, s)
	return &testServer{addr: s.Addr().String(), metrics: "http://" + s.HTTPAddr().String() + "/metrics"}
}

// flagShards runs the recipes against a server whose locks are spread
// over shards (docs/scale-out.md): the children of /locks, where nearly
// every test's locks are, by the hash of their names over this many
// shards, so that a test's locks, and a MultiLock's parts, are in several:
// go test ./recipes -recipes.shards=4.
var flagShards = flag.Int("recipes.shards", 0, "spread the children of /locks over this many shards by hash")

// shardLocks spreads /locks' children over *flagShards shards, if asked.
func shardLocks(t *testing.T, s *server.Server) {
	t.Helper()
	if *flagShards < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	c, err := client.Dial(ctx, []string{s.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	shardtest.Spread(t, c, []*server.Server{s}, "/locks", *flagShards, testWait)
}

func (s *testServer) dial(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	opts = append([]client.Option{client.WithSessionTimeout(5 * time.Second)}, opts...)
	c, err := client.Dial(ctx, []string{s.addr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// notifications reads the server's count of watch notifications sent.
func (s *testServer) notifications(t *testing.T) int {
	return s.metric(t, "arbor_watch_notifications_total ")
}

// metric sums the values of the server's metric lines that start with
// prefix (a name, or a name and the first labels).
func (s *testServer) metric(t *testing.T, prefix string) int {
	t.Helper()
	resp, err := http.Get(s.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += int(n)
	}
	return sum // 0: none counted yet
}

// children returns the recipe nodes under path.
func children(t *testing.T, c *client.Client, path string) []string {
	t.Helper()
	names, _, err := c.Children(context.Background(), path)
	if err != nil && !errors.Is(err, client.ErrNoNode) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range lockq.Sort(names) {
		out = append(out, e.Name)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testWait); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func ctxWait(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cutter is a dialer whose connections a test can break, and whose dials
// it can refuse: a client's crash or partition, as the server sees it.
type cutter struct {
	mu      sync.Mutex
	conns   []net.Conn
	refuse  bool
	dropAck atomic.Bool // the next create's answer is lost with the connection
}

func (k *cutter) dial(ctx context.Context, addr string) (net.Conn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refuse {
		return nil, errors.New("cutter: refused")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	k.conns = append(k.conns, nc)
	return &cutConn{Conn: nc, k: k}, nil
}

// cut breaks every connection and refuses new ones until heal.
func (k *cutter) cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refuse = true
	for _, nc := range k.conns {
		nc.Close()
	}
	k.conns = nil
}

func (k *cutter) heal() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.refuse = false
}

// cutConn, when its cutter's dropAck is set, lets the next create of a
// recipe node through to the server, swallows the answer and breaks the
// connection: the node exists, and the client cannot know it.
type cutConn struct {
	net.Conn
	k     *cutter
	wrote atomic.Bool
}

func (c *cutConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.k.dropAck.Load() && bytes.Contains(p, []byte(lockq.Mark)) {
		c.wrote.Store(true)
	}
	return n, err
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.wrote.Load() && c.k.dropAck.CompareAndSwap(true, false) {
		c.Conn.Close()
		return 0, errors.New("cutConn: the answer was dropped")
	}
	return n, err
}

// reads counts the getData, exists and getChildren requests the server has
// answered.
func (s *testServer) reads(t *testing.T) int {
	n := 0
	for _, op := range []string{"getData", "exists", "getChildren"} {
		n += s.metric(t, `arbor_requests_total{op="`+op+`"`)
	}
	return n
}
