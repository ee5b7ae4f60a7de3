package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

// TestAWatchOverShardsOfANodeInAShardIsSetFromTheMetaGroup: /zoo has a
// partitioned parent below it, so a recursive watch of /zoo sees several
// shards' events, while the node /zoo itself is shard 1's once the top
// level is split. Such a watch is set a shard at a time from the meta
// group's read lock, not its node's shard's (which it would take twice):
// it is set at once while both groups apply writes, checks READ on the
// node in its shard, and sees its shard's events.
func TestAWatchOverShardsOfANodeInAShardIsSetFromTheMetaGroup(t *testing.T) {
	t.Parallel()
	s := startZKServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zc := sessionZK(t, s)
	for _, n := range []struct {
		path string
		acl  []zkwire.ACL
	}{
		{"/app", zkwire.OpenACL}, {"/zoo", zkwire.OpenACL}, {"/zoo/p", zkwire.OpenACL},
		{"/zs", []zkwire.ACL{{Perms: zkwire.PermCreate | zkwire.PermWrite, ID: zkwire.Anyone}}}, {"/zs/p", zkwire.OpenACL},
	} {
		if r := zc.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: n.path, ACL: n.acl}); r.Err != 0 {
			t.Fatalf("create %s: %+v", n.path, r)
		}
	}
	for _, p := range []string{"/zoo/p", "/zs/p"} {
		if _, _, err := s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition(p) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SplitShards(ctx, "/", []byte("m")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "shard 1 led", func() bool { return len(s.Status().Shards) == 1 && s.Status().Shards[0].Leader == 1 })
	if g, err := s.groupOfPath("/zoo"); err != nil || g.id != 1 || !s.spans("/zoo", true) {
		t.Fatalf("/zoo in group %v (%v), spans %v: want shard 1's node, a watch over shards", g, err, s.spans("/zoo", true))
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { // writes in both groups meanwhile
		w := sessionZK(t, s)
		for i := 0; !stop.Load() && i < 10_000; i++ {
			w.call(t, zkwire.Request{Op: zkwire.OpSetData, Path: []string{"/app", "/zoo"}[i%2], Data: fmt.Append(nil, i), Version: -1})
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	for i := range 20 {
		c := sessionZK(t, s)
		done := make(chan zkwire.Reply, 1)
		go func() { done <- c.call(t, zkwire.Request{Op: zkwire.OpAddWatch, Path: "/zoo", Mode: 1}) }()
		select {
		case r := <-done:
			if r.Err != 0 {
				t.Fatalf("addWatch %d: %+v", i, r)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("addWatch %d of /zoo did not answer", i)
		}
		c.nc.Close()
	}
	if r := zc.call(t, zkwire.Request{Op: zkwire.OpAddWatch, Path: "/zs", Mode: 1}); r.Err != int32(wire.CodeNoAuth) {
		t.Errorf("addWatch of /zs, which its ACL does not let be read: %+v, want NoAuth", r)
	}
	stop.Store(true)
	wg.Wait()

	if r := zc.call(t, zkwire.Request{Op: zkwire.OpAddWatch, Path: "/zoo", Mode: 1}); r.Err != 0 {
		t.Fatalf("addWatch: %+v", r)
	}
	_, events := zc.callEvents(t, zkwire.Request{Op: zkwire.OpCreate, Path: "/zoo/q", ACL: zkwire.OpenACL})
	if !slices.Contains(events, "1 /zoo/q") { // NodeCreated
		t.Errorf("after a create below /zoo the watch got %v", events)
	}
}

// TestAShardedRestoreSendsEachEventOnceAroundItsUnlockedBulk: a recursive
// watch of "/" on a member split in two is restored from its places in
// each shard. The bulk of its replay goes without the groups' locks
// (preReplaySharded), and changes in both shards applied between the bulk
// and the locked rest come once, each shard's in its order, before the
// live ones.
func TestAShardedRestoreSendsEachEventOnceAroundItsUnlockedBulk(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.SplitShards(ctx, "/", []byte("m")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "shard 1 led", func() bool { return len(s.Status().Shards) == 1 && s.Status().Shards[0].Leader == 1 })
	w := dialRaw(t, s)
	w.connect(wire.ConnectRequest{})
	xid := int32(0)
	create := func(p string) int64 {
		t.Helper()
		xid++
		r := w.call(wire.Request{Xid: xid, Op: wire.OpCreate, Path: p})
		if r.Err != wire.CodeOK {
			t.Fatalf("create %s: %v", p, r.Err)
		}
		return r.Zxid
	}
	atA, atZ := create("/a0"), create("/z0") // the meta group's, shard 1's
	for _, p := range []string{"/a1", "/z1", "/a2", "/z2"} {
		create(p)
	}
	var once sync.Once
	s.afterPreReplay = func() { once.Do(func() { create("/a3"); create("/z3") }) }

	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.write(wire.AppendRequest(nil, &wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: atZ,
		RecursiveWatches: []string{"/"}, WatchZxids: []int64{atA},
		WatchPositions: [][]int64{{wire.Position(0, atA), wire.Position(1, atZ)}}}))
	var got []string
	last := map[uint64]int64{}
	next := func() wire.Reply {
		t.Helper()
		r, err := c.reply(wire.OpSetWatches2)
		if err != nil {
			t.Fatal(err)
		}
		if r.Xid == wire.XidNotification {
			g, z := wire.PositionOf(r.Zxid)
			if z <= last[g] || r.EventType != wire.EventNodeCreated {
				t.Fatalf("%v %s at %d in group %d, after %d: again, out of order or not a create", r.EventType, r.Path, z, g, last[g])
			}
			last[g] = z
			got = append(got, r.Path)
		}
		return r
	}
	for r := next(); r.Xid != wire.XidSetWatches; r = next() {
	}
	create("/a4")
	create("/z4")
	for len(got) < 8 {
		next()
	}
	slices.Sort(got)
	if want := []string{"/a1", "/a2", "/a3", "/a4", "/z1", "/z2", "/z3", "/z4"}; !slices.Equal(got, want) {
		t.Fatalf("the watch got %v, want %v", got, want)
	}
}
