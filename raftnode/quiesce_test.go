package raftnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestIdleGroupsGoQuietAndWake runs three quiescing groups on three
// members, each led by its preferred member, and checks that they go
// quiet when idle and wake for what needs them: a write through a
// follower, a leader cut off by a partition (its followers elect another,
// and after the partition heals the leadership goes back, the writes of
// both sides in the log), and a leader's member stopped and restarted.
func TestIdleGroupsGoQuietAndWake(t *testing.T) {
	t.Parallel()
	groups := []uint64{1, 2, 3}
	prefer := map[uint64]uint64{1: 1, 2: 2, 3: 3}
	opts := groupOptions{prefer: prefer, quiesce: true}
	members, addrs := startGroupCluster(t, groups, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	quiet := func() bool {
		for _, m := range members {
			for _, g := range groups {
				if !m.nodes[g].Quiescent() {
					return false
				}
			}
		}
		return true
	}
	ledByPreferred := func() bool {
		for _, m := range members {
			for _, g := range groups {
				if m.nodes[g].Leader() != prefer[g] {
					return false
				}
			}
		}
		return true
	}
	want := map[uint64]map[string]bool{1: {}, 2: {}, 3: {}}
	write := func(g, through uint64, v string) {
		t.Helper()
		n := members[through].nodes[g]
		for o := n.Propose(ctx, []byte(v)).Wait(ctx); o.Err != nil; o = n.Propose(ctx, []byte(v)).Wait(ctx) {
			if ctx.Err() != nil {
				t.Fatalf("group %d through member %d: %v", g, through, o.Err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		want[g][v] = true
	}
	converged := func() bool {
		for _, m := range members {
			for _, g := range groups {
				if !m.states[g].equals(want[g]) {
					return false
				}
			}
		}
		return true
	}
	waitFor("each group led by its preferred member", ledByPreferred)
	waitFor("every group quiet on every member", quiet)
	terms := map[uint64]uint64{}
	for _, g := range groups {
		terms[g] = members[1].nodes[g].Term()
	}
	time.Sleep(50 * 10 * time.Millisecond) // five election timeouts with nobody ticking
	for _, g := range groups {
		if term := members[1].nodes[g].Term(); term != terms[g] {
			t.Errorf("group %d went from term %d to %d while quiet", g, terms[g], term)
		}
	}

	write(2, 1, "through a follower")
	waitFor("the write on every member", converged)
	waitFor("quiet again after the write", quiet)

	// Member 1, group 1's leader, is cut off: the others judge it dead,
	// wake, and elect one of them.
	cut := func(f Filter) {
		for _, m := range members {
			m.tr.(*TCPTransport).SetFilter(f)
		}
	}
	cut(func(from, to uint64) bool { return from != 1 && to != 1 })
	start := time.Now()
	for _, id := range []uint64{2, 3} {
		waitFor(fmt.Sprint("member ", id, " to follow a new leader of group 1"), func() bool {
			l := members[id].nodes[1].Leader()
			return (l == 2 || l == 3) && members[id].nodes[1].Term() > terms[1]
		})
	}
	t.Logf("group 1 led again %v after its leader was cut off (ticks of 10 ms)", time.Since(start))
	write(1, 2, "while 1 is cut off")
	cut(nil)
	waitFor("the leaderships back with their preferred members", ledByPreferred)
	write(1, 1, "after the partition")
	waitFor("every write on every member", converged)
	waitFor("quiet again after the partition", quiet)

	// Member 3, group 3's leader, stops.
	dir3 := members[3].dir
	members[3].stop(t)
	delete(members, 3)
	start = time.Now()
	waitFor("a new leader of group 3", func() bool {
		l1, l2 := members[1].nodes[3].Leader(), members[2].nodes[3].Leader()
		return l1 == l2 && (l1 == 1 || l1 == 2)
	})
	t.Logf("group 3 led again %v after its leader stopped", time.Since(start))
	write(3, 1, "while 3 is down")
	members[3] = startGroupMember(t, 3, dir3, listen(t, 3, addrs[3]), addrs, groups, opts)
	waitFor("the leaderships back with their preferred members", ledByPreferred)
	waitFor("every write on every member", converged)
	waitFor("quiet again after the restart", quiet)
}

func TestLivenessJudgesAPeerDeadOnceUntilItIsHeardFromAgain(t *testing.T) {
	t.Parallel()
	var l liveness
	t0 := time.Unix(1000, 0)
	l.heardFrom(2, t0) // not started: forgotten
	if l.alive(2, t0) || l.sweep(t0) != nil {
		t.Fatal("a liveness not started judges")
	}
	if !l.start(time.Second) || l.start(time.Minute) {
		t.Fatal("start: only the first call starts")
	}
	for _, step := range []struct {
		at    time.Duration
		heard uint64 // a frame of this peer at this time, 0 for none
		died  []uint64
		alive []uint64
	}{
		{at: 0, heard: 2, alive: []uint64{2}}, // 3 never heard from: never judged
		{at: 999 * time.Millisecond, alive: []uint64{2}},
		{at: time.Second, died: []uint64{2}}, // 2's frame is a timeout old
		{at: 1500 * time.Millisecond},        // judged dead once
		{at: 2 * time.Second, heard: 3, alive: []uint64{3}},
		{at: 2500 * time.Millisecond, heard: 2, alive: []uint64{2, 3}},
		{at: 3 * time.Second, died: []uint64{3}, alive: []uint64{2}},
	} {
		now := t0.Add(step.at)
		if step.heard != 0 {
			l.heardFrom(step.heard, now)
		}
		died := l.sweep(now)
		slices.Sort(died)
		if !slices.Equal(died, step.died) {
			t.Errorf("at %v: died %v, want %v", step.at, died, step.died)
		}
		for _, id := range []uint64{2, 3} {
			if got, want := l.alive(id, now), slices.Contains(step.alive, id); got != want {
				t.Errorf("at %v: alive(%d) = %v, want %v", step.at, id, got, want)
			}
		}
	}
}
