package server

import (
	"io"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// stallingClient makes a client that asks for a 1 MiB node n times and
// never reads: its replies pile up on the server unless the server stops
// answering it. Its session times out after timeout (0: the default);
// before it stalls, it sends first, reading the replies.
func stallingClient(t *testing.T, s *Server, n int, timeout time.Duration, first ...wire.Request) *rawConn {
	t.Helper()
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{TimeoutMs: int32(timeout.Milliseconds())})
	c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/big", Data: make([]byte, 1<<20)})
	for _, r := range first {
		c.call(r)
	}
	var frames []byte
	for i := range n {
		frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(2 + i), Op: wire.OpGetData, Path: "/big"})
	}
	go c.nc.Write(frames) // and never read
	return c
}

// A client that asks and never reads is answered until its socket and a
// megabyte of queued replies are full, and then waits: the server does
// not queue its 100 MiB of replies, and answers other clients meanwhile,
// also once the client's session expires and its connection closes.
func TestAClientThatDoesNotReadHoldsABoundedQueueOfReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	stallingClient(t, s, 100, 300*time.Millisecond)
	// The responder stops once the socket's buffers and the queue are
	// full; by then the queue holds one reply past the high-water mark at
	// most, and flush one more batch of that size in its write.
	bound := int64(2 * (replyHighWater + (1<<20 + 1024)))
	other := dialRaw(t, s)
	other.connect(wire.ConnectRequest{})
	for i := range 100 {
		if r := other.call(wire.Request{Xid: int32(i + 1), Op: wire.OpExists, Path: "/big"}); r.Err != wire.CodeOK {
			t.Fatalf("another client's exists: %v", r.Err)
		}
		if held := s.memory.replies.Load(); held > bound {
			t.Fatalf("%d bytes of replies queued for a client that does not read, over %d", held, bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := metric(t, s, `arbor_memory_held_bytes{part="replies"}`); got > float64(bound) {
		t.Fatalf("/metrics shows %v bytes of replies held", got)
	}
}

// Once the member's memory for requests is full, a write waits for room
// and is then refused with ErrThrottled, counted against the memory
// limit; the room comes back when the requests holding it are answered.
func TestAWriteIsRefusedWhenTheMembersRequestMemoryStaysFull(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MemoryBudget = 4 << 20 }) // 1 MiB for requests
	staller := stallingClient(t, s, 100, 0)
	// Big writes behind the stalled reads: the first hold the member's
	// request memory while the responder waits for the staller to read.
	var frames []byte
	for i := range 8 {
		frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(1000 + i), Op: wire.OpSetData, Path: "/big", Data: make([]byte, 300<<10), Version: -1})
	}
	go staller.nc.Write(frames)
	other := dialRaw(t, s)
	other.connect(wire.ConnectRequest{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := other.call(wire.Request{Xid: 1, Op: wire.OpSetData, Path: "/big", Data: make([]byte, 300<<10), Version: -1})
		if r.Err == wire.CodeThrottled {
			break
		}
		if r.Err != wire.CodeOK || time.Now().After(deadline) {
			t.Fatalf("a write while the request memory is full: %v, want %v", r.Err, wire.CodeThrottled)
		}
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="memory_requests"}`); got < 1 {
		t.Fatalf("refusals counted against the request memory: %v", got)
	}
	staller.nc.Close()
	for {
		r := other.call(wire.Request{Xid: 2, Op: wire.OpSetData, Path: "/big", Data: make([]byte, 300<<10), Version: -1})
		if r.Err == wire.CodeOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write after the staller left: %v", r.Err)
		}
	}
	// The staller's connection gives its requests' memory back as it
	// winds down, which may end after the other's write.
	for used := s.memory.requests.Used(); used != 0; used = s.memory.requests.Used() {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of request memory still held with nothing outstanding", used)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A watcher that does not read is dropped, with a warning, once its
// notifications pile up over the high-water mark while the member's reply
// memory is spent: notifications cannot wait for room as replies do. The
// write timeout, which would drop it too, is an hour here: only the
// notifications can.
func TestAWatcherThatDoesNotReadIsDroppedWithAWarning(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	s := startServer(t, "", func(c *Config) {
		c.MemoryBudget = 4 << 20 // 1 MiB for replies: the staller spends it
		c.Logger = zap.New(core)
		c.writeTimeout = time.Hour
	})
	staller := stallingClient(t, s, 100, time.Minute,
		wire.Request{Xid: 1000, Op: wire.OpCreate, Path: "/watched"},
		wire.Request{Xid: 1001, Op: wire.OpAddWatch, Path: "/watched", AddWatchMode: wire.AddWatchPersistent})
	waitFor(t, "the staller's replies to fill the member's share", s.memory.repliesFull)
	// Each change notifies the staller; one that finds its queue over the
	// high-water mark (it is, once its replies wait for room) drops it.
	other := dialRaw(t, s)
	other.connect(wire.ConnectRequest{})
	msg := "closing connection: client is not reading its replies"
	for i := 0; logs.FilterMessage(msg).Len() == 0; i++ {
		if i == 10_000 {
			t.Fatalf("the server never logged %q; it logged %v", msg, logs.All())
		}
		if r := other.call(wire.Request{Xid: int32(i + 1), Op: wire.OpSetData, Path: "/watched", Version: -1}); r.Err != wire.CodeOK {
			t.Fatalf("setData: %v", r.Err)
		}
	}
	// The connection closes: what was queued is dropped, not kept.
	_ = staller.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, staller.nc); err != nil {
		t.Fatalf("the dropped watcher's connection did not close: %v", err)
	}
	waitFor(t, "the dropped watcher's replies to be let go", func() bool { return s.memory.replies.Load() == 0 })
}
