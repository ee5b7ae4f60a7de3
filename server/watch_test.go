package server

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestWatchRegistryFiresOnceAndForgetsClosedConnections(t *testing.T) {
	t.Parallel()
	type fired struct {
		c    *conn
		typ  wire.EventType
		path string
	}
	var got []fired
	w := newWatchRegistry(func(c *conn, _ uint64, _ int64, ev tree.Event, _ []string) {
		got = append(got, fired{c, ev.Type, ev.Path})
	})
	a, b := &conn{}, &conn{}
	w.add(watchData, "/x", a)
	w.add(watchData, "/x", a) // once per connection and path
	w.add(watchChild, "/x", a)
	w.add(watchData, "/x", b)
	w.add(watchChild, "/y", b)
	if w.size() != 4 {
		t.Fatalf("size %d, want 4", w.size())
	}
	w.trigger(0, []tree.Event{{Type: wire.EventNodeDataChanged, Path: "/x"}}, 5, nil)
	if len(got) != 2 || w.size() != 2 {
		t.Fatalf("data change fired %v, %d left; want a and b fired, 2 left", got, w.size())
	}
	w.trigger(0, []tree.Event{{Type: wire.EventNodeDataChanged, Path: "/x"}}, 6, nil)
	if len(got) != 2 {
		t.Fatalf("a fired watch fired again: %v", got)
	}
	w.removeConn(b)
	if w.size() != 1 || len(w.byConn[b]) != 0 {
		t.Fatalf("after b closed: %d watches, b indexes %v", w.size(), w.byConn[b])
	}
	w.trigger(0, []tree.Event{{Type: wire.EventNodeDeleted, Path: "/x"}}, 7, nil)
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

// recordingRegistry is a registry with a history of its own, recording
// what it sends: PersistentWatchRemoved events with the oldest zxid kept
// as their zxid.
func recordingRegistry(t *testing.T) (*watchRegistry, *[]notification) {
	var got []notification
	w := newWatchRegistry(func(c *conn, _ uint64, zxid int64, ev tree.Event, _ []string) {
		got = append(got, notification{c, zxid, ev.Type, ev.Path})
	})
	w.send = func(c *conn, rep *wire.Reply) {
		got = append(got, notification{c, rep.OldestZxid, rep.EventType, rep.Path})
	}
	w.history = testHistory(t, historyLimits{events: 1000})
	return w, &got
}

// applyEvents records events in w's history and fires them, as the fsm
// does for a txn applied at zxid.
func applyEvents(w *watchRegistry, zxid int64, events ...tree.Event) {
	w.history.record(zxid, 0, events)
	w.trigger(0, events, zxid, nil)
}

func TestPersistentAndRecursiveWatchesStayAndSeeTheirEvents(t *testing.T) {
	t.Parallel()
	w, got := recordingRegistry(t)
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
		w.trigger(0, []tree.Event{ev}, int64(10+i), nil)
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
	t.Parallel()
	w, got := recordingRegistry(t)
	applyEvents(w, 5, tree.Event{Type: wire.EventNodeCreated, Path: "/svc/a"}) // seen before the reconnect
	applyEvents(w, 6, tree.Event{Type: wire.EventNodeDataChanged, Path: "/svc/a"},
		tree.Event{Type: wire.EventNodeChildrenChanged, Path: "/svc"})
	applyEvents(w, 7, tree.Event{Type: wire.EventNodeDeleted, Path: "/other"})
	applyEvents(w, 8, tree.Event{Type: wire.EventNodeCreated, Path: "/cfg"})
	c := &conn{}
	w.restoreLasting(c, w.history, 5, 9, []string{"/svc"}, []string{"/svc", "/cfg"})
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
	// away since then is told its watches are gone, and from where it
	// could resume.
	*got = nil
	if err := w.history.restored(100); err != nil {
		t.Fatal(err)
	}
	d := &conn{}
	w.restoreLasting(d, w.history, 50, 100, []string{"/svc"}, []string{"/cfg"})
	want = []notification{{d, 100, wire.EventPersistentWatchRemoved, "/svc"}, {d, 100, wire.EventPersistentWatchRemoved, "/cfg"}}
	if !slices.Equal(*got, want) || len(w.byConn[d]) != 0 {
		t.Errorf("after a gap: %v, watches %v; want %v and none registered", *got, w.byConn[d], want)
	}
	*got = nil
	w.restoreLasting(d, w.history, 100, 100, []string{"/svc"}, nil)
	if len(*got) != 0 || len(w.byConn[d]) != 1 {
		t.Errorf("no gap: %v, watches %v", *got, w.byConn[d])
	}
}

func TestAWatchFromAPastZxidGetsItsOwnEventsAfterIt(t *testing.T) {
	t.Parallel()
	w, _ := recordingRegistry(t)
	applyEvents(w, 5, tree.Event{Type: wire.EventNodeCreated, Path: "/svc/a"})
	applyEvents(w, 6, tree.Event{Type: wire.EventNodeDataChanged, Path: "/svc/a"},
		tree.Event{Type: wire.EventNodeChildrenChanged, Path: "/svc"})
	applyEvents(w, 7, tree.Event{Type: wire.EventNodeCreated, Path: "/svcx"})
	applyEvents(w, 8, tree.Event{Type: wire.EventNodeDeleted, Path: "/svc"})
	c := &conn{}
	var replayed []string
	send := func(z int64, ev tree.Event) { replayed = append(replayed, fmt.Sprint(z, " ", ev.Type, " ", ev.Path)) }
	if ok, err := w.addFrom(watchRecursive, "/svc", c, w.history, 5, send); !ok || err != nil {
		t.Fatalf("addFrom: %v %v", ok, err)
	}
	want := []string{"6 NodeDataChanged /svc/a", "8 NodeDeleted /svc"}
	if !slices.Equal(replayed, want) {
		t.Errorf("recursive from 5 replayed %q, want %q", replayed, want)
	}
	replayed = nil
	if ok, err := w.addFrom(watchPersistent, "/svc", c, w.history, 0, send); !ok || err != nil {
		t.Fatalf("addFrom: %v %v", ok, err)
	}
	want = []string{"6 NodeChildrenChanged /svc", "8 NodeDeleted /svc"}
	if !slices.Equal(replayed, want) || w.size() != 2 {
		t.Errorf("persistent from 0 replayed %q (%d watches), want %q", replayed, w.size(), want)
	}

	if err := w.history.restored(20); err != nil {
		t.Fatal(err)
	}
	d := &conn{}
	_, err := w.addFrom(watchPersistent, "/svc", d, w.history, 19, send)
	var hc *historyCompactedError
	if !errors.Is(err, wire.ErrHistoryCompacted) || !errors.As(err, &hc) || hc.oldest != 20 || len(w.byConn[d]) != 0 {
		t.Errorf("from 19 after a restore at 20: %v, %+v; watches %v", err, hc, w.byConn[d])
	}
}

func TestOnlyLastingWatchersGetTheNode(t *testing.T) {
	t.Parallel()
	var got []tree.Event
	var to []*conn
	w := newWatchRegistry(func(c *conn, _ uint64, _ int64, ev tree.Event, _ []string) { got, to = append(got, ev), append(to, c) })
	oneShot, lasting := &conn{}, &conn{}
	w.add(watchData, "/cfg", oneShot)
	w.add(watchPersistent, "/cfg", lasting)
	w.trigger(0, []tree.Event{{Type: wire.EventNodeDataChanged, Path: "/cfg", Data: []byte("v2"), Stat: wire.Stat{Czxid: 1, Version: 2}}}, 9, nil)
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
	t.Parallel()
	w, got := recordingRegistry(t)
	alice := connAs(wire.Identity{Scheme: "digest", ID: aliceDigest})
	stranger := connAs(wire.Identity{Scheme: "ip", ID: "127.0.0.1"})
	root := connAs(wire.Identity{Scheme: "super", ID: "root"})
	oneShot := connAs()
	for _, c := range []*conn{alice, stranger, root} {
		w.add(watchRecursive, "/", c)
	}
	w.add(watchData, "/s", oneShot)
	secret := []wire.ACL{{Perms: wire.PermRead, Scheme: "digest", ID: aliceDigest}}
	applyEvents(w, 5, tree.Event{Type: wire.EventNodeDataChanged, Path: "/s", Data: []byte("x"), ACL: secret})
	applyEvents(w, 6, tree.Event{Type: wire.EventNodeCreated, Path: "/open"})
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
	w.restoreLasting(late, w.history, 4, 6, nil, []string{"/"})
	if len(*got) != 1 || (*got)[0] != (notification{late, 6, wire.EventNodeCreated, "/open"}) {
		t.Fatalf("replay to a stranger: %v", *got)
	}
}

// TestAOneShotWatchFiresBesideALastingOneThatMayNotRead: a connection
// whose lasting watch may not see an event still gets the event, without
// data, for its one-shot watch on the node (which ZooKeeper fires whatever
// the ACL), rather than losing it.
func TestAOneShotWatchFiresBesideALastingOneThatMayNotRead(t *testing.T) {
	t.Parallel()
	w, got := recordingRegistry(t)
	stranger := connAs(wire.Identity{Scheme: "ip", ID: "127.0.0.1"})
	w.add(watchRecursive, "/", stranger)
	w.add(watchData, "/s", stranger) // set while /s was readable, or via setWatches
	secret := []wire.ACL{{Perms: wire.PermRead, Scheme: "digest", ID: aliceDigest}}
	w.trigger(0, []tree.Event{{Type: wire.EventNodeDeleted, Path: "/s", ACL: secret}}, 5, nil)
	if w.has(wire.WatcherData, "/s", stranger) {
		t.Fatal("one-shot still registered")
	}
	if len(*got) == 0 {
		t.Fatalf("one-shot watch on /s was consumed but no notification was sent")
	}
}

// The waiters a data watch names go with the watch, however it goes, and
// a deletion names those whose turn came (by holds) to their connection.
func TestAWatchsWaitersGoWithIt(t *testing.T) {
	t.Parallel()
	var turns [][]string
	w := newWatchRegistry(func(_ *conn, _ uint64, _ int64, _ tree.Event, ts []string) { turns = append(turns, ts) })
	holds := func(dir, name string) bool { return dir == "/l" && name == "b" }
	a := &conn{}
	for _, tc := range []struct {
		name string
		end  func()
	}{
		{"the node changes", func() { w.trigger(0, []tree.Event{{Type: wire.EventNodeDataChanged, Path: "/l/a"}}, 1, holds) }},
		{"the watch is removed", func() { w.remove(wire.WatcherData, "/l/a", a) }},
		{"the connection closes", func() { w.removeConn(a) }},
		{"the node is deleted", func() { w.trigger(0, []tree.Event{{Type: wire.EventNodeDeleted, Path: "/l/a"}}, 2, holds) }},
	} {
		turns = nil
		for _, name := range []string{"b", "c", "b"} {
			if !w.addWaiter("/l/a", a, name) {
				t.Fatalf("%s: addWaiter refused", tc.name)
			}
		}
		tc.end()
		if len(w.waiters) != 0 || w.size() != 0 {
			t.Errorf("%s: %d waiters and %d watches left", tc.name, len(w.waiters), w.size())
		}
		if want := tc.name == "the node is deleted"; want != (len(turns) == 1 && slices.Equal(turns[0], []string{"b"})) {
			t.Errorf("%s: notified with turns %q", tc.name, turns)
		}
	}
}
