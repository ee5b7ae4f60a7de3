package server

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap"
)

// ZooKeeper's client protocol is a second codec in front of the same
// pipeline (see codec): on the Config.ZKListen port, each connection is
// either a four-letter word (fourletter.go) or a ZooKeeper client, whose
// requests are decoded into wire.Request values (zkwire.RequestToWire),
// run through the reader, executor and responder like Arbor's own, and
// answered in jute (zkwire.ReplyFromWire). A session made by either
// protocol is the same kind of session. What differs between the two
// protocols is translation, in zkwire, and the few rules here: which paths
// a request must name validly, that a failed auth closes the connection,
// as ZooKeeper does, and SASL logins (sasl.go).

// zkCodec is the ZooKeeper codec of one connection.
type zkCodec struct {
	c *conn
	// hasReadOnly is set when the client sent the readOnly flag in its
	// ConnectRequest: the ConnectResponse then carries one too; readOnly
	// is the flag (canBeReadOnly).
	hasReadOnly, readOnly bool
}

func newZKCodec(c *conn) codec { return &zkCodec{c: c} }

func (z *zkCodec) readConnect(br *bufio.Reader) (wire.ConnectRequest, bool) {
	head, err := br.Peek(4)
	if err != nil {
		z.c.log.Debug("handshake read failed", zap.Error(err))
		return wire.ConnectRequest{}, false
	}
	// A ConnectRequest starts with its length, which is never four ASCII
	// letters' worth (over 1.6 GB): those are a four-letter word.
	if word := string(head); isFourLetterWord(word) {
		z.c.srv.limits.handshakes.done(z.c.nc) // the word is all such a client says
		z.c.srv.fourLetter(z.c, word)
		return wire.ConnectRequest{}, false
	}
	body, err := wire.ReadFrame(br, nil, z.c.srv.cfg.MaxFrame)
	if err != nil {
		z.c.log.Debug("ZooKeeper handshake read failed", zap.Error(err))
		return wire.ConnectRequest{}, false
	}
	var m zkwire.ConnectRequest
	if err := zkwire.DecodeConnectRequest(body, &m); err != nil {
		z.c.log.Info("closing connection: malformed ZooKeeper handshake", zap.Error(err))
		return wire.ConnectRequest{}, false
	}
	z.hasReadOnly, z.readOnly = m.HasReadOnly, m.ReadOnly
	req := zkwire.ConnectRequestToWire(&m)
	_, req.LastZxidSeen = wire.PositionOf(m.LastZxidSeen)
	return req, true
}

// A ZooKeeper client keeps one zxid, the one its last reply carried, and
// gives it back as it reconnects: as the last zxid it has seen, and as
// the relative zxid of the setWatches that restores its watches. On a
// sharded cluster a reply's zxid is its shard's, and two shards' zxids are
// not comparable (docs/scale-out.md, "Zxids across shards"), so a reply
// header carries a position instead (wire.Position), which names the
// shard. A cluster of one shard has only the meta group, whose positions
// are its zxids: nothing changes there. Clients only keep the number and
// give it back: ZooKeeper's Java client, kazoo and go-zookeeper take each
// reply's as it comes, with no comparison; the C client (and what is
// built on it) takes a notification's too, so notifications carry
// positions as well (conn.eventZxid).

// replyPosition is the position r's reply carries for its zxid. A batch
// of reads over several shards carries 0, which a client does not take
// (ZooKeeper's clients keep only a zxid above 0): it keeps the position it
// had. A restore of watches echoes the client's own, which still says
// where it was in the shard of its last reply; the watches of that shard
// were restored from it, the others as if it had seen nothing.
func (z *zkCodec) replyPosition(r *request, zxid int64) int64 {
	switch {
	case r.mixedZxid:
		return 0
	case (r.req.Op == wire.OpSetWatches || r.req.Op == wire.OpSetWatches2) && z.c.srv.routingMap() != nil:
		return r.req.RelativeZxid
	case r.group != nil:
		return wire.Position(r.group.id, zxid)
	}
	return zxid // the meta group's: its position
}

// placeWatches gives each watch of req, a ZooKeeper client's restore on a
// sharded cluster, the zxid it is restored from (wire.Request.WatchZxids,
// as an Arbor client sends them): the zxid of the client's position for a
// watch of that position's shard; for any other, -1, as if the client had
// seen nothing of its shard: a data or child watch fires, a lasting watch
// ends with HistoryCompacted. A watch fires without a change at most,
// which costs its client a read; none misses one.
func (s *Server) placeWatches(req *wire.Request) {
	seen, zxid := wire.PositionOf(req.RelativeZxid)
	req.WatchZxids = make([]int64, 0, watchCount(req))
	for kind, paths := range [][]string{req.DataWatches, req.ExistWatches, req.ChildWatches, req.PersistentWatches, req.RecursiveWatches} {
		for _, p := range paths {
			var g *group
			if kind >= 3 { // persistent, recursive
				g, _ = s.historyOf(p, kind == 4)
			} else {
				g, _ = s.groupOfPath(p)
			}
			from := int64(-1)
			if g != nil && g.id == seen {
				from = zxid
			}
			req.WatchZxids = append(req.WatchZxids, from)
		}
	}
}

