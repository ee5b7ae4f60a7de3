package integration

import (
	"slices"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

// An observer configured at start (ZooKeeper's observer: a raft learner
// for good) joins as a learner, never leads, serves reads and watches, and
// forwards its clients' writes; the voters go on without it.
func TestAnObserverServesReadsWatchesAndForwardsWrites(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 4, func(cfg *server.Config) { cfg.Observers = []uint64{4} })
	ctx := testCtx(t)
	if lead := c.leader(); lead == 4 {
		t.Fatal("the observer leads")
	}
	onObserver := dial(t, c.addr(4))
	members, err := onObserver.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(members, func(m client.Member) bool { return m.ID == 4 && m.Learner }) {
		t.Fatalf("members %+v: want 4 a learner", members)
	}
	if _, err := onObserver.Create(ctx, "/obs", []byte("a"), client.Persistent); err != nil {
		t.Fatalf("a write through the observer: %v", err)
	}
	data, _, changed, err := onObserver.GetW(ctx, "/obs")
	if err != nil || string(data) != "a" {
		t.Fatalf("a read on the observer: %q, %v", data, err)
	}
	onVoter := dial(t, c.addr(1))
	if _, err := onVoter.Set(ctx, "/obs", []byte("b"), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-changed:
		if ev.Type != client.EventNodeDataChanged {
			t.Fatalf("the observer's watch: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the observer's watch did not fire")
	}

	// The observer does not count toward the quorum: without it, the
	// voters still write.
	c.stop(4)
	if _, err := onVoter.Set(ctx, "/obs", []byte("c"), -1); err != nil {
		t.Fatalf("a write with the observer down: %v", err)
	}
}
