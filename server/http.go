package server

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// newHTTPServer returns the server of the HTTP listener, serving h.
// ReadHeaderTimeout closes a connection whose client is slow to send its
// request's headers (or sends none), IdleTimeout one that waits longer than
// cfg.HTTPIdleTimeout for its next request; neither cuts a request in
// progress. WriteTimeout stays unset: it bounds a response from the start
// of its request, and would cut a long poll or an event stream. ReadTimeout
// stays unset too: how long a body may take to arrive is for the handlers
// that read one to decide.
func newHTTPServer(cfg *Config, h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: cfg.HTTPIdleTimeout}
}

// listenHTTP listens for HTTP on addr, with at most s.cfg.HTTPMaxConns
// connections open.
func (s *Server) listenHTTP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || s.cfg.HTTPMaxConns < 0 {
		return ln, err
	}
	return &connCapListener{Listener: ln, max: int64(s.cfg.HTTPMaxConns), refused: func(remote net.Addr) {
		s.limits.refused(s.log, limitHTTPConns, fmt.Errorf("closed a new HTTP connection from %v: %d are open (the %s limit)",
			remote, s.cfg.HTTPMaxConns, limitHTTPConns))
	}}, nil
}

// connCapListener keeps at most max of the connections it accepted open. A
// connection past that is closed as soon as it is accepted, so its client
// fails at once. Waiting to accept it until another closes, as
// golang.org/x/net/netutil's LimitListener does, would leave it in the
// kernel's accept queue, its client hanging until its own timeout (a health
// check timing out rather than failing), and once that queue is full, every
// new connection would hang in its handshake.
type connCapListener struct {
	net.Listener
	max     int64
	refused func(remote net.Addr) // called for each connection closed at once

	open atomic.Int64
}

func (l *connCapListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &cappedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		c.Close()
		l.refused(c.RemoteAddr())
	}
}

// cappedConn gives its place back to its listener when it is closed.
type cappedConn struct {
	net.Conn
	l    *connCapListener
	once sync.Once // a connection may be closed more than once, but counts once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
