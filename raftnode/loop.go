package raftnode

import (
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// run is the node's raft goroutine: the only one that touches the RawNode
// and writes the log. It hands committed entries to the apply goroutine.
func (n *Node) run() {
	defer close(n.donec)
	err := n.loop()
	close(n.applyStop)
	<-n.applyDone
	n.fail(err)
}

// loop drives the RawNode until the node stops, and returns why.
func (n *Node) loop() error {
	tick := time.NewTimer(untilTick(time.Now(), n.cfg.TickInterval))
	defer tick.Stop()
	ticking := true
	for {
		n.holdWhileStalled()
		select {
		case now := <-tick.C:
			tick.Reset(untilTick(now, n.cfg.TickInterval))
			if !n.maybeQuiesce() {
				n.rn.Tick()
				n.preferLeader()
			}
		case <-n.props.ready:
			n.takeProposals()
		case <-n.inbox.ready:
			n.takeMessages()
		case id := <-n.readc:
			n.readIndex(id)
		case f := <-n.callc:
			n.wake()
			f()
		case r := <-n.reportc:
			if r.snap {
				n.rn.ReportSnapshot(r.to, r.status)
			} else {
				n.rn.ReportUnreachable(r.to)
			}
		case <-n.livec:
			n.wakeIfLeaderDied()
		case <-n.stopc:
			return ErrStopped
		case <-n.applyDone:
			return n.stopErr() // the apply goroutine failed and said why
		}
		n.drain()
		if err := n.processReady(); err != nil {
			if errors.Is(err, ErrRemoved) {
				n.log.Info("removed from the cluster; stopping")
			} else {
				n.log.Error("raft node failed; stopping", zap.Error(err))
			}
			return err
		}
		n.syncTimer(tick, &ticking)
	}
}

// untilTick is the time from now to the next tick: ticks fall on multiples
// of every since the epoch, so that the groups of a member tick at the same
// moments and their heartbeats to a peer leave together, in one write of
// the transport (BenchmarkIdleGroups).
func untilTick(now time.Time, every time.Duration) time.Duration {
	return every - time.Duration(now.UnixNano()%int64(every))
}

// drain takes the proposals and messages already waiting, up to MaxBatch
// of each, so that one Ready, and one fsync, covers all of them.
func (n *Node) drain() {
	n.takeProposals()
	n.takeMessages()
}

// takeProposals proposes up to MaxBatch of the proposals waiting.
func (n *Node) takeProposals() {
	n.propBuf = n.props.take(n.propBuf, n.cfg.MaxBatch)
	for _, p := range n.propBuf {
		n.propose(p)
	}
	n.propBuf = reuse(n.propBuf) // not to hold their payloads until the next
}

// takeMessages steps raft with up to MaxBatch of the messages waiting.
func (n *Node) takeMessages() {
	n.msgBuf = n.inbox.take(n.msgBuf, n.cfg.MaxBatch)
	for _, m := range n.msgBuf {
		n.step(m)
	}
	n.msgBuf = reuse(n.msgBuf)
}

func (n *Node) step(m raftpb.Message) {
	if n.removed[m.From] && !n.isMember(m.From) {
		// A member removed from the group (one a forced recovery left
		// out, say) that is still running: its messages, with a term of
		// the old group, must not make this one step down. (One added
		// again, which this member may know only from a snapshot, is
		// heard.)
		return
	}
	if !quiescing(m) {
		n.wake()
	}
	n.contact.heardFrom(m)
	leading := false
	if m.Type == raftpb.MsgProp {
		leading = n.rn.BasicStatus().RaftState == raft.StateLeader
		if !n.dropSeen(&m, leading) || leading && n.refusesConfChanges(m.Entries) {
			return
		}
	}
	if err := n.rn.Step(m); err != nil {
		n.log.Debug("raft step", zap.Error(err))
	} else if leading {
		n.noteEntries(m.Entries) // at once: a copy may follow in this same batch
	} else if quiescing(m) {
		n.followQuiesce(m)
	}
}

func (n *Node) propose(p proposal) {
	n.wake()
	if p.cc != nil {
		if n.confChangePending() {
			n.deliver(p.id, Outcome{Err: ErrConfChangeInProgress})
			return
		}
		if err := n.checkConfChange(*p.cc); err != nil {
			n.deliver(p.id, Outcome{Err: err})
			return
		}
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
	if p.resend {
		// Only as a follower that knows its leader, as raft has it now
		// (n.leader may lag a Ready behind): a member that just became
		// leader would append the copy as it is, without the check of
		// the ids in its log.
		if st := n.rn.BasicStatus(); st.RaftState != raft.StateFollower || st.Lead == raft.None {
			return
		}
	}
	data := entryData(p)
	if err := n.rn.Propose(data); err != nil && !p.resend {
		n.deliver(p.id, Outcome{Err: n.dropped()})
	}
}

// dropped says why raft dropped a proposal: on a leader that is not
// handing over its leadership, only for the uncommitted entries' limit.
func (n *Node) dropped() error {
	if st := n.rn.BasicStatus(); st.RaftState == raft.StateLeader && st.LeadTransferee == raft.None {
		return ErrUncommittedFull
	}
	return ErrProposalDropped
}

// processReady handles every pending Ready: persist, send, hand the
// committed entries to the apply goroutine, advance.
func (n *Node) processReady() error {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		leaderChanged := false
		if rd.SoftState != nil {
			old := n.leader.Swap(rd.SoftState.Lead)
			leaderChanged = old != 0 && old != rd.SoftState.Lead
			if rd.SoftState.Lead == n.cfg.ID && old != n.cfg.ID {
				n.contact.lead(time.Now())
				// Raft takes no membership change before it applied the
				// log it led with (confChangePending).
				n.leadFrom, _ = n.storage.LastIndex()
			}
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			n.term.Store(rd.HardState.Term)
			n.commit.Store(rd.HardState.Commit)
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
			// After this Ready's committed entries, in the apply order; it
			// fails only what began before the change.
			n.mu.Lock()
			n.epoch++
			epoch := n.epoch
			n.mu.Unlock()
			if err := n.handOver(applyTask{leaderChanged: epoch}); err != nil {
				return err
			}
		}
		n.rn.Advance(rd)
	}
	return nil
}

// persistAndApply writes rd's state and hands its committed entries to the
// apply goroutine. Committed entries are durable on a quorum already, so
// they are handed over before this Ready's own write, and applied (and
// their writers answered) while it is under way: under load a Ready
// carries new entries as well as committed ones, and a write would
// otherwise wait for the fsync of the writes behind it.
//
// A snapshot from the leader or a membership change takes the slow way:
// the Ready is written first, the snapshot is restored in the apply order,
// and each membership change is applied here once the apply goroutine has
// done everything before it.
func (n *Node) persistAndApply(rd raft.Ready) error {
	if raft.IsEmptySnap(rd.Snapshot) && !slices.ContainsFunc(rd.CommittedEntries, isConfChange) {
		var persisted chan struct{}
		if len(rd.CommittedEntries) > 0 {
			persisted = make(chan struct{})
			if err := n.handOver(applyTask{entries: rd.CommittedEntries, persisted: persisted}); err != nil {
				return err
			}
		}
		if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
			return err
		}
		if persisted != nil {
			close(persisted)
		}
		return nil
	}
	if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
		return err
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.handOver(applyTask{snap: &rd.Snapshot}); err != nil {
			return err
		}
	}
	ents := rd.CommittedEntries
	for len(ents) > 0 {
		i := slices.IndexFunc(ents, isConfChange)
		if i < 0 {
			i = len(ents)
		}
		if i > 0 {
			if err := n.handOver(applyTask{entries: ents[:i], persisted: closedChan}); err != nil {
				return err
			}
		}
		if i == len(ents) {
			return nil
		}
		if err := n.waitIdle(); err != nil {
			return err
		}
		if e := &ents[i]; e.Index > n.applied.Load() { // else covered by a snapshot
			if err := n.applyConfChange(e); err != nil {
				return err
			}
			// A snapshot with the new membership, for a new member to
			// catch up from (apply.go).
			if err := n.handOver(applyTask{snapshotNow: true}); err != nil {
				return err
			}
		}
		ents = ents[i+1:]
	}
	return nil
}

func isConfChange(e raftpb.Entry) bool {
	return e.Type == raftpb.EntryConfChange || e.Type == raftpb.EntryConfChangeV2
}

// readIndex asks raft for a read index. Raft drops the request without a
// word when this member knows no leader: it fails at once then, as a
// dropped proposal does, rather than at its caller's deadline.
func (n *Node) readIndex(id uint64) {
	n.wake()
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
	w, ok := n.reads[id]
	delete(n.reads, id)
	n.mu.Unlock()
	if ok {
		w.finish(o)
	}
}

// raftLogger sends raft's log lines to zap.
type raftLogger struct{ *zap.SugaredLogger }

func (l raftLogger) Warning(args ...any)                 { l.Warn(args...) }
func (l raftLogger) Warningf(format string, args ...any) { l.Warnf(format, args...) }
