package raftnode

import (
	"testing"
	"time"
)

// A proposal a follower forwarded and the network lost is sent again, and
// applied once.
func TestALostForwardedProposalIsSentAgainAndAppliedOnce(t *testing.T) {
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	g.nw.Drop(follower, lead, 1)
	time.AfterFunc(50*time.Millisecond, g.nw.Heal)
	if o := g.add(t, follower, 1000); o.Err != nil {
		t.Fatalf("a proposal whose first forward was lost: %v", o.Err)
	}
	waitFor(t, "every member to apply it", func() bool {
		for _, sm := range g.sms {
			if sm.value() < 1000 {
				return false
			}
		}
		return true
	})
	if o := g.add(t, lead, 1); o.Err != nil { // a mark after it
		t.Fatal(o.Err)
	}
	for id, sm := range g.sms {
		waitFor(t, "the mark", func() bool { return sm.value() >= 1001 })
		if got := sm.value(); got != 1001 {
			t.Fatalf("member %d sums %d: the proposal was applied more than once", id, got)
		}
	}
}

// A forwarded proposal that is only slow, not lost, reaches the leader
// twice, the first copy and the one sent again: the leader appends it once.
func TestASlowForwardedProposalIsAppliedOnce(t *testing.T) {
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	g.nw.Delay(follower, lead, 350*time.Millisecond) // past retryAfter (200ms here)
	if o := g.add(t, follower, 1000); o.Err != nil {
		t.Fatalf("a slow forwarded proposal: %v", o.Err)
	}
	time.Sleep(500 * time.Millisecond) // the copy sent again arrives too
	g.nw.Heal()
	if o := g.add(t, lead, 1); o.Err != nil {
		t.Fatal(o.Err)
	}
	for id, sm := range g.sms {
		waitFor(t, "the mark", func() bool { return sm.value() >= 1001 })
		if got := sm.value(); got != 1001 {
			t.Fatalf("member %d sums %d: the proposal was applied more than once", id, got)
		}
	}
}
