package client

import (
	"bufio"
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/internal/clock"
	"github.com/arbor-coord/arbor/wire"
)

// This file holds a scripted server for protocol tests: every dial makes a
// net.Pipe and hands its server end to the test, which then plays the server
// frame by frame.

const (
	testSession  = int64(0x1234)
	testWait     = 5 * time.Second // how long a test waits for something that must happen
	testPassword = "secret"
)

// pipes is a dialer whose connections the test accepts as peers.
type pipes struct {
	t     *testing.T
	peers chan *peer
}

func newPipes(t *testing.T) *pipes { return &pipes{t: t, peers: make(chan *peer)} }

func (ps *pipes) dial(ctx context.Context, addr string) (net.Conn, error) {
	cli, srv := net.Pipe()
	p := &peer{t: ps.t, addr: addr, nc: srv, br: bufio.NewReader(srv)}
	select {
	case ps.peers <- p:
		return cli, nil
	case <-ctx.Done():
		cli.Close()
		srv.Close()
		return nil, ctx.Err()
	}
}

// accept returns the next connection the client makes.
func (ps *pipes) accept() *peer {
	ps.t.Helper()
	select {
	case p := <-ps.peers:
		ps.t.Cleanup(func() { p.nc.Close() })
		return p
	case <-time.After(testWait):
		ps.t.Fatal("the client did not connect")
		return nil
	}
}

// peer is the server end of one connection.
type peer struct {
	t    *testing.T
	addr string
	nc   net.Conn
	br   *bufio.Reader
}

func (p *peer) frame() ([]byte, error) {
	p.nc.SetReadDeadline(time.Now().Add(testWait))
	return wire.ReadFrame(p.br, nil, 64<<20)
}

// handshake reads the ConnectRequest and answers it with resp (its zero
// fields filled in to grant the session).
func (p *peer) handshake(resp wire.ConnectResponse) wire.ConnectRequest {
	p.t.Helper()
	body, err := p.frame()
	if err != nil {
		p.t.Fatalf("reading the handshake: %v", err)
	}
	var req wire.ConnectRequest
	if err := wire.DecodeConnectRequest(body, &req); err != nil {
		p.t.Fatalf("decoding the handshake: %v", err)
	}
	if resp.Err == wire.CodeOK {
		if resp.SessionID == 0 {
			resp.SessionID = testSession
		}
		if resp.TimeoutMs == 0 {
			resp.TimeoutMs = req.TimeoutMs
		}
		if resp.Password == nil {
			resp.Password = []byte(testPassword)
		}
	}
	resp.ProtocolVersion = wire.ProtocolVersion
	p.write(wire.AppendConnectResponse(nil, &resp))
	return req
}

// next returns the next frame from the client, pings included.
func (p *peer) next() wire.Request {
	p.t.Helper()
	body, err := p.frame()
	if err != nil {
		p.t.Fatalf("reading a request: %v", err)
	}
	var req wire.Request
	if err := wire.DecodeRequest(body, &req); err != nil {
		p.t.Fatalf("decoding a request: %v", err)
	}
	return req
}

// read returns the next request, answering pings on the way.
func (p *peer) read() wire.Request {
	p.t.Helper()
	for {
		req := p.next()
		if req.Xid != wire.XidPing {
			return req
		}
		p.reply(wire.OpPing, wire.Reply{Xid: wire.XidPing})
	}
}

// expect reads the next request and checks its op and path.
func (p *peer) expect(op wire.Op, path string) wire.Request {
	p.t.Helper()
	req := p.read()
	if req.Op != op || req.Path != path {
		p.t.Fatalf("got %s %q, want %s %q", req.Op, req.Path, op, path)
	}
	return req
}

func (p *peer) reply(op wire.Op, r wire.Reply) {
	p.t.Helper()
	p.write(wire.AppendReply(nil, op, &r))
}

