package server

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// waitFor polls cond until it holds, failing the test if it has not after
// a bound generous enough for a loaded machine: it waits for a state, it
// does not time one.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
	}
}

// squat opens a connection to addr that never says a word.
func squat(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

// closedByServer reports whether the server closes nc within bound, from
// the client's side: the read ends with EOF (or a reset), not with the
// client's own deadline.
func closedByServer(t *testing.T, nc net.Conn, bound time.Duration) bool {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(bound))
	_, err := nc.Read(make([]byte, 1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false
	case err == nil:
		t.Fatal("the server sent bytes to a client that sent none")
	}
	return true
}

func TestConnectionsPastTheHandshakeCapAreClosedAtOnce(t *testing.T) {
	t.Parallel()
	const maxHandshaking = 3
	s := startZKServer(t, func(c *Config) {
		c.MaxHandshaking = maxHandshaking
		// No shedding here: the squatters stay until they are closed.
		c.HandshakeTimeout, c.ShortHandshakeTimeout = time.Hour, time.Hour
	})
	squatters := []net.Conn{squat(t, s.Addr()), squat(t, s.ZKAddr()), squat(t, s.Addr())}
	waitFor(t, "the squatters to be in their handshake", func() bool { return s.limits.handshakes.count() == maxHandshaking })

	t.Run("a connection past the cap is closed without being read, on either port", func(t *testing.T) {
		for _, addr := range []net.Addr{s.Addr(), s.ZKAddr()} {
			// The bound is far below the squatters' hour (and the 10 s
			// the handshake had before there was a cap): only the cap
			// closes this connection within it.
			if !closedByServer(t, squat(t, addr), 5*time.Second) {
				t.Fatalf("a connection to %s past the cap was kept open", addr)
			}
		}
		if got := metric(t, s, `arbor_limit_refusals_total{limit="handshaking_connections"}`); got != 2 {
			t.Fatalf("handshaking_connections refusals = %v, want 2", got)
		}
		if got := metric(t, s, `arbor_handshaking_connections`); got != maxHandshaking {
			t.Fatalf("arbor_handshaking_connections = %v, want %d", got, maxHandshaking)
		}
	})
	t.Run("a squatter that leaves makes room for a client", func(t *testing.T) {
		squatters[0].Close()
		waitFor(t, "the squatter's slot to be given back", func() bool { return s.limits.handshakes.count() == maxHandshaking-1 })
		c := dialRaw(t, s)
		if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
			t.Fatalf("connect: %v", resp.Err)
		}
		// Its handshake over, the client holds no slot.
		if n := s.limits.handshakes.count(); n != maxHandshaking-1 {
			t.Fatalf("%d connections in their handshake, want %d", n, maxHandshaking-1)
		}
		if r := c.call(wire.Request{Xid: 1, Op: wire.OpExists, Path: "/"}); r.Err != wire.CodeOK {
			t.Fatalf("exists: %v", r.Err)
		}
	})
	if got := metric(t, s, `arbor_limit{limit="handshaking_connections"}`); got != maxHandshaking {
		t.Fatalf("the cap in metrics: %v", got)
	}
}

func TestSquattersAreShedSoonerWhenOverHalfTheCapIsInUse(t *testing.T) {
	t.Parallel()
	const maxHandshaking = 4
	s := startServer(t, "", func(c *Config) {
		c.MaxHandshaking = maxHandshaking
		c.HandshakeTimeout, c.ShortHandshakeTimeout = time.Hour, 100*time.Millisecond
	})
	// Two squatters are half the cap: their deadline is the hour.
	early := []net.Conn{squat(t, s.Addr()), squat(t, s.Addr())}
	waitFor(t, "two squatters in their handshake", func() bool { return s.limits.handshakes.count() == 2 })
	// A third takes it over half: every squatter's deadline shrinks, the
	// early ones' too.
	late := squat(t, s.Addr())
	for i, nc := range append(early, late) {
		// The bound is far below the hour (and below the 10 s the
		// handshake had before there was a cap).
		if !closedByServer(t, nc, 5*time.Second) {
			t.Fatalf("squatter %d was not shed", i)
		}
	}
	waitFor(t, "the squatters' slots to be given back", func() bool { return s.limits.handshakes.count() == 0 })
	c := dialRaw(t, s)
	if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("a client after the squatters were shed: %v", resp.Err)
	}
	t.Run("under half the cap the timeout is the long one again", func(t *testing.T) {
		h := s.limits.handshakes
		h.mu.Lock()
		pressed := h.pressed
		h.mu.Unlock()
		if pressed {
			t.Fatal("still under pressure with no connection in its handshake")
		}
	})
}

