package server

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// fsm is the replicated state machine: the tree, applied on raftnode's
// apply goroutine. mu makes a read and its watch registration one step with
// respect to apply: Apply holds it for writing while it changes the tree and
// queues the watch notifications; readers hold it for reading.
type fsm struct {
	log     *zap.Logger
	watches *watchRegistry
	// history records the events of every applied txn (nil: none, for
	// tests of the fsm alone).
	history  *watchHistory
	sessions *session.Table
	maxData  int
	// historyLimit is how many events the lock history keeps.
	historyLimit int

	// onClosing is told, under mu, before a session's close applies, of
	// the session and its leases and how their holds end (a shard ends
	// them after this tree shows them gone, as it says).
	onClosing func(ids []int64, how closeHow)
	// onClose is told, outside mu, of each session whose close was applied,
	// so the server can drop its connection.
	onClose func(id int64)
	// onRestore is told, outside mu, that a snapshot replaced the tree.
	onRestore func()
	// onLeaseExpired is told, outside mu, of each lease its expiry closed.
	onLeaseExpired func()
	// onRenewal is told, outside mu, of each renewal of a lease: how late
	// it came (ms; negative when early) after it was due, a third of the
	// lease's TTL after the one before.
	onRenewal func(lateMs int64)
	// lockChanged wakes what waits on a lock's queue (pathWatch).
	lockChanged func(paths []string)
	// nodeChanged wakes what waits on the nodes an applied txn changed
	// (the server's nodeWatch).
	nodeChanged func(events []tree.Event)
	// onMapChanged is told, outside mu, that the tree's partition map
	// changed (the meta group's routes the requests).
	onMapChanged func()
	// onSplit is told, on the apply goroutine and under mu, of each split
	// the fsm applied, at index, with a writer of the state as the split
	// left it (Snapshot's): the new group's seed (groups.go). Under mu, so
	// that whoever reads the map the split made finds its seed already
	// queued, and does not start the new group empty.
	onSplit func(sp shardmap.SplitSpec, index uint64, write func(io.Writer) error)

	group uint64 // the raft group whose state the fsm is (tree.WithGroup)

	mu    sync.RWMutex
	tree  *tree.Tree   // mu guards tree, locks and zxid
	locks *locks.Index // every lock of the tree
	zxid  int64        // the index of the last txn applied
}

func newFSM(log *zap.Logger, watches *watchRegistry, sessions *session.Table, maxData, historyLimit int, group uint64) *fsm {
	x := locks.New()
	x.SetHistoryLimit(historyLimit)
	return &fsm{
		log: log, watches: watches, sessions: sessions, maxData: maxData, historyLimit: historyLimit, group: group,
		tree: tree.New(tree.WithMaxDataSize(maxData), tree.WithGroup(group)), locks: x,
	}
}

