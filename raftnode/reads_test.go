package raftnode

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Reads that arrive together share rounds: each still sees every write
// committed before it began, and raft is asked far fewer times than there
// are reads.
func TestConcurrentReadIndexesShareRounds(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	const reads = 200
	var wg sync.WaitGroup
	errs := make(chan error, reads)
	for i := range reads {
		if o := g.add(t, lead, 1); o.Err != nil {
			t.Fatal(o.Err)
		}
		want := uint64(i + 1) // the writes committed before this read began
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := g.nodes[follower].ReadIndex(ctx); err != nil {
				errs <- err
				return
			}
			if got := g.sms[follower].value(); got < want {
				t.Errorf("a read after ReadIndex sees %d, want at least %d", got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if rounds := g.nodes[follower].readRounds.Load(); rounds >= reads {
		t.Fatalf("%d reads made %d read index requests, want fewer", reads, rounds)
	}
}

// Raft does not resend a read index request a follower forwarded: when
// the network loses it, the round asks again rather than wait for its
// callers' deadlines.
func TestALostReadIndexIsAskedAgain(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	follower := lead%3 + 1
	if o := g.add(t, lead, 7); o.Err != nil {
		t.Fatal(o.Err)
	}
	g.nw.Drop(follower, lead, 1)
	time.AfterFunc(50*time.Millisecond, g.nw.Heal)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := g.nodes[follower].ReadIndex(ctx); err != nil {
		t.Fatalf("ReadIndex after its request was lost: %v (after %v)", err, time.Since(start))
	}
	if got := g.sms[follower].value(); got != 7 {
		t.Fatalf("a read after ReadIndex sees %d, want 7", got)
	}
	if rounds := g.nodes[follower].readRounds.Load(); rounds < 2 {
		t.Fatalf("%d read index requests, want the lost one asked again", rounds)
	}
}
