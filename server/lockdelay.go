package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// Lock-delay (Chubby's): a holder may ask, in its lock node's record
// (lockq.Record.DelayMs), that if it is lost without releasing (its
// session or lease expires, or the lock is broken), nobody holds the lock
// for a while, so that a resource that cannot check fencing tokens sees
// the lost holder's last requests drain before the next holder's begin.
// The member that ends the hold puts a node of kind lockq.Delay at the
// head of the lock's queue: a TTL node, which sorts before every other
// node and excludes every mode, and which the leader reaps once the delay
// has passed (within a second after, the reaper's period). Waiters wait
// for it as for a holder: the Go recipes, the HTTP API and the server's
// views alike. A release hands over at once.

// lockDelayOwner is the owner the lock views show for a lock-delay.
const lockDelayOwner = "lock-delay"

// lockDelays returns the ops that put the lock-delays the loss of the
// nodes at paths calls for: for each node that holds its lock and asked
// for a delay, unless that lock has one for it already (a close or a break
// tried again), the delay's create and a rewrite of the lost node's data.
// A delay goes before a holder, which nothing else in a queue does (see
// lockq's priorities), and a waiter that watches the holder may take the
// holder's delete as its turn without listing the queue again (package
// recipes): the rewrite, in the same txn as the create and before any
// delete of the node, sends it to list again, where it finds the delay.
// Each op acts as the member itself. The caller holds the fsm's read lock.
func (s *Server) lockDelays(t *tree.Tree, x *locks.Index, paths []string, now int64) []tree.Txn {
	var ops []tree.Txn
	for _, p := range paths {
		i := strings.LastIndexByte(p, '/')
		dir, name := p[:i], p[i+1:]
		if dir == "" {
			dir = "/"
		}
		data, _, err := t.Get(p)
		rec := lockq.DecodeRecord(data)
		if err != nil || rec.DelayMs <= 0 || !slices.Contains(x.HolderNodes(dir), name) || hasDelayFor(t, dir, name) {
			continue
		}
		acl, _, _ := t.ACL(dir) // the delay reads as its lock does
		member := []wire.Identity{{Scheme: tree.SuperScheme, ID: fmt.Sprintf("member %d", s.cfg.ID)}}
		ops = append(ops, tree.Txn{
			Type: wire.OpCreate, Time: now, Path: strings.TrimSuffix(dir, "/") + "/" + lockq.Prefix(randomHex(8), lockq.Delay),
			Mode: wire.ModePersistentSequentialWithTTL, TTL: rec.DelayMs, ACL: acl,
			Data: lockq.Record{Owner: lockDelayOwner, Holder: name}.Encode(), Identities: member,
		}, tree.Txn{Type: wire.OpSetData, Time: now, Path: p, Data: data, Version: -1, Identities: member})
	}
	return ops
}

// hasDelayFor reports whether the lock at dir has a lock-delay for the
// loss of its node name.
func hasDelayFor(t *tree.Tree, dir, name string) bool {
	names, _, _ := t.Children(dir)
	for _, n := range names {
		if e, ok := lockq.Parse(n); ok && e.Kind == lockq.Delay {
			data, _, _ := t.Get(strings.TrimSuffix(dir, "/") + "/" + n)
			if lockq.DecodeRecord(data).Holder == name {
				return true
			}
		}
	}
	return false
}

// delayBeforeClose writes the lock-delays that the close of session id
// calls for (its nodes', and those of the leases that end with it),
// before the leader, in term, proposes the close: they must hold the
// locks before its nodes go. It reports whether the close may go ahead.
func (s *Server) delayBeforeClose(id int64, now time.Time, term uint64) bool {
	var ops []tree.Txn
	s.fsm.readLocks(func(t *tree.Tree, x *locks.Index) {
		nodes := t.Ephemerals(id)
		for _, lease := range t.Leases(id) {
			nodes = append(nodes, t.Ephemerals(lease)...)
		}
		ops = s.lockDelays(t, x, nodes, now.UnixMilli())
	})
	if len(ops) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	// A renewal of a lease that commits between the two finds its node
	// behind the delay, and the close then fails at the lease's old
	// version: the holder holds again once the delay is reaped, and nobody
	// held meanwhile.
	txn := tree.Txn{Type: wire.OpMulti, Time: now.UnixMilli(), Session: id, Ops: ops, Cause: tree.CauseLockDelay}
	// As the close: only while this member leads in term, never forwarded
	// to a leader that may have given the session a new timeout.
	if err := s.proposeDelays(ctx, s.metaGroup, &txn, term); err != nil {
		s.log.Info("could not put the lock-delays of an expired session; the close waits", zap.Int64("session", id), zap.Error(err))
		return false
	}
	return true
}

// proposeDelays proposes txn, the lock-delays of a session that ends,
// to group g while this member leads it in term, and counts the quota
// limits they went over: hard limits let them through (tree.Cause), so
// that a full quota over a lock cannot hold the close back for good.
func (s *Server) proposeDelays(ctx context.Context, g *group, txn *tree.Txn, term uint64) error {
	o := g.node.ProposeAsLeader(ctx, tree.AppendTxn(nil, txn), term).Wait(ctx)
	if o.Err != nil {
		return o.Err
	}
	res := o.Result.(*tree.Result)
	s.quotas.note(s.log, res.Quota, txn.Session)
	return res.Err
}