// Apply decodes and applies one txn. It returns a *tree.Result.
func (f *fsm) Apply(index uint64, payload []byte) any {
	txn, err := tree.DecodeTxn(payload)
	if err != nil {
		// Every replica refuses the same bytes the same way.
		f.log.Error("refusing a malformed txn", zap.Uint64("index", index), zap.Error(err))
		return &tree.Result{Err: wire.ErrMalformed}
	}
	if txn.Type == tree.TxnSetConfig {
		txn.Data = stampVersion(txn.Data, index) // zkconfig.go
	}
	zxid := int64(index)
	f.mu.Lock()
	renewals := renewalsOf(&txn)
	due := make([]int64, len(renewals)) // each renewal's: when it was due (0: unknown)
	for i, r := range renewals {
		if l, ok := f.tree.Lease(r.Session); ok {
			due[i] = l.Expires - l.TTLMs + l.TTLMs/3
		}
	}
	cause := locks.CauseOf(f.tree, &txn)
	if txn.Type == tree.TxnCloseSession && f.onClosing != nil {
		// Before the close is seen (a shard's sweep reads this tree).
		how := closeHow{end: cause.End, expired: txn.Cause == tree.CauseExpiry}
		f.onClosing(append([]int64{txn.Session}, f.tree.Leases(txn.Session)...), how)
	}
	res, events := f.tree.Apply(zxid, &txn)
	f.zxid = zxid
	changed := f.locks.Apply(f.tree, zxid, txn.Time, cause, events)
	switch m, ok := f.tree.ShardMap(); {
	case txn.Type == tree.TxnStub:
		// The ancestors a shard's nodes need, which the meta group has:
		// what the cluster's clients see (the meta group's node, a merged
		// listing) does not change.
		events = nil
	case ok && len(m.Shards) > 1:
		events = slices.DeleteFunc(slices.Clone(events), func(ev tree.Event) bool { return !f.tree.ServesEvent(ev) })
	}
	if f.history != nil {
		f.history.record(zxid, txn.Time, events)
	}
	f.watches.trigger(f.group, events, zxid, f.locks.Holds) // the turns in this group's lock index
	if txn.Type == tree.TxnSplit && res.Err == nil {
		// The new group starts from the state as the split left it; then
		// this group drops what it no longer serves.
		if f.onSplit != nil {
			seed, err := f.Snapshot()
			f.split(&txn, index, seed, err)
		}
		f.prune(index)
	}
	f.mu.Unlock()
	if len(changed) > 0 && f.lockChanged != nil {
		f.lockChanged(changed)
	}
	if f.nodeChanged != nil {
		f.nodeChanged(events)
	}

	if (txn.Type == tree.TxnSplit || txn.Type == tree.TxnSetShardMap) && res.Err == nil && f.onMapChanged != nil {
		f.onMapChanged()
	}

	switch {
	case txn.Type == tree.TxnRenewLease:
		f.leaseKept(txn.Session, &res, due[0], txn.Time)
	case txn.Type == tree.TxnRenewLeases:
		for i := range res.Renewals {
			f.leaseKept(txn.Ops[i].Session, &res.Renewals[i], due[i], txn.Time)
		}
	case txn.Type == tree.TxnCreateSession && res.Err == nil && res.Lease.Version > 0:
		f.leaseKept(txn.Session, &res, 0, txn.Time)
	case txn.Type == tree.TxnCreateSession && res.Err == nil:
		f.sessions.Add(txn.Session, time.Duration(txn.TimeoutMs)*time.Millisecond, time.Now())
	case txn.Type == tree.TxnCloseSession && !errors.Is(res.Err, wire.ErrBadVersion):
		// Also when the close failed (the session was gone already): the
		// leader must stop proposing it. A lease renewed after its close
		// was decided stays; the leases of a closed session go with it.
		f.sessions.Remove(txn.Session)
		for _, l := range res.Closed {
			f.sessions.Remove(l)
		}
		if res.Err == nil && f.onClose != nil {
			f.onClose(txn.Session)
		}
		if res.Err == nil && txn.LeaseVersion != 0 && f.onLeaseExpired != nil {
			f.onLeaseExpired() // only the leader's expiry closes at a version
		}
	}
	return &res
}

// prune drops what the tree holds and its group no longer serves (a
// split's leftovers: tree.Prune), and rebuilds the lock index of what
// stays. The caller holds mu for writing, or has the tree to itself.
func (f *fsm) prune(index uint64) {
	if n := f.tree.Prune(); n > 0 {
		f.locks.Rebuild(f.tree)
		f.log.Info("dropped what another shard serves now", zap.Uint64("group", f.group), zap.Uint64("index", index), zap.Int("znodes", n))
	}
}

// split hands onSplit the split txn applied at index, with write, a
// writer of the state as it left it (or the error of taking it). A split
// the tree took decodes.
func (f *fsm) split(txn *tree.Txn, index uint64, write func(io.Writer) error, err error) {
	sp, derr := shardmap.DecodeSplit(txn.Data)
	if derr != nil {
		f.log.Error("a split the tree took does not decode", zap.Uint64("index", index), zap.Error(derr))
		if write != nil {
			_ = write(failingWriter{})
		}
		return
	}
	if err != nil {
		f.log.Error("cannot take the state a split left, to seed its new group; it catches up from the others", zap.Uint64("group", sp.Into), zap.Error(err))
		return
	}
	f.onSplit(sp, index, write)
}

// renewalsOf returns the lease renewals of txn: itself, or a batch's.
func renewalsOf(txn *tree.Txn) []tree.Txn {
	switch txn.Type {
	case tree.TxnRenewLease:
		return []tree.Txn{*txn}
	case tree.TxnRenewLeases:
		return txn.Ops
	}
	return nil
}

