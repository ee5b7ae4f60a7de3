package server

import (
	"bufio"
	"errors"

	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// codec is the plug between a connection's bytes and the request pipeline:
// it decodes the handshake and the requests into wire's types, and encodes
// the pipeline's wire.Reply values back. Arbor's own protocol (arborCodec)
// and ZooKeeper's (zkCodec, zk.go) are the two; reads, writes through raft,
// watches, sessions, ordering and metrics are the same for both.
//
// A codec only translates: every op is run by the pipeline, whichever
// protocol asked for it. The rules that differ between the protocols are the
// codec's: which requests it refuses while decoding (which paths must be
// valid, for one), and the optional abilities below (authFailureCloser).
//
// readConnect runs on the connection's reader goroutine before the others
// start; decode on the reader; appendReply on whichever goroutine queues
// output (the responder for replies, the reader for pings, the apply path
// for notifications), never two at once for one connection (the output
// lock is held).
//
// appendReply takes the reply by value: through an interface call a
// pointer would escape, and every request's reply, Arbor's too, would be
// allocated on the heap.
type codec interface {
	// readConnect reads and decodes the client's first frame. It reports
	// false if the connection is to end (the codec logged why, or served
	// the connection in some other way).
	readConnect(br *bufio.Reader) (wire.ConnectRequest, bool)
	// appendConnectResponse appends the answer to the handshake. A non-zero
	// resp.Err refuses the session; the connection closes after it.
	appendConnectResponse(dst []byte, resp *wire.ConnectResponse) []byte
	// decode decodes a request frame body into r and checks the paths it
	// names (checkPaths, paths.go) as the protocol requires. An error ends
	// the connection (a malformed frame); a request the codec can answer
	// with an error and carry on has r.err set instead.
	decode(body []byte, r *request) error
	// appendReply appends reply, the answer to r; with r nil, reply is a
	// notification (XidNotification) or the closing frame (XidClosing).
	appendReply(dst []byte, r *request, reply wire.Reply) []byte
	// opName names r's op in metrics and in the cons four-letter word.
	opName(r *request) string
	// canBeReadOnly reports whether the client said in its handshake that
	// it accepts a read-only server (ZooKeeper's canBeReadOnly).
	canBeReadOnly() bool
}

// authFailureCloser is a codec whose protocol ends the connection once a
// failed auth is answered (ZooKeeper's). Arbor's protocol carries on, and
// the client may try again.
type authFailureCloser interface {
	closesOnAuthFailure()
}

// arborCodec is Arbor's own protocol, package wire.
type arborCodec struct {
	c *conn
}

func newArborCodec(c *conn) codec { return arborCodec{c} }

func (a arborCodec) readConnect(br *bufio.Reader) (wire.ConnectRequest, bool) {
	var req wire.ConnectRequest
	if !a.c.carried && isMuxPreface(br) {
		a.c.srv.limits.handshakes.done(a.c.nc) // the preface is its handshake
		a.c.serveMux(br)
		return req, false
	}
	body, err := wire.ReadFrame(br, nil, a.c.srv.cfg.MaxFrame)
	if err != nil {
		a.c.log.Debug("handshake read failed", zap.Error(err))
		return req, false
	}
	if err := wire.DecodeConnectRequest(body, &req); err != nil {
		a.c.log.Info("closing connection: malformed handshake", zap.Error(err))
		return req, false
	}
	return req, true
}

func (arborCodec) appendConnectResponse(dst []byte, resp *wire.ConnectResponse) []byte {
	return wire.AppendConnectResponse(dst, resp)
}

// decode holds every path a request names to the same rules, getEphemerals'
// prefix included (docs/protocol.md).
func (a arborCodec) decode(body []byte, r *request) error {
	if err := wire.DecodeRequest(body, &r.req); err != nil {
		if !errors.Is(err, wire.ErrUnimplemented) {
			return err
		}
		r.err = err // answered in order, the connection carries on
	}
	if !wire.RequestXidAllowed(r.req.Xid, r.req.Op) {
		// No reply can carry a reserved xid without being read as
		// something else: the refusal goes in the closing frame.
		r.err = wire.Errorf(wire.CodeBadArguments,
			"xid %d is reserved: a request's xid is 0 or more (-2 only for ping, -8 only for setWatches)", r.req.Xid)
		r.refuseConn = true
	}
	if r.err == nil {
		r.err = a.c.checkPaths(&r.req)
	}
	return nil
}

func (arborCodec) appendReply(dst []byte, r *request, reply wire.Reply) []byte {
	op := wire.OpPing // notifications and closing frames ignore it
	if r != nil {
		op = r.req.Op
	}
	return wire.AppendReply(dst, op, &reply)
}

// opName names a request by its op; all unknown ops share one name, so
// that a client cannot grow the metrics' label set without bound.
// canBeReadOnly: Arbor's protocol has no read-only mode.
func (arborCodec) canBeReadOnly() bool { return false }

func (arborCodec) opName(r *request) string {
	if !r.req.Op.Known() {
		return "unknown"
	}
	return r.req.Op.String()
}
