package raftnode

import (
	"context"
	"time"
)

// TransferLeadership hands this member's leadership, if it leads a group
// of more than itself, to the voter most caught up with its log, and waits
// until another member leads or ctx ends: a planned stop of the leader
// then costs the group no election timeout (raft's leadership transfer:
// the leader stops taking proposals, brings the transferee up to date and
// tells it to campaign at once). It returns the member it handed over to,
// 0 when it did not lead or leads alone.
func (n *Node) TransferLeadership(ctx context.Context) (uint64, error) {
	if !n.IsLeader() {
		return 0, nil
	}
	picked := make(chan uint64, 1)
	pick := func() {
		var to, match uint64
		st := n.rn.Status()
		for id, pr := range st.Progress {
			if id != n.cfg.ID && !pr.IsLearner && (to == 0 || pr.Match > match) {
				to, match = id, pr.Match
			}
		}
		if to != 0 {
			n.rn.TransferLeader(to)
		}
		picked <- to
	}
	select {
	case n.callc <- pick:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-n.donec:
		return 0, n.stopErr()
	}
	to := <-picked
	if to == 0 {
		return 0, nil
	}
	tick := time.NewTicker(n.cfg.TickInterval)
	defer tick.Stop()
	for lead := n.Leader(); lead == 0 || lead == n.cfg.ID; lead = n.Leader() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return to, ctx.Err()
		case <-n.donec:
			return to, n.stopErr()
		}
	}
	return to, nil
}
