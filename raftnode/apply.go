package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// The apply goroutine applies committed entries to the state machine and
// takes its snapshots, so that the raft goroutine never waits for the
// state machine: a snapshot of a large state takes seconds, and a raft
// goroutine stalled for that long misses its ticks, its followers elect
// another leader, and every write waits (etcd's server splits its work
// the same way).
//
// The raft goroutine hands it work through applyq, in log order:
//
//   - the committed entries of a Ready, with a channel closed once that
//     Ready is durable here;
//   - a snapshot received from the leader, after the entries before it and
//     before those after it (the raft goroutine has already made it
//     durable);
//   - a barrier, closed once everything before it is applied: the raft
//     goroutine waits for it before it applies a membership change itself
//     (RawNode.ApplyConfChange is the raft goroutine's), so that the apply
//     goroutine is idle while the membership changes and a snapshot
//     records the membership as of its index;
//   - the membership change just applied, for the state machine
//     (MembershipApplier) and the change's proposer;
//   - a leader change, which fails what was pending when it happened, but
//     only once the entries committed before it were applied and answered;
//   - a call from WithApplied, run between the entries before it and those
//     after it (a backup's consistent copy of the state);
//   - a snapshot to take now, after a membership change, if there was one
//     before: a member that joins a group whose log is compacted catches
//     up only from a snapshot, and raft refuses one whose membership lacks
//     the member.
//
// Applying a committed entry before this member's own write of it is
// durable is safe: an entry is committed only once a quorum holds it
// durably, so it survives a crash of this member, which then learns it
// again from the leader (raft thesis 10.2.1; the raft goroutine always
// applied the committed entries of a Ready before writing its new ones).
// What must wait for the local write is a snapshot: its index must be in
// the log it compacts (raft.MemoryStorage panics otherwise), and after a
// crash the stored HardState's commit index must not be behind the
// snapshot (raft refuses to start). So a snapshot waits for the persisted
// channel of the Ready whose entries it covers.
type applyTask struct {
	entries       []raftpb.Entry
	bytes         int64 // the entries' size, held in the node's applyBytes until applied
	persisted     <-chan struct{}
	snap          *raftpb.Snapshot
	barrier       chan struct{}
	leaderChanged uint64     // the epoch of the change; 0 for none
	call          *applyCall // a function to run between two entries (WithApplied)
	snapshotNow   bool       // take a snapshot whatever the thresholds (after a membership change)
	conf          *confApplied
}

// errApplyStopped ends the apply goroutine when the node stops.
var errApplyStopped = errors.New("raftnode: apply stopped")

// closedChan is the persisted channel of entries handed over after their
// Ready was written.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// runApply is the apply goroutine: the only one that calls the state
// machine after Start. A failure stops the node, a snapshot's included.
func (n *Node) runApply() {
	defer close(n.applyDone)
	defer func() {
		if err := n.finishSnapshot(); err != nil {
			n.log.Warn("the last snapshot failed", zap.Error(err))
		}
	}()
	var tasks []applyTask
	for {
		var err error
		select {
		case <-n.applyq.ready:
			tasks = n.applyq.take(tasks, applyQueue)
			for _, t := range tasks {
				if err == nil {
					err = n.do(t)
				}
				n.applyBytes.Give(t.bytes)
			}
			tasks = reuse(tasks) // not to hold their entries until the next
		case <-n.snapping.finished():
			err = n.finishSnapshot()
			if err == nil && n.snapAgain {
				// A membership change came while it was written.
				n.snapAgain = false
				err = n.snapshot(n.lastPersisted)
			}
		case <-n.applyStop:
			return
		}
		if err != nil {
			if !errors.Is(err, errApplyStopped) {
				n.log.Error("applying committed entries failed; stopping", zap.Error(err))
				n.fail(err)
			}
			return
		}
	}
}

// do carries out one task.
func (n *Node) do(t applyTask) error {
	switch {
	case t.barrier != nil:
		close(t.barrier)
	case t.call != nil:
		t.call.run(n.applied.Load())
	case t.snapshotNow:
		switch {
		case n.snapping != nil:
			// The one being written has the membership from before:
			// another follows once it is stored (runApply), rather than
			// Apply waiting for it here.
			n.snapAgain = true
		case n.snapIndex > 0 && n.applied.Load() > n.snapIndex:
			// Without a snapshot yet, the log is whole from its first
			// entry, which a new member replays instead.
			return n.snapshot(closedChan)
		}
	case t.leaderChanged != 0:
		// What was forwarded to the old leader may be lost: say so now
		// rather than at the callers' deadlines. What was committed before
		// the change was applied and answered by the tasks before this one;
		// what began after it went to the new leader.
		n.mu.Lock()
		n.failPendingLocked(ErrLeaderChanged, t.leaderChanged)
		n.mu.Unlock()
	case t.snap != nil:
		return n.restore(*t.snap)
	case t.conf != nil:
		n.applyMembers(t.conf)
	default:
		n.applyEntries(t.entries)
		n.lastPersisted = t.persisted
		return n.maybeSnapshot(t.persisted)
	}
	return nil
}

// handOver queues a task for the apply goroutine. It waits while the queue
// is full, in tasks or in bytes, and fails if the apply goroutine has
// stopped.
func (n *Node) handOver(t applyTask) error {
	for i := range t.entries {
		t.bytes += int64(t.entries[i].Size())
	}
	if !n.applyBytes.Take(t.bytes, n.applyDone) {
		return n.stopErr()
	}
	if !n.applyq.pushWait(t, n.applyDone, nil) {
		n.applyBytes.Give(t.bytes)
		return n.stopErr()
	}
	return nil
}

