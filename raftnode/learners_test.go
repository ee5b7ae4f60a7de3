package raftnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// startMemGroupWith starts a group of members 1 to n over a MemNetwork,
// of which learners are learners.
func startMemGroupWith(t *testing.T, n int, learners []uint64) *memGroup {
	t.Helper()
	g := &memGroup{nw: NewMemNetwork(), nodes: map[uint64]*Node{}, sms: map[uint64]*counter{}}
	peers := map[uint64]string{}
	for id := uint64(1); id <= uint64(n); id++ {
		peers[id] = ""
	}
	for id := range peers {
		tr := g.nw.NewTransport(id)
		g.sms[id] = &counter{}
		node, err := Start(Config{ID: id, Peers: peers, Learners: learners, Dir: t.TempDir(), TickInterval: 10 * time.Millisecond,
			Transport: tr, Logger: zaptest.NewLogger(t).Named(fmt.Sprintf("n%d", id))}, g.sms[id])
		if err != nil {
			t.Fatal(err)
		}
		tr.Attach(node, nil)
		g.nodes[id] = node
		t.Cleanup(func() {
			node.Stop()
			tr.Close()
		})
	}
	return g
}

// Learners configured at start join as learners once the voters elect a
// leader, replicate the log, never vote, and are not added again once
// removed.
func TestConfiguredLearnersJoinAndStayLearners(t *testing.T) {
	t.Parallel()
	g := startMemGroupWith(t, 4, []uint64{4})
	lead := g.leader(t, 1, 2, 3)
	if lead == 4 {
		t.Fatal("the learner leads")
	}
	waitFor(t, "the learner to be added", func() bool {
		return slices.Contains(g.nodes[lead].Members(), Member{ID: 4, Learner: true})
	})
	if o := g.add(t, lead, 7); o.Err != nil {
		t.Fatal(o.Err)
	}
	waitFor(t, "the learner to apply the write", func() bool { return g.sms[4].value() == 7 })
	// Forwarded by the learner, a write commits too.
	if o := g.add(t, 4, 1); o.Err != nil {
		t.Fatalf("a write proposed on the learner: %v", o.Err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.nodes[lead].RemoveMember(ctx, 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * learnerEvery)
	if slices.ContainsFunc(g.nodes[lead].Members(), func(m Member) bool { return m.ID == 4 }) {
		t.Fatal("a removed learner was added again")
	}
}

// A member removed from the group that still runs, or comes back (one a
// forced recovery left out), is not heard: its messages, with a term of
// its own, do not make the group's leader step down. Added again, it is
// heard again.
func TestARemovedMemberIsNotHeard(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	gone := lead%3 + 1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.nodes[lead].RemoveMember(ctx, gone); err != nil {
		t.Fatal(err)
	}
	term := g.nodes[lead].Term()
	if err := g.nodes[lead].Step(ctx, raftpb.Message{Type: raftpb.MsgHeartbeat, From: gone, To: lead, Term: term + 5}); err != nil {
		t.Fatal(err)
	}
	if o := g.add(t, lead, 1); o.Err != nil {
		t.Fatalf("a write after the removed member's message: %v", o.Err)
	}
	if !g.nodes[lead].IsLeader() || g.nodes[lead].Term() != term {
		t.Fatalf("the leader heard the removed member: leads %v, term %d (was %d)", g.nodes[lead].IsLeader(), g.nodes[lead].Term(), term)
	}
}