func (z *zkCodec) appendConnectResponse(dst []byte, resp *wire.ConnectResponse) []byte {
	m, ok := zkwire.ConnectResponseFromWire(resp, z.hasReadOnly)
	if !ok {
		return dst // ZooKeeper closes without a word: the client tries another server
	}
	m.ReadOnly = m.HasReadOnly && z.c.readOnly.Load()
	return zkwire.AppendConnectResponse(dst, &m)
}

// zkShape is what of a ZooKeeper request its reply is shaped by: the op
// the client sent (create2 and create are one op in wire, answered apart)
// and a multi's or multiRead's sub-requests, by their ops.
type zkShape struct {
	op  zkwire.Op
	ops []zkwire.Request
}

// request gives the shape back as the zkwire.Request that ReplyFromWire
// takes.
func (s zkShape) request() zkwire.Request { return zkwire.Request{Op: s.op, Ops: s.ops} }

// decode keeps the shape of the request as the client sent it in r.zk:
// its reply is shaped by it. The decoded record itself is not kept (it
// would cost an allocation per request): r.req holds what the pipeline
// needs of it.
func (z *zkCodec) decode(body []byte, r *request) error {
	if len(body) < zkwire.RequestHeaderSize {
		return fmt.Errorf("ZooKeeper request of %d bytes has no header", len(body))
	}
	var zr zkwire.Request
	err := zkwire.DecodeRequest(body, &zr)
	r.req.Xid = zr.Xid
	r.zk = zkShape{op: zr.Op, ops: zr.Ops}
	switch {
	case errors.Is(err, zkwire.ErrUnknownOp):
		r.err = wire.Errorf(wire.CodeUnimplemented, "unknown op %d", int32(zr.Op))
	case err != nil:
		// ZooKeeper answers a record it cannot read with
		// MarshallingError and carries on; the framing is intact.
		r.err = wire.Errorf(wire.CodeMarshallingError, "%v", err)
	default:
		r.err = zkwire.RequestToWire(&zr, &r.req)
		r.batch = zr.Op == zkwire.OpMultiRead
		r.keepWatches = zr.Op == zkwire.OpCheckWatches
		r.sasl = zr.Op == zkwire.OpSASL
		if (zr.Op == zkwire.OpSetWatches || zr.Op == zkwire.OpSetWatches2) && z.c.srv.routingMap() != nil {
			z.c.srv.placeWatches(&r.req)
		}
	}
	if r.err == nil {
		r.err = z.checkPaths(&zr, &r.req)
	}
	if errors.Is(r.err, wire.ErrInvalidACL) {
		z.c.log.Info("refusing a ZooKeeper request", zap.Stringer("op", zr.Op), zap.Error(r.err))
	}
	return nil
}

// checkPaths checks the paths of req, mapped from zr, as Arbor's protocol
// does, but for getEphemerals' prefix: ZooKeeper takes any string there, so
// only its length is checked, as the client sent it. (A multiRead's reads
// are checked one by one as they run: a bad path fails only its read.)
func (z *zkCodec) checkPaths(zr *zkwire.Request, req *wire.Request) error {
	if zr.Op == zkwire.OpGetEphemerals {
		return z.c.checkPathLength(zr.Path, false)
	}
	return z.c.checkPaths(req)
}

// closesOnAuthFailure: ZooKeeper closes the connection after a failed
// auth, and its client gives up the session (AUTH_FAILED).
func (z *zkCodec) closesOnAuthFailure() {}

// opName names a request by the pipeline op it became, or by its
// ZooKeeper op when it became none (a multiRead, or one refused before
// mapping) or is run in another op's form (checkWatches, sasl); all
// unknown ops share one name, so that a client cannot grow the metrics'
// label set without bound.
func (z *zkCodec) canBeReadOnly() bool { return z.readOnly }

func (z *zkCodec) opName(r *request) string {
	op := r.zk.op
	switch {
	case op == zkwire.OpCheckWatches, op == zkwire.OpSASL:
		return op.String()
	case r.req.Op != 0:
		return r.req.Op.String()
	case op.Known():
		return op.String()
	}
	return "unknown"
}

func (z *zkCodec) appendReply(dst []byte, r *request, reply wire.Reply) []byte {
	switch {
	case reply.Xid == wire.XidClosing:
		return dst // ZooKeeper has no closing frame: the connection just closes
	case r == nil:
		n := zkwire.NotificationFromWire(&reply)
		return zkwire.AppendReply(dst, zkwire.OpNotification, &n)
	}
	zr := r.zk.request()
	out := zkwire.ReplyFromWire(&zr, &reply, r.batchReplies)
	out.Zxid = z.replyPosition(r, reply.Zxid)
	return zkwire.AppendReply(dst, zr.Op, &out)
}
