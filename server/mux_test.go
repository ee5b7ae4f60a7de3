package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/mux"
	"github.com/arbor-coord/arbor/wire"
)

// sockets records the connections a Mux dials, so a test can break them
// or freeze them.
type sockets struct {
	mu    sync.Mutex
	conns []*freezable
}

func (s *sockets) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	f := &freezable{Conn: nc, frozen: make(chan struct{})}
	s.mu.Lock()
	s.conns = append(s.conns, f)
	s.mu.Unlock()
	return f, nil
}

// freezable is a connection whose reads can be stopped, as a partition
// stops them, without closing it.
type freezable struct {
	net.Conn
	frozen chan struct{} // closed to freeze
	once   sync.Once
}

func (f *freezable) Read(p []byte) (int, error) {
	select {
	case <-f.frozen:
		<-make(chan struct{}) // a read of a cut-off connection waits for ever: until Close
	default:
	}
	return f.Conn.Read(p)
}

func (f *freezable) freeze() { f.once.Do(func() { close(f.frozen) }) }

// refusedDial checks that a session dialed with opts is refused with
// TooManyConnections. The client tries again until its context ends, and
// reports the refusal with the end.
func refusedDial(t *testing.T, s *Server, what string, opts ...client.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, []string{s.Addr().String()}, opts...); !errors.Is(err, client.ErrTooManyConnections) {
		t.Fatalf("%s: %v, want ErrTooManyConnections", what, err)
	}
}

func (s *sockets) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *sockets) breakAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, nc := range s.conns {
		nc.Close()
	}
}

