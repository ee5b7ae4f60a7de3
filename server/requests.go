package server

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// propose validates a write request and proposes its txn; the outcome is
// awaited in order by respond.
func (c *conn) propose(r *request) {
	if err := c.admitWrite(r); err != nil {
		r.err = err
		return
	}
	ids := c.identities()
	if err := c.srv.resolveACLs(&r.req, ids); err != nil {
		r.err = err
		return
	}
	txn := tree.TxnFromRequest(&r.req, c.session, time.Now().UnixMilli(), ids)
	if err := c.srv.leaseTxn(c.session, &r.req, &txn); err != nil {
		r.err = err
		return
	}
	if r.req.Op == wire.OpLockBreak {
		if r.broken, r.err = c.srv.breakTxn(ids, &r.req, &txn); r.err != nil {
			return
		}
	}
	if op := r.req.Op; op == wire.OpLeaseCreate || op == wire.OpLeaseRenew {
		r.lease = txn.Session // the lease it makes or keeps
	}
	if r.req.Op == wire.OpLeaseRenew {
		r.proposal = c.srv.renewals.renew(txn.Session, txn.LeaseTTL)
		c.renewed = true
		return
	}
	if c.renewed {
		// A renewal of ours may still wait for its batch: it goes first.
		c.srv.renewals.flush()
		c.renewed = false
	}
	g, err := c.srv.groupFor(&r.req)
	if err == nil && g.id != shardmap.MetaGroup {
		ctx, cancel := context.WithDeadline(c.ctx, r.start.Add(c.srv.cfg.RequestTimeout))
		err = c.srv.prepare(ctx, g, &txn)
		cancel()
	}
	if err != nil {
		r.err = err
		return
	}
	r.proposal, r.group = g.node.Propose(c.ctx, tree.AppendTxn(nil, &txn)), g
}

// pendingWrite is a write handed to raft, alone (*raftnode.Proposal) or
// in a batch (*renewal), whose outcome its connection waits for.
type pendingWrite interface {
	Wait(ctx context.Context) raftnode.Outcome
}

// respond answers the requests in order.
func (c *conn) respond() {
	for r := range c.replies {
		c.waitForRoom()
		reply := wire.Reply{Xid: r.req.Xid}
		switch {
		case r.refuseConn:
			c.closeRefused(r)
		case !c.linearized(r) || !c.answerReadAfterReplay(r, &reply):
			c.answer(r, &reply)
			c.applied(r)
			c.reply(r, &reply)
		}
		ends := r.req.Op == wire.OpClose || r.endConn || r.refuseConn
		if ends {
			// Before execute hears of the answer: it must propose nothing
			// the client sent after a request that ends the connection (a
			// failed login), as ZooKeeper stops reading then.
			c.cancel()
		}
		if r.answered != nil {
			close(r.answered)
		}
		c.finished(r)
		switch {
		case ends:
		case r.req.Op.IsWrite() && outcomeUnknown(r.outcome):
			// Later writes of this connection may already be proposed and
			// could now apply before this one: end the connection, so the
			// client treats them all as unknown (ZooKeeper's rule).
			c.goodbye(wire.CodeConnectionLoss)
			c.cancel()
		}
	}
}

// restoreSoFar is the restore that setWatches2 frame req continues or ends:
// the frames gathered before it (c.restoring) and req's own watches, from
// the lowest relative zxid of them. Without frames before, it is req.
func (c *conn) restoreSoFar(req *wire.Request) *wire.Request {
	g := c.restoring
	if g == nil {
		return req
	}
	r := *req
	r.RelativeZxid = min(g.RelativeZxid, req.RelativeZxid)
	r.WatchZxids = nil
	if before, ok := watchZxids(g); ok {
		if now, ok := watchZxids(req); ok {
			for i := range before {
				r.WatchZxids = append(append(r.WatchZxids, before[i]...), now[i]...)
			}
		}
	}
	r.WatchPositions = nil
	if len(g.WatchPositions)+len(req.WatchPositions) > 0 {
		before, now := lastingPositions(g), lastingPositions(req)
		r.WatchPositions = slices.Concat(before[0], now[0], before[1], now[1])
	}
	r.DataWatches = append(slices.Clip(g.DataWatches), req.DataWatches...)
	r.ExistWatches = append(slices.Clip(g.ExistWatches), req.ExistWatches...)
	r.ChildWatches = append(slices.Clip(g.ChildWatches), req.ChildWatches...)
	r.PersistentWatches = append(slices.Clip(g.PersistentWatches), req.PersistentWatches...)
	r.RecursiveWatches = append(slices.Clip(g.RecursiveWatches), req.RecursiveWatches...)
	return &r
}

