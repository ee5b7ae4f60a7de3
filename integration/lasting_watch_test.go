package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/internal/shardtest"
	"github.com/arbor-coord/arbor/server"
)

// collect reads n events from ch, failing the test if they do not come.
func collect(t *testing.T, ch <-chan client.Event, n int, within time.Duration) []client.Event {
	t.Helper()
	var got []client.Event
	deadline := time.After(within)
	for len(got) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events: %v", len(got), n, got[max(0, len(got)-3):])
			}
			got = append(got, ev)
		case <-deadline:
			t.Fatalf("%d of %d events within %v", len(got), n, within)
		}
	}
	return got
}

// watchThroughProxy sets a recursive watch of path from a watcher that
// reaches s through a proxy the test can cut, and returns the proxy, the
// watcher, a writer that reaches s directly, the watch's events and the
// test's context.
func watchThroughProxy(t *testing.T, s *server.Server, path string) (*proxy, *client.Client, *client.Client, <-chan client.Event, context.Context) {
	t.Helper()
	p := newProxy(t, s.Addr().String())
	watcher := dial(t, p.addr(), client.WithSessionTimeout(20*time.Second))
	ctx := testCtx(t)
	events, err := watcher.AddWatch(ctx, path, client.WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	return p, watcher, dial(t, s.Addr().String()), events, ctx
}

func TestARecursiveWatchSeesEveryChangeInOrderAcrossAReconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p, _, writer, events, ctx := watchThroughProxy(t, s, "/deep")

	// 1,000 changes in a subtree up to 6 deep: creates, sets, deletes of
	// leaves. Half-way the watcher's connection breaks.
	const changes = 1000
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := []string{"/deep"}
	children := map[string]int{}
	var want []string
	wantData := map[int]string{} // event index: the data a NodeDataChanged carries
	if _, err := writer.Create(ctx, "/deep", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	want = append(want, "NodeCreated /deep")
	for i := 1; i < changes; i++ {
		if i == changes/2 {
			p.cut(false)
		}
		n := nodes[rng.IntN(len(nodes))]
		switch {
		case i%5 == 4 && n != "/deep" && children[n] == 0:
			if err := writer.Delete(ctx, n, -1); err != nil {
				t.Fatal(err)
			}
			nodes = slices.DeleteFunc(nodes, func(x string) bool { return x == n })
			children[n[:strings.LastIndexByte(n, '/')]]--
			want = append(want, "NodeDeleted "+n)
		case i%3 == 0 || strings.Count(n, "/") >= 6:
			if _, err := writer.Set(ctx, n, fmt.Appendf(nil, "%d", i), -1); err != nil {
				t.Fatal(err)
			}
			wantData[len(want)] = fmt.Sprint(i)
			want = append(want, "NodeDataChanged "+n)
		default:
			child := fmt.Sprintf("%s/n%d", n, i)
			if _, err := writer.Create(ctx, child, nil, client.Persistent); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, child)
			children[n]++
			want = append(want, "NodeCreated "+child)
		}
	}
	got := collect(t, events, len(want), 20*time.Second)
	var last int64
	for i, ev := range got {
		if s := ev.Type.String() + " " + ev.Path; s != want[i] {
			t.Fatalf("event %d: %s, want %s (the events before: %v)", i, s, want[i], got[max(0, i-3):i])
		}
		if ev.Zxid <= last {
			t.Fatalf("event %d at zxid %d after %d: not in zxid order", i, ev.Zxid, last)
		}
		// Every value is in its event, also the replayed ones.
		switch ev.Type {
		case client.EventNodeDataChanged:
			if string(ev.Data) != wantData[i] || ev.Stat.Mzxid != ev.Zxid {
				t.Fatalf("event %d: %s carries %q at mzxid %d, want %q at %d", i, ev.Path, ev.Data, ev.Stat.Mzxid, wantData[i], ev.Zxid)
			}
		case client.EventNodeCreated:
			if ev.Stat.Czxid != ev.Zxid {
				t.Fatalf("event %d: %s carries czxid %d, want %d", i, ev.Path, ev.Stat.Czxid, ev.Zxid)
			}
		}
		last = ev.Zxid
	}
	select {
	case ev := <-events:
		t.Errorf("an event beyond the changes made: %v", ev)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestAPersistentWatchSeesItsNodeAndStaysUntilRemoved(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	events, err := c.AddWatch(ctx, "/cfg", client.WatchPersistent)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func() error
		want string // "" for no event
	}{
		{func() error { _, err := c.Create(ctx, "/cfg", []byte("1"), client.Persistent); return err }, "NodeCreated /cfg"},
		{func() error { _, err := c.Set(ctx, "/cfg", []byte("2"), -1); return err }, "NodeDataChanged /cfg"},
		{func() error { _, err := c.Create(ctx, "/cfg/x", nil, client.Persistent); return err }, "NodeChildrenChanged /cfg"},
		{func() error { _, err := c.Set(ctx, "/cfg/x", []byte("y"), -1); return err }, ""},
		{func() error { return c.Delete(ctx, "/cfg/x", -1) }, "NodeChildrenChanged /cfg"},
		{func() error { return c.Delete(ctx, "/cfg", -1) }, "NodeDeleted /cfg"},
		{func() error { _, err := c.Create(ctx, "/cfg", nil, client.Persistent); return err }, "NodeCreated /cfg"},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		// A sync is answered after every notification it follows.
		if err := c.Sync(ctx, "/"); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-events:
			if got := ev.Type.String() + " " + ev.Path; got != st.want {
				t.Errorf("step %d: %s, want %q", i, got, st.want)
			}
		default:
			if st.want != "" {
				t.Errorf("step %d: no event, want %s", i, st.want)
			}
		}
	}
	if err := c.RemoveWatch(ctx, "/cfg", client.WatchPersistent); err != nil {
		t.Fatal(err)
	}
	if _, open := <-events; open {
		t.Error("the channel of a removed watch is open")
	}
	if err := c.RemoveWatch(ctx, "/cfg", client.WatchPersistent); !errors.Is(err, client.ErrNoWatcher) {
		t.Errorf("removing it again: %v, want ErrNoWatcher", err)
	}
}

