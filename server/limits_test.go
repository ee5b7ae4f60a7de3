package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

// metric reads one series of the server's /metrics, such as
// `arbor_limit{limit="data_size"}`.
func metric(t *testing.T, s *Server, series string) float64 {
	t.Helper()
	_, body := get(t, "http://"+s.HTTPAddr().String()+"/metrics")
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

func TestBudgetBoundsCountAndBytes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		count, bytes  int
		held          []int // sizes taken first
		n             int   // the size then taken
		wantLimit     string
		wantLetThough bool
	}{
		{"a request under both limits goes through at once", 2, 100, []int{10}, 10, "", true},
		{"a request past the count waits", 2, 100, []int{10, 10}, 10, limitOutstanding, false},
		{"a request past the bytes waits", 10, 100, []int{60}, 60, limitOutstandingBytes, false},
		{"a request exactly at the bytes goes through", 10, 100, []int{60}, 40, "", true},
		{"one request always fits, however large", 10, 100, nil, 1000, "", true},
		{"a large request waits for the others to finish", 10, 100, []int{1}, 1000, limitOutstandingBytes, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newBudget(tt.count, tt.bytes)
			for _, n := range tt.held {
				if _, _, ok := b.take(context.Background(), n); !ok {
					t.Fatal("could not take what fits")
				}
			}
			// A request that does not fit waits until its context ends:
			// here it has ended already.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			limit, _, ok := b.take(ctx, tt.n)
			if limit != tt.wantLimit || ok != tt.wantLetThough {
				t.Fatalf("take(%d) = %q, %v; want %q, %v", tt.n, limit, ok, tt.wantLimit, tt.wantLetThough)
			}
		})
	}
}

// waitingCtx tells, by closing waiting, when a take first selects on its
// Done: it has found the budget spent and waits.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func TestBudgetGiveLetsAWaitingTakeThrough(t *testing.T) {
	t.Parallel()
	b := newBudget(1, 100)
	b.take(context.Background(), 10)
	parent, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx := &waitingCtx{Context: parent, waiting: make(chan struct{})}
	go func() {
		<-ctx.waiting
		b.give(10)
	}()
	limit, waited, ok := b.take(ctx, 10)
	if !ok || limit != limitOutstanding || waited <= 0 {
		t.Fatalf("take = %q, %v, %v; want to wait for outstanding_requests and go through", limit, waited, ok)
	}
}

func TestRefusalsAreLoggedAtMostOnceASecondPerLimit(t *testing.T) {
	t.Parallel()
	var l logThrottle
	t0 := time.Now()
	for _, step := range []struct {
		limit          string
		at             time.Duration
		wantOK         bool
		wantSuppressed int
	}{
		{limitWatches, 0, true, 0},
		{limitWatches, 100 * time.Millisecond, false, 0},
		{limitEphemerals, 200 * time.Millisecond, true, 0}, // another limit has its own rate
		{limitWatches, 900 * time.Millisecond, false, 0},
		{limitWatches, 1100 * time.Millisecond, true, 2},
		{limitWatches, 1200 * time.Millisecond, false, 0},
	} {
		suppressed, ok := l.mayLog(step.limit, t0.Add(step.at))
		if ok != step.wantOK || suppressed != step.wantSuppressed {
			t.Fatalf("%s at %v: mayLog = %d, %v; want %d, %v", step.limit, step.at, suppressed, ok, step.wantSuppressed, step.wantOK)
		}
	}
}

func TestLimitsThatCannotBeTurnedOffAreRefused(t *testing.T) {
	t.Parallel()
	for _, mod := range []func(*Config){
		func(c *Config) { c.MaxOutstanding = NoLimit },
		func(c *Config) { c.MaxOutstandingBytes = NoLimit },
	} {
		cfg := Config{Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir()}
		mod(&cfg)
		if s, err := New(cfg); err == nil {
			s.Close()
			t.Fatalf("New took %+v", cfg)
		}
	}
}

func TestLimitsAreInMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxWatches = NoLimit; c.MaxEphemerals = 7 })
	for series, want := range map[string]float64{
		`arbor_limit{limit="data_size"}`:                      float64(1 << 20),
		`arbor_limit{limit="frame_size"}`:                     float64(s.cfg.MaxFrame),
		`arbor_limit{limit="connections"}`:                    4096,
		`arbor_limit{limit="connections_per_ip"}`:             DefaultMaxConnsPerIP,
		`arbor_limit{limit="outstanding_requests"}`:           DefaultMaxOutstanding,
		`arbor_limit{limit="outstanding_bytes"}`:              DefaultMaxOutstandingBytes,
		`arbor_limit{limit="watches_per_connection"}`:         math.Inf(1),
		`arbor_limit{limit="ephemerals_per_session"}`:         7,
		`arbor_limit{limit="listing_names"}`:                  DefaultMaxListNames,
		`arbor_limit{limit="listing_bytes"}`:                  DefaultMaxListBytes,
		`arbor_limit{limit="path_length"}`:                    DefaultMaxPath,
		`arbor_limit{limit="name_length"}`:                    DefaultMaxName,
		`arbor_limit{limit="handshaking_connections"}`:        DefaultMaxHandshaking,
		`arbor_handshaking_connections`:                       0,
		`arbor_limit{limit="http_connections"}`:               DefaultHTTPMaxConns,
		`arbor_limit_refusals_total{limit="data_size"}`:       0,
		`arbor_throttled_total{limit="outstanding_requests"}`: 0,
	} {
		if got := metric(t, s, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	if r := c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/big", Data: make([]byte, 1<<20+1)}); r.Err != wire.CodeDataTooLarge {
		t.Fatalf("create of 1 MiB + 1: %v", r.Err)
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="data_size"}`); got != 1 {
		t.Fatalf("data_size refusals = %v, want 1", got)
	}
}

func TestConnectionsPerIPAreLimited(t *testing.T) {
	t.Parallel()
	s := startZKServer(t, func(c *Config) { c.MaxConnsPerIP = 2 })
	a, b := dialRaw(t, s), dialRaw(t, s)
	for _, c := range []*rawConn{a, b} {
		if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
			t.Fatalf("connect under the limit: %v", resp.Err)
		}
	}
	t.Run("a third Arbor client is told it has too many connections", func(t *testing.T) {
		over := dialRaw(t, s)
		if resp := over.connect(wire.ConnectRequest{}); resp.Err != wire.CodeTooManyConnections {
			t.Fatalf("connect over the limit: %v", resp.Err)
		}
	})
	t.Run("a ZooKeeper client over the limit is closed without an answer, as ZooKeeper does", func(t *testing.T) {
		z, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		defer z.nc.Close()
		if _, err := z.connect(zkwire.ConnectRequest{TimeOut: 5000}); !errors.Is(err, io.EOF) {
			t.Fatalf("err %v, want EOF", err)
		}
	})
	if r := a.call(wire.Request{Xid: 1, Op: wire.OpExists, Path: "/"}); r.Err != wire.CodeOK {
		t.Fatalf("a connection under the limit after refusals: %v", r.Err)
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="connections_per_ip"}`); got != 2 {
		t.Fatalf("connections_per_ip refusals = %v, want 2", got)
	}
	t.Run("a closed connection makes room", func(t *testing.T) {
		b.nc.Close()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			again := dialRaw(t, s)
			resp := again.connect(wire.ConnectRequest{})
			if resp.Err == wire.CodeOK {
				break
			}
			again.nc.Close()
			if time.Now().After(deadline) {
				t.Fatalf("still refused after a connection closed: %v", resp.Err)
			}
		}
	})
}