// watchZxids splits the WatchZxids of a setWatches2 by the watch lists
// they go with (data, exist, child, persistent, recursive), if it names
// one for each watch.
func watchZxids(r *wire.Request) (lists [5][]int64, ok bool) {
	z := r.WatchZxids
	if len(z) != watchCount(r) {
		return lists, false
	}
	for i, l := range [][]string{r.DataWatches, r.ExistWatches, r.ChildWatches, r.PersistentWatches, r.RecursiveWatches} {
		lists[i], z = z[:len(l):len(l)], z[len(l):]
	}
	return lists, true
}

// lastingPositions splits the WatchPositions of a setWatches2 by the
// watch lists they go with (persistent, recursive), one entry per watch.
func lastingPositions(r *wire.Request) (lists [2][][]int64) {
	ps := r.WatchPositions
	for i, l := range [][]string{r.PersistentWatches, r.RecursiveWatches} {
		lists[i] = make([][]int64, len(l))
		n := copy(lists[i], ps)
		ps = ps[n:]
	}
	return lists
}

// changesState reports whether op changes what the cluster holds, which a
// read-only member refuses (ZooKeeper's NOTREADONLY): every write, sync
// (it needs the leader) and the membership changes. A close is let
// through: on a read-only connection it ends only the connection.
func changesState(op wire.Op) bool {
	return op.IsLogged() && op != wire.OpClose || op == wire.OpSync
}

// linearize asks raft for the read index of r if it is a linearizable
// read: as it arrives, so that the reads a client pipelines share a round
// (raftnode.Node.ReadIndex), and the responder waits for it in linearized.
func (c *conn) linearize(r *request) {
	if !r.req.Linearizable || r.req.Op.Class() != wire.ClassRead {
		return
	}
	r.linearized = make(chan error, 1)
	go func() {
		ctx, cancel := context.WithDeadline(c.ctx, r.start.Add(c.srv.cfg.RequestTimeout))
		defer cancel()
		r.linearized <- c.srv.readIndexOf(ctx, &r.req)
	}()
}

// linearized waits until this member has applied everything committed
// before the linearizable read r arrived, and reports true; a read that
// cannot be served so gets its error, in r.err, and false. Any other
// request passes at once.
func (c *conn) linearized(r *request) bool {
	if r.linearized == nil || r.err != nil {
		return true
	}
	if err := <-r.linearized; err != nil {
		r.err = err
		return false
	}
	return true
}

// closeRefused answers r, a request no reply can answer, with the closing
// frame: the connection ends.
func (c *conn) closeRefused(r *request) {
	c.log.Info("closing connection: request refused", zap.Error(r.err))
	c.srv.metrics.observe(c.codec.opName(r), wire.CodeOf(r.err), time.Since(r.start))
	c.goodbye(wire.CodeOf(r.err))
}

// reply counts a request and queues its reply.
func (c *conn) reply(r *request, reply *wire.Reply) {
	name, took := c.codec.opName(r), time.Since(r.start)
	c.srv.metrics.observe(name, reply.Err, took)
	if reply.Err == wire.CodeNoAuth {
		c.srv.metrics.noAuth.Inc()
	}
	c.stats.answered(c.srv, name, r.req.Xid, reply.Zxid, took)
	if r.req.Op.Class() == wire.ClassRead {
		c.srv.stats.reads.Add(1)
	}
	c.send(r, reply)
}