// leaseKept tells the session table of lease's new expiry after res, a
// lease's creation or renewal (nothing if it failed), and, for a renewal
// at time at that was due at due (0: unknown), how late it came.
func (f *fsm) leaseKept(lease int64, res *tree.Result, due, at int64) {
	if res.Err != nil {
		return
	}
	f.sessions.SetLease(lease, res.Lease.Version, time.UnixMilli(res.Lease.Expires))
	if p := res.Lease.Parent; p != 0 {
		// The lease's session spoke, and a quorum has it: on the leader,
		// its deadline is a full timeout from now, after the request's
		// send. A holder counts its stop-by deadline from a successful
		// renewal's send for this (recipes' deadline), not from pings,
		// which a member cut off from the leader may answer.
		f.sessions.Touch(p, time.Now())
	}
	if due != 0 && f.onRenewal != nil {
		f.onRenewal(at - due)
	}
}

// Snapshot returns a writer of the tree as it is now, with what of the
// lock index the tree cannot tell (the lock history, when holds began) as
// its annex. raftnode calls it on the apply goroutine, the only writer of
// the tree and the lock index, and calls write on another goroutine while
// txns are applied: write writes a view of the tree (tree.Freeze), which
// later txns do not change, and releases it.
//
// raftnode compacts the log behind a snapshot only once it is stored, so
// Snapshot first makes the watch history durable up to here: the log
// after it regenerates the rest after a crash (see history).
func (f *fsm) Snapshot() (write func(io.Writer) error, err error) {
	if f.history != nil {
		if err := f.history.sync(); err != nil {
			return nil, fmt.Errorf("sync the watch history: %w", err)
		}
	}
	annex := f.locks.Save()
	v := f.tree.Freeze() // it changes nothing readers look at
	return func(w io.Writer) error {
		defer v.Release()
		return v.WriteSnapshot(w, annex)
	}, nil
}

// Restore replaces the tree with a snapshot's and tracks exactly its
// sessions, each with a fresh full timeout. A restore while serving (a
// follower that fell behind the leader's log) then calls onRestore: the
// connections' watches and sessions were made against the old tree.
func (f *fsm) Restore(r io.Reader, index uint64) error {
	t, snap, err := tree.RestoreWith(r, tree.WithMaxDataSize(f.maxData), tree.WithGroup(f.group))
	if err != nil {
		return err
	}
	if n := t.Prune(); n > 0 { // a new shard's seed: the whole state of the group it split from
		f.log.Info("dropped what another shard serves", zap.Uint64("group", f.group), zap.Uint64("index", index), zap.Int("znodes", n))
	}
	sessions, leases := map[int64]time.Duration{}, map[int64]session.Lease{}
	for _, s := range t.Sessions() {
		if l := s.Lease; l != nil {
			leases[s.ID] = session.Lease{Version: l.Version, Expires: time.UnixMilli(l.Expires)}
		} else {
			sessions[s.ID] = time.Duration(s.TimeoutMs) * time.Millisecond
		}
	}
	x := locks.New()
	x.SetHistoryLimit(f.historyLimit)
	if err := x.Load(snap.Annex); err != nil {
		// The tree is whole (its digest matched); a lock history this
		// build cannot read only makes this member's start here.
		f.log.Warn("the snapshot's lock history is unreadable; it starts again", zap.Error(err))
	}
	x.Rebuild(t)
	f.mu.Lock()
	if f.history != nil {
		if err := f.history.restored(int64(index)); err != nil {
			f.mu.Unlock()
			return fmt.Errorf("restart the watch history after the snapshot: %w", err)
		}
	}
	x.Observe = f.locks.Observe
	f.tree, f.locks = t, x
	f.zxid = int64(index)
	f.sessions.Replace(sessions, leases, time.Now())
	f.mu.Unlock()
	if f.onRestore != nil {
		f.onRestore()
	}
	return nil
}

// read runs fn with the tree locked for reading and returns the zxid the
// read saw.
func (f *fsm) read(fn func(t *tree.Tree)) int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.tree)
	return f.zxid
}

// readLocks runs fn with the tree and its lock index locked for reading,
// and returns the zxid they are at.
func (f *fsm) readLocks(fn func(t *tree.Tree, x *locks.Index)) int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.tree, f.locks)
	return f.zxid
}
