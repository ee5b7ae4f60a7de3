package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// lockTurn is the turn of the lock node at p in its lock's queue, as the
// lock index has it now, for a create that asked (wire.Request.TellTurn):
// whether its acquisition holds, or the node it waits for. It is empty
// for a node that is not a lock node, or no longer in its queue.
func (s *Server) lockTurn(p string) wire.LockTurn {
	dir, name := parent(p), p[strings.LastIndexByte(p, '/')+1:]
	var t wire.LockTurn
	g, err := s.groupOfPath(p)
	if err != nil {
		return t
	}
	t.Zxid = g.fsm.readLocks(func(_ *tree.Tree, x *locks.Index) {
		if x.Holds(dir, name) {
			t.Known, t.Holds = true, true
		} else if _, blocker, ok := x.Waiting(dir, name); ok {
			t.Known, t.Blocker = true, blocker
		}
	})
	return t
}

// lockInfos is the locks at or under prefix that ids may read (READ on a
// lock's path, as a getChildren of it needs), as the shards' indexes show
// them, sorted by path. The caller holds the meta group's read lock (t).
func (s *Server) lockInfos(t *tree.Tree, prefix string, ids []wire.Identity) []wire.LockInfo {
	var out []wire.LockInfo
	s.eachShard(t, func(t *tree.Tree, x *locks.Index, serves func(string) bool) {
		out = append(out, indexLockInfos(t, x, prefix, ids, serves)...)
	})
	for i := range out {
		withLeases(t, &out[i])
	}
	slices.SortFunc(out, func(a, b wire.LockInfo) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// lockInfo is the lock at path as its shard's index shows it, if there is
// one.
func (s *Server) lockInfo(path string) (info wire.LockInfo, ok bool) {
	s.readLock(path, func(meta, t *tree.Tree, x *locks.Index) {
		info, ok = x.Info(t, path)
		withLeases(meta, &info)
	})
	return info, ok
}

// readLock runs fn on the tree and lock index of the group that serves the
// lock at path (the meta group's if that group does not run here), under
// its read lock, with the meta group's tree, which knows the leases, under
// its own. The caller holds no group's lock.
func (s *Server) readLock(path string, fn func(meta, t *tree.Tree, x *locks.Index)) {
	s.fsm.readLocks(func(meta *tree.Tree, x *locks.Index) {
		if g, err := s.groupOfPath(path); err == nil && g.id != shardmap.MetaGroup {
			g.fsm.readLocks(func(t *tree.Tree, x *locks.Index) { fn(meta, t, x) })
		} else {
			fn(meta, meta, x)
		}
	})
}

// withLeases gives info's parties their leases as t, the meta group's
// tree, has them: the meta group keeps a lease's deadline, which its
// renewals move; a shard's tree has its first (or knows a lease only as
// the owner of its nodes, if registered there by an older member).
func withLeases(t *tree.Tree, info *wire.LockInfo) {
	for _, parties := range [][]wire.LockParty{info.Holders, info.Waiters} {
		for i := range parties {
			p := &parties[i]
			id := p.Lease
			if id == 0 {
				id = p.Session
			}
			if l, ok := t.Lease(id); ok {
				p.Lease, p.Session, p.Expires = id, l.Parent, l.Expires
			}
		}
	}
}

// indexLockInfos is lockInfos of one group's index (t and x, under its
// read lock), of the locks serves takes (all for nil).
func indexLockInfos(t *tree.Tree, x *locks.Index, prefix string, ids []wire.Identity, serves func(string) bool) []wire.LockInfo {
	var out []wire.LockInfo
	for _, p := range x.Paths(prefix) {
		if (serves == nil || serves(p)) && t.Check(p, ids, wire.PermRead) == nil {
			info, _ := x.Info(t, p)
			out = append(out, info)
		}
	}
	return out
}

// lockHistory is the history of the locks at or under prefix whose paths
// ids may read (READ, as for lockInfos; a lock whose path is gone shows to
// those who could read its parent), oldest first (across shards, by
// time). The caller holds the meta group's read lock (t).
func (s *Server) lockHistory(t *tree.Tree, prefix string, ids []wire.Identity) []wire.LockEvent {
	var out []wire.LockEvent
	s.eachShard(t, func(t *tree.Tree, x *locks.Index, serves func(string) bool) {
		readable := map[string]bool{}
		for _, ev := range x.History(prefix) {
			if serves != nil && !serves(ev.Lock) {
				continue
			}
			ok, seen := readable[ev.Lock]
			if !seen {
				ok = mayReadLock(t, ev.Lock, ids)
				readable[ev.Lock] = ok
			}
			if ok {
				out = append(out, ev)
			}
		}
	})
	if s.routingMap() != nil {
		slices.SortStableFunc(out, func(a, b wire.LockEvent) int { return cmp.Compare(a.Time, b.Time) })
	}
	return out
}

// mayReadLock reports whether ids may read p, or, if p is gone, its nearest
// ancestor that is not.
func mayReadLock(t *tree.Tree, p string, ids []wire.Identity) bool {
	for {
		err := t.Check(p, ids, wire.PermRead)
		if !errors.Is(err, wire.ErrNoNode) || p == "/" {
			return err == nil
		}
		p = path.Dir(p)
	}
}

// deadlocks is the cycles of the wait-for graph whose every lock ids may
// read. The caller holds the fsm's read lock.
func (s *Server) deadlocks(t *tree.Tree, ids []wire.Identity) [][]wire.LockWait {
	waits, hidden := s.waits(t, ids)
	var out [][]wire.LockWait
	for _, c := range locks.Cycles(waits) {
		if !slices.ContainsFunc(c, func(w wire.LockWait) bool { return hidden[w.Lock] }) {
			out = append(out, c)
		}
	}
	return out
}

// waits are the edges of the wait-for graph of every shard's locks, and
// the locks among them that ids may not read (none asked for with ids
// nil). The caller holds the meta group's read lock (t).
func (s *Server) waits(t *tree.Tree, ids []wire.Identity) (waits []wire.LockWait, hidden map[string]bool) {
	hidden = map[string]bool{}
	s.eachShard(t, func(t *tree.Tree, x *locks.Index, serves func(string) bool) {
		for _, w := range x.Waits(t, serves) {
			if ids != nil && t.Check(w.Lock, ids, wire.PermRead) != nil {
				hidden[w.Lock] = true
			}
			waits = append(waits, w)
		}
	})
	return waits, hidden
}

// breakTxn turns txn into the break of the lock req names, asked by ids:
// a multi that deletes every node of each acquisition that holds it now,
// so that the next waiter holds (with a higher token). It needs ADMIN on
// the lock's path, and the deletes DELETE, checked as the txn applies. It
// returns the nodes it deletes; a lock nobody holds is NoNode.
func (s *Server) breakTxn(ids []wire.Identity, req *wire.Request, txn *tree.Txn) ([]string, error) {
	var nodes []string
	var ops, delays []tree.Txn
	g, err := s.groupOfPath(req.Path)
	if err != nil {
		return nil, err
	}
	g.fsm.readLocks(func(t *tree.Tree, x *locks.Index) {
		if err = t.Check(req.Path, ids, wire.PermAdmin); err != nil {
			return
		}
		nodes = x.HolderNodes(req.Path)
		for _, n := range nodes {
			ops = append(ops, tree.Txn{Type: wire.OpDelete, Path: strings.TrimSuffix(req.Path, "/") + "/" + n, Version: -1, Time: txn.Time})
		}
		delays = s.lockDelays(t, x, txnPaths(ops), txn.Time)
	})
	switch {
	case err != nil:
		return nil, err
	case len(nodes) == 0:
		return nil, wire.Errorf(wire.CodeNoNode, "nobody holds %s", req.Path)
	}
	// The lock-delays go first: the deletes' events then find the queue
	// with its delay at the head.
	ops = append(delays, ops...)
	*txn = tree.Txn{Type: wire.OpMulti, Time: txn.Time, Session: txn.Session, Ops: ops, Identities: ids,
		Cause: tree.CauseBreak, Reason: lockq.TrimOwner(req.Reason)} // the history keeps no more of it
	s.log.Warn("breaking a lock", zap.String("lock", req.Path), zap.Strings("nodes", nodes),
		zap.String("reason", req.Reason), zap.Any("by", whoAmI(ids)))
	return nodes, nil
}

// txnPaths lists the paths of ops.
func txnPaths(ops []tree.Txn) []string {
	paths := make([]string, len(ops))
	for i := range ops {
		paths[i] = ops[i].Path
	}
	return paths
}

// endWait ends the wait w, the youngest of a deadlock: one write that
// deletes every node of the waiter's acquisition and rewrites the data of
// the node it watches, so that it looks again and finds its own gone
// (recipes then answer ErrDeadlock), if the lock's queue is still the one
// seen: a check of the lock's cversion fails the write if anything joined
// or left it since, when the waiter may hold by now. The member acts as
// the superuser, as it does to expire a session; the history records the
// end as a deadlock.
func (s *Server) endWait(w wire.LockWait) {
	var txn tree.Txn
	var ok bool
	g, err := s.groupOfPath(w.Lock)
	if err != nil {
		return
	}
	g.fsm.readLocks(func(t *tree.Tree, x *locks.Index) {
		nodes, blocker, waiting := x.Waiting(w.Lock, w.Waiter.Node)
		_, lockStat, err := t.Get(w.Lock)
		if !waiting || err != nil {
			return
		}
		blockerData, blockerStat, err := t.Get(w.Lock + "/" + blocker)
		if err != nil {
			return
		}
		now := time.Now().UnixMilli()
		ops := []tree.Txn{{Type: wire.OpCheck, Path: w.Lock, Version: lockStat.Cversion, Mode: wire.CheckCversion, Time: now}}
		for _, n := range nodes {
			ops = append(ops, tree.Txn{Type: wire.OpDelete, Path: w.Lock + "/" + n, Version: -1, Time: now})
		}
		ops = append(ops, tree.Txn{Type: wire.OpSetData, Path: w.Lock + "/" + blocker, Data: blockerData, Version: blockerStat.Version, Time: now})
		txn = tree.Txn{Type: wire.OpMulti, Time: now, Ops: ops, Cause: tree.CauseDeadlock,
			Identities: []wire.Identity{{Scheme: tree.SuperScheme, ID: fmt.Sprintf("member %d", s.cfg.ID)}}}
		ok = true
	})
	if !ok {
		return
	}
	fields := []zap.Field{zap.String("lock", w.Lock), zap.String("node", w.Waiter.Node),
		zap.String("owner", w.Waiter.Owner), zap.String("holder", w.Waiter.Holder)}
	if _, err := s.write(context.Background(), &txn); err != nil {
		// The queue changed since the cycle was seen, or no quorum: the
		// next look finds the cycle again if it is still there.
		s.log.Info("could not end the youngest wait of a deadlock", append(fields, zap.Error(err))...)
		return
	}
	s.log.Warn("ended the youngest wait of a deadlock", fields...)
}
