package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// The connection's handshake: the client's ConnectRequest, the session it
// creates or reattaches to, and the check that this member is not behind
// what the client has seen. (handshakes.go is the cap on how many
// connections may be in their handshake at once, and their deadlines.)

// handshake reads the ConnectRequest, within the deadline the accept set
// (see handshakes), creates or reattaches the session, and answers. It
// reports whether the connection may carry on.
func (c *conn) handshake(br *bufio.Reader) bool {
	req, ok := c.codec.readConnect(br)
	c.srv.limits.handshakes.done(c.nc) // the client has said who it is, or never will
	if !ok {
		return false
	}
	_ = c.nc.SetDeadline(time.Time{})
	if c.ctx.Err() != nil {
		return false // closed meanwhile: the deadline that unblocks the reader was just cleared
	}
	// The connection speaks the lower of the two versions.
	resp := wire.ConnectResponse{ProtocolVersion: min(max(req.ProtocolVersion, 1), wire.ProtocolVersion)}
	err := c.srv.vouchForSessions() // a leader to create the session and keep it alive
	switch {
	case err != nil && !c.srv.cfg.NoReadOnly && c.codec.canBeReadOnly():
		err = c.readOnlySession(&req, &resp)
	case err != nil:
	case !c.caughtUp(req.LastZxidSeen):
		// A new session too: the client's next read must not go back in
		// time, whichever session it is made in.
		err = wire.ErrNotCaughtUp
	case req.SessionID == 0:
		err = c.createSession(&req, &resp)
	default:
		err = c.reattach(&req, &resp)
	}
	if err != nil {
		c.log.Info("refusing session", zap.Int64("session", req.SessionID), zap.Error(err))
		resp = wire.ConnectResponse{ProtocolVersion: resp.ProtocolVersion, Err: wire.CodeOf(err)}
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.HandshakeTimeout))
	if _, werr := c.nc.Write(c.codec.appendConnectResponse(nil, &resp)); werr != nil || err != nil {
		return false
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	_, zk := c.codec.(*zkCodec)
	c.session, c.positions = resp.SessionID, zk || resp.ProtocolVersion >= wire.ShardedWatches
	c.stats.attached(resp.TimeoutMs)
	c.srv.bindSession(c)
	if c.readOnly.Load() {
		return true // its session may be one of its own (readOnlySession)
	}
	// A close applied between the check in reattach and bindSession found
	// no connection to end: look again now that this one is bound.
	var live bool
	c.srv.fsm.read(func(t *tree.Tree) { _, live = t.Session(c.session) })
	if !live {
		return false // the client learns of the expiry when it reattaches
	}
	return true
}

// readOnlySession serves, read-only, a ZooKeeper client that accepts a
// read-only server (canBeReadOnly) on a member that cannot vouch for
// sessions (no leader, or none that hears it), as a ZooKeeper server that
// lost its quorum does in read-only mode. The client reads what this
// member holds, never older than what it has seen; a change of any kind
// is refused with NotReadOnly. Its session is not kept alive meanwhile:
// the leader, on the other side, may expire it. A client without a
// session gets one of this connection's own, which no other member
// knows: ZooKeeper's clients start a real one when they reach a
// read-write member. When this member can vouch again, it drops its
// read-only clients (expiryLoop) so that they move to one.
func (c *conn) readOnlySession(req *wire.ConnectRequest, resp *wire.ConnectResponse) error {
	// (Without a quorum a sharded member cannot catch its shards up, as
	// caughtUp does: the zxid is held to the weaker rule of appliedSeen.)
	if !c.appliedSeen(req.LastZxidSeen) {
		return wire.ErrNotCaughtUp
	}
	timeout := c.srv.sessions.Negotiate(time.Duration(req.TimeoutMs) * time.Millisecond)
	resp.TimeoutMs = int32(timeout / time.Millisecond)
	if req.SessionID == 0 {
		resp.SessionID, resp.Password = c.srv.ids.Next(), make([]byte, 16)
		_, _ = rand.Read(resp.Password)
	} else {
		var s tree.Session
		var ok bool
		c.srv.fsm.read(func(t *tree.Tree) { s, ok = t.Session(req.SessionID) })
		switch {
		case !ok:
			// Unknown here, it may be newer than this member's state: an
			// expiry is final for the client, so it is sent elsewhere.
			return wire.Errorf(wire.CodeNotCaughtUp, "session %#x is not known to this member, which cannot reach a quorum", req.SessionID)
		case subtle.ConstantTimeCompare(s.Password, req.Password) != 1:
			return wire.ErrBadPassword
		}
		resp.SessionID, resp.Password = req.SessionID, req.Password
	}
	c.readOnly.Store(true)
	c.srv.readOnlyConns.Add(1)
	context.AfterFunc(c.ctx, func() { c.srv.readOnlyConns.Add(-1) })
	c.log.Info("serving a client read-only: this member cannot reach a quorum", zap.Int64("session", resp.SessionID))
	return nil
}

