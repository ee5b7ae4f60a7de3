package raftnode

import (
	"context"
	"testing"
	"time"
)

// A leader about to stop hands its leadership to another member, which
// leads by the time the call returns: the group waits no election
// timeout.
func TestALeaderHandsItsLeadershipOver(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	if o := g.add(t, lead, 1); o.Err != nil {
		t.Fatal(o.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	to, err := g.nodes[lead].TransferLeadership(ctx)
	if err != nil || to == 0 || to == lead {
		t.Fatalf("TransferLeadership = %d, %v", to, err)
	}
	if g.nodes[lead].IsLeader() {
		t.Fatal("the old leader still leads")
	}
	if got := g.nodes[lead].Leader(); got != to {
		t.Fatalf("the old leader follows %d, want %d", got, to)
	}
	waitFor(t, "the new leader to know it leads", g.nodes[to].IsLeader)
	if o := g.add(t, to, 1); o.Err != nil {
		t.Fatalf("a write to the new leader: %v", o.Err)
	}
	// A follower hands nothing over.
	if to, err := g.nodes[lead].TransferLeadership(ctx); to != 0 || err != nil {
		t.Fatalf("a follower's TransferLeadership = %d, %v", to, err)
	}
}