// Sessions carried by one connection are sessions like any other: each its
// own ephemerals and watches, the IP's connection limit counting the
// connection once, and a session's close ending only that session.
func TestManySessionsShareOneConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxConnsPerIP = 1 })
	ctx := context.Background()
	var socks sockets
	m := client.NewMux(client.WithDialer(socks.dial))
	t.Cleanup(func() { m.Close() })
	const sessions = 100
	clients := make([]*client.Client, sessions)
	ids := map[int64]bool{}
	for i := range clients {
		clients[i] = dialClient(t, s, client.WithMux(m))
		ids[clients[i].SessionID()] = true
		if _, err := clients[i].Create(ctx, fmt.Sprintf("/s%d", i), nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != sessions || socks.count() != 1 || m.Conns() != 1 {
		t.Fatalf("%d sessions over %d sockets (the Mux holds %d), want %d over 1", len(ids), socks.count(), m.Conns(), sessions)
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="connections_per_ip"}`); got != 0 {
		t.Fatalf("connections_per_ip refusals = %v: the sessions were counted as connections", got)
	}

	_, _, events, err := clients[1].GetW(ctx, "/s0")
	if err != nil {
		t.Fatal(err)
	}
	if err := clients[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Type != client.EventNodeDeleted || ev.Path != "/s0" {
			t.Fatalf("watch fired %v, want the deletion of /s0", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification on another session of the connection")
	}
	for i := 1; i < sessions; i++ {
		if ok, _, err := clients[i].Exists(ctx, fmt.Sprintf("/s%d", i)); err != nil || !ok {
			t.Fatalf("session %d's ephemeral after another session closed: %v, %v", i, ok, err)
		}
	}
}

// When the connection breaks, each session on it reconnects through the
// Mux, on a new connection, and keeps its ephemerals.
func TestSessionsOutliveTheirSharedConnection(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	var socks sockets
	m := client.NewMux(client.WithDialer(socks.dial))
	t.Cleanup(func() { m.Close() })
	clients := make([]*client.Client, 20)
	for i := range clients {
		clients[i] = dialClient(t, s, client.WithMux(m), client.WithSessionTimeout(10*time.Second))
		if _, err := clients[i].Create(ctx, fmt.Sprintf("/e%d", i), nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	before := make([]int64, len(clients))
	for i, c := range clients {
		before[i] = c.SessionID()
	}
	socks.breakAll()
	for i, c := range clients {
		// A request sent before the client noticed the break is lost
		// with it, as on a connection of its own.
		var err error
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err = c.Create(ctx, fmt.Sprintf("/after%d", i), nil, client.Ephemeral); !errors.Is(err, client.ErrConnectionLoss) {
				break
			}
		}
		if err != nil {
			t.Fatalf("session %d after the connection broke: %v", i, err)
		}
		if c.SessionID() != before[i] {
			t.Fatalf("session %d is %#x after the break, was %#x", i, c.SessionID(), before[i])
		}
		if ok, _, err := c.Exists(ctx, fmt.Sprintf("/e%d", i)); err != nil || !ok {
			t.Fatalf("session %d's ephemeral after the break: %v, %v", i, ok, err)
		}
	}
	if socks.count() != 2 {
		t.Fatalf("%d sockets dialed, want 2: the sessions should have moved together", socks.count())
	}
}

// The handshake timeout is the preface's, and then each channel's: the
// connection outlives it.
func TestAMultiplexedConnectionOutlivesTheHandshakeTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	s := startServer(t, "", func(c *Config) { c.HandshakeTimeout, c.ShortHandshakeTimeout = timeout, timeout })
	var socks sockets
	m := client.NewMux(client.WithDialer(socks.dial))
	t.Cleanup(func() { m.Close() })
	c := dialClient(t, s, client.WithMux(m))
	time.Sleep(3 * timeout)
	second := dialClient(t, s, client.WithMux(m)) // a channel opened past the timeout has one of its own
	for _, c := range []*client.Client{c, second} {
		if _, _, err := c.Exists(context.Background(), "/"); err != nil {
			t.Fatal(err)
		}
	}
	if socks.count() != 1 {
		t.Fatalf("%d sockets dialed, want 1: the connection was cut at the handshake timeout", socks.count())
	}
}

func TestSessionsPerConnectionAreLimited(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxSessionsPerConn = 3 })
	m := client.NewMux()
	t.Cleanup(func() { m.Close() })
	for range 3 {
		dialClient(t, s, client.WithMux(m))
	}
	refusedDial(t, s, "a fourth session on the connection", client.WithMux(m))
	if got := metric(t, s, `arbor_limit_refusals_total{limit="sessions_per_connection"}`); got < 1 {
		t.Fatalf("sessions_per_connection refusals = %v, want at least 1", got)
	}
	// Another connection carries more.
	dialClient(t, s, client.WithMux(client.NewMux()))
}

func TestTheSessionsAllConnectionsCarryAreLimited(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxCarriedSessions, c.MaxConns = 2, 2 })
	dialClient(t, s, client.WithMux(client.NewMux()))
	m := client.NewMux()
	t.Cleanup(func() { m.Close() })
	dialClient(t, s, client.WithMux(m))
	refusedDial(t, s, "a third carried session", client.WithMux(m))
	if got := metric(t, s, `arbor_limit_refusals_total{limit="carried_sessions"}`); got < 1 {
		t.Fatalf("carried_sessions refusals = %v, want at least 1", got)
	}
	// The two multiplexed connections count toward MaxConns, their
	// sessions do not: a connection of its own is over it.
	refusedDial(t, s, "a third connection")
}

// Bad multiplexed input ends that connection, and only it.
func TestABadMultiplexedConnectionEndsAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	good := dialRaw(t, s)
	if resp := good.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK {
		t.Fatal(resp.Err)
	}
	preface := func(t *testing.T) *rawConn {
		rc := dialRaw(t, s)
		rc.write(mux.Preface)
		answer := make([]byte, len(mux.Preface))
		if _, err := io.ReadFull(rc.br, answer); err != nil || !bytes.Equal(answer, mux.Preface) {
			t.Fatalf("the preface was answered %x, %v", answer, err)
		}
		return rc
	}
	for name, frame := range map[string][]byte{
		"a malformed grant":  mux.AppendFrame(nil, 0, []byte("x")),
		"an oversized frame": {0xff, 0, 0, 0, 0, 0, 0, 1},
	} {
		t.Run(name, func(t *testing.T) {
			bad := preface(t)
			bad.write(frame)
			if !closedByServer(t, bad.nc, 10*time.Second) {
				t.Fatal("the connection was kept open")
			}
		})
	}
	t.Run("a malformed handshake on a channel closes the channel", func(t *testing.T) {
		rc := preface(t)
		rc.write(mux.AppendFrame(nil, 1, nil))
		rc.write(mux.AppendFrame(nil, 1, []byte{0, 0, 0, 2, 0xc1, 0xc1}))
		_ = rc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		id, payload, err := mux.ReadFrame(rc.br, nil)
		if err != nil || id != 1 || len(payload) != 0 {
			t.Fatalf("read channel %d, %x, %v; want channel 1's closing frame", id, payload, err)
		}
		// The connection carries on: a new channel gets its session.
		rc.write(mux.AppendFrame(nil, 2, nil))
		rc.write(mux.AppendFrame(nil, 2, wire.AppendConnectRequest(nil, &wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 5000})))
		id, payload, err = mux.ReadFrame(rc.br, nil)
		if err != nil || id != 2 {
			t.Fatalf("read channel %d, %v; want channel 2's handshake", id, err)
		}
		var resp wire.ConnectResponse
		body, err := wire.ReadFrame(bytes.NewReader(payload), nil, 1<<20)
		if err == nil {
			err = wire.DecodeConnectResponse(body, &resp)
		}
		if err != nil || resp.Err != wire.CodeOK || resp.SessionID == 0 {
			t.Fatalf("channel 2's handshake: %+v, %v", resp, err)
		}
	})
	if r := good.call(wire.Request{Xid: 1, Op: wire.OpExists, Path: "/"}); r.Err != wire.CodeOK {
		t.Fatalf("another connection after the bad ones: %v", r.Err)
	}
}

// A session that does not grant its replies back gets a window of them and
// no more, and is dropped as a client that does not read is: its channel
// closes, and the connection's other sessions carry on.
func TestASessionThatDoesNotGrantIsDroppedAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.writeTimeout = 300 * time.Millisecond })
	rc := dialRaw(t, s)
	rc.write(mux.Preface)
	if _, err := io.ReadFull(rc.br, make([]byte, len(mux.Preface))); err != nil {
		t.Fatal(err)
	}
	connect := wire.AppendConnectRequest(nil, &wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: 10000})
	var out []byte
	for _, id := range []uint32{1, 2} {
		out = mux.AppendFrame(out, id, nil)
		out = mux.AppendFrame(out, id, connect)
	}
	// Channel 1 asks for replies worth more than a window, and never
	// grants them back.
	reqs := wire.AppendRequest(nil, &wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/big", Data: make([]byte, 1000)})
	for xid := int32(2); xid <= 100; xid++ {
		reqs = wire.AppendRequest(reqs, &wire.Request{Xid: xid, Op: wire.OpGetData, Path: "/big"})
	}
	for len(reqs) > 0 {
		n := min(len(reqs), mux.Window/2)
		out = mux.AppendFrame(out, 1, reqs[:n])
		reqs = reqs[n:]
	}
	rc.write(out)
	got := map[uint32]int{}
	_ = rc.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		id, payload, err := mux.ReadFrame(rc.br, nil)
		if err != nil {
			t.Fatalf("no close of channel 1: %v (read %v bytes by channel)", err, got)
		}
		if id == 1 && len(payload) == 0 {
			break
		}
		got[id] += len(payload)
	}
	if got[1] > mux.Window {
		t.Fatalf("channel 1 was sent %d bytes without a grant, past its window of %d", got[1], mux.Window)
	}
	// Channel 2 has its session still: a ping is answered.
	rc.write(mux.AppendFrame(nil, 2, wire.AppendRequest(nil, &wire.Request{Xid: wire.XidPing, Op: wire.OpPing})))
	for {
		id, payload, err := mux.ReadFrame(rc.br, nil)
		if err != nil {
			t.Fatalf("channel 2 after channel 1 was dropped: %v", err)
		}
		if id == 2 && len(payload) > 0 && got[2] > 0 { // past its handshake's answer
			break
		}
		got[id] += len(payload)
	}
}

// A Mux hands no new session to a connection whose server stopped
// answering: the session goes on a new connection.
func TestAMuxLeavesASilentConnectionToItsSessions(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	var socks sockets
	m := client.NewMux(client.WithDialer(socks.dial))
	t.Cleanup(func() { m.Close() })
	dialClient(t, s, client.WithMux(m), client.WithSessionTimeout(30*time.Second))
	socks.mu.Lock()
	socks.conns[0].freeze()
	socks.mu.Unlock()
	// Past the Mux's 3 s of silence, counted from the last frame the read
	// under way when it froze may still bring (a pong, a second on).
	time.Sleep(5 * time.Second)
	c := dialClient(t, s, client.WithMux(m))
	if _, _, err := c.Exists(context.Background(), "/"); err != nil {
		t.Fatal(err)
	}
	if socks.count() != 2 {
		t.Fatalf("%d connections dialed, want 2: the new session went on the silent one", socks.count())
	}
}