// waitIdle waits until the apply goroutine has done everything handed to
// it so far.
func (n *Node) waitIdle() error {
	done := make(chan struct{})
	if err := n.handOver(applyTask{barrier: done}); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-n.applyDone:
		return n.stopErr()
	}
}

// restore loads a snapshot received from the leader.
func (n *Node) restore(snap raftpb.Snapshot) error {
	if err := n.sm.Restore(bytes.NewReader(snap.Data), snap.Metadata.Index); err != nil {
		return fmt.Errorf("restore snapshot at %d: %w", snap.Metadata.Index, err)
	}
	n.mu.Lock()
	n.members = snap.Metadata.ConfState
	n.logMembers = incomingOf(snap.Metadata.ConfState)
	n.mu.Unlock()
	n.snapIndex = snap.Metadata.Index
	n.setApplied(snap.Metadata.Index)
	return nil
}

// applyEntries applies normal entries; the raft goroutine keeps the
// membership changes. An entry's index is recorded as applied before its
// proposer hears, as the proposer may ask Applied.
func (n *Node) applyEntries(ents []raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	for i := range ents {
		e := &ents[i]
		if e.Index <= n.applied.Load() {
			continue // covered by a snapshot
		}
		if id, payload, ok := entryPayload(*e); ok {
			res := n.sm.Apply(e.Index, payload)
			n.applied.Store(e.Index)
			n.deliver(id, Outcome{Index: e.Index, Result: res})
		}
		n.applied.Store(e.Index)
	}
	n.setApplied(n.applied.Load())
}

// setApplied records index as applied and wakes WaitApplied callers.
func (n *Node) setApplied(index uint64) {
	n.applied.Store(index)
	n.mu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.mu.Unlock()
}

// maybeSnapshot snapshots the state machine every SnapshotEvery entries,
// or sooner once the log since the last snapshot holds SnapshotBytes, and
// compacts the log behind it, once the Ready whose entries it covers is
// durable (persisted). One snapshot is written at a time.
func (n *Node) maybeSnapshot(persisted <-chan struct{}) error {
	if n.snapping != nil {
		return nil
	}
	applied := n.applied.Load()
	if applied == n.snapIndex || applied-n.snapIndex < n.cfg.SnapshotEvery && n.storage.LogBytes(n.snapIndex, applied) < n.cfg.SnapshotBytes {
		return nil
	}
	return n.snapshot(persisted)
}

// A snapshotJob is a snapshot being written and stored on a goroutine of
// its own while entries are applied.
type snapshotJob struct {
	index, compactTo uint64
	start            time.Time
	st               SnapshotStats
	took             time.Duration
	err              error
	done             chan struct{} // closed once st, took and err are set
}

// finished is closed once the job is done; nil (never ready) for no job.
func (j *snapshotJob) finished() <-chan struct{} {
	if j == nil {
		return nil
	}
	return j.done
}

// snapshot snapshots the state machine at the applied index and compacts
// the log behind it, once the Ready whose entries it covers is durable:
// it takes the state machine's view of the moment here and writes and
// stores it on another goroutine (finishSnapshot hears how that went).
// Its callers start one only when none is being written.
func (n *Node) snapshot(persisted <-chan struct{}) error {
	applied := n.applied.Load()
	if applied <= n.snapIndex {
		return nil // a snapshot stored, here or from the leader, covers it
	}
	select {
	case <-persisted:
	case <-n.applyStop:
		return errApplyStopped
	}
	job := &snapshotJob{index: applied, start: time.Now(), done: make(chan struct{})}
	n.mu.Lock()
	cs := n.members
	n.mu.Unlock()
	job.compactTo = n.storage.compactPoint(applied, n.cfg.CatchUpEntries, n.cfg.CatchUpBytes)
	write, err := n.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot at %d: %w", applied, err)
	}
	n.snapping = job
	go func() {
		defer close(job.done)
		job.st, job.err = n.storeSnapshot(applied, &cs, write, job.compactTo)
		job.took = time.Since(job.start)
	}()
	return nil
}

// storeSnapshot stores what write writes as the snapshot at index, and
// calls write once whatever the store did: the state machine lets go of
// its view in write, so it is given a writer that fails at once when the
// store had no use for it (a newer snapshot stored meanwhile).
func (n *Node) storeSnapshot(index uint64, cs *raftpb.ConfState, write func(io.Writer) error, compactTo uint64) (SnapshotStats, error) {
	written := false
	st, err := n.storage.CreateSnapshot(index, cs, func(w io.Writer) error {
		written = true
		return write(w)
	}, compactTo)
	if !written {
		_ = write(failingWriter{})
	}
	return st, err
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("raftnode: snapshot not needed")
}

// finishSnapshot waits for the snapshot being written, if there is one,
// and hears how it went.
func (n *Node) finishSnapshot() error {
	job := n.snapping
	if job == nil {
		return nil
	}
	<-job.done
	n.snapping = nil
	if job.err != nil {
		return fmt.Errorf("snapshot at %d: %w", job.index, job.err)
	}
	n.snapIndex = max(n.snapIndex, job.index)
	if !job.st.Saved {
		n.log.Info("snapshot dropped: a newer one from the leader is stored", zap.Uint64("index", job.index))
		return nil
	}
	n.log.Info("snapshot saved", zap.Uint64("index", job.index), zap.Int("bytes", job.st.Bytes),
		zap.Uint64("compacted_to", job.compactTo), zap.Duration("took", job.took),
		zap.Duration("serialize", job.took-job.st.Stored), zap.Duration("write", job.st.Stored))
	return nil
}
