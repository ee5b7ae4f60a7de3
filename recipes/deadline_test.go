package recipes

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/wire"
)

// lagger is a dialer whose connections hand the client what the server
// sent only lag after it came: slow answers (or, with a long lag, none),
// while the client's requests go out at once.
type lagger struct {
	lag   atomic.Int64
	dials atomic.Int32 // connections made
}

func (g *lagger) set(d time.Duration) { g.lag.Store(int64(d)) }

func (g *lagger) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	g.dials.Add(1)
	lc := &lagConn{Conn: nc, g: g, in: make(chan lagChunk, 64), done: make(chan struct{}), moved: make(chan struct{}, 1)}
	go lc.pump()
	return lc, nil
}

type lagChunk struct {
	b   []byte
	at  time.Time // when it came
	err error
}

// lagConn keeps its own read deadline: what the server sent waits out
// the lag here, and a deadline set meanwhile (the client's handshake
// timeout, or the cut it makes when it closes) must end the Read then,
// not once the lag has passed.
type lagConn struct {
	net.Conn
	g    *lagger
	in   chan lagChunk
	done chan struct{}
	next *lagChunk // the chunk waiting out its lag
	rest []byte    // of the chunk being read
	err  error

	mu       sync.Mutex
	deadline time.Time     // the read deadline; zero: none
	moved    chan struct{} // capacity 1: the read deadline moved
}

// pump reads what the server sends, stamped with when it came.
func (c *lagConn) pump() {
	for {
		b := make([]byte, 64<<10)
		n, err := c.Conn.Read(b)
		select {
		case c.in <- lagChunk{b: b[:n], at: time.Now(), err: err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *lagConn) Read(p []byte) (int, error) {
	for len(c.rest) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		var in <-chan lagChunk // a new chunk, when none waits out its lag
		var lagged time.Duration
		if c.next == nil {
			in = c.in
		} else if lagged = time.Until(c.next.at.Add(time.Duration(c.g.lag.Load()))); lagged <= 0 {
			c.rest, c.err, c.next = c.next.b, c.next.err, nil
			continue
		}
		if err := c.await(in, lagged); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// await waits for a chunk on in (or, with in nil, for lagged to pass), for
// the read deadline to move or pass, or for the conn to close.
func (c *lagConn) await(in <-chan lagChunk, lagged time.Duration) error {
	c.mu.Lock()
	deadline := c.deadline
	c.mu.Unlock()
	var expired, due <-chan time.Time
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(left)
		defer t.Stop()
		expired = t.C
	}
	if in == nil {
		t := time.NewTimer(lagged)
		defer t.Stop()
		due = t.C
	}
	select {
	case ch := <-in:
		c.next = &ch
	case <-due:
	case <-expired:
		return os.ErrDeadlineExceeded
	case <-c.moved:
	case <-c.done:
		return net.ErrClosed
	}
	return nil
}

func (c *lagConn) SetDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *lagConn) SetReadDeadline(t time.Time) error {
	c.setReadDeadline(t)
	return nil
}

func (c *lagConn) setReadDeadline(t time.Time) {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	select {
	case c.moved <- struct{}{}:
	default:
	}
}

func (c *lagConn) Close() error {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	return c.Conn.Close()
}

// A read deadline ends a Read of a lagConn at once, even while what the
// server sent waits out a long lag: the client's handshake and Close rely
// on it (a cleanup once waited an hour on such a handshake).
func TestALagConnHonoursItsReadDeadline(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var g lagger
	g.set(time.Hour)
	nc, err := g.dial(ctxWait(t), s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 5000, Password: make([]byte, 16)}
	if _, err := nc.Write(wire.AppendConnectRequest(nil, &req)); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := nc.Read(make([]byte, 1))
		read <- err
	}()
	time.Sleep(100 * time.Millisecond) // the answer waits out its lag, and the Read with it
	must(t, nc.SetDeadline(time.Unix(1, 0)))
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read after the deadline: %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(testWait):
		t.Fatal("Read went on past its deadline")
	}
}

// A client whose server stops answering reconnects, and its handshake gets
// no answer either: Close ends it at once (the client cuts the handshake's
// deadline short), rather than wait for an answer that never comes. The
// deadline tests' cleanup hung so, for as long as the lag.
func TestCloseEndsAHandshakeThatGetsNoAnswer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var g lagger
	c, err := client.Dial(ctxWait(t), []string{s.addr}, client.WithDialer(g.dial), client.WithSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	g.set(time.Hour) // no answer comes any more
	waitFor(t, "the client to reconnect", func() bool { return g.dials.Load() > 1 })
	time.Sleep(100 * time.Millisecond) // its handshake waits for an answer
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		must(t, err)
	case <-time.After(testWait):
		t.Fatal("Close waits for a handshake that gets no answer")
	}
}