// answerRead answers a read or a watch op (wire.ClassRead, wire.ClassWatch),
// a batch of reads (multiRead) or a check of a watch: the reply is queued
// under the same read lock as the read, so that no notification of a later
// change can overtake it. It reports false for any other request.
func (c *conn) answerRead(r *request, reply *wire.Reply) bool {
	req := &r.req
	switch {
	case r.err != nil:
		return false
	case r.batch && c.srv.routingMap() != nil:
		reply.Zxid, r.mixedZxid = c.srv.maxZxid(), true
		r.batchReplies = c.readRoutedBatch(req.Ops)
		c.reply(r, reply)
	case r.batch:
		c.srv.fsm.read(func(t *tree.Tree) {
			reply.Zxid = c.srv.fsm.zxid
			r.batchReplies = c.readBatch(t, req.Ops)
			c.reply(r, reply)
		})
	case r.keepWatches:
		c.srv.fsm.read(func(*tree.Tree) {
			reply.Zxid = c.srv.fsm.zxid
			reply.Err = wire.CodeOf(c.srv.removeWatches(c, req, false))
			c.reply(r, reply)
		})
	case req.Op == wire.OpSetWatches, req.Op == wire.OpSetWatches2:
		c.srv.fsm.read(func(t *tree.Tree) {
			var err error
			reply.Zxid, err = c.setWatches(t, req)
			reply.Err = wire.CodeOf(err)
			c.reply(r, reply)
		})
	case req.Op.Class() == wire.ClassRead, req.Op.Class() == wire.ClassWatch:
		g, err := c.srv.groupFor(req)
		if err != nil {
			reply.Err, reply.Zxid = wire.CodeOf(err), c.srv.fsm.lastZxid()
			c.reply(r, reply)
			return true
		}
		if req.Op == wire.OpAddWatch && c.srv.spans(req.Path, req.AddWatchMode == wire.AddWatchPersistentRecursive) {
			// Set a shard at a time from the meta group's read lock
			// (addSpanningWatch), whichever shard holds the node.
			g = c.srv.metaGroup
		}
		r.group = g
		g.fsm.read(func(t *tree.Tree) {
			reply.Zxid = g.fsm.zxid
			c.srv.read(t, c, req, reply)
			c.reply(r, reply)
		})
	default:
		return false
	}
	return true
}

// answer answers a request answerRead does not: a write once its outcome
// is known, a session or admin op, or a request refused before it ran.
func (c *conn) answer(r *request, reply *wire.Reply) {
	switch op := r.req.Op; {
	case r.err != nil:
		reply.Err, reply.Zxid = wire.CodeOf(r.err), c.srv.fsm.lastZxid()
	case op.IsWrite():
		c.finishWrite(r, reply)
	case op.Class() == wire.ClassSession:
		c.answerSession(r, reply)
	case op.Class() == wire.ClassAdmin:
		c.srv.admin(c, &r.req, reply)
		reply.Zxid = c.srv.fsm.lastZxid()
	default:
		reply.Err, reply.Zxid = wire.CodeUnimplemented, c.srv.fsm.lastZxid()
	}
}

// answerSession answers the ops of the session and its connection
// (wire.ClassSession).
func (c *conn) answerSession(r *request, reply *wire.Reply) {
	req := &r.req
	switch req.Op {
	case wire.OpPing:
		if err := c.srv.vouchForSessions(); err != nil && !c.readOnly.Load() {
			// The session's deadline is kept by a leader this member
			// cannot reach: a ping answered here would keep the client
			// believing in a session that may be expiring. The client
			// moves on.
			reply.Err = wire.CodeOf(err)
		}
		reply.Zxid = c.srv.fsm.lastZxid()
	case wire.OpAuth:
		var err error
		if r.sasl {
			reply.Data, err = c.saslStep(req.AuthData)
		} else {
			err = c.authenticate(req.AuthScheme, req.AuthData)
		}
		if _, closes := c.codec.(authFailureCloser); err != nil && closes {
			r.endConn = true
		}
		reply.Err, reply.Zxid = wire.CodeOf(err), c.srv.fsm.lastZxid()
	case wire.OpWhoAmI:
		reply.Identities, reply.Zxid = whoAmI(c.identities()), c.srv.fsm.lastZxid()
	case wire.OpSync:
		ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.RequestTimeout)
		err := c.srv.readIndexOf(ctx, req)
		cancel()
		reply.Err, reply.Zxid, reply.Path = wire.CodeOf(err), c.srv.fsm.lastZxid(), req.Path
	case wire.OpClose:
		c.closingSession.Store(true)
		if c.readOnly.Load() {
			// Nothing to end but the connection: a read-only member
			// cannot close a session, which expires on its own.
			reply.Zxid = c.srv.fsm.lastZxid()
			return
		}
		_, err := c.srv.write(c.ctx, &tree.Txn{Type: tree.TxnCloseSession, Session: c.session, Time: time.Now().UnixMilli()})
		reply.Err, reply.Zxid = wire.CodeOf(err), c.srv.fsm.lastZxid()
	default:
		reply.Err, reply.Zxid = wire.CodeUnimplemented, c.srv.fsm.lastZxid()
	}
}

