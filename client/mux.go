package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/internal/mux"
)

// Mux carries the sessions of many Clients over one connection to each
// server, instead of a connection per session: a process that keeps
// thousands of sessions (a lock service's clients, a load generator) holds
// a few sockets, and each member reads a few sockets, not thousands.
// Everything else about a session is as on a connection of its own: its
// handshake, timeout, requests, watches and reconnects (a Client whose
// connection breaks dials again through the Mux, to any server). The
// sessions of one connection share its bandwidth, each within a window of
// its own, so one that stops reading holds up only itself. See
// docs/protocol.md §11. It needs a server that multiplexes (Arbor's port,
// not ZooKeeper's): an older one refuses the connection, and Dial fails.
//
// A Mux is safe for concurrent use. Its connection to a server is made
// when a Client first needs it, and closes when its last session leaves
// it, or on Close. A connection whose server has not answered its pings
// for 3 s is handed no new session: those go on a new connection, and the
// sessions on the old one decide for themselves.
type Mux struct {
	dialNet func(ctx context.Context, addr string) (net.Conn, error)

	mu     sync.Mutex
	conns  map[string]*muxConn   // by server address: the one new sessions go on
	all    map[*muxConn]struct{} // every connection open or being made, for Close
	closed bool
}

// muxSilence is how long a connection may go without a frame, its pings
// included (sent after a second of quiet, answered at once), before new
// sessions to its server go on a new connection: its server may have been
// cut off. The sessions already on it stay and decide for themselves.
const muxSilence = 3 * time.Second

// muxConn is a Mux's connection to one server, or the dial that makes it.
type muxConn struct {
	ready chan struct{} // closed once the dial is done
	conn  *mux.Conn     // set before ready closes, nil if the dial failed
	err   error
}

// NewMux makes a Mux. Of opts, WithDialer and WithTLS apply: they say how
// its connections are made, as they would for a Client's own.
func NewMux(opts ...Option) *Mux {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Mux{dialNet: o.dialer(), conns: map[string]*muxConn{}, all: map[*muxConn]struct{}{}}
}

// WithMux makes the client's session travel over m's connections. The
// client's own WithDialer and WithTLS are then not used: m's are.
func WithMux(m *Mux) Option { return func(o *options) { o.mux = m } }

// Close closes the Mux's connections: every session on them loses its
// connection (and dials again through the Mux, which fails: close the
// Clients first).
func (m *Mux) Close() error {
	m.mu.Lock()
	m.closed = true
	all := m.all
	m.conns, m.all = map[string]*muxConn{}, map[*muxConn]struct{}{}
	m.mu.Unlock()
	for mc := range all {
		<-mc.ready
		if mc.conn != nil {
			mc.conn.Close()
		}
	}
	return nil
}

// Conns is the number of connections the Mux has open or is making.
func (m *Mux) Conns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.all)
}

// dial opens a channel for a session on the connection to addr, making
// the connection first if there is none.
func (m *Mux) dial(ctx context.Context, addr string) (net.Conn, error) {
	for tries := 0; ; tries++ {
		mc, err := m.conn(ctx, addr)
		if err != nil {
			return nil, err
		}
		ch, err := mc.conn.Open()
		if err == nil {
			return ch, nil
		}
		// The connection ended since it was looked up (its last session
		// left it): once more, on a new one.
		m.forget(addr, mc)
		if tries > 0 {
			return nil, err
		}
	}
}

// conn returns the connection to addr, making it if there is none.
func (m *Mux) conn(ctx context.Context, addr string) (*muxConn, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, errors.New("mux: closed")
	}
	mc := m.conns[addr]
	if mc != nil && mc.stale() {
		mc = nil // left to the sessions on it
	}
	if mc == nil {
		mc = &muxConn{ready: make(chan struct{})}
		m.conns[addr] = mc
		m.all[mc] = struct{}{}
		m.mu.Unlock()
		mc.conn, mc.err = m.connect(ctx, addr)
		close(mc.ready)
		if mc.err != nil {
			m.forget(addr, mc)
			return nil, mc.err
		}
		go func() {
			<-mc.conn.Done()
			m.forget(addr, mc)
		}()
		return mc, nil
	}
	m.mu.Unlock()
	select {
	case <-mc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if mc.err != nil {
		return nil, mc.err // the dial it waited for failed: so does this one
	}
	return mc, nil
}

// connect dials addr and opens the multiplexed connection.
func (m *Mux) connect(ctx context.Context, addr string) (*mux.Conn, error) {
	nc, err := m.dialNet(ctx, addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	if deadline.IsZero() {
		deadline = time.Now().Add(DefaultSessionTimeout)
	}
	c, err := mux.Client(nc, deadline)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("server %s: %w", addr, err)
	}
	return c, nil
}

// forget drops mc, ended or failed, and as the connection to addr if it
// still is.
func (m *Mux) forget(addr string, mc *muxConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.all, mc)
	if m.conns[addr] == mc {
		delete(m.conns, addr)
	}
}

// stale reports whether mc is made and has been silent past muxSilence.
func (mc *muxConn) stale() bool {
	select {
	case <-mc.ready:
		return mc.conn != nil && mc.conn.Silent() > muxSilence
	default:
		return false // still being made
	}
}
