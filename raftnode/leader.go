package raftnode

import (
	"time"

	"go.etcd.io/raft/v3"
)

// preferState paces preferLeader's transfers.
type preferState struct {
	ticks int // since the last transfer this leader began
	wait  int // ticks before it may begin another
}

// preferLeader, on each tick, hands this member's leadership to
// Config.PreferredLeader when that member is a voter that is caught up
// with the log and has been heard from lately: the leaderships of a
// member's groups stay spread over the members however elections went
// (docs/scale-out.md, "Replica placement and where leaders go"). A
// transfer stops the leader's proposals until the transferee leads or an
// election timeout passes, so while this member goes on leading (the
// transferee could not win), each further try waits twice as long, up to
// a minute's worth of ticks.
func (n *Node) preferLeader() {
	want := n.cfg.PreferredLeader
	if want == 0 || want == n.cfg.ID {
		return
	}
	if st := n.rn.BasicStatus(); st.RaftState != raft.StateLeader {
		n.prefer = preferState{}
		return
	} else if st.LeadTransferee != raft.None {
		return
	}
	if n.prefer.ticks++; n.prefer.ticks < n.prefer.wait {
		return
	}
	st := n.rn.Status()
	pr, ok := st.Progress[want]
	if !ok || pr.IsLearner || !pr.RecentActive || pr.Match < st.Commit {
		return
	}
	n.rn.TransferLeader(want)
	maxWait := int(time.Minute / n.cfg.TickInterval)
	n.prefer = preferState{wait: min(max(2*n.prefer.wait, 2*n.cfg.ElectionTicks), maxWait)}
}