func (c *conn) finishWrite(r *request, reply *wire.Reply) {
	ctx, cancel := context.WithDeadline(c.ctx, r.start.Add(c.srv.cfg.RequestTimeout))
	defer cancel()
	o := r.proposal.Wait(ctx)
	r.outcome = o.Err
	if o.Err != nil {
		g := cmp.Or(r.group, c.srv.metaGroup)
		reply.Err, reply.Zxid = wire.CodeOf(c.srv.writeErrorIn(g, o.Err)), g.fsm.lastZxid()
		return
	}
	res := o.Result.(*tree.Result)
	c.srv.quotas.note(c.srv.log, res.Quota, c.session)
	if r.req.Op == wire.OpLeaseClose && res.Err == nil {
		// As a session's close (Server.write): its nodes in the other
		// shards are gone when the close answers; but for two election
		// timeouts at most, as the connection's later answers wait behind
		// it (a shard that cannot end them yet ends them later).
		wctx, cancel := context.WithTimeout(ctx, c.srv.contactTimeout())
		c.srv.awaitEndedInShards(wctx, append([]int64{r.req.Lease}, res.Closed...))
		cancel()
	}
	reply.Zxid = int64(o.Index)
	reply.Err = wire.CodeOf(leaseError(&r.req, res.Err))
	reply.Path, reply.Stat, reply.Results = res.Path, res.Stat, res.Multi
	if r.req.Op == wire.OpCreate && r.req.TellTurn && res.Err == nil {
		reply.Turn = c.srv.lockTurn(res.Path)
	}
	if r.req.Op == wire.OpLockBreak && res.Err == nil {
		reply.Children = r.broken
		c.srv.lockMetrics.breaks.Inc()
	}
	if res.Lease.Version > 0 {
		reply.Lease = wire.Lease{ID: r.lease, TTLMs: res.Lease.TTLMs, Expires: res.Lease.Expires, Version: res.Lease.Version, MaxUntil: res.Lease.MaxUntil}
		if r.req.Op == wire.OpLeaseRenew && r.req.Path != "" {
			reply.Lease.Node = c.srv.leaseNode(r.lease, r.req.Path)
		}
	}
}

// writeError maps a raftnode or context error to the protocol error the
// client sees. A write that timed out while this member knows no leader
// could not reach a quorum.
func (s *Server) writeError(err error) error { return s.writeErrorIn(s.metaGroup, err) }

// writeErrorIn is writeError of a write to group g.
func (s *Server) writeErrorIn(g *group, err error) error {
	noLeader := g.node.Leader() == 0
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raftnode.ErrProposalDropped):
		return wire.ErrNoQuorum
	case errors.Is(err, raftnode.ErrBadConfChange):
		return wire.Errorf(wire.CodeBadArguments, "%v", err)
	case errors.Is(err, raftnode.ErrUncommittedFull):
		return s.limits.refuse(s.log, limitUncommitted, wire.CodeThrottled,
			"the member's proposals not yet committed are over their share (an eighth of --memory-budget, %d bytes)", s.memory.uncommitted())
	case errors.Is(err, raftnode.ErrStopped):
		return wire.ErrShuttingDown
	case errors.Is(err, raftnode.ErrRemoved):
		return wire.Errorf(wire.CodeShuttingDown, "this member was removed from the cluster")
	case errors.Is(err, raftnode.ErrLeaderChanged) && noLeader:
		return wire.Errorf(wire.CodeNoQuorum, "lost the leader before the write committed: it may or may not be applied")
	case errors.Is(err, raftnode.ErrLeaderChanged):
		return wire.Errorf(wire.CodeOperationTimeout, "the leader changed before the write committed: it may or may not be applied")
	case errors.Is(err, context.DeadlineExceeded) && noLeader:
		return wire.ErrNoQuorum
	case errors.Is(err, context.DeadlineExceeded):
		return wire.ErrOperationTimeout
	case errors.Is(err, context.Canceled):
		return wire.ErrConnectionLoss
	}
	return err
}

