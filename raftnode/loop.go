package raftnode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// run is the node's goroutine: the only one that touches the RawNode, the
// storage's write side and the state machine.
func (n *Node) run() {
	defer close(n.donec)
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			n.rn.Tick()
		case p := <-n.propc:
			n.propose(p)
		case m := <-n.recvc:
			n.step(m)
		case id := <-n.readc:
			n.readIndex(id)
		case r := <-n.reportc:
			if r.snap {
				n.rn.ReportSnapshot(r.to, r.status)
			} else {
				n.rn.ReportUnreachable(r.to)
			}
		case <-n.stopc:
			n.fail(ErrStopped)
			return
		}
		n.drain()
		if err := n.processReady(); err != nil {
			if errors.Is(err, ErrRemoved) {
				n.log.Info("removed from the cluster; stopping")
			} else {
				n.log.Error("raft node failed; stopping", zap.Error(err))
			}
			n.fail(err)
			return
		}
	}
}

// drain takes the proposals and messages already waiting, up to MaxBatch,
// so that one Ready, and one fsync, covers all of them.
func (n *Node) drain() {
	for i := 0; i < n.cfg.MaxBatch; i++ {
		select {
		case p := <-n.propc:
			n.propose(p)
		case m := <-n.recvc:
			n.step(m)
		default:
			return
		}
	}
}

func (n *Node) step(m raftpb.Message) {
	if err := n.rn.Step(m); err != nil {
		n.log.Debug("raft step", zap.Error(err))
	}
}

func (n *Node) propose(p proposal) {
	if p.cc != nil {
		p.cc.Context = binary.BigEndian.AppendUint64(nil, p.id)
		p.cc.Context = append(p.cc.Context, p.payload...)
		if err := n.rn.ProposeConfChange(*p.cc); err != nil {
			n.deliver(p.id, Outcome{Err: ErrProposalDropped})
		}
		return
	}
	if p.leader {
		if st := n.rn.BasicStatus(); st.RaftState != raft.StateLeader || st.Term != p.term {
			n.deliver(p.id, Outcome{Err: ErrProposalDropped})
			return
		}
	}
	data := make([]byte, 8+len(p.payload))
	binary.BigEndian.PutUint64(data, p.id)
	copy(data[8:], p.payload)
	if err := n.rn.Propose(data); err != nil {
		n.deliver(p.id, Outcome{Err: ErrProposalDropped})
	}
}

// processReady handles every pending Ready: persist, send, apply, advance.
func (n *Node) processReady() error {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		leaderChanged := false
		if rd.SoftState != nil {
			old := n.leader.Swap(rd.SoftState.Lead)
			leaderChanged = old != 0 && old != rd.SoftState.Lead
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			n.term.Store(rd.HardState.Term)
		}
		// A leader sends before its own fsync, so that its followers write
		// the entries while it does (raft thesis, 10.2.1): an entry counts
		// toward commit only once a member acknowledges it as durable, the
		// leader included. A follower or candidate must persist first: its
		// answers (votes, acknowledgements) promise durable state.
		leading := n.leader.Load() == n.cfg.ID
		send := n.cfg.Transport != nil && len(rd.Messages) > 0
		if send && leading {
			n.cfg.Transport.Send(rd.Messages)
		}
		if err := n.persistAndApply(rd); err != nil {
			return err
		}
		if send && !leading {
			n.cfg.Transport.Send(rd.Messages)
		}
		for _, rs := range rd.ReadStates {
			n.resolveRead(binary.BigEndian.Uint64(rs.RequestCtx), rs.Index)
		}
		if leaderChanged {
			// What was forwarded to the old leader may be lost: say so now
			// rather than at the callers' deadlines. (What this Ready
			// committed was applied and answered above.)
			n.mu.Lock()
			n.failPendingLocked(ErrLeaderChanged)
			n.mu.Unlock()
		}
		n.rn.Advance(rd)
		if err := n.maybeSnapshot(); err != nil {
			return err
		}
	}
	return nil
}

