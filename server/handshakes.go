package server

import (
	"net"
	"sync"
	"time"
)

// A connection between its accept and the end of its handshake (TLS, then
// the client's ConnectRequest) holds a socket, a goroutine and buffers, and
// has proved nothing: it may be a client on its way or a squatter that will
// never speak. handshakes bounds how many there are at once, on both client
// ports and from every address together (Config.MaxHandshaking): past the
// cap, a new connection is closed at once, before anything is read or
// allocated for it. While more than half the cap is in use, the handshake
// timeout shrinks (Config.ShortHandshakeTimeout) for the connections in
// their handshake and those that come, so squatters are shed within it and
// their slots go to clients that do speak, whose handshake takes a round
// trip or two.
//
// While a connection is in its handshake its deadline belongs to
// handshakes: take sets it (and may lower the others'), shorten only lowers
// it, done hands the connection back, all under mu. So no deadline is ever
// set on a connection after its handshake, where it would cut a live
// client off.
type handshakes struct {
	max     int           // the cap; negative: none
	timeout time.Duration // Config.HandshakeTimeout
	short   time.Duration // the timeout under pressure: Config.ShortHandshakeTimeout, at most timeout

	mu      sync.Mutex // guards conns and pressed
	conns   map[net.Conn]*handshake
	pressed bool // more than half the cap is in use: deadlines are short
}

// handshake is one connection in its handshake.
type handshake struct {
	start    time.Time
	deadline time.Time
}

func newHandshakes(cfg *Config) *handshakes {
	return &handshakes{
		max: cfg.MaxHandshaking, timeout: cfg.HandshakeTimeout,
		short: min(cfg.ShortHandshakeTimeout, cfg.HandshakeTimeout),
		conns: map[net.Conn]*handshake{},
	}
}

// take counts nc, just accepted, as in its handshake and sets its
// deadline, unless the cap is reached (ok false: the caller closes nc).
// pressed reports that this connection took the count over half the cap,
// and the deadlines were shortened.
func (h *handshakes) take(nc net.Conn) (ok, pressed bool) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.conns) + 1
	if over(n, h.max) {
		return false, false
	}
	if !h.pressed && h.max >= 0 && n > h.max/2 {
		h.pressed, pressed = true, true
		for other, hs := range h.conns {
			h.lowerLocked(other, hs, hs.start.Add(h.short))
		}
	}
	timeout := h.timeout
	if h.pressed {
		timeout = h.short
	}
	hs := &handshake{start: now, deadline: now.Add(timeout)}
	h.conns[nc] = hs
	_ = nc.SetDeadline(hs.deadline)
	return true, pressed
}

// shorten lowers nc's deadline to d from now, if that is sooner, while nc
// is in its handshake.
func (h *handshakes) shorten(nc net.Conn, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hs, ok := h.conns[nc]; ok {
		h.lowerLocked(nc, hs, time.Now().Add(d))
	}
}

// lowerLocked moves hs's deadline back to t if t is sooner.
func (h *handshakes) lowerLocked(nc net.Conn, hs *handshake, t time.Time) {
	if t.Before(hs.deadline) {
		hs.deadline = t
		_ = nc.SetDeadline(t)
	}
}

// done ends nc's handshake, whichever way it ended (finished, failed,
// timed out, the connection or the server closed); nc's deadline is its
// own again. It may be called more than once: only the first counts.
func (h *handshakes) done(nc net.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns, nc)
	if h.pressed && len(h.conns) <= h.max/2 {
		h.pressed = false
	}
}

// pressing reports whether more than half the cap is in use.
func (h *handshakes) pressing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pressed
}

// count is the number of connections in their handshake.
func (h *handshakes) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}
