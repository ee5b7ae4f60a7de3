package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/internal/clock"
	"github.com/arbor-coord/arbor/wire"
)

func TestDialSendsTheHandshakeAndKeepsTheNegotiatedTimeout(t *testing.T) {
	ps := newPipes(t)
	done := async(func() error {
		c, err := Dial(context.Background(), []string{"s1"}, WithDialer(ps.dial),
			WithSessionTimeout(7*time.Second), WithLogger(zaptest.NewLogger(t)))
		if err == nil {
			closeAtEnd(t, c)
			if got := c.SessionTimeout(); got != 4*time.Second {
				return fmt.Errorf("session timeout %v, want the granted 4s", got)
			}
			if c.SessionID() != 99 || c.State() != StateConnected {
				return fmt.Errorf("session %#x in state %s, want 0x63 connected", c.SessionID(), c.State())
			}
		}
		return err
	})
	req := ps.accept().handshake(wire.ConnectResponse{SessionID: 99, TimeoutMs: 4000})
	want := wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 7000}
	if req.ProtocolVersion != want.ProtocolVersion || req.TimeoutMs != want.TimeoutMs ||
		req.SessionID != 0 || req.LastZxidSeen != 0 || len(req.Password) != 0 {
		t.Errorf("handshake %+v, want %+v", req, want)
	}
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestDialTriesTheServersUntilOneAccepts(t *testing.T) {
	ps := newPipes(t)
	done := async(func() error {
		c, err := Dial(context.Background(), []string{"s1", "s2", "s3"}, WithDialer(ps.dial))
		if err == nil {
			closeAtEnd(t, c)
		}
		return err
	})
	seen := map[string]bool{}
	for _, code := range []wire.Code{wire.CodeNotCaughtUp, wire.CodeTooManyConnections, wire.CodeShuttingDown} {
		p := ps.accept()
		seen[p.addr] = true
		p.handshake(wire.ConnectResponse{Err: code})
	}
	if len(seen) != 3 {
		t.Errorf("the first round tried %v, want each of the 3 servers once", seen)
	}
	ps.accept().handshake(wire.ConnectResponse{})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestDialGivesUpWhenItsContextEnds(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	// The caller's deadline is on the test's clock too: it ends while the
	// client waits to try again, after the server's refusal.
	ctx, cancel := clock.WithTimeout(context.Background(), m, 200*time.Millisecond)
	defer cancel()
	done := async(func() error {
		_, err := Dial(ctx, []string{"s1"}, WithDialer(ps.dial), withClock(m))
		return err
	})
	ps.accept().handshake(wire.ConnectResponse{Err: wire.CodeShuttingDown})
	waitUntil(t, "the client to back off after the refusal", func() bool {
		timers := m.Timers() // the backoff, due before the caller's deadline
		return len(timers) == 2 && timers[0] <= minBackoff && timers[1] == 200*time.Millisecond
	})
	m.Advance(200 * time.Millisecond)
	err := wait(t, done)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, wire.ErrShuttingDown) {
		t.Errorf("Dial: %v, want the deadline and the last server's refusal", err)
	}
	checkNoGoroutines(t)
}

func TestRequestsArePipelinedAndRepliesMatchedInOrder(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	const n = 20
	results := make(chan error, n)
	for i := range n {
		path := fmt.Sprintf("/n%d", i)
		go func() {
			data, st, err := c.Get(context.Background(), path)
			if err == nil && (string(data) != path || st.Version != int32(len(path))) {
				err = fmt.Errorf("get %s got %q version %d: another request's reply", path, data, st.Version)
			}
			results <- err
		}()
	}
	// Every request arrives before any reply is sent: the client does not
	// wait for a reply before sending the next request.
	var reqs []wire.Request
	for range n {
		reqs = append(reqs, p.read())
	}
	for i, r := range reqs {
		if r.Op != wire.OpGetData || (i > 0 && r.Xid <= reqs[i-1].Xid) || r.Xid <= 0 {
			t.Fatalf("request %d: %s xid %d, want getData with increasing positive xids", i, r.Op, r.Xid)
		}
	}
	for _, r := range reqs {
		p.reply(wire.OpGetData, wire.Reply{Xid: r.Xid, Zxid: 5, Data: []byte(r.Path), Stat: wire.Stat{Version: int32(len(r.Path))}})
	}
	for range n {
		if err := wait(t, results); err != nil {
			t.Error(err)
		}
	}
	if got := c.lastZxid.Load(); got != 5 {
		t.Errorf("lastZxid %d, want 5", got)
	}
}