func TestALastingWatchMissesNothingAcrossARestartOfItsServer(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freePort(t)
	small := func(c *server.Config) { c.SnapshotEvery = 20 } // the log behind snapshots goes
	s := startServer(t, dir, addr, small)
	p := newProxy(t, addr)
	watcher := dial(t, p.addr(), client.WithSessionTimeout(20*time.Second))
	writer := dial(t, addr)
	ctx := testCtx(t)
	events, err := watcher.AddWatch(ctx, "/x", client.WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	p.cut(true)
	want := []string{"NodeCreated /x"}
	if _, err := writer.Create(ctx, "/x", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		path := fmt.Sprintf("/y%d", i) // beside /x: not seen
		if i%2 == 1 {
			path = fmt.Sprintf("/x/n%d", i)
			want = append(want, "NodeCreated "+path)
		}
		if _, err := writer.Create(ctx, path, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	// The history survives the restart, though the log behind its
	// snapshots is gone: the watcher gets every event it missed.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	startServer(t, dir, addr, small)
	p.setRefuse(false)
	got := collect(t, events, len(want), 20*time.Second)
	for i, ev := range got {
		if s := ev.Type.String() + " " + ev.Path; s != want[i] {
			t.Fatalf("event %d: %s, want %s", i, s, want[i])
		}
	}
	noEvent(t, events, 100*time.Millisecond)
}

func TestALastingWatchEndsWhenTheHistoryNoLongerHasWhatItMissed(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	startServer(t, "", addr, func(c *server.Config) { c.WatchHistoryEvents = 10 })
	p := newProxy(t, addr)
	watcher := dial(t, p.addr(), client.WithSessionTimeout(20*time.Second))
	writer := dial(t, addr)
	ctx := testCtx(t)
	// (Under one top-level name: a watch of "/" on a sharded cluster
	// cannot resume from one zxid, below.)
	if _, err := writer.Create(ctx, "/h", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	events, err := watcher.AddWatch(ctx, "/h", client.WatchPersistentRecursive)
	if err != nil {
		t.Fatal(err)
	}
	p.cut(true)
	for i := range 30 {
		if _, err := writer.Create(ctx, fmt.Sprintf("/h/n%d", i), nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	p.setRefuse(false)
	ev := collect(t, events, 1, 20*time.Second)[0]
	var hc *client.HistoryCompactedError
	if ev.Type != client.EventWatchRemoved || ev.Path != "/h" || !errors.Is(ev.Err, client.ErrEventsLost) ||
		!errors.As(ev.Err, &hc) || hc.Oldest <= 0 {
		t.Fatalf("got %v (%v), want the watch removed with ErrEventsLost and the oldest zxid kept", ev, ev.Err)
	}
	if _, open := <-events; open {
		t.Error("the channel is still open")
	}
	// The client can resume from there.
	again, err := watcher.AddWatch(ctx, "/h", client.WatchPersistentRecursive, client.FromZxid(hc.Oldest))
	if err != nil {
		t.Fatal(err)
	}
	first := collect(t, again, 1, 5*time.Second)[0]
	if first.Zxid != hc.Oldest+1 || first.Type != client.EventNodeCreated {
		t.Errorf("resumed from %d: first event %v", hc.Oldest, first)
	}
}

func TestAWatchFromAPastZxidGetsEveryChangeAfterItThenTheLiveOnes(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", func(c *server.Config) { c.WatchHistoryEvents = 200 })
	c := dial(t, s.Addr().String())
	ctx := testCtx(t)
	var zxids []int64 // of the changes under /a, in order
	var want []string
	for i := range 50 {
		path := fmt.Sprintf("/a%d", i)
		if i%2 == 0 {
			path = fmt.Sprintf("/a/n%d", i)
		}
		if i == 0 {
			path = "/a"
		}
		_, st, err := c.CreateStat(ctx, path, []byte{byte(i)}, client.Persistent)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(path+"/", "/a/") {
			zxids = append(zxids, st.Czxid)
			want = append(want, "NodeCreated "+path)
		}
	}
	from := zxids[10] // the changes after the eleventh
	events, err := c.AddWatch(ctx, "/a", client.WatchPersistentRecursive, client.FromZxid(from))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/a", []byte("live"), -1); err != nil {
		t.Fatal(err)
	}
	want = append(want[11:], "NodeDataChanged /a")
	got := collect(t, events, len(want), 5*time.Second)
	for i, ev := range got {
		if s := ev.Type.String() + " " + ev.Path; s != want[i] {
			t.Fatalf("event %d: %s, want %s", i, s, want[i])
		}
		if i < len(zxids)-11 && (ev.Zxid != zxids[11+i] || ev.Stat.Czxid != ev.Zxid || len(ev.Data) != 1) {
			t.Fatalf("replayed event %d: %+v, want zxid %d with the node", i, ev, zxids[11+i])
		}
	}
	noEvent(t, events, 100*time.Millisecond)

	// Far enough back, the history has gone: the error names where it
	// starts.
	for range 200 {
		if _, err := c.Set(ctx, "/a", nil, -1); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.AddWatch(ctx, "/a", client.WatchPersistent, client.FromZxid(from))
	var hc *client.HistoryCompactedError
	if !errors.Is(err, client.ErrHistoryCompacted) || !errors.As(err, &hc) || hc.Oldest <= from {
		t.Fatalf("from %d after 200 more changes: %v, want ErrHistoryCompacted naming a later zxid", from, err)
	}
	old, err := c.AddWatch(ctx, "/a", client.WatchPersistent, client.FromZxid(hc.Oldest))
	if err != nil {
		t.Fatal(err)
	}
	if ev := collect(t, old, 1, 5*time.Second)[0]; ev.Zxid != hc.Oldest+1 {
		t.Errorf("from the oldest zxid %d: first event at %d", hc.Oldest, ev.Zxid)
	}
}

// TestARestoreOfWatchesOverManyFramesHasNoDuplicate: more than 128 KiB of
// watched paths go back in several setWatches2 frames, while a writer
// keeps changing what they watch; every change reaches the watcher once.
func TestARestoreOfWatchesOverManyFramesHasNoDuplicate(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p, watcher, writer, all, ctx := watchThroughProxy(t, s, "/")
	long := strings.Repeat("p", 1000)
	const paths = 200 // 200 KB of paths
	for i := range paths {
		if _, err := watcher.AddWatch(ctx, fmt.Sprintf("/%s%03d", long, i), client.WatchPersistent); err != nil {
			t.Fatal(err)
		}
	}
	const writes = 600
	done := make(chan error, 1)
	go func() {
		for i := range writes {
			if _, err := writer.Create(ctx, fmt.Sprintf("/%s%03d", long, i%paths)+fmt.Sprint("x", i/paths), nil, client.Persistent); err != nil {
				done <- err
				return
			}
			if i%100 == 50 {
				p.cut(false)
			}
		}
		done <- nil
	}()
	got := collect(t, all, writes, 30*time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i, ev := range got {
		if seen[ev.Zxid] || i > 0 && ev.Zxid <= got[i-1].Zxid || ev.Type != client.EventNodeCreated {
			t.Fatalf("event %d: %v, after %v", i, ev, got[max(0, i-2):i])
		}
		seen[ev.Zxid] = true
	}
	noEvent(t, all, 200*time.Millisecond)
}

// TestARecursiveWatchOverShardsResumesInEachAfterAReconnect: on a member
// whose top-level names are split over four shards, a recursive watch of
// "/" sees every shard's events. Its connection breaks while each shard
// changes, and goes on while the watch is restored: it gets every change
// once, each shard's in that shard's order, resumed from where it was in
// each (wire.ShardedWatches), not ended for a reread.
func TestARecursiveWatchOverShardsResumesInEachAfterAReconnect(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	shardInto(t, 4, s) // at "g", "n" and "t": a, h, p and w below are each another shard's
	p, watcher, writer, events, ctx := watchThroughProxy(t, s, "/")
	var want []string
	write := func(rounds ...int) {
		for _, round := range rounds {
			for _, top := range []string{"a", "h", "p", "w"} {
				path := fmt.Sprintf("/%s%d", top, round)
				if _, err := writer.Create(ctx, path, nil, client.Persistent); err != nil {
					t.Fatal(err)
				}
				want = append(want, "NodeCreated "+path)
			}
		}
	}
	write(0, 1)
	collect(t, events, len(want), 10*time.Second)
	p.cut(true)
	write(2, 3, 4)
	p.setRefuse(false)
	write(5, 6) // as the watcher reconnects and restores
	got := collect(t, events, len(want)-8, 20*time.Second)
	seen := map[string]bool{}
	last := map[byte]int64{} // by shard: the zxid of its last event
	for i, ev := range got {
		name := ev.Type.String() + " " + ev.Path
		shard := ev.Path[1]
		if seen[name] || ev.Zxid <= last[shard] {
			t.Fatalf("event %d: %v again or out of its shard's order, after %v", i, ev, got[:i])
		}
		seen[name], last[shard] = true, ev.Zxid
	}
	for _, name := range want[8:] {
		if !seen[name] {
			t.Errorf("missed %s", name)
		}
	}
	noEvent(t, events, 200*time.Millisecond)
	// One zxid cannot say where such a watch resumes in each shard.
	if _, err := watcher.AddWatch(ctx, "/", client.WatchPersistentRecursive, client.FromZxid(1)); !errors.Is(err, client.ErrHistoryCompacted) {
		t.Errorf("a watch of / from one zxid: %v, want ErrHistoryCompacted", err)
	}
}

// TestARecursiveWatchOverShardsResumesInAShardSplitOffAfterIt: a recursive
// watch of "/" set before a split has no place in the new shard until it
// has an event of it. Its connection breaks right after the split, while
// the new shard changes: the member places it at the split, and the watch
// gets the new shard's changes with the others', rather than end.
func TestARecursiveWatchOverShardsResumesInAShardSplitOffAfterIt(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	shardInto(t, 2, s) // at "t": /a is the meta group's, /u and /x another's
	p, _, writer, events, ctx := watchThroughProxy(t, s, "/")
	create := func(paths ...string) {
		for _, path := range paths {
			if _, err := writer.Create(ctx, path, nil, client.Persistent); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The nodes created, in the order they come, but the map's own
	// changes (/zookeeper/shards), which the watch sees too.
	created := func(n int) []string {
		t.Helper()
		var paths []string
		for deadline := time.After(20 * time.Second); len(paths) < n; {
			select {
			case ev, ok := <-events:
				switch {
				case !ok:
					t.Fatalf("the watch ended after %v", paths)
				case ev.Type == client.EventNodeCreated:
					paths = append(paths, ev.Path)
				case !strings.HasPrefix(ev.Path, "/zookeeper/"):
					t.Fatalf("after %v: %v (%v)", paths, ev, ev.Err)
				}
			case <-deadline:
				t.Fatalf("%d of %d creates: %v", len(paths), n, paths)
			}
		}
		return paths
	}
	create("/a0", "/u0", "/x0")
	created(3)
	before := len(s.Status().Shards)
	if _, err := s.SplitShards(ctx, "/", []byte("w")); err != nil { // /x to a new shard
		t.Fatal(err)
	}
	waitUntil(t, "the new shard led", patience, func() bool { return shardtest.Led(s, before+2) })
	p.cut(true)
	create("/x1", "/a1", "/u1", "/x2")
	p.setRefuse(false)
	got := created(4)
	if i := slices.Index(got, "/x1"); i < 0 || i > slices.Index(got, "/x2") {
		t.Errorf("the new shard's creates out of order: %v", got)
	}
	slices.Sort(got)
	if want := []string{"/a1", "/u1", "/x1", "/x2"}; !slices.Equal(got, want) {
		t.Fatalf("after the reconnect the watch got %v, want %v", got, want)
	}
}