// A leased hold's deadline counts from when its renewal was sent, not
// from when the answer came: the server renewed the lease after the send,
// perhaps long before the answer arrived.
func TestTheDeadlineCountsFromTheRenewalsSendNotItsAnswer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	var g lagger
	c := s.dial(t, client.WithDialer(g.dial))
	const ttl = 2 * time.Second // under the session's timeout (5 s): the deadline's term
	m := NewMutex(c, "/locks/send", WithLease(ttl), WithClockDrift(0), WithSafetyMargin(0))
	m.h.every = time.Hour // only the test renews
	if !m.Deadline().IsZero() {
		t.Errorf("Deadline %v before Lock, want zero", m.Deadline())
	}
	must(t, m.Lock(ctx))

	const lag = 300 * time.Millisecond
	g.set(lag)
	var last time.Time
	for i := range 2 {
		before := time.Now()
		if _, err := m.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		d := m.Deadline()
		// The renewal was sent between before and its answer, which took
		// lag to come.
		if d.Before(before.Add(ttl)) || d.After(after.Add(-lag).Add(ttl)) {
			t.Errorf("renewal %d sent within [%v, %v]: deadline %v, want the send plus %v",
				i, before, after.Add(-lag), d, ttl)
		}
		if !d.After(last) {
			t.Errorf("renewal %d moved the deadline from %v to %v", i, last, d)
		}
		last = d
	}
	g.set(0)
	must(t, m.Unlock(ctx))
	if !m.Deadline().IsZero() {
		t.Errorf("Deadline %v after Unlock, want zero", m.Deadline())
	}
}

// A holder whose renewals get no answer (they may well reach the server)
// is told at its deadline, before the next waiter holds: the lease may have
// ended by then for all it knows.
func TestLostClosesAtTheDeadlineWhenNoRenewalGetsThrough(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	var g lagger
	held := NewMutex(s.dial(t, client.WithDialer(g.dial)), "/locks/silent", WithLease(time.Second))
	must(t, held.Lock(ctx))
	lostAt := make(chan time.Time, 1)
	go func() {
		<-held.Lost()
		lostAt <- time.Now()
	}()
	waiter := NewMutex(s.dial(t), "/locks/silent")
	granted := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err != nil {
			t.Error(err)
		}
		granted <- time.Now()
	}()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, s.dial(t), "/locks/silent")) == 2 })

	g.set(time.Hour) // no answer comes any more
	deadline := held.Deadline()
	var lost time.Time
	select {
	case lost = <-lostAt:
	case <-ctx.Done():
		t.Fatal("no Lost while no renewal got through")
	}
	if lost.Before(deadline) {
		t.Errorf("Lost at %v, before the deadline %v", lost, deadline)
	}
	if err := held.LostReason(); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("LostReason = %v, want ErrDeadlinePassed", err)
	}
	if !held.Deadline().IsZero() {
		t.Errorf("Deadline %v once lost, want zero", held.Deadline())
	}
	select {
	case at := <-granted:
		if !lost.Before(at) {
			t.Errorf("the holder was told at %v, the next one held at %v", lost, at)
		}
	case <-ctx.Done():
		t.Fatal("the waiter never held")
	}
	must(t, waiter.Unlock(ctx))
}

// A hold of the session alone counts its deadline from what a server last
// answered, and every answer moves it on.
func TestASessionHoldsDeadlineMovesWithWhatTheServerAnswers(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t) // a session timeout of 5 s: a ping at least every 5/3 s
	m := NewMutex(c, "/locks/session")
	must(t, m.Lock(ctx))
	first := m.Deadline()
	timeout := c.SessionTimeout()
	if !first.Before(c.LastHeard().Add(timeout)) {
		t.Errorf("deadline %v, not before the session could end (%v)", first, c.LastHeard().Add(timeout))
	}
	if !first.After(time.Now()) {
		t.Fatalf("deadline %v passed at once", first)
	}
	waitFor(t, "a ping's answer to move the deadline", func() bool { return m.Deadline().After(first) })
	if isClosed(m.Lost()) {
		t.Fatalf("lost while the server answered: %v", m.LostReason())
	}
	must(t, m.Unlock(ctx))
}

// A hold lost at its deadline may still be the server's: Unlock deletes
// its node all the same, and says why it was lost.
func TestUnlockAfterTheDeadlineStillFreesTheLock(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	m := NewMutex(c, "/locks/late")
	must(t, m.Lock(ctx))
	m.h.mu.Lock()
	l := m.h.loss
	m.h.mu.Unlock()
	l.end(ErrDeadlinePassed) // as if the deadline had passed
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("not lost")
	}
	if err := m.Unlock(ctx); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("Unlock = %v, want ErrDeadlinePassed", err)
	}
	if nodes := children(t, c, "/locks/late"); len(nodes) != 0 {
		t.Errorf("nodes left: %v", nodes)
	}
	other := NewMutex(s.dial(t), "/locks/late")
	if ok, err := other.TryLock(ctx); err != nil || !ok {
		t.Fatalf("TryLock after the late Unlock = %v, %v", ok, err)
	}
	must(t, other.Unlock(ctx))
}