func (c *conn) createSession(req *wire.ConnectRequest, resp *wire.ConnectResponse) error {
	timeout := c.srv.sessions.Negotiate(time.Duration(req.TimeoutMs) * time.Millisecond)
	password := make([]byte, 16)
	_, _ = rand.Read(password)
	txn := tree.Txn{
		Type:      tree.TxnCreateSession,
		Time:      time.Now().UnixMilli(),
		Session:   c.srv.ids.Next(),
		TimeoutMs: int32(timeout / time.Millisecond),
		Password:  password,
	}
	if _, err := c.srv.write(c.ctx, &txn); err != nil {
		return err
	}
	resp.SessionID, resp.Password, resp.TimeoutMs = txn.Session, txn.Password, txn.TimeoutMs
	return nil
}

// caughtUp reports whether this member has applied everything the client
// has seen, lastZxidSeen being the highest zxid it saw. A member of one
// shard compares it with its own (appliedSeen). On a sharded cluster the
// zxid is one shard's, and says nothing of where the client was in the
// others (docs/scale-out.md, "Zxids across shards"): the member catches
// every group it runs up with its leader (readIndexAll), so that it holds
// everything any shard committed before the handshake, which is all that
// the client can have seen. A member behind
// waits a little to catch up; if it does not, the client is sent
// elsewhere.
func (c *conn) caughtUp(lastZxidSeen int64) bool {
	if lastZxidSeen <= 0 || c.srv.routingMap() == nil {
		return c.appliedSeen(lastZxidSeen)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	defer cancel()
	return c.srv.readIndexAll(ctx) == nil && lastZxidSeen <= c.srv.maxZxid()
}

// appliedSeen reports whether this member has applied lastZxidSeen, after
// a short wait for its log to catch up. On a sharded cluster the zxid may
// be any shard's: the member's largest over its shards must reach it.
func (c *conn) appliedSeen(lastZxidSeen int64) bool {
	if lastZxidSeen <= c.srv.maxZxid() {
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	err := c.srv.node.WaitApplied(ctx, uint64(lastZxidSeen))
	cancel()
	return err == nil && lastZxidSeen <= c.srv.fsm.lastZxid() || lastZxidSeen <= c.srv.maxZxid()
}

func (c *conn) reattach(req *wire.ConnectRequest, resp *wire.ConnectResponse) error {
	var s tree.Session
	var ok bool
	c.srv.fsm.read(func(t *tree.Tree) { s, ok = t.Session(req.SessionID) })
	if !ok {
		// An expiry is final for the client, so it is told one only when
		// the leader's view says so: a session made on another member
		// just now may not be applied here yet, and its client, whose
		// handshake carries no zxid of that creation, passed caughtUp.
		ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
		err := c.srv.node.ReadIndex(ctx)
		cancel()
		if err != nil {
			return wire.ErrNotCaughtUp // try another member
		}
		c.srv.fsm.read(func(t *tree.Tree) { s, ok = t.Session(req.SessionID) })
	}
	if !ok {
		return wire.ErrSessionExpired
	}
	if subtle.ConstantTimeCompare(s.Password, req.Password) != 1 {
		return wire.ErrBadPassword
	}
	c.srv.heardFrom(s.ID)
	resp.SessionID, resp.Password, resp.TimeoutMs = s.ID, s.Password, s.TimeoutMs
	return nil
}
