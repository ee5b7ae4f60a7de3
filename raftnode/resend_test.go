package raftnode

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// A proposal a follower forwarded and the network lost is sent again, and
// applied once.
func TestALostForwardedProposalIsSentAgainAndAppliedOnce(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	g.probed(t, follower, lead)
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
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	g.probed(t, follower, lead)
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

// probed has member from probe member to until it answers: a follower
// sends copies of its proposals only to a leader that does (resend).
func (g *memGroup) probed(t *testing.T, from, to uint64) {
	t.Helper()
	tr := g.nodes[from].cfg.Transport.(*MemTransport)
	tr.Probe(to)
	waitFor(t, "an answer to a probe", func() bool { return tr.AnswersProbes(to) })
}

// A follower sends no copy to a leader that never answered a probe: a
// member of an older version would append the copy's form as it is.
func TestNoCopyGoesToALeaderThatAnswersNoProbes(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	g.nw.Drop(follower, lead, 1)
	time.AfterFunc(50*time.Millisecond, g.nw.Heal)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if o := g.nodes[follower].Propose(ctx, binary.BigEndian.AppendUint64(nil, 1000)).Wait(ctx); o.Err == nil {
		t.Fatal("a lost proposal was sent again to a leader that never answered a probe")
	}
}

// A leader takes a copy only in the term of its first send: a leader of a
// later term may hold the first in its log (from before a restart, or in
// a snapshot) without knowing its id.
func TestALeaderTakesACopyOnlyInTheTermOfItsFirstSend(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	term := g.nodes[lead].Term()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	copyOf := func(id, sent, v uint64) raftpb.Message {
		data := entryData(proposal{id: id, sent: sent, resend: true, payload: binary.BigEndian.AppendUint64(nil, v)})
		return raftpb.Message{Type: raftpb.MsgProp, From: follower, To: lead, Entries: []raftpb.Entry{{Data: data}}}
	}
	if err := g.nodes[lead].Step(ctx, copyOf(1<<40+1, term-1, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := g.nodes[lead].Step(ctx, copyOf(1<<40+2, term, 10)); err != nil {
		t.Fatal(err)
	}
	if o := g.add(t, lead, 1); o.Err != nil { // a mark after them
		t.Fatal(o.Err)
	}
	for id, sm := range g.sms {
		waitFor(t, "the mark", func() bool { return sm.value() >= 11 })
		if got := sm.value(); got != 11 {
			t.Fatalf("member %d sums %d, want 11: the copy of the current term and the mark, not the older term's", id, got)
		}
	}
}