func TestAReplyOutOfOrderBreaksTheConnection(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	first := async(func() error { _, _, err := c.Exists(context.Background(), "/a"); return err })
	r1 := p.read()
	second := async(func() error { _, _, err := c.Exists(context.Background(), "/b"); return err })
	r2 := p.read()
	p.reply(wire.OpExists, wire.Reply{Xid: r2.Xid})
	_ = r1
	for _, ch := range []<-chan error{first, second} {
		if err := wait(t, ch); !errors.Is(err, ErrConnectionLoss) {
			t.Errorf("got %v, want connection loss", err)
		}
	}
	ps.accept().handshake(wire.ConnectResponse{})
	waitState(t, c, StateConnected)
}

func TestInFlightRequestsFailAtOnceWhenTheConnectionBreaks(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	c, p := dialPipe(t, ps, withClock(m))
	done := async(func() error { return c.Delete(context.Background(), "/x", -1) })
	p.expect(wire.OpDelete, "/x")
	p.nc.Close()
	// The client's clock stands still: the request fails on the break
	// itself, not on any timeout.
	err := wait(t, done)
	if !errors.Is(err, ErrConnectionLoss) {
		t.Fatalf("delete: %v, want connection loss", err)
	}
	if want := "delete /x: connection lost"; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
}

func TestReconnectReattachesTheSessionWithItsPasswordAndLastZxid(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	done := async(func() error { _, err := c.Set(context.Background(), "/x", []byte("v"), -1); return err })
	req := p.expect(wire.OpSetData, "/x")
	p.reply(wire.OpSetData, wire.Reply{Xid: req.Xid, Zxid: 42})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	p.nc.Close()
	waitState(t, c, StateDisconnected)

	// A call made while disconnected waits for the reconnect.
	got := async(func() error { _, _, err := c.Get(context.Background(), "/x"); return err })
	p2 := ps.accept()
	hs := p2.handshake(wire.ConnectResponse{})
	if hs.SessionID != testSession || string(hs.Password) != testPassword || hs.LastZxidSeen != 42 {
		t.Errorf("reattach with session %#x password %q last zxid %d, want %#x %q 42",
			hs.SessionID, hs.Password, hs.LastZxidSeen, testSession, testPassword)
	}
	req = p2.expect(wire.OpGetData, "/x")
	p2.reply(wire.OpGetData, wire.Reply{Xid: req.Xid, Zxid: 42})
	if err := wait(t, got); err != nil {
		t.Fatal(err)
	}
	want := []State{StateConnected, StateDisconnected, StateConnected}
	if states := drainStates(c); !slices.Equal(states, want) {
		t.Errorf("state changes %v, want %v", states, want)
	}
}

func TestCallsWhileDisconnectedEndWithTheirContext(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	p.nc.Close()
	waitState(t, c, StateDisconnected)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := c.Get(ctx, "/x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("get while disconnected: %v, want the context's deadline", err)
	}
}

func TestACancelledCallReturnsAndItsLateReplyIsDropped(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() error { _, _, _, err := c.GetW(ctx, "/slow"); return err })
	slow := p.expect(wire.OpGetData, "/slow")
	cancel()
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled get: %v, want context.Canceled", err)
	}
	next := async(func() error { _, _, err := c.Get(context.Background(), "/next"); return err })
	fast := p.expect(wire.OpGetData, "/next")
	p.reply(wire.OpGetData, wire.Reply{Xid: slow.Xid})
	p.reply(wire.OpGetData, wire.Reply{Xid: fast.Xid, Data: []byte("n")})
	if err := wait(t, next); err != nil {
		t.Fatal(err)
	}
	if n := countWatches(&c.watches); n != 0 {
		t.Errorf("%d watches registered for an abandoned call, want 0", n)
	}
}

func TestAnIdleClientPingsAndAnswersKeepTheConnection(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	c, p := dialPipe(t, ps, WithSessionTimeout(900*time.Millisecond), withClock(m))
	// Each round goes a third of the timeout on: the writer's idle timer
	// fires, and the reader, answered each time, gives the server two
	// thirds of the timeout again from the answer.
	for range 3 {
		want := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} // the ping, the server's silence
		waitUntil(t, fmt.Sprintf("the client to wait %v", want), func() bool { return slices.Equal(m.Timers(), want) })
		m.Advance(300 * time.Millisecond)
		req := p.next()
		if req.Xid != wire.XidPing || req.Op != wire.OpPing {
			t.Fatalf("got %s xid %d, want a ping", req.Op, req.Xid)
		}
		p.reply(wire.OpPing, wire.Reply{Xid: wire.XidPing})
	}
	if c.State() != StateConnected {
		t.Errorf("state %s, want connected", c.State())
	}
}

