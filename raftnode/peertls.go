package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"go.uber.org/zap"
)

// TransportOption configures a TCPTransport.
type TransportOption func(*TCPTransport)

// peerTLS is the TLS of the peer port: listen serves accepted connections,
// dial makes connections to the other members. Both nil means plaintext.
type peerTLS struct {
	listen *tls.Config
	dial   *tls.Config
}

// WithTLS makes the transport speak TLS both ways: listen is the server
// side of the peer port (set ClientAuth to tls.RequireAndVerifyClientCert
// with ClientCAs to accept only members whose certificate a CA signed),
// dial the client side of connections to other members (its RootCAs verify
// their certificates against the host of their peer address, and its
// Certificates are what this member presents). Every member of a cluster
// must use TLS or none.
func WithTLS(listen, dial *tls.Config) TransportOption {
	return func(t *TCPTransport) { t.tls = peerTLS{listen: listen, dial: dial} }
}

// peerDialTimeout bounds connecting to a peer; with TLS it bounds the
// handshake too.
const (
	peerDialTimeout    = time.Second
	peerTLSDialTimeout = 5 * time.Second
)

// peerHandshakeTimeout bounds the TLS handshake of an accepted peer
// connection, so a silent dialer cannot hold its goroutine.
const peerHandshakeTimeout = 5 * time.Second

// dial connects to p, over TLS when the transport has it. A TLS failure
// (a certificate the other side or this one refused) is logged when it
// differs from p's last one: it is a misconfiguration that retrying will
// not mend, unlike a peer that is down.
func (t *TCPTransport) dial(p *peer) (net.Conn, error) {
	if t.tls.dial == nil {
		return net.DialTimeout("tcp", p.addr, peerDialTimeout)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: peerTLSDialTimeout}, "tcp", p.addr, t.tls.dial)
	switch {
	case err == nil:
		p.lastTLSErr = ""
	case errors.Is(err, context.DeadlineExceeded) && p.lastTLSErr != "timeout":
		// It took the connection and said nothing back.
		p.lastTLSErr = "timeout"
		t.log.Warn("peer TLS handshake failed: no answer (is its peer port plaintext?)", zap.Uint64("peer", p.id), zap.String("addr", p.addr))
	case isTLSRefusal(err) && err.Error() != p.lastTLSErr:
		p.lastTLSErr = err.Error()
		t.log.Warn("peer TLS handshake failed", zap.Uint64("peer", p.id), zap.String("addr", p.addr), zap.Error(err))
	}
	return c, err
}

// isTLSRefusal reports whether err is one side refusing the other's TLS:
// a certificate that did not verify, an alert from the peer, or a peer
// port that does not speak TLS.
func isTLSRefusal(err error) bool {
	var verify *tls.CertificateVerificationError
	var opErr *net.OpError
	var plain tls.RecordHeaderError
	return errors.As(err, &verify) || errors.As(err, &opErr) && opErr.Op == "remote error" || errors.As(err, &plain)
}

// maxRefusedHosts bounds the hosts whose last refusal a transport
// remembers: anyone can fail a handshake, from any number of addresses.
const maxRefusedHosts = 1024

// noteHandshake records the outcome of a handshake with host and returns
// the reason its previous one was refused ("" if none is remembered). The
// caller holds t.mu. When the record is full it starts again, so a host
// may be logged once more.
func (t *TCPTransport) noteHandshake(host string, err error) (last string) {
	last = t.refused[host]
	switch {
	case err == nil:
		delete(t.refused, host)
	case last == "" && len(t.refused) >= maxRefusedHosts:
		clear(t.refused)
		fallthrough
	default:
		t.refused[host] = err.Error()
	}
	return last
}

// handshake completes the TLS handshake of an accepted connection, if it is
// a TLS one, within peerHandshakeTimeout. It reports whether the
// connection may be read.
func (t *TCPTransport) handshake(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return true
	}
	_ = tc.SetDeadline(time.Now().Add(peerHandshakeTimeout))
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	err := tc.Handshake()
	t.mu.Lock()
	stopped, last := t.stopped, t.noteHandshake(host, err)
	t.mu.Unlock()
	if err == nil {
		_ = tc.SetDeadline(time.Time{})
		return true
	}
	// A member refused goes on dialing: say so when it starts, or when
	// its reason changes, not at every attempt.
	var rh tls.RecordHeaderError
	switch {
	case stopped || err.Error() == last:
	case errors.As(err, &rh):
		t.log.Warn("closing peer connection: it sent plaintext to a TLS port", zap.Stringer("remote", c.RemoteAddr()))
	default:
		t.log.Warn("closing peer connection: TLS handshake failed", zap.Stringer("remote", c.RemoteAddr()), zap.Error(err))
	}
	return false
}
