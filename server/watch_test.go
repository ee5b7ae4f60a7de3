package server

import (
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestWatchRegistryFiresOnceAndForgetsClosedConnections(t *testing.T) {
	type fired struct {
		c    *conn
		typ  wire.EventType
		path string
	}
	var got []fired
	w := newWatchRegistry(func(c *conn, _ int64, ev tree.Event) { got = append(got, fired{c, ev.Type, ev.Path}) })
	a, b := &conn{}, &conn{}
	w.add(watchData, "/x", a)
	w.add(watchData, "/x", a) // once per connection and path
	w.add(watchChild, "/x", a)
	w.add(watchData, "/x", b)
	w.add(watchChild, "/y", b)
	if w.size() != 4 {
		t.Fatalf("size %d, want 4", w.size())
	}
	w.trigger([]tree.Event{{Type: wire.EventNodeDataChanged, Path: "/x"}}, 5)
	if len(got) != 2 || w.size() != 2 {
		t.Fatalf("data change fired %v, %d left; want a and b fired, 2 left", got, w.size())
	}
	w.trigger([]tree.Event{{Type: wire.EventNodeDataChanged, Path: "/x"}}, 6)
	if len(got) != 2 {
		t.Fatalf("a fired watch fired again: %v", got)
	}
	w.removeConn(b)
	if w.size() != 1 || len(w.byConn[b]) != 0 {
		t.Fatalf("after b closed: %d watches, b indexes %v", w.size(), w.byConn[b])
	}
	w.trigger([]tree.Event{{Type: wire.EventNodeDeleted, Path: "/x"}}, 7)
	if len(got) != 3 || got[2] != (fired{a, wire.EventNodeDeleted, "/x"}) || w.size() != 0 || len(w.byConn[a]) != 0 {
		t.Fatalf("delete fired %v, %d left, a indexes %v", got, w.size(), w.byConn[a])
	}
}

type notification struct {
	c    *conn
	zxid int64
	typ  wire.EventType
	path string
}

func recordingRegistry() (*watchRegistry, *[]notification) {
	var got []notification
	w := newWatchRegistry(func(c *conn, zxid int64, ev tree.Event) {
		got = append(got, notification{c, zxid, ev.Type, ev.Path})
	})
	return w, &got
}

func TestPersistentAndRecursiveWatchesStayAndSeeTheirEvents(t *testing.T) {
	w, got := recordingRegistry()
	p, r, all := &conn{}, &conn{}, &conn{}
	w.add(watchPersistent, "/a", p)
	w.add(watchRecursive, "/a", r)
	// One connection with every kind on /a gets one notification per event.
	for k := range watchKinds {
		w.add(k, "/a", all)
	}
	events := []tree.Event{
		{Type: wire.EventNodeCreated, Path: "/a"},
		{Type: wire.EventNodeChildrenChanged, Path: "/a"},
		{Type: wire.EventNodeCreated, Path: "/a/b"},
		{Type: wire.EventNodeDataChanged, Path: "/a/b/c"},
		{Type: wire.EventNodeCreated, Path: "/ab"}, // not below /a
		{Type: wire.EventNodeDataChanged, Path: "/a"},
		{Type: wire.EventNodeDeleted, Path: "/a"},
	}
	for i, ev := range events {
		w.trigger([]tree.Event{ev}, int64(10+i))
	}
	want := map[*conn][]string{
		p:   {"NodeCreated /a", "NodeChildrenChanged /a", "NodeDataChanged /a", "NodeDeleted /a"},
		r:   {"NodeCreated /a", "NodeCreated /a/b", "NodeDataChanged /a/b/c", "NodeDataChanged /a", "NodeDeleted /a"},
		all: {"NodeCreated /a", "NodeChildrenChanged /a", "NodeCreated /a/b", "NodeDataChanged /a/b/c", "NodeDataChanged /a", "NodeDeleted /a"},
	}
	for c, w := range want {
		var seen []string
		for _, n := range *got {
			if n.c == c {
				seen = append(seen, n.typ.String()+" "+n.path)
			}
		}
		if !slices.Equal(seen, w) {
			t.Errorf("%s watch saw %q, want %q", map[*conn]string{p: "persistent", r: "recursive", all: "every kind of"}[c], seen, w)
		}
	}
	if w.size() != 4 { // p, r and all's two lasting watches; the one-shots fired
		t.Errorf("%d watches left, want 4", w.size())
	}
	if !w.remove(wire.WatcherPersistent, "/a", p) || w.remove(wire.WatcherPersistent, "/a", p) {
		t.Error("removeWatches of a persistent watch: want true, then false")
	}
	if w.remove(wire.WatcherPersistentRecursive, "/a", p) || !w.remove(wire.WatcherAny, "/a", all) {
		t.Error("removeWatches of kinds held and not held")
	}
	if w.size() != 1 {
		t.Errorf("%d watches left, want r's", w.size())
	}
}

func TestRestoringLastingWatchesReplaysWhatTheyMissed(t *testing.T) {
	w, got := recordingRegistry()
	for i, ev := range []tree.Event{
		{Type: wire.EventNodeCreated, Path: "/svc/a"},       // 5: seen before the reconnect
		{Type: wire.EventNodeDataChanged, Path: "/svc/a"},   // 6
		{Type: wire.EventNodeChildrenChanged, Path: "/svc"}, // 6, same txn
		{Type: wire.EventNodeDeleted, Path: "/other"},       // 7
		{Type: wire.EventNodeCreated, Path: "/cfg"},         // 8
	} {
		w.trigger([]tree.Event{ev}, map[int]int64{0: 5, 1: 6, 2: 6, 3: 7, 4: 8}[i])
	}
	c := &conn{}
	w.restoreLasting(c, 5, 9, []string{"/svc"}, []string{"/svc", "/cfg"})
	want := []notification{
		{c, 6, wire.EventNodeDataChanged, "/svc/a"},
		{c, 6, wire.EventNodeChildrenChanged, "/svc"},
		{c, 8, wire.EventNodeCreated, "/cfg"},
	}
	if !slices.Equal(*got, want) {
		t.Errorf("replayed %v, want %v", *got, want)
	}
	if w.size() != 3 {
		t.Errorf("%d watches registered, want 3", w.size())
	}

	// Events before a snapshot restore are not known: a client that was
	// away since then is told its watches are gone.
	*got = nil
	w.restored(100)
	d := &conn{}
	w.restoreLasting(d, 50, 100, []string{"/svc"}, []string{"/cfg"})
	want = []notification{{d, 100, wire.EventPersistentWatchRemoved, "/svc"}, {d, 100, wire.EventPersistentWatchRemoved, "/cfg"}}
	if !slices.Equal(*got, want) || len(w.byConn[d]) != 0 {
		t.Errorf("after a gap: %v, watches %v; want %v and none registered", *got, w.byConn[d], want)
	}
	*got = nil
	w.restoreLasting(d, 100, 100, []string{"/svc"}, nil)
	if len(*got) != 0 || len(w.byConn[d]) != 1 {
		t.Errorf("no gap: %v, watches %v", *got, w.byConn[d])
	}
}

func TestTheEventRingForgetsWholeTxns(t *testing.T) {
	var r eventRing
	r.reset(1)
	for i := range recentEvents + 2 {
		r.add(recentEvent{zxid: int64(1 + i/2)}) // two events per txn
	}
	// The two events of txn 1 went: every event after zxid 1 is kept.
	if !r.covers(1) || r.covers(0) {
		t.Errorf("from %d: covers(1) %v, covers(0) %v", r.from, r.covers(1), r.covers(0))
	}
	r.add(recentEvent{zxid: int64(1 + (recentEvents+2)/2)})
	if r.covers(1) || !r.covers(2) {
		t.Errorf("after cutting txn 2 in half, from %d", r.from)
	}
	n := 0
	r.since(int64(recentEvents/2), func(recentEvent) { n++ })
	if n != 3 {
		t.Errorf("since: %d events, want the 3 of the last two txns", n)
	}
}

func TestTheEventRingKeepsOrderWhileItGrowsAndDrops(t *testing.T) {
	var r eventRing
	r.reset(1)
	big := make([]byte, recentBytes/2)
	for z := int64(1); z <= 200; z++ {
		ev := recentEvent{zxid: z}
		if z == 10 || z == 20 || z == 30 {
			ev.Data = big // two of them fill the byte budget
		}
		r.add(ev)
	}
	// The third big event pushed out events 1 to 10 while the ring was
	// still small; then it grew (twice) with its oldest event mid-buffer.
	var zs []int64
	r.since(0, func(ev recentEvent) { zs = append(zs, ev.zxid) })
	if len(zs) != 190 || zs[0] != 11 || r.bytes != 2*len(big) {
		t.Fatalf("kept %d events from %v, %d bytes", len(zs), zs[:min(1, len(zs))], r.bytes)
	}
	for i := 1; i < len(zs); i++ {
		if zs[i] != zs[i-1]+1 {
			t.Fatalf("out of order: %d after %d", zs[i], zs[i-1])
		}
	}
	if r.from != 11 || !r.covers(10) || r.covers(9) {
		t.Errorf("from %d, want 11", r.from)
	}
}

func TestOnlyLastingWatchersGetTheNode(t *testing.T) {
	var got []tree.Event
	var to []*conn
	w := newWatchRegistry(func(c *conn, _ int64, ev tree.Event) { got, to = append(got, ev), append(to, c) })
	oneShot, lasting := &conn{}, &conn{}
	w.add(watchData, "/cfg", oneShot)
	w.add(watchPersistent, "/cfg", lasting)
	w.trigger([]tree.Event{{Type: wire.EventNodeDataChanged, Path: "/cfg", Data: []byte("v2"), Stat: wire.Stat{Czxid: 1, Version: 2}}}, 9)
	if len(got) != 2 {
		t.Fatalf("notifications %v", got)
	}
	for i, ev := range got {
		if withNode := ev.Stat.Version == 2 && string(ev.Data) == "v2"; withNode != (to[i] == lasting) {
			t.Errorf("notification to the %s watcher: %+v", map[bool]string{true: "persistent", false: "one-shot"}[to[i] == lasting], ev)
		}
	}
}

// connAs is a connection with identities ids, for the registry alone.
func connAs(ids ...wire.Identity) *conn {
	c := &conn{}
	c.ids.Store(&ids)
	return c
}

func TestLastingWatchesNeedReadOnTheEventsNode(t *testing.T) {
	w, got := recordingRegistry()
	alice := connAs(wire.Identity{Scheme: "digest", ID: aliceDigest})
	stranger := connAs(wire.Identity{Scheme: "ip", ID: "127.0.0.1"})
	root := connAs(wire.Identity{Scheme: "super", ID: "root"})
	oneShot := connAs()
	for _, c := range []*conn{alice, stranger, root} {
		w.add(watchRecursive, "/", c)
	}
	w.add(watchData, "/s", oneShot)
	secret := []wire.ACL{{Perms: wire.PermRead, Scheme: "digest", ID: aliceDigest}}
	w.trigger([]tree.Event{{Type: wire.EventNodeDataChanged, Path: "/s", Data: []byte("x"), ACL: secret}}, 5)
	w.trigger([]tree.Event{{Type: wire.EventNodeCreated, Path: "/open"}}, 6)
	want := map[notification]bool{
		{alice, 5, wire.EventNodeDataChanged, "/s"}: true, {root, 5, wire.EventNodeDataChanged, "/s"}: true,
		{oneShot, 5, wire.EventNodeDataChanged, "/s"}: true, // set by a read that was checked; carries no data
		{alice, 6, wire.EventNodeCreated, "/open"}:    true, {stranger, 6, wire.EventNodeCreated, "/open"}: true,
		{root, 6, wire.EventNodeCreated, "/open"}: true,
	}
	if len(*got) != len(want) {
		t.Fatalf("notifications %v", *got)
	}
	for _, n := range *got {
		if !want[n] {
			t.Errorf("unexpected notification %+v", n)
		}
	}

	// A reconnecting stranger's replay skips the secret event too.
	*got = nil
	late := connAs(wire.Identity{Scheme: "ip", ID: "127.0.0.1"})
	w.restoreLasting(late, 4, 6, nil, []string{"/"})
	if len(*got) != 1 || (*got)[0] != (notification{late, 6, wire.EventNodeCreated, "/open"}) {
		t.Fatalf("replay to a stranger: %v", *got)
	}
}

// TestAOneShotWatchFiresBesideALastingOneThatMayNotRead: a connection
// whose lasting watch may not see an event still gets the event, without
// data, for its one-shot watch on the node (which ZooKeeper fires whatever
// the ACL), rather than losing it.
func TestAOneShotWatchFiresBesideALastingOneThatMayNotRead(t *testing.T) {
	w, got := recordingRegistry()
	stranger := connAs(wire.Identity{Scheme: "ip", ID: "127.0.0.1"})
	w.add(watchRecursive, "/", stranger)
	w.add(watchData, "/s", stranger) // set while /s was readable, or via setWatches
	secret := []wire.ACL{{Perms: wire.PermRead, Scheme: "digest", ID: aliceDigest}}
	w.trigger([]tree.Event{{Type: wire.EventNodeDeleted, Path: "/s", ACL: secret}}, 5)
	if w.has(wire.WatcherData, "/s", stranger) {
		t.Fatal("one-shot still registered")
	}
	if len(*got) == 0 {
		t.Fatalf("one-shot watch on /s was consumed but no notification was sent")
	}
}