func TestTheSessionIsCountedFromTheSendOfTheLastAnsweredRequest(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	c, p := dialPipe(t, ps, WithSessionTimeout(5*time.Second), withClock(m))
	const before = time.Second
	m.Advance(before) // the request is sent a second into the session
	pending := async(func() error { _, _, err := c.Get(context.Background(), "/x"); return err })
	req := p.expect(wire.OpGetData, "/x")
	const delay = 300 * time.Millisecond
	m.Advance(delay) // the server sits on the request before answering
	p.reply(wire.OpGetData, wire.Reply{Xid: req.Xid})
	if err := wait(t, pending); err != nil {
		t.Fatal(err)
	}
	// The server heard from the session when the request arrived, which
	// may have been just after it was sent: the session may end a timeout
	// after the send, not after the answer.
	if left, want := c.sessionLeft(), c.SessionTimeout()-delay; left != want {
		t.Errorf("session left %v after an answer that took %v, want %v", left, delay, want)
	}
	if got, want := c.LastHeard(), m.Now().Add(-delay); !got.Equal(want) {
		t.Errorf("LastHeard %v, want the request's send %v, not its answer %v", got, want, m.Now())
	}
}

func TestAPingAnsweredWithoutQuorumSendsTheClientElsewhere(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	c, p := dialPipe(t, ps, WithSessionTimeout(600*time.Millisecond), withClock(m))
	waitTimers(t, m, 2)
	heard := c.LastHeard()
	m.AdvanceToNext() // the writer's idle timer: a ping
	if req := p.next(); req.Xid != wire.XidPing {
		t.Fatalf("got %s, want a ping", req.Op)
	}
	p.reply(wire.OpPing, wire.Reply{Xid: wire.XidPing, Err: wire.CodeNoQuorum})
	waitState(t, c, StateDisconnected)
	if got := c.LastHeard(); !got.Equal(heard) {
		t.Errorf("LastHeard moved from %v to %v on a ping answered without a quorum", heard, got)
	}
	// The reconnect begins with a backoff: the old connection's timers
	// are stopped, so the one timer set is the backoff's.
	waitTimers(t, m, 1)
	m.AdvanceToNext()
	ps.accept().handshake(wire.ConnectResponse{})
	waitState(t, c, StateConnected)
}

func TestASilentServerIsGivenUpAndTheSessionExpiresLocally(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	start := m.Now() // the handshake: the server was last heard from then
	c, p := dialPipe(t, ps, WithSessionTimeout(300*time.Millisecond), withClock(m))
	// The server reads but never answers: after 2/3 of the timeout the
	// client gives it up, and with no server answering the handshake, the
	// session expires a full timeout after the server was last heard from.
	go func() {
		for {
			if _, err := p.frame(); err != nil {
				return
			}
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case q := <-ps.peers:
				defer q.nc.Close() // accept and never answer
			case <-stop:
				return
			}
		}
	}()
	waitTimers(t, m, 2) // the ping and the server's silence
	m.Advance(199 * time.Millisecond)
	if s := c.State(); s != StateConnected {
		t.Fatalf("state %s before 2/3 of the timeout, want connected", s)
	}
	m.Advance(time.Millisecond)
	waitState(t, c, StateDisconnected)
	advanceUntil(t, m, "the session to expire", func() bool { return c.State() == StateExpired })
	if d := m.Now().Sub(start); d != 300*time.Millisecond {
		t.Errorf("expired %v after the server was last heard from, want the 300ms session timeout", d)
	}
	if _, _, err := c.Get(context.Background(), "/x"); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("get after expiry: %v, want ErrSessionExpired", err)
	}
}