func TestUnderPressureAConnectionOverItsAddressLimitIsClosedUnanswered(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) {
		c.MaxHandshaking, c.MaxConnsPerIP = 4, 1
		c.HandshakeTimeout, c.ShortHandshakeTimeout = time.Hour, time.Hour
	})
	// answer sends a ConnectRequest on a new connection and returns the
	// server's answer, or false if the server closed without one.
	answer := func() (wire.Code, bool) {
		c := dialRaw(t, s)
		req := wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 5000}
		if _, err := c.nc.Write(wire.AppendConnectRequest(nil, &req)); err != nil {
			return 0, false // closed before the request went out
		}
		body, err := wire.ReadFrame(c.br, nil, 1<<20)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("neither answered nor closed")
			}
			return 0, false
		}
		var resp wire.ConnectResponse
		if err := wire.DecodeConnectResponse(body, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Err, true
	}
	squat(t, s.Addr()) // 127.0.0.1's one connection
	waitFor(t, "a squatter in its handshake", func() bool { return s.limits.handshakes.count() == 1 })
	t.Run("under half the cap it is told it has too many connections", func(t *testing.T) {
		if code, ok := answer(); !ok || code != wire.CodeTooManyConnections {
			t.Fatalf("answer %v, %v; want TooManyConnections", code, ok)
		}
		waitFor(t, "the refused connection's slot to be given back", func() bool { return s.limits.handshakes.count() == 1 })
	})
	t.Run("past half the cap it is closed without an answer", func(t *testing.T) {
		// A squatter from another loopback address, within its own limit.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
		other, err := d.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Skipf("no second loopback address to dial from: %v", err)
		}
		defer other.Close()
		waitFor(t, "two squatters in their handshake", func() bool { return s.limits.handshakes.count() == 2 })
		// With this one the cap is past half.
		if code, ok := answer(); ok {
			t.Fatalf("answered %v", code)
		}
	})
}

func TestEveryWayAHandshakeEndsGivesItsSlotBack(t *testing.T) {
	t.Parallel()
	s := startZKServer(t, func(c *Config) { c.MaxConns = 3 })
	idle := func() bool { return s.limits.handshakes.count() == 0 }
	conns := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns)
	}
	held := dialRaw(t, s) // stays connected
	if resp := held.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatalf("connect: %v", resp.Err)
	}
	for _, tt := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a client that closes before a word", func(t *testing.T) {
			squat(t, s.Addr()).Close()
		}},
		{"a malformed handshake", func(t *testing.T) {
			c := dialRaw(t, s)
			c.write([]byte{0, 0, 0, 3, 0xc1, 0xc1, 0xc1})
			if _, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
				t.Fatalf("read after a malformed handshake: %v, want EOF", err)
			}
		}},
		{"a handshake refused for the session", func(t *testing.T) {
			c := dialRaw(t, s)
			if resp := c.connect(wire.ConnectRequest{SessionID: 12345, Password: make([]byte, 16)}); resp.Err != wire.CodeSessionExpired {
				t.Fatalf("got %v, want SessionExpired", resp.Err)
			}
		}},
		{"a four-letter word", func(t *testing.T) {
			nc := squat(t, s.ZKAddr())
			if _, err := nc.Write([]byte("ruok")); err != nil {
				t.Fatal(err)
			}
			_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if b, err := io.ReadAll(nc); err != nil || string(b) != "imok" {
				t.Fatalf("ruok: %q, %v", b, err)
			}
		}},
		{"a ZooKeeper client that connects and leaves", func(t *testing.T) {
			connectZK(t, s)
		}},
		{"a connection refused at the connection limit", func(t *testing.T) {
			waitFor(t, "the earlier connections to close", func() bool { return conns() == 1 })
			others := []*rawConn{dialRaw(t, s), dialRaw(t, s)}
			for _, c := range others {
				if resp := c.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
					t.Fatalf("connect under the limit: %v", resp.Err)
				}
			}
			if resp := dialRaw(t, s).connect(wire.ConnectRequest{}); resp.Err != wire.CodeTooManyConnections {
				t.Fatalf("got %v, want TooManyConnections", resp.Err)
			}
			for _, c := range others {
				c.nc.Close()
			}
			waitFor(t, "the others to close", func() bool { return conns() == 1 })
		}},
	} {
		t.Run(tt.name+" gives its slot back", func(t *testing.T) {
			tt.run(t)
			waitFor(t, "every slot to be given back", idle)
		})
	}
	t.Run("closing the server gives back the slots of connections in their handshake", func(t *testing.T) {
		squat(t, s.Addr())
		squat(t, s.ZKAddr())
		waitFor(t, "the squatters in their handshake", func() bool { return s.limits.handshakes.count() == 2 })
		s.Close()
		waitFor(t, "every slot to be given back", idle)
	})
}

