package server

import (
	"bufio"
	"bytes"
	"context"
	"time"

	"github.com/arbor-coord/arbor/internal/mux"
	"go.uber.org/zap"
)

// A client may carry many sessions over one connection (package mux,
// docs/protocol.md "Multiplexed connections"): it opens the connection with
// mux.Preface instead of a ConnectRequest, and then a channel per session.
// Each channel is served as a connection of its own (a conn, with its own
// handshake, pipeline, budget and watches), so everything a session does is
// what it does on a socket of its own. The limits count them so:
//
//   - the multiplexed connection counts as one client connection, toward
//     the client IP's limit (Config.MaxConnsPerIP) and the member's
//     (Config.MaxConns), and is in its handshake (Config.MaxHandshaking)
//     until its preface;
//   - a connection carries at most Config.MaxSessionsPerConn channels, and
//     all of them together at most Config.MaxCarriedSessions, a limit of
//     their own because a channel costs a fraction of a socket (small
//     buffers, no kernel socket); a channel is in its handshake until its
//     ConnectRequest, as a socket is.

// isMuxPreface reports whether the connection br reads starts with
// mux.Preface. It waits for no more bytes than the first frame has: a
// ConnectRequest may be shorter than the preface.
func isMuxPreface(br *bufio.Reader) bool {
	head, err := br.Peek(4)
	if err != nil || !bytes.Equal(head, mux.Preface[:4]) {
		return false
	}
	head, err = br.Peek(len(mux.Preface))
	return err == nil && bytes.Equal(head, mux.Preface)
}

// serveMux serves the channels of the multiplexed connection c, whose
// preface br holds, until it ends.
func (c *conn) serveMux(br *bufio.Reader) {
	_, _ = br.Discard(len(mux.Preface))
	_ = c.nc.SetDeadline(time.Time{}) // the handshake's: the connection lives on, its channels have theirs
	m := mux.Server(c.nc, br, c.srv.cfg.writeTimeout)
	stop := context.AfterFunc(c.ctx, func() { m.Close() })
	defer stop()
	defer m.Close()
	c.log.Debug("multiplexed connection")
	for {
		ch, err := m.Accept()
		if err != nil {
			c.log.Debug("multiplexed connection ended", zap.Error(err))
			return
		}
		limit := ""
		if over(m.Channels(), c.srv.cfg.MaxSessionsPerConn) {
			limit = limitSessionsPerConn
		}
		if c.srv.startHandshake(ch) {
			c.srv.serveConn(newConn(c.srv, ch, newArborCodec), limit)
		}
	}
}