func TestServerClosingFrames(t *testing.T) {
	t.Run("a closing frame with a reason breaks the connection and the client reconnects", func(t *testing.T) {
		ps := newPipes(t)
		c, p := dialPipe(t, ps)
		p.reply(0, wire.Reply{Xid: wire.XidClosing, Err: wire.CodeShuttingDown})
		ps.accept().handshake(wire.ConnectResponse{})
		waitState(t, c, StateConnected)
		if s := drainStates(c); !slices.Equal(s, []State{StateConnected, StateDisconnected, StateConnected}) {
			t.Errorf("states %v", s)
		}
	})
	t.Run("a closing frame saying the session expired expires it", func(t *testing.T) {
		ps := newPipes(t)
		c, p := dialPipe(t, ps)
		p.reply(0, wire.Reply{Xid: wire.XidClosing, Err: wire.CodeSessionExpired})
		waitState(t, c, StateExpired)
	})
	t.Run("a session-expired notification expires the session", func(t *testing.T) {
		ps := newPipes(t)
		c, p := dialPipe(t, ps)
		p.reply(0, wire.Reply{Xid: wire.XidNotification, EventType: wire.EventNone, State: wire.StateExpired})
		waitState(t, c, StateExpired)
	})
}

func TestAReplyOverTheFrameLimitBreaksTheConnection(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps, WithMaxFrame(1024))
	done := async(func() error { _, _, err := c.Get(context.Background(), "/big"); return err })
	req := p.expect(wire.OpGetData, "/big")
	go p.reply(wire.OpGetData, wire.Reply{Xid: req.Xid, Data: make([]byte, 2048)})
	err := wait(t, done)
	if !errors.Is(err, ErrConnectionLoss) || !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("get: %v, want connection loss for a frame too large", err)
	}
}

func TestInvalidPathsFailWithoutARoundTrip(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	ctx := context.Background()
	calls := map[string]func() error{
		"get with a relative path":           func() error { _, _, err := c.Get(ctx, "x"); return err },
		"getw with a trailing slash":         func() error { _, _, _, err := c.GetW(ctx, "/x/"); return err },
		"exists with an empty segment":       func() error { _, _, err := c.Exists(ctx, "/a//b"); return err },
		"children of an empty path":          func() error { _, _, err := c.Children(ctx, ""); return err },
		"set with a dot segment":             func() error { _, err := c.Set(ctx, "/a/./b", nil, -1); return err },
		"delete with a control character":    func() error { return c.Delete(ctx, "/a\x01", -1) },
		"sync with a dot-dot segment":        func() error { return c.Sync(ctx, "/a/..") },
		"persistent create with a slash":     func() error { _, err := c.Create(ctx, "/a/", nil, Persistent); return err },
		"create with an unknown mode":        func() error { _, err := c.Create(ctx, "/a", nil, CreateMode(42)); return err },
		"create of a TTL mode without ttl":   func() error { _, err := c.Create(ctx, "/a", nil, PersistentTTL); return err },
		"createTTL of a non-TTL mode":        func() error { _, err := c.CreateTTL(ctx, "/a", nil, Persistent, time.Second); return err },
		"createTTL with a zero ttl":          func() error { _, err := c.CreateTTL(ctx, "/a", nil, PersistentTTL, 0); return err },
		"multi with a bad path in op 1":      func() error { _, err := c.Multi(ctx, CheckOp("/a", 1), DeleteOp("a", -1)); return err },
		"multi with a zero Op":               func() error { _, err := c.Multi(ctx, Op{}); return err },
		"multi with a TTL create and no ttl": func() error { _, err := c.Multi(ctx, CreateOp("/t", nil, PersistentTTL)); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("got %v, want ErrInvalidPath (bad arguments)", err)
			}
		})
	}
	var me *MultiError
	if _, err := c.Multi(ctx, CheckOp("/a", 1), DeleteOp("a", -1)); !errors.As(err, &me) || me.Index != 1 {
		t.Errorf("multi: %v, want a MultiError for op 1", err)
	}
	// None of them reached the server: the next frame it gets is a valid
	// call's.
	done := async(func() error { _, _, err := c.Exists(ctx, "/valid"); return err })
	req := p.expect(wire.OpExists, "/valid")
	p.reply(wire.OpExists, wire.Reply{Xid: req.Xid})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestASequentialCreateMayEndInASlash(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	done := async(func() error {
		path, err := c.CreateTTL(context.Background(), "/q/", []byte("d"), PersistentSequentialTTL, 1500*time.Millisecond)
		if err == nil && path != "/q/0000000007" {
			err = fmt.Errorf("created %q", path)
		}
		return err
	})
	req := p.expect(wire.OpCreate, "/q/")
	if req.Mode != PersistentSequentialTTL || req.TTL != 1500 || string(req.Data) != "d" {
		t.Errorf("create request %+v, want mode %s ttl 1500", req, PersistentSequentialTTL)
	}
	p.reply(wire.OpCreate, wire.Reply{Xid: req.Xid, Path: "/q/0000000007"})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestServerErrorsMatchTheirSentinelsAndNameTheOpAndPath(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		op   wire.Op
		code wire.Code
		want error
		msg  string
	}{
		{"get of a missing node", func() error { _, _, err := c.Get(ctx, "/x"); return err },
			wire.OpGetData, wire.CodeNoNode, ErrNoNode, "get /x: no node"},
		{"create of an existing node", func() error { _, err := c.Create(ctx, "/x", nil, Ephemeral); return err },
			wire.OpCreate, wire.CodeNodeExists, ErrNodeExists, "create /x: node already exists"},
		{"set with a stale version", func() error { _, err := c.Set(ctx, "/x", nil, 3); return err },
			wire.OpSetData, wire.CodeBadVersion, ErrBadVersion, "set /x: version does not match"},
		{"delete of a parent", func() error { return c.Delete(ctx, "/x", -1) },
			wire.OpDelete, wire.CodeNotEmpty, ErrNotEmpty, "delete /x: node has children"},
		{"children without quorum", func() error { _, _, err := c.Children(ctx, "/x"); return err },
			wire.OpGetChildren, wire.CodeNoQuorum, ErrNoQuorum, "children /x: no quorum"},
		{"sync of an unknown op", func() error { return c.Sync(ctx, "/x") },
			wire.OpSync, wire.CodeUnimplemented, ErrUnimplemented, "sync /x: operation not implemented"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := async(tt.call)
			req := p.read()
			if req.Op != tt.op {
				t.Fatalf("sent %s, want %s", req.Op, tt.op)
			}
			p.reply(req.Op, wire.Reply{Xid: req.Xid, Err: tt.code})
			err := wait(t, done)
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Errorf("got %q, want %q matching %v", err, tt.msg, tt.want)
			}
		})
	}
}