// read serves a read request from the local tree t (the caller holds the
// fsm's read lock), leaving its watch. A read of a node needs READ on it;
// getACL needs READ or ADMIN, and shows digest ids masked without ADMIN.
func (s *Server) read(t *tree.Tree, c *conn, req *wire.Request, reply *wire.Reply) {
	var err error
	ids := c.identities()
	switch req.Op {
	case wire.OpGetData:
		if err = t.Check(req.Path, ids, wire.PermRead); err == nil {
			reply.Data, reply.Stat, err = t.Get(req.Path)
		}
		if err == nil && req.Watch {
			err = s.addDataWatch(req, c)
		}
	case wire.OpExists:
		// A missing node has no ACL: NoNode, and the watch waits for it.
		if err = t.Check(req.Path, ids, wire.PermRead); err == nil || errors.Is(err, wire.ErrNoNode) {
			reply.Stat, err = t.Exists(req.Path)
			if req.Watch && (err == nil || errors.Is(err, wire.ErrNoNode)) {
				if werr := s.addDataWatch(req, c); werr != nil {
					err = werr
				}
			}
		}
	case wire.OpGetChildren:
		if err = t.Check(req.Path, ids, wire.PermRead); err == nil {
			reply.Children, reply.Stat, err = s.children(t, c, req.Path)
		}
		if err == nil && req.Watch {
			err = s.addWatch(watchChild, req.Path, c)
		}
	case wire.OpGetACL:
		if err = t.Check(req.Path, ids, wire.PermRead|wire.PermAdmin); err == nil {
			reply.ACL, reply.Stat, err = t.ACL(req.Path)
			if err == nil && t.Check(req.Path, ids, wire.PermAdmin) != nil {
				reply.ACL = maskDigests(reply.ACL)
			}
		}
	case wire.OpAddWatch:
		kind := watchPersistent
		switch req.AddWatchMode {
		case wire.AddWatchPersistent:
		case wire.AddWatchPersistentRecursive:
			kind = watchRecursive
		default:
			err = wire.Errorf(wire.CodeBadArguments, "unknown watch mode %d", req.AddWatchMode)
		}
		if err == nil {
			err = wire.ValidatePath(req.Path, false)
		}
		// The node's events are checked against the watcher's READ as
		// they fire; a node that exists is checked now too, in its shard
		// (t is the meta group's for a watch over several shards).
		check := func(t *tree.Tree) {
			if err = t.Check(req.Path, ids, wire.PermRead); errors.Is(err, wire.ErrNoNode) {
				err = nil
			}
		}
		switch {
		case err != nil:
		case s.spans(req.Path, kind == watchRecursive):
			if e := s.inShardOf(t, req.Path, check); e != nil {
				err = e
			}
		default:
			check(t)
		}
		if err == nil {
			err = s.addLastingWatch(kind, req, c, reply)
		}
	case wire.OpRemoveWatches:
		err = s.removeWatches(c, req, true)
	case wire.OpGetEphemerals:
		// The prefix is matched as a string, not as a subtree ("/app"
		// matches "/app2/x"): ZooKeeper's rule, for both protocols. What a
		// prefix may be is each protocol's, checked as it was decoded.
		reply.Children = s.ephemerals(t, c.session, req.Path)
		err = s.checkListing(c, reply.Children)
	case wire.OpGetAllChildrenNumber:
		if err = t.Check(req.Path, ids, wire.PermRead); err == nil {
			var n int
			if s.isMergedListing(req.Path) {
				n, err = s.mergedDescendants(t, req.Path)
			} else {
				n, err = t.Descendants(req.Path)
			}
			reply.Descendants = int32(min(n, math.MaxInt32))
		}
	case wire.OpLocks:
		reply.Locks = s.lockInfos(t, req.Path, ids)
	case wire.OpDeadlocks:
		reply.Deadlocks = s.deadlocks(t, ids)
	case wire.OpLockHistory:
		reply.LockHistory = s.lockHistory(t, req.Path, ids)
	}
	if err != nil {
		reply.Data, reply.Children = nil, nil
	}
	reply.Err = wire.CodeOf(err)
	if hc := (*historyCompactedError)(nil); errors.As(err, &hc) {
		reply.OldestZxid = hc.oldest
	}
}

