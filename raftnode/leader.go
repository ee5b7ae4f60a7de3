package raftnode

import (
	"time"

	"go.etcd.io/raft/v3"
)

// preferState paces preferLeader.
type preferState struct {
	ticks   int // since the last look
	wait    int // ticks before the next look
	backoff int // ticks after a transfer before the next look: doubles while this member goes on leading
}

// preferLeader, on each tick, hands this member's leadership to
// Config.PreferredLeader when that member is a voter that is caught up
// with the log and has been heard from lately: the leaderships of a
// member's groups stay spread over the members however elections went
// (docs/scale-out.md, "Replica placement and where leaders go"). It looks
// once an election timeout. A transfer stops the leader's proposals until
// the transferee leads or an election timeout passes, so while this
// member goes on leading (the transferee could not win), the wait after
// each further transfer doubles, up to a minute. A member that has just
// become leader waits two and a half election timeouts before its first
// look.
func (n *Node) preferLeader() {
	want := n.preferred.Load()
	if want == 0 || want == n.cfg.ID {
		return
	}
	if st := n.rn.BasicStatus(); st.RaftState != raft.StateLeader {
		// A new leader looks first after two and a half election
		// timeouts: the preferred member may have just handed its
		// leadership over because it stops, and shows recently active
		// until the leader's next quorum check, within one. The half
		// keeps the looks between those checks, each of which leaves no
		// member recently active until it is heard from again.
		n.prefer = preferState{wait: 2*n.cfg.ElectionTicks + n.cfg.ElectionTicks/2}
		return
	} else if st.LeadTransferee != raft.None {
		return
	}
	if n.prefer.ticks++; n.prefer.ticks < n.prefer.wait {
		return
	}
	n.prefer.ticks, n.prefer.wait = 0, n.cfg.ElectionTicks
	st := n.rn.Status()
	pr, ok := st.Progress[want]
	if !ok || pr.IsLearner || !pr.RecentActive || pr.Match < st.Commit {
		return
	}
	n.rn.TransferLeader(want)
	maxWait := int(time.Minute / n.cfg.TickInterval)
	n.prefer.backoff = min(max(2*n.prefer.backoff, 2*n.cfg.ElectionTicks), maxWait)
	n.prefer.wait = n.prefer.backoff
}