func TestWatchesPerConnectionAreLimited(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxWatches = 2 })
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	for i, p := range []string{"/a", "/b"} {
		c.call(wire.Request{Xid: int32(i + 1), Op: wire.OpCreate, Path: p})
	}
	c.call(wire.Request{Xid: 3, Op: wire.OpGetData, Path: "/a", Watch: true})
	c.call(wire.Request{Xid: 4, Op: wire.OpGetChildren, Path: "/a", Watch: true})
	for _, tt := range []struct {
		name string
		req  wire.Request
		want wire.Code
	}{
		{"getData with a new watch is refused", wire.Request{Op: wire.OpGetData, Path: "/b", Watch: true}, wire.CodeQuotaExceeded},
		{"exists with a watch on a missing node is refused", wire.Request{Op: wire.OpExists, Path: "/none", Watch: true}, wire.CodeQuotaExceeded},
		{"getChildren with a new watch is refused", wire.Request{Op: wire.OpGetChildren, Path: "/b", Watch: true}, wire.CodeQuotaExceeded},
		{"addWatch is refused", wire.Request{Op: wire.OpAddWatch, Path: "/b", AddWatchMode: wire.AddWatchPersistentRecursive}, wire.CodeQuotaExceeded},
		{"setWatches is refused", wire.Request{Op: wire.OpSetWatches2, DataWatches: []string{"/b"}}, wire.CodeQuotaExceeded},
		{"getData without a watch is served", wire.Request{Op: wire.OpGetData, Path: "/b"}, wire.CodeOK},
		{"a watch the connection holds already is taken again", wire.Request{Op: wire.OpGetData, Path: "/a", Watch: true}, wire.CodeOK},
		{"a missing node is still no node", wire.Request{Op: wire.OpGetData, Path: "/none", Watch: true}, wire.CodeNoNode},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Xid = 10
			if r := c.call(tt.req); r.Err != tt.want {
				t.Fatalf("%s: %v, want %v", tt.req.Op, r.Err, tt.want)
			}
		})
	}
	if n := s.watches.held(s.connOf(t, c)); n != 2 {
		t.Fatalf("the connection holds %d watches, want 2", n)
	}
	t.Run("a watch that fired makes room", func(t *testing.T) {
		other := dialRaw(t, s)
		other.connect(wire.ConnectRequest{})
		other.call(wire.Request{Xid: 1, Op: wire.OpSetData, Path: "/a", Version: -1})
		if r, err := c.reply(wire.OpGetData); err != nil || r.Xid != wire.XidNotification {
			t.Fatalf("want the notification, got %+v, %v", r, err)
		}
		if r := c.call(wire.Request{Xid: 11, Op: wire.OpGetData, Path: "/b", Watch: true}); r.Err != wire.CodeOK {
			t.Fatalf("getData with a watch after one fired: %v", r.Err)
		}
	})
	if got := metric(t, s, `arbor_limit_refusals_total{limit="watches_per_connection"}`); got != 5 {
		t.Fatalf("watch refusals = %v, want 5", got)
	}
}

// connOf finds the server's side of a raw connection.
func (s *Server) connOf(t *testing.T, rc *rawConn) *conn {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.nc.RemoteAddr().String() == rc.nc.LocalAddr().String() {
			return c
		}
	}
	t.Fatal("no such connection")
	return nil
}

func TestEphemeralsPerSessionAreLimited(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxEphemerals = 2 })
	t.Run("pipelined creates count those in flight", func(t *testing.T) {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		var frames []byte
		for i := range 5 {
			frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(i + 1), Op: wire.OpCreate, Path: fmt.Sprintf("/p%d", i), Mode: wire.ModeEphemeral})
		}
		c.write(frames)
		var got []wire.Code
		served := 0
		for range 5 {
			r, err := c.reply(wire.OpCreate)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Err)
			switch r.Err {
			case wire.CodeOK:
				served++
			case wire.CodeQuotaExceeded:
			default:
				t.Fatalf("replies %v: want only ok and quota exceeded", got)
			}
		}
		// The count errs on the side of refusing (a create applied and
		// not yet answered counts twice), so on a loaded machine fewer
		// than two may go through; more never may.
		if got[0] != wire.CodeOK || served > 2 {
			t.Fatalf("replies %v, want the first served and at most 2 in all", got)
		}
	})
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	// call sends req and checks that, once it is answered, the server has
	// no ephemeral create of c in flight: the next create must not count
	// the one just answered twice.
	call := func(req wire.Request) wire.Reply {
		t.Helper()
		r := c.call(req)
		if n := s.connOf(t, c).ephemeralsInFlight.Load(); n != 0 {
			t.Fatalf("%d ephemeral creates still in flight once answered", n)
		}
		return r
	}
	for i, p := range []string{"/e0", "/e1"} {
		if r := call(wire.Request{Xid: int32(i + 1), Op: wire.OpCreate, Path: p, Mode: wire.ModeEphemeral}); r.Err != wire.CodeOK {
			t.Fatalf("create %s under the limit: %v", p, r.Err)
		}
	}
	for _, tt := range []struct {
		name string
		req  wire.Request
		want wire.Code
	}{
		{"an ephemeral create is refused", wire.Request{Op: wire.OpCreate, Path: "/x", Mode: wire.ModeEphemeralSequential}, wire.CodeQuotaExceeded},
		{"a multi with an ephemeral create is refused", wire.Request{Op: wire.OpMulti, Ops: []wire.Request{
			{Op: wire.OpCreate, Path: "/p"}, {Op: wire.OpCreate, Path: "/p/x", Mode: wire.ModeEphemeral}}}, wire.CodeQuotaExceeded},
		{"a persistent create is served", wire.Request{Op: wire.OpCreate, Path: "/persistent"}, wire.CodeOK},
		{"a delete of an ephemeral is served", wire.Request{Op: wire.OpDelete, Path: "/e0", Version: -1}, wire.CodeOK},
		{"then there is room for one", wire.Request{Op: wire.OpCreate, Path: "/e5", Mode: wire.ModeEphemeral}, wire.CodeOK},
		{"and no more", wire.Request{Op: wire.OpCreate, Path: "/e6", Mode: wire.ModeEphemeral}, wire.CodeQuotaExceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Xid = 10
			if r := call(tt.req); r.Err != tt.want {
				t.Fatalf("%s: %v, want %v", tt.req.Op, r.Err, tt.want)
			}
		})
	}
	t.Run("another session has its own limit", func(t *testing.T) {
		other := dialRaw(t, s)
		other.connect(wire.ConnectRequest{})
		if r := other.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/other", Mode: wire.ModeEphemeral}); r.Err != wire.CodeOK {
			t.Fatalf("create: %v", r.Err)
		}
	})
	t.Run("a ZooKeeper client gets QuotaExceeded", func(t *testing.T) {
		s := startZKServer(t, func(c *Config) { c.MaxEphemerals = 1 })
		z := connectZK(t, s)
		for i, want := range []int32{0, int32(wire.CodeQuotaExceeded)} {
			r := z.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: fmt.Sprintf("/z%d", i), ACL: zkwire.OpenACL, Flags: int32(wire.ModeEphemeral)})
			if r.Err != want {
				t.Fatalf("create %d: %d, want %d", i, r.Err, want)
			}
		}
	})
}