func TestExistsOfAMissingNodeIsNotAnError(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	type out struct {
		ok  bool
		st  Stat
		err error
	}
	done := make(chan out, 1)
	go func() {
		ok, st, err := c.Exists(context.Background(), "/x")
		done <- out{ok, st, err}
	}()
	req := p.expect(wire.OpExists, "/x")
	if req.Watch {
		t.Error("Exists asked for a watch")
	}
	p.reply(wire.OpExists, wire.Reply{Xid: req.Xid, Err: wire.CodeNoNode})
	if o := wait(t, done); o.ok || o.err != nil || o.st != (Stat{}) {
		t.Errorf("exists of a missing node: %v %+v %v, want false, zero Stat, nil", o.ok, o.st, o.err)
	}
}

func TestMultiReportsTheFailingOp(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	type out struct {
		res []OpResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := c.Multi(context.Background(),
			CreateOp("/a", []byte("x"), Persistent), SetOp("/b", nil, 4), DeleteOp("/c", -1))
		done <- out{res, err}
	}()
	req := p.read()
	if req.Op != wire.OpMulti || len(req.Ops) != 3 || req.Ops[1].Op != wire.OpSetData || req.Ops[1].Version != 4 {
		t.Fatalf("multi request %+v", req)
	}
	p.reply(wire.OpMulti, wire.Reply{Xid: req.Xid, Err: wire.CodeBadVersion, Results: []wire.OpResult{
		{Op: wire.OpCreate}, {Op: wire.OpSetData, Err: wire.CodeBadVersion},
		{Op: wire.OpDelete, Err: wire.CodeRuntimeInconsistency}}})
	o := wait(t, done)
	var me *MultiError
	if !errors.As(o.err, &me) || me.Index != 1 || me.Path != "/b" || !errors.Is(o.err, ErrBadVersion) {
		t.Fatalf("multi: %v, want op 1 failing with a bad version", o.err)
	}
	if want := "multi: op 1 (set /b): version does not match"; o.err.Error() != want {
		t.Errorf("error %q, want %q", o.err, want)
	}
	if len(o.res) != 3 || o.res[0].Err != nil || !errors.Is(o.res[1].Err, ErrBadVersion) ||
		!errors.Is(o.res[2].Err, ErrRuntimeInconsistency) {
		t.Errorf("results %+v", o.res)
	}
}