func (p *peer) notify(typ wire.EventType, path string, zxid int64) {
	p.t.Helper()
	p.reply(0, wire.Reply{Xid: wire.XidNotification, Zxid: zxid, EventType: typ, State: wire.StateConnected, Path: path})
}

func (p *peer) write(frame []byte) {
	p.t.Helper()
	p.nc.SetWriteDeadline(time.Now().Add(testWait))
	if _, err := p.nc.Write(frame); err != nil {
		p.t.Fatalf("writing to the client: %v", err)
	}
}

// serveClose answers the client's OpClose, if it sends one.
func (p *peer) serveClose() {
	for {
		body, err := p.frame()
		if err != nil {
			return
		}
		var req wire.Request
		if wire.DecodeRequest(body, &req) != nil {
			return
		}
		if req.Op == wire.OpClose {
			p.nc.Write(wire.AppendReply(nil, wire.OpClose, &wire.Reply{Xid: req.Xid}))
			p.nc.Close()
			return
		}
	}
}

// dialPipe dials a client over pipes and accepts its first connection with
// a granted session.
func dialPipe(t *testing.T, ps *pipes, opts ...Option) (*Client, *peer) {
	t.Helper()
	type dialed struct {
		c   *Client
		err error
	}
	done := make(chan dialed, 1)
	opts = append([]Option{WithDialer(ps.dial), WithLogger(zaptest.NewLogger(t))}, opts...)
	go func() {
		c, err := Dial(context.Background(), []string{"s1"}, opts...)
		done <- dialed{c, err}
	}()
	p := ps.accept()
	p.handshake(wire.ConnectResponse{})
	d := <-done
	if d.err != nil {
		t.Fatalf("Dial: %v", d.err)
	}
	closeAtEnd(t, d.c)
	return d.c, p
}

// closeAtEnd closes c when the test ends and checks that no goroutine of
// the client outlives it.
func closeAtEnd(t *testing.T, c *Client) {
	t.Cleanup(func() {
		c.stop() // do not wait for an OpClose answer no one will give
		c.Close()
		checkNoGoroutines(t)
	})
}

// checkNoGoroutines fails the test if a goroutine of the client is still
// running shortly after.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var leaked []string
		for _, fn := range []string{"client.(*conn).readLoop", "client.(*conn).writeLoop", "client.(*Client).run"} {
			if strings.Contains(stacks, fn) {
				leaked = append(leaked, fn)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines still running: %v\n%s", leaked, stacks)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// async runs f in a goroutine and returns its error on a channel.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// wait returns what ch delivers, failing the test if nothing comes.
func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testWait):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

// waitState waits until c is in state s.
func waitState(t *testing.T, c *Client, s State) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for c.State() != s {
		if time.Now().After(deadline) {
			t.Fatalf("state is %s, want %s", c.State(), s)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// withClock makes the client read and wait for all its time on clk: a
// test's manual clock, which moves only when the test advances it.
func withClock(clk clock.Clock) Option { return func(o *options) { o.clock = clk } }

// newClock returns a manual clock for a client under test.
func newClock() *clock.Manual { return clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// waitTimers waits until at least n timers are set on m: the client is
// waiting for its time to come.
func waitTimers(t *testing.T, m *clock.Manual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := m.WaitForTimers(ctx, n); err != nil {
		t.Fatalf("the client set %d timers, want %d", m.Pending(), n)
	}
}

// waitUntil polls cond until it holds, failing the test after testWait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testWait); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
	}
}

// advanceUntil moves m from timer to timer, firing the earliest whenever
// one is set and otherwise letting the client act, until cond holds.
func advanceUntil(t *testing.T, m *clock.Manual, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for i := 0; !cond(); i++ {
		if i > 100_000 || time.Now().After(deadline) {
			t.Fatalf("still waiting for %s, at %v on the test's clock", what, m.Now())
		}
		if !m.AdvanceToNext() {
			time.Sleep(time.Millisecond)
		}
	}
}