// connectZK opens a ZooKeeper session on s.
func connectZK(t *testing.T, s *Server) *zkConn {
	t.Helper()
	z, err := dialZK(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z.nc.Close() })
	if _, err := z.connect(zkwire.ConnectRequest{TimeOut: 5000}); err != nil {
		t.Fatal(err)
	}
	return z
}

func TestListingsAreLimited(t *testing.T) {
	t.Parallel()
	s := startZKServer(t, func(c *Config) { c.MaxListNames = 3; c.MaxListBytes = 10 })
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	xid := int32(0)
	create := func(p string, mode wire.CreateMode) {
		xid++
		if r := c.call(wire.Request{Xid: xid, Op: wire.OpCreate, Path: p, Mode: mode}); r.Err != wire.CodeOK {
			t.Fatalf("create %s: %v", p, r.Err)
		}
	}
	for _, p := range []string{"/few", "/few/a", "/few/b", "/few/c", "/many", "/long", "/long/0123456789a", "/e"} {
		create(p, wire.ModePersistent)
	}
	for i := range 4 {
		create(fmt.Sprintf("/many/%d", i), wire.ModePersistent)
	}
	for i := range 4 {
		create(fmt.Sprintf("/e/%d", i), wire.ModeEphemeral)
	}
	for _, tt := range []struct {
		name string
		req  wire.Request
		want wire.Code
	}{
		{"a listing at the limits is served", wire.Request{Op: wire.OpGetChildren, Path: "/few", Watch: true}, wire.CodeOK},
		{"a listing of more names is refused", wire.Request{Op: wire.OpGetChildren, Path: "/many"}, wire.CodeQuotaExceeded},
		{"a listing of more bytes is refused", wire.Request{Op: wire.OpGetChildren, Path: "/long"}, wire.CodeQuotaExceeded},
		{"getEphemerals over the limits is refused", wire.Request{Op: wire.OpGetEphemerals, Path: "/"}, wire.CodeQuotaExceeded},
		{"getEphemerals under them is served", wire.Request{Op: wire.OpGetEphemerals, Path: "/e/1"}, wire.CodeOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			xid++
			tt.req.Xid = xid
			if r := c.call(tt.req); r.Err != tt.want {
				t.Fatalf("%s %s: %v, want %v", tt.req.Op, tt.req.Path, r.Err, tt.want)
			}
		})
	}
	t.Run("a ZooKeeper client gets QuotaExceeded", func(t *testing.T) {
		z := connectZK(t, s)
		if r := z.call(t, zkwire.Request{Op: zkwire.OpGetChildren2, Path: "/many"}); r.Err != int32(wire.CodeQuotaExceeded) {
			t.Fatalf("getChildren2: %d", r.Err)
		}
		if r := z.call(t, zkwire.Request{Op: zkwire.OpGetChildren, Path: "/few"}); r.Err != 0 || len(r.Children) != 3 {
			t.Fatalf("getChildren: %+v", r)
		}
	})
	if got := metric(t, s, `arbor_limit_refusals_total{limit="listing_names"}`); got != 3 {
		t.Errorf("listing_names refusals = %v, want 3", got)
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="listing_bytes"}`); got != 1 {
		t.Errorf("listing_bytes refusals = %v, want 1", got)
	}
}

// A connection that pipelines past its budget is slowed, not refused:
// every request is answered, in order.
func TestOutstandingRequestsAreThrottledNotRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		mod   func(*Config)
		size  int
		limit string
	}{
		{"by count", func(c *Config) { c.MaxOutstanding = 2 }, 10, limitOutstanding},
		{"by bytes", func(c *Config) { c.MaxOutstandingBytes = 10 << 10 }, 4 << 10, limitOutstandingBytes},
		{"by bytes, with frames larger than the budget", func(c *Config) { c.MaxOutstandingBytes = 1 << 10 }, 64 << 10, limitOutstandingBytes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, "", tt.mod)
			c := dialRaw(t, s)
			c.connect(wire.ConnectRequest{})
			c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/x"})
			const n = 40
			var frames []byte
			for i := range n {
				frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(100 + i), Op: wire.OpSetData, Path: "/x", Data: make([]byte, tt.size), Version: -1})
			}
			go c.nc.Write(frames)
			for i := range n {
				r, err := c.reply(wire.OpSetData)
				if err != nil {
					t.Fatal(err)
				}
				if r.Xid != int32(100+i) || r.Err != wire.CodeOK {
					t.Fatalf("reply %d: xid %d, %v", i, r.Xid, r.Err)
				}
			}
			if got := metric(t, s, `arbor_throttled_total{limit="`+tt.limit+`"}`); got == 0 {
				t.Fatalf("the connection was never throttled by %s", tt.limit)
			}
			if got := metric(t, s, `arbor_throttled_seconds_total{limit="`+tt.limit+`"}`); got <= 0 {
				t.Fatalf("throttled for %v seconds", got)
			}
		})
	}
}

// noisyClient pipelines getData, and a setData in ten, on its own node as
// fast as it can until stop or n requests, while it reads the replies. run reports the
// requests sent and how many were not answered OK. It runs on a goroutine
// of its own: it reports failures instead of failing the test.
type noisyClient struct {
	c        *rawConn
	path     string
	answered atomic.Int64 // replies read
}

func newNoisyClient(t *testing.T, s *Server, id int) *noisyClient {
	c := dialRaw(t, s)
	_ = c.nc.SetDeadline(time.Now().Add(time.Minute))
	c.connect(wire.ConnectRequest{})
	path := fmt.Sprintf("/noisy%d", id)
	c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: path})
	return &noisyClient{c: c, path: path}
}

func (nc *noisyClient) request(i int) wire.Request {
	if i%10 == 0 {
		return wire.Request{Xid: int32(2 + i), Op: wire.OpSetData, Path: nc.path, Data: make([]byte, 100), Version: -1}
	}
	return wire.Request{Xid: int32(2 + i), Op: wire.OpGetData, Path: nc.path}
}

func (nc *noisyClient) run(n int, stop <-chan struct{}) (sent, failed int) {
	var written atomic.Int64 // requests whose frames are written
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; {
			select {
			case <-stop:
				return
			default:
			}
			if written.Load()-nc.answered.Load() > maxUnread {
				// Past the server's budget already: more would only wait
				// in the sockets' buffers, and outlast stop.
				time.Sleep(time.Millisecond)
				continue
			}
			var frames []byte
			for range 50 {
				req := nc.request(i)
				frames = wire.AppendRequest(frames, &req)
				i++
			}
			if _, err := nc.c.nc.Write(frames); err != nil {
				return
			}
			written.Store(int64(i))
		}
	}()
	for i := 0; ; i++ {
		for int64(i) >= written.Load() {
			select {
			case <-done:
				if int64(i) >= written.Load() {
					return i, failed
				}
			case <-time.After(time.Millisecond):
			}
		}
		req := nc.request(i)
		r, err := readReply(nc.c.br, req.Op)
		if err != nil {
			<-done
			return int(written.Load()), failed + int(written.Load()) - i
		}
		if r.Xid != req.Xid || r.Err != wire.CodeOK {
			failed++
		}
		nc.answered.Store(int64(i + 1))
	}
}

// maxUnread is how far a noisy client runs ahead of its replies: twice the
// server's default budget.
const maxUnread = 2 * DefaultMaxOutstanding

// readReply reads the next frame as the reply to a request of op.
func readReply(br io.Reader, op wire.Op) (wire.Reply, error) {
	var r wire.Reply
	body, err := wire.ReadFrame(br, nil, 64<<20)
	if err != nil {
		return r, err
	}
	return r, wire.DecodeReply(body, op, &r)
}

// The test: clients that flood requests or watches are throttled
// or refused while another client is served alongside them. What it
// checks is counted, not timed: the flood goes on until the quiet client
// is done, and while one of the quiet client's gets is in flight the
// noisy clients get few replies, fewer than the requests one of them may
// hold in the server: the quiet get does not wait behind their backlog.
func TestANoisyClientDoesNotStarveTheOthers(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxWatches = 1000 })
	quiet := dialRaw(t, s)
	// (It sends no ping: its session must outlast the flood's build-up
	// on a loaded machine.)
	quiet.connect(wire.ConnectRequest{TimeoutMs: 30_000})
	quiet.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/quiet", Data: []byte("q")})

	var noisy []*noisyClient
	for id := range 4 {
		noisy = append(noisy, newNoisyClient(t, s, id))
	}
	flood := dialRaw(t, s)
	flood.connect(wire.ConnectRequest{})
	answered := func() (n int64) {
		for _, nc := range noisy {
			n += nc.answered.Load()
		}
		return n
	}

	// The flood stops when the quiet client is done (or, if it never is,
	// after the noisy clients' connections' deadline).
	stopCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent, failed int
	var flooding atomic.Int32
	for _, nc := range noisy {
		flooding.Add(1)
		wg.Go(func() {
			defer flooding.Add(-1)
			s, f := nc.run(math.MaxInt32-2, stopCtx.Done())
			mu.Lock()
			sent, failed = sent+s, failed+f
			mu.Unlock()
		})
	}
	watchCodes := map[wire.Code]int{}
	wg.Go(func() {
		var frames []byte
		for i := range 2000 {
			frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(i + 1), Op: wire.OpExists, Path: fmt.Sprintf("/w%d", i), Watch: true})
		}
		go flood.nc.Write(frames)
		for range 2000 {
			r, err := readReply(flood.br, wire.OpExists)
			if err != nil {
				watchCodes[wire.CodeConnectionLoss]++
				return
			}
			watchCodes[r.Err]++
		}
	})

	waitFor(t, "the flood to build up", func() bool {
		for _, nc := range noisy {
			if nc.answered.Load() < maxUnread {
				return false
			}
		}
		return true
	})
	var during []int64 // the noisy clients' replies while each quiet get was in flight
	var took []time.Duration
	for i := range 200 {
		before, start := answered(), time.Now()
		r := quiet.call(wire.Request{Xid: int32(2 + i), Op: wire.OpGetData, Path: "/quiet"})
		took = append(took, time.Since(start))
		during = append(during, answered()-before)
		if r.Err != wire.CodeOK || string(r.Data) != "q" {
			t.Fatalf("quiet get %d: %v %q", i, r.Err, r.Data)
		}
	}
	if n := flooding.Load(); n != int32(len(noisy)) {
		t.Errorf("%d of the %d noisy clients stopped before the quiet client's gets were done", len(noisy)-int(n), len(noisy))
	}
	stop()
	wg.Wait()

	slices.Sort(took)
	slices.Sort(during)
	p99 := during[len(during)*99/100-1]
	t.Logf("quiet client: median %v, p99 %v, max %v; noisy replies during a quiet get: median %d, p99 %d, max %d; noisy clients sent %d requests and were throttled %v times",
		took[len(took)/2], took[len(took)*99/100-1], took[len(took)-1], during[len(during)/2], p99, during[len(during)-1],
		sent, metric(t, s, `arbor_throttled_total{limit="outstanding_requests"}`))
	if p99 >= DefaultMaxOutstanding {
		t.Errorf("p99 of the noisy replies during a quiet get is %d, as many as the %d requests a noisy client may hold in the server: the quiet client waits behind them", p99, DefaultMaxOutstanding)
	}
	if failed != 0 {
		t.Errorf("%d of the noisy clients' %d requests failed: they should be slowed, not refused", failed, sent)
	}
	// An exists of a missing node leaves its watch and answers NoNode.
	if watchCodes[wire.CodeNoNode] != 1000 || watchCodes[wire.CodeQuotaExceeded] != 1000 {
		t.Errorf("the watch flood got %v, want 1000 no_node and 1000 quota_exceeded", watchCodes)
	}
}