func TestMultiReturnsEveryResultOnSuccess(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	type out struct {
		res []OpResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := c.Multi(context.Background(), CreateOp("/a", nil, Persistent), SetOp("/b", []byte("1"), -1), CheckOp("/c", 2))
		done <- out{res, err}
	}()
	req := p.read()
	p.reply(wire.OpMulti, wire.Reply{Xid: req.Xid, Results: []wire.OpResult{
		{Op: wire.OpCreate, Path: "/a", Stat: wire.Stat{Czxid: 9}},
		{Op: wire.OpSetData, Stat: wire.Stat{Version: 1}}, {Op: wire.OpCheck}}})
	o := wait(t, done)
	if o.err != nil || len(o.res) != 3 || o.res[0].Path != "/a" || o.res[0].Stat.Czxid != 9 || o.res[1].Stat.Version != 1 {
		t.Errorf("multi: %+v %v", o.res, o.err)
	}
}

func TestCloseEndsTheSession(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	_, _, watch, _ := getW(t, c, p, "/w")
	done := async(c.Close)
	req := p.read()
	if req.Op != wire.OpClose || req.Xid <= 0 {
		t.Fatalf("got %s xid %d, want a numbered close", req.Op, req.Xid)
	}
	p.reply(wire.OpClose, wire.Reply{Xid: req.Xid})
	if err := wait(t, done); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkNoGoroutines(t)
	ev := wait(t, watch)
	if ev.Type != EventSession || ev.State != StateClosed || !errors.Is(ev.Err, ErrClosed) {
		t.Errorf("watch got %v, want a closed session event", ev)
	}
	if _, ok := <-watch; ok {
		t.Error("the watch channel is still open")
	}
	if _, _, err := c.Get(context.Background(), "/x"); !errors.Is(err, ErrClosed) {
		t.Errorf("get after Close: %v, want ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	var last State
	for s := range c.StateChanges() {
		last = s
	}
	if last != StateClosed || c.State() != StateClosed {
		t.Errorf("last state %s (now %s), want closed", last, c.State())
	}
}

func TestCloseFailsRequestsStillInFlight(t *testing.T) {
	ps := newPipes(t)
	m := newClock()
	c, p := dialPipe(t, ps, WithSessionTimeout(3*time.Second), withClock(m))
	pending := async(func() error { _, _, err := c.Get(context.Background(), "/x"); return err })
	p.expect(wire.OpGetData, "/x")
	closed := async(c.Close)
	p.expect(wire.OpClose, "") // and never answer: Close waits only briefly
	// Close's wait (1s), the ping (a third of 3s) and the server's silence.
	want := []time.Duration{closeWait, time.Second, 2 * time.Second}
	waitUntil(t, fmt.Sprintf("the client to wait %v", want), func() bool { return slices.Equal(m.Timers(), want) })
	m.Advance(closeWait)
	if err := wait(t, closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := wait(t, pending); !errors.Is(err, ErrClosed) {
		t.Errorf("request in flight: %v, want ErrClosed", err)
	}
}

func TestStateChangesKeepsTheLatestStateForASlowReader(t *testing.T) {
	c := &Client{changed: make(chan struct{}), states: make(chan State, stateBuffer), ended: make(chan struct{})}
	c.mu.Lock()
	for i := range 3 * stateBuffer {
		c.setStateLocked(State(i%2), nil)
	}
	c.setStateLocked(StateExpired, nil)
	c.mu.Unlock()
	var got []State
	for len(c.states) > 0 {
		got = append(got, <-c.states)
	}
	if len(got) != stateBuffer || got[len(got)-1] != StateExpired {
		t.Errorf("read %v, want %d states ending with expired", got, stateBuffer)
	}
}

// getW calls GetW on path and answers it successfully.
func getW(t *testing.T, c *Client, p *peer, path string) ([]byte, Stat, <-chan Event, error) {
	t.Helper()
	type out struct {
		ch  <-chan Event
		err error
	}
	done := make(chan out, 1)
	go func() {
		_, _, ch, err := c.GetW(context.Background(), path)
		done <- out{ch, err}
	}()
	req := p.expect(wire.OpGetData, path)
	if !req.Watch {
		t.Errorf("GetW did not ask for a watch")
	}
	p.reply(wire.OpGetData, wire.Reply{Xid: req.Xid, Zxid: 1})
	o := wait(t, done)
	if o.err != nil {
		t.Fatalf("GetW %s: %v", path, o.err)
	}
	return nil, Stat{}, o.ch, nil
}

// drainStates returns the states waiting in StateChanges.
func drainStates(c *Client) []State {
	var s []State
	for {
		select {
		case st := <-c.states:
			s = append(s, st)
		default:
			return s
		}
	}
}

func countWatches(t *watchTable) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, m := range []map[string][]chan Event{t.data, t.exist, t.child} {
		for _, chs := range m {
			n += len(chs)
		}
	}
	return n
}
