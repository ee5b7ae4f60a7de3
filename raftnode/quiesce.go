package raftnode

import (
	"bytes"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// A quiescent group (Config.Quiesce; docs/scale-out.md, "Quiescent
// groups") neither ticks nor sends heartbeats: an idle shard costs its
// member nothing but memory. Its leader goes quiet on a tick at which the
// whole log is committed, applied and held by every follower, every
// follower is alive as far as the member's liveness knows, and nothing
// else is under way (a read, a leadership transfer, a hand-over to the
// preferred leader). It then sends each follower one last heartbeat that
// says so (its context is quiesceContext, its commit the last index);
// a follower that agrees (the heartbeat is its leader's, of its term, and
// its log ends at that commit) goes quiet too. One that does not agree
// goes on ticking and, with no heartbeats coming, calls a pre-vote, which
// wakes the others: a disagreement costs a round of messages, never
// safety, for raft decides every election as before.
//
// Anything else wakes a quiet group: a proposal, a read, a call, and any
// message from a peer but the quiescing heartbeat and its answer. A
// follower also wakes when the member judges its leader's member dead
// (liveness.go), and then elects a new leader as raft does after an
// election timeout. A quiet group's leader hears nothing from its
// followers, so QuorumContact and PeersHeard say nothing of it: the
// meta group, whose leader vouches for sessions by them, never quiesces.

// quiesceContext marks the heartbeat that quiesces a group, and its
// answer, which raft sends back with the same context. Read index
// contexts are 8 bytes, so raft's read tracking never takes it for one.
var quiesceContext = []byte("arbor-quiesce")

// quiescing reports whether m is a quiescing heartbeat or its answer:
// the messages that do not wake a quiet group.
func quiescing(m raftpb.Message) bool {
	return (m.Type == raftpb.MsgHeartbeat || m.Type == raftpb.MsgHeartbeatResp) && bytes.Equal(m.Context, quiesceContext)
}

// maybeQuiesce, on the leader's tick, quiesces the group if it is idle,
// and reports whether it is quiet.
func (n *Node) maybeQuiesce() bool {
	lt, ok := n.cfg.Transport.(livenessTransport)
	if !n.cfg.Quiesce || !ok || n.quiet || n.leader.Load() != n.cfg.ID {
		return n.quiet
	}
	st := n.rn.Status()
	last, err := n.storage.LastIndex()
	if err != nil || st.RaftState != raft.StateLeader || st.LeadTransferee != raft.None || st.Commit != last || st.Applied != last {
		return false
	}
	if want := n.preferred.Load(); want != 0 && want != n.cfg.ID && lt.peerAlive(want) {
		return false // preferLeader hands the leadership over first
	}
	msgs := make([]raftpb.Message, 0, len(st.Progress))
	for id, pr := range st.Progress {
		if id == n.cfg.ID {
			continue
		}
		if pr.Match != last || pr.State != tracker.StateReplicate || !lt.peerAlive(id) {
			return false
		}
		msgs = append(msgs, raftpb.Message{Type: raftpb.MsgHeartbeat, To: id, From: n.cfg.ID, Term: st.Term, Commit: last, Context: quiesceContext})
	}
	n.readMu.Lock()
	reading := n.readBusy || n.readNext != nil
	n.readMu.Unlock()
	if reading {
		return false
	}
	n.cfg.Transport.Send(msgs)
	n.setQuiet(true)
	return true
}

// followQuiesce, on a follower that just stepped m, a quiescing
// heartbeat, quiesces the group if this member agrees: m is its leader's,
// of its term, its log ends at m's commit, and the leader's member is
// alive.
func (n *Node) followQuiesce(m raftpb.Message) {
	lt, ok := n.cfg.Transport.(livenessTransport)
	if !n.cfg.Quiesce || !ok || m.Type != raftpb.MsgHeartbeat {
		return
	}
	st := n.rn.BasicStatus()
	last, err := n.storage.LastIndex()
	if err == nil && st.RaftState == raft.StateFollower && st.Lead == m.From && st.Term == m.Term &&
		st.Commit == m.Commit && last == m.Commit && lt.peerAlive(m.From) {
		n.setQuiet(true)
	}
}

// wakeIfLeaderDied, on a quiet follower, wakes the group when the
// member's liveness judges its leader's member dead. It also wakes the
// leader, with an answer to a heartbeat it did not send: a leader judged
// dead by mistake (a member short of CPU, say) then heartbeats again
// before its followers' election timeouts run out.
func (n *Node) wakeIfLeaderDied() {
	lt, ok := n.cfg.Transport.(livenessTransport)
	lead := n.leader.Load()
	if !n.quiet || !ok || lead == n.cfg.ID || lt.peerAlive(lead) {
		return
	}
	n.wake()
	n.cfg.Transport.Send([]raftpb.Message{{Type: raftpb.MsgHeartbeatResp, To: lead, From: n.cfg.ID, Term: n.term.Load()}})
}

// wake ends the group's quiet on this member, if it is quiet.
func (n *Node) wake() {
	if n.quiet {
		n.setQuiet(false)
	}
}

func (n *Node) setQuiet(q bool) {
	n.quiet = q
	n.quiescent.Store(q)
}

// livenessChanged tells the node, from the transport's liveness, that a
// peer stopped being heard from. It never blocks: one note is enough.
func (n *Node) livenessChanged() {
	select {
	case n.livec <- struct{}{}:
	default:
	}
}

// Quiescent reports whether the group is quiet on this member: not
// ticking, and sending nothing, until something wakes it.
func (n *Node) Quiescent() bool { return n.quiescent.Load() }

// syncTimer stops the tick timer of a quiet group and starts a woken
// group's again, on the common grid; ticking is whether it runs.
func (n *Node) syncTimer(tick *time.Timer, ticking *bool) {
	switch {
	case n.quiet && *ticking:
		tick.Stop()
	case !n.quiet && !*ticking:
		tick.Reset(untilTick(time.Now(), n.cfg.TickInterval))
	default:
		return
	}
	*ticking = !n.quiet
}