// setWatches restores a reconnected client's watches (setWatches and
// setWatches2). One-shot watches follow ZooKeeper's rules: what changed
// after the client's last seen zxid fires at once, the rest is registered.
// Persistent and recursive watches are registered and get the events they
// missed (see restoreLasting). The caller holds the fsm's read lock. It
// returns the zxid it saw, and an error, having set no watch, when the
// connection could not hold them all.
//
// The frames of one restore that say MoreWatches are only kept, and
// restored with the last frame, all at once: a watch restored by an
// earlier frame would otherwise see live an event that a later frame's
// replay sends again.
func (c *conn) setWatches(t *tree.Tree, req *wire.Request) (int64, error) {
	zxid := c.srv.fsm.zxid
	if req.Op == wire.OpSetWatches2 && c.restoreRefused != nil {
		// A restore refused in an earlier frame is refused whole: the
		// client ends its lasting watches rather than keep some.
		err := c.restoreRefused
		if !req.MoreWatches {
			c.restoreRefused = nil
		}
		return zxid, err
	}
	if req.Op == wire.OpSetWatches2 {
		req = c.restoreSoFar(req)
		c.restoring = nil
		if req.MoreWatches {
			if err := c.srv.roomForWatches(c, watchCount(req)); err != nil {
				c.restoreRefused = err
				return zxid, err
			}
			c.restoring = req
			return zxid, nil
		}
	}
	rel := req.RelativeZxid
	if err := c.srv.roomForWatches(c, watchCount(req)); err != nil {
		return zxid, err
	}
	if c.srv.routingMap() != nil {
		// The client's zxid may be any shard's, and a shard's zxids are
		// not comparable with another's: each watch is restored from
		// where its client says it was in its shard (docs/scale-out.md,
		// "Zxids across shards").
		since, perWatch := watchZxids(req)
		c.restoreSharded(t, req, since, perWatch, zxid)
		return zxid, nil
	}
	// The replayed events are older than the catch-up events below, which
	// carry zxid: they go first, so that events arrive in zxid order. What
	// preReplay sent already is not sent again.
	if err := c.replayed.err; err != nil {
		c.log.Error("replaying the watch history failed", zap.Error(err))
		c.srv.watches.lost(c, zxid, c.srv.watches.history.oldestZxid(), req.PersistentWatches, req.RecursiveWatches)
	} else {
		c.srv.watches.restoreLasting(c, c.srv.fsm.history, max(rel, c.replayed.to), zxid, req.PersistentWatches, req.RecursiveWatches)
	}
	for _, restore := range c.oneShotRestores(req, func(int, int) int64 { return rel })[shardmap.MetaGroup] {
		restore(t, c.srv.metaGroup)
	}
	return zxid, nil
}

// historyOf is the group whose watch history holds every event a lasting
// watch of path sees (recursive: of path and below), and that history:
// the meta group's on a cluster of one shard, else the history of the
// shard that serves path, if the watch sees no other shard's nodes (it
// is not the root's, and has no partitioned parent at or, recursive, below
// it, whose children the shards share). Its history is nil otherwise, or
// if the group runs without one.
func (s *Server) historyOf(path string, recursive bool) (*group, *watchHistory) {
	if s.routingMap() == nil {
		return s.metaGroup, s.fsm.history
	}
	if s.spans(path, recursive) {
		return nil, nil
	}
	g, err := s.groupOfPath(path)
	if err != nil || g.fsm.history == nil {
		return nil, nil
	}
	return g, g.fsm.history
}

// watchCount is the number of watches a setWatches asks for.
func watchCount(req *wire.Request) int {
	return len(req.DataWatches) + len(req.ExistWatches) + len(req.ChildWatches) + len(req.PersistentWatches) + len(req.RecursiveWatches)
}

// outcomeUnknown reports whether a write failed without the server knowing
// whether it will be applied: its wait timed out, or the leader changed.
func outcomeUnknown(err error) bool {
	return errors.Is(err, raftnode.ErrLeaderChanged) || errors.Is(err, context.DeadlineExceeded)
}