// persistAndApply writes rd's state and applies its committed entries.
// Committed entries are durable on a quorum already, so they are applied
// (and their writers answered) before this Ready's own write, not after:
// under load a Ready carries new entries as well as committed ones, and a
// write would otherwise wait for the fsync of the writes behind it. A
// snapshot is the exception: it replaces the state the entries follow, so
// it is written and loaded first.
func (n *Node) persistAndApply(rd raft.Ready) error {
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
			return err
		}
		if err := n.restore(rd.Snapshot); err != nil {
			return err
		}
		return n.apply(rd.CommittedEntries)
	}
	if err := n.apply(rd.CommittedEntries); err != nil {
		return err
	}
	return n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync)
}

// restore loads a snapshot received from the leader.
func (n *Node) restore(snap raftpb.Snapshot) error {
	if err := n.sm.Restore(bytes.NewReader(snap.Data), snap.Metadata.Index); err != nil {
		return fmt.Errorf("restore snapshot at %d: %w", snap.Metadata.Index, err)
	}
	n.confState = snap.Metadata.ConfState
	n.mu.Lock()
	n.members = n.confState
	n.mu.Unlock()
	n.snapIndex = snap.Metadata.Index
	n.setApplied(snap.Metadata.Index)
	return nil
}

func (n *Node) apply(ents []raftpb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	for i := range ents {
		e := &ents[i]
		if e.Index <= n.applied.Load() {
			continue
		}
		switch e.Type {
		case raftpb.EntryNormal:
			if len(e.Data) >= 8 {
				id := binary.BigEndian.Uint64(e.Data)
				res := n.sm.Apply(e.Index, e.Data[8:])
				n.applied.Store(e.Index) // before the proposer hears: it may ask Applied
				n.deliver(id, Outcome{Index: e.Index, Result: res})
			}
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			if err := n.applyConfChange(e); err != nil {
				n.applied.Store(e.Index)
				return err
			}
		}
		n.applied.Store(e.Index)
	}
	n.setApplied(n.applied.Load())
	return nil
}

// setApplied records index as applied and wakes WaitApplied callers.
func (n *Node) setApplied(index uint64) {
	n.applied.Store(index)
	n.mu.Lock()
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	n.mu.Unlock()
}

// readIndex asks raft for a read index. Raft drops the request without a
// word when this member knows no leader: it fails at once then, as a
// dropped proposal does, rather than at its caller's deadline.
func (n *Node) readIndex(id uint64) {
	if n.rn.BasicStatus().Lead == raft.None {
		n.endRead(id, Outcome{Err: ErrProposalDropped})
		return
	}
	n.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, id))
}

func (n *Node) resolveRead(id, index uint64) {
	n.endRead(id, Outcome{Index: index})
}

func (n *Node) endRead(id uint64, o Outcome) {
	n.mu.Lock()
	ch, ok := n.reads[id]
	delete(n.reads, id)
	n.mu.Unlock()
	if ok {
		ch <- o
	}
}

// maybeSnapshot snapshots the state machine every SnapshotEvery entries and
// compacts the log behind it.
func (n *Node) maybeSnapshot() error {
	applied := n.applied.Load()
	if applied-n.snapIndex < n.cfg.SnapshotEvery {
		return nil
	}
	start := time.Now()
	var buf bytes.Buffer
	if err := n.sm.Snapshot(&buf); err != nil {
		return fmt.Errorf("snapshot at %d: %w", applied, err)
	}
	var compactTo uint64
	if applied > n.cfg.CatchUpEntries {
		compactTo = applied - n.cfg.CatchUpEntries
	}
	if err := n.storage.CreateSnapshot(applied, &n.confState, buf.Bytes(), compactTo); err != nil {
		return fmt.Errorf("save snapshot at %d: %w", applied, err)
	}
	n.snapIndex = applied
	n.log.Info("snapshot saved", zap.Uint64("index", applied), zap.Int("bytes", buf.Len()),
		zap.Uint64("compacted_to", compactTo), zap.Duration("took", time.Since(start)))
	return nil
}

// raftLogger sends raft's log lines to zap.
type raftLogger struct{ *zap.SugaredLogger }

func (l raftLogger) Warning(args ...any)                 { l.Warn(args...) }
func (l raftLogger) Warningf(format string, args ...any) { l.Warnf(format, args...) }
