package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
)

// lockName finds a child name of /locks whose hash is at or above 2^63
// (high) or below it.
func lockName(high bool) string {
	for i := 0; ; i++ {
		name := fmt.Sprint("lock-", i)
		if shardmap.Hash(name) >= 1<<63 == high {
			return name
		}
	}
}

// TestRequestsGoToTheShardThatServesTheirPaths shards three members into
// the meta group (names below "m", the lower half of /locks' hashes),
// group 1 (names from "m") and group 2 (the upper half of /locks), and
// uses them through clients on different members: every request reaches
// the shard of its paths, a listing of / or of /locks merges the shards',
// a multi across shards is refused whole, an ephemeral in a shard goes
// with its session, watches fire from every shard, and a mutex in a shard
// hands over from one client to another.
func TestRequestsGoToTheShardThatServesTheirPaths(t *testing.T) {
	t.Parallel()
	members, _ := startTrio(t, map[uint64]string{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range []string{"/locks", "/queues"} {
		if _, _, err := members[1].changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition(p) }); err != nil {
			t.Fatal(err)
		}
	}
	dial := func(id uint64) *client.Client {
		c, err := client.Dial(ctx, []string{members[id].Addr().String()}, client.WithSessionTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2, c3 := dial(1), dial(2), dial(3)
	for _, p := range []string{"/app", "/zoo", "/locks"} {
		if _, err := c1.Create(ctx, p, []byte(p), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := members[2].splitMeta(ctx, shardmap.Key{Key: "m"}); err != nil {
		t.Fatal(err)
	}
	if m, err := c3.SplitShards(ctx, shardmap.Key{Space: "/locks"}); err != nil || m.Group(2) == nil {
		t.Fatalf("a split of /locks' hashes by a client: %+v, %v", m, err)
	}
	for _, s := range members {
		// Each group's leadership settles on the member the spread names
		// (a transfer drops the proposals made meanwhile).
		waitFor(t, "every member routing by three shards, each led by its spread leader", func() bool {
			m := s.routingMap()
			g1, g2 := s.group(1), s.group(2)
			return m != nil && len(m.Shards) == 3 && g1 != nil && g2 != nil && g1.node.Leader() == 2 && g2.node.Leader() == 3
		})
	}
	low, high := "/locks/"+lockName(false), "/locks/"+lockName(true)

	// Writes through each member land in the shard of their path, and
	// every member reads them after a sync of that path.
	for i, p := range []string{"/zoo/a", "/app/a", high, low} {
		w := []*client.Client{c1, c2, c3}[i%3]
		if _, err := w.Create(ctx, p, []byte(p), client.Persistent); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	for id, s := range members {
		for p, g := range map[string]uint64{"/zoo/a": 1, "/app/a": 0, high: 2, low: 0} {
			if got, err := s.routeOf(&wire.Request{Op: wire.OpGetData, Path: p}); err != nil || got != g {
				t.Errorf("member %d routes %s to %d, %v; want %d", id, p, got, err, g)
			}
		}
	}
	for _, c := range []*client.Client{c1, c2, c3} {
		for _, p := range []string{"/zoo/a", "/app/a", high, low} {
			if err := c.Sync(ctx, p); err != nil {
				t.Fatal(err)
			}
			if data, _, err := c.Get(ctx, p); err != nil || string(data) != p {
				t.Errorf("get %s: %q, %v", p, data, err)
			}
		}
	}
	if kids, _, err := c2.Children(ctx, "/"); err != nil || !slices.Equal(kids, []string{"app", "locks", "zoo", "zookeeper"}) {
		t.Errorf("ls /: %v, %v", kids, err)
	}
	if _, err := c1.Create(ctx, "/zoo2", nil, client.Persistent); err != nil { // made in group 1 alone
		t.Fatal(err)
	}
	if err := c1.Sync(ctx, "/zoo2"); err != nil {
		t.Fatal(err)
	}
	if v, err := members[1].Node(nil, "/", 0, 10); err != nil || len(v.Children) != 5 || v.Children[3].Name != "zoo2" ||
		v.Children[1].NumChildren != 2 || v.Children[2].NumChildren != 1 {
		t.Errorf("the tree API's view of /: %+v, %v; want its five children, /locks' from two shards, /zoo's from group 1", v.Children, err)
	}
	want := []string{lockName(false), lockName(true)}
	slices.Sort(want)
	if kids, st, err := c3.Children(ctx, "/locks"); err != nil || !slices.Equal(kids, want) || st.NumChildren != 2 {
		t.Errorf("ls /locks: %v %+v, %v; want %v", kids, st, err, want)
	}

	// A partitioned parent made after the split of its hashes: the shard
	// that takes a child of it first gets the parent (a stub, with the
	// meta group's ACL), and the parent's ACL and existence then stay.
	if m, err := c1.SplitShards(ctx, shardmap.Key{Space: "/queues"}); err != nil || m.Group(3) == nil {
		t.Fatalf("a split of /queues' hashes before /queues exists: %+v, %v", m, err)
	}
	waitFor(t, "group 3 led on member 1", func() bool { g := members[1].group(3); return g != nil && g.node.Leader() != 0 })
	if _, err := c2.Create(ctx, "/queues", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	qLow, qHigh := "/queues/"+lockName(false), "/queues/"+lockName(true)
	for _, p := range []string{qLow, qHigh} {
		// Again while a leadership moves (group 3's to its spread member):
		// a create whose outcome was unknown may find its node made.
		for retried := false; ; retried = true {
			_, err := c2.Create(ctx, p, []byte(p), client.Persistent)
			if errors.Is(err, client.ErrNoQuorum) || errors.Is(err, client.ErrOperationTimeout) || errors.Is(err, client.ErrConnectionLoss) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil && !(retried && errors.Is(err, client.ErrNodeExists)) {
				t.Fatalf("create %s: %v", p, err)
			}
			break
		}
	}
	for _, p := range []string{qLow, qHigh} { // a listing reads each shard as this member has it
		if err := c3.Sync(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if kids, _, err := c3.Children(ctx, "/queues"); err != nil || len(kids) != 2 {
		t.Errorf("ls /queues: %v, %v", kids, err)
	}
	if _, err := c1.SetACL(ctx, "/queues", []client.ACL{client.WorldACL(client.PermAll)}, -1); !errors.Is(err, client.ErrBadArguments) {
		t.Errorf("setACL of a partitioned parent of a sharded cluster: %v, want BadArguments", err)
	}

	// A multi across shards is refused whole; within one it applies.
	_, err := c1.Multi(ctx, client.CreateOp("/app/b", nil, client.Persistent), client.CreateOp("/zoo/b", nil, client.Persistent))
	if !errors.Is(err, wire.ErrCrossShard) {
		t.Errorf("a multi across shards: %v, want CrossShard", err)
	}
	if _, err := c1.Multi(ctx, client.CreateOp("/zoo/b", nil, client.Persistent), client.SetOp("/zoo/a", []byte("x"), -1)); err != nil {
		t.Errorf("a multi in group 1: %v", err)
	}

	// A watch in a shard fires; an ephemeral in a shard goes with its
	// session.
	_, _, changed, err := c2.GetW(ctx, "/zoo/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Set(ctx, "/zoo/a", []byte("y"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, changed); ev.Type != client.EventNodeDataChanged {
		t.Errorf("the watch on /zoo/a: %+v", ev)
	}
	owner := dial(1)
	if _, err := owner.Create(ctx, "/zoo/e", nil, client.Ephemeral); err != nil {
		t.Fatalf("an ephemeral in group 1: %v", err)
	}
	if _, err := owner.Create(ctx, "/app/e", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if eph, err := owner.Ephemerals(ctx, "/"); err != nil || !slices.Equal(eph, []string{"/app/e", "/zoo/e"}) {
		t.Errorf("the session's ephemerals in two shards: %v, %v", eph, err)
	}
	if err := c3.Sync(ctx, "/zoo/e"); err != nil {
		t.Fatal(err)
	}
	ok, _, gone, err := c3.ExistsW(ctx, "/zoo/e")
	if err != nil || !ok {
		t.Fatalf("the ephemeral seen from member 3: %v, %v", ok, err)
	}
	owner.Close()
	if ev := nextEvent(t, gone); ev.Type != client.EventNodeDeleted {
		t.Errorf("the ephemeral of a closed session: %+v", ev)
	}

	// A mutex on a lock in group 2 hands over between clients on two
	// members.
	name := high + "/mutex"
	a, b := recipes.NewMutex(c1, name), recipes.NewMutex(c2, name)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	acquired := make(chan error, 1)
	go func() { acquired <- b.Lock(ctx) }()
	select {
	case err := <-acquired:
		t.Fatalf("the second locker got the mutex while the first held it: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-acquired; err != nil {
		t.Fatalf("the second locker: %v", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The mutex's container, empty now, is reaped by group 2's leader.
	waitFor(t, "the empty container of the mutex reaped in group 2", func() bool {
		ok, _, err := c3.Exists(ctx, name)
		return err == nil && !ok
	})

	// Two holders each waiting for the other's mutex, in two shards: the
	// wait-for graph spans them, and the lock listing shows both locks.
	lowMutex, highMutex := low+"/mutex", high+"/mutex"
	p1, g1 := recipes.WithOwner("p1"), recipes.WithHolder("g1")
	p2, g2 := recipes.WithOwner("p2"), recipes.WithHolder("g2")
	aLow, aHigh := recipes.NewMutex(c1, lowMutex, p1, g1), recipes.NewMutex(c1, highMutex, p1, g1)
	bLow, bHigh := recipes.NewMutex(c2, lowMutex, p2, g2), recipes.NewMutex(c2, highMutex, p2, g2)
	if err := aLow.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bHigh.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go func() { _ = aHigh.Lock(waitCtx) }()
	go func() { _ = bLow.Lock(waitCtx) }()
	var cycles [][]client.LockWait
	waitFor(t, "a deadlock across two shards", func() bool {
		cycles, err = c3.Deadlocks(ctx, true)
		return err == nil && len(cycles) == 1 && len(cycles[0]) == 2
	})
	locks, err := c3.Locks(ctx, "/locks", true)
	if err != nil || len(locks) != 2 || locks[0].Path > locks[1].Path {
		t.Errorf("the locks under /locks: %+v, %v; want both mutexes, sorted", locks, err)
	}
}

// nextEvent waits up to 10 s for an event on ch.
func nextEvent(t *testing.T, ch <-chan client.Event) client.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
		return client.Event{}
	}
}