func TestHandshakesCountEachConnectionOnceAndShortenPastHalfTheCap(t *testing.T) {
	t.Parallel()
	h := newHandshakes(&Config{MaxHandshaking: 4, HandshakeTimeout: time.Hour, ShortHandshakeTimeout: time.Second})
	conns := make([]net.Conn, 5)
	for i := range conns {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		conns[i] = a
	}
	timeout := func(i int) time.Duration {
		h.mu.Lock()
		defer h.mu.Unlock()
		hs := h.conns[conns[i]]
		return hs.deadline.Sub(hs.start)
	}
	for _, step := range []struct {
		name        string
		do          func() (ok, pressed bool)
		wantOK      bool
		wantPressed bool
		wantCount   int
		check       func() bool
	}{
		{"the first connection gets the long timeout", func() (bool, bool) { return h.take(conns[0]) }, true, false, 1,
			func() bool { return timeout(0) == time.Hour }},
		{"half the cap is not pressure", func() (bool, bool) { return h.take(conns[1]) }, true, false, 2,
			func() bool { return timeout(1) == time.Hour }},
		{"past half the cap every deadline shrinks", func() (bool, bool) { return h.take(conns[2]) }, true, true, 3,
			func() bool {
				return timeout(0) == time.Second && timeout(1) == time.Second && timeout(2) == time.Second
			}},
		{"a connection under pressure gets the short timeout", func() (bool, bool) { return h.take(conns[3]) }, true, false, 4,
			func() bool { return timeout(3) == time.Second }},
		{"a connection past the cap is refused", func() (bool, bool) { return h.take(conns[4]) }, false, false, 4, nil},
		{"done counts once however often it is called", func() (bool, bool) { h.done(conns[3]); h.done(conns[3]); return true, false }, true, false, 3, nil},
		{"back at half the cap the pressure ends", func() (bool, bool) { h.done(conns[2]); return true, false }, true, false, 2,
			func() bool { h.mu.Lock(); defer h.mu.Unlock(); return !h.pressed }},
		{"past half again it starts again", func() (bool, bool) { return h.take(conns[4]) }, true, true, 3,
			func() bool { return timeout(4) == time.Second }},
	} {
		t.Run(step.name, func(t *testing.T) {
			ok, pressed := step.do()
			if ok != step.wantOK || pressed != step.wantPressed || h.count() != step.wantCount {
				t.Fatalf("ok %v, pressed %v, count %d; want %v, %v, %d", ok, pressed, h.count(), step.wantOK, step.wantPressed, step.wantCount)
			}
			if step.check != nil && !step.check() {
				t.Fatal("the deadlines are not as they should be")
			}
		})
	}
}
