package server

import (
	"fmt"
	"math"
	"net"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// knownOps are the ops wire has a row for.
func knownOps() []wire.Op {
	var ops []wire.Op
	for op := wire.Op(math.MinInt16); op <= math.MaxInt16; op++ {
		if op.Known() {
			ops = append(ops, op)
		}
	}
	return ops
}

// overEveryLimit is a request of op with everything in it that a limit
// holds: a watch on /n, 64 bytes of data, an ephemeral create (in a multi
// too), a listing of /n. Whatever op does with it, it is over each limit
// of limitCases that it counts against.
func overEveryLimit(op wire.Op) wire.Request {
	data := make([]byte, 64)
	return wire.Request{
		Xid: 1, Op: op, Path: "/n", Watch: true, Data: data, Mode: wire.ModeEphemeral, Version: -1,
		Ops:          []wire.Request{{Op: wire.OpCreate, Path: "/n/m", Data: data, Mode: wire.ModeEphemeral}},
		AddWatchMode: wire.AddWatchPersistent, WatcherType: wire.WatcherAny,
		DataWatches: []string{"/n"}, ExistWatches: []string{"/n"}, ChildWatches: []string{"/n"},
		AuthScheme: "digest", AuthData: []byte("alice:secret"),
	}
}

// limitCases are the limits whose checks live beside the ops they hold:
// each with a server where overEveryLimit is over it and no other, and
// what a new session there holds first (prepare, numbered by session).
var limitCases = []struct {
	limit   wire.Limit
	name    string // its refusals' label in /metrics
	config  func(*Config)
	prepare func(c *rawConn, i int)
}{
	{wire.LimitWatches, limitWatches, func(c *Config) { c.MaxWatches = 1 }, func(c *rawConn, _ int) {
		c.must(wire.Request{Xid: 1, Op: wire.OpExists, Path: "/w", Watch: true})
	}},
	{wire.LimitEphemerals, limitEphemerals, func(c *Config) { c.MaxEphemerals = 1 }, func(c *rawConn, i int) {
		c.must(wire.Request{Xid: 1, Op: wire.OpCreate, Path: fmt.Sprintf("/e%d", i), Mode: wire.ModeEphemeral})
	}},
	{wire.LimitDataSize, limitDataSize, func(c *Config) { c.MaxDataSize = 32 }, func(*rawConn, int) {}},
	{wire.LimitListing, limitListNames, func(c *Config) { c.MaxListNames = 1 }, func(c *rawConn, i int) {
		for _, name := range []string{"a", "b"} {
			c.must(wire.Request{Xid: 1, Op: wire.OpCreate, Path: fmt.Sprintf("/n/e%d%s", i, name), Mode: wire.ModeEphemeral})
		}
	}},
}

// The limits are checked where the ops they hold are run; wire's table
// says which ops count against which. The two must agree: an op is refused
// by a limit exactly when wire says it counts against it.
func TestEachLimitRefusesTheOpsWireSaysCountAgainstIt(t *testing.T) {
	t.Parallel()
	for _, lc := range limitCases {
		t.Run(lc.name, func(t *testing.T) {
			s := startServer(t, "", lc.config)
			setup := dialRaw(t, s)
			setup.connect(wire.ConnectRequest{})
			for _, p := range []string{"/n", "/n/a", "/n/b", "/w"} {
				setup.must(wire.Request{Xid: 1, Op: wire.OpCreate, Path: p})
			}
			series := `arbor_limit_refusals_total{limit="` + lc.name + `"}`
			for i, op := range knownOps() {
				c := dialRaw(t, s)
				c.connect(wire.ConnectRequest{})
				lc.prepare(c, i)
				before := metric(t, s, series)
				r := c.answer(overEveryLimit(op))
				refused := metric(t, s, series) > before
				if want := op.Counts(lc.limit); refused != want {
					t.Errorf("%s (answered %s): refused by the %s limit: %v; wire says it counts against it: %v",
						op, r.Err, lc.name, refused, want)
				}
				c.nc.Close()
			}
		})
	}
}

// Only an op that holds no place in the outstanding budget (the ping) is
// answered ahead of the requests before it; every other waits its turn.
func TestOnlyOpsOutsideTheOutstandingBudgetAreAnsweredAheadOfEarlierRequests(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	setup := dialRaw(t, s)
	setup.connect(wire.ConnectRequest{})
	setup.must(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/big", Data: make([]byte, 1<<20)})
	for _, p := range []string{"/n", "/n/a", "/n/b", "/w"} {
		setup.must(wire.Request{Xid: 1, Op: wire.OpCreate, Path: p})
	}
	// With small socket buffers, the flusher and the connection's queue
	// hold two of these 1 MiB replies (one being written, one past the
	// high-water mark): while the client does not read, the responder
	// stops before the last.
	const before = 4
	for _, op := range knownOps() {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		sc := s.connOf(t, c)
		for _, nc := range []net.Conn{c.nc, sc.nc} {
			tc, ok := nc.(*net.TCPConn)
			if !ok {
				t.Fatalf("a %T, not a TCP connection", nc)
			}
			_ = tc.SetReadBuffer(16 << 10)
			_ = tc.SetWriteBuffer(16 << 10)
		}
		var frames []byte
		for i := range before {
			frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(100 + i), Op: wire.OpGetData, Path: "/big"})
		}
		x := overEveryLimit(op)
		frames = wire.AppendRequest(frames, &x)
		// Once the server has read the request after x, it has handled
		// x: answered it if it goes ahead, queued it otherwise. After a
		// close, it reads no more.
		frames = wire.AppendRequest(frames, &wire.Request{Xid: 200, Op: wire.OpExists, Path: "/n"})
		read := int64(before + 2)
		if op == wire.OpClose {
			read--
		}
		c.write(frames)
		waitFor(t, fmt.Sprintf("the server to read the requests up to %s's", op), func() bool { return sc.stats.nRecv.Load() == read })
		answered := 0 // the getData replies that came before x's
		for {
			body, err := wire.ReadFrame(c.br, nil, 2<<20)
			if err != nil {
				t.Fatalf("%s: %v", op, err)
			}
			xid, err := wire.PeekXid(body)
			if err != nil {
				t.Fatal(err)
			}
			if xid == x.Xid {
				break
			}
			if xid >= 100 && xid < 100+before {
				answered++
			}
		}
		if ahead, want := answered < before, !op.Counts(wire.LimitOutstanding); ahead != want {
			t.Errorf("%s was answered after %d of the %d requests before it; wire says it holds no place in the budget: %v",
				op, answered, before, want)
		}
		c.nc.Close()
	}
}
