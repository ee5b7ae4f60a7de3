package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

func TestWatchTableFollowsZooKeepersRules(t *testing.T) {
	type reg struct {
		op   wire.Op
		code wire.Code
	}
	var (
		getW          = reg{wire.OpGetData, wire.CodeOK}
		existsW       = reg{wire.OpExists, wire.CodeOK}
		existsWAbsent = reg{wire.OpExists, wire.CodeNoNode}
		childrenW     = reg{wire.OpGetChildren, wire.CodeOK}
	)
	tests := []struct {
		name  string
		reg   reg
		event EventType
		fires bool
	}{
		{"a data change fires a GetW watch", getW, EventNodeDataChanged, true},
		{"a delete fires a GetW watch", getW, EventNodeDeleted, true},
		{"a children change does not fire a GetW watch", getW, EventNodeChildrenChanged, false},
		{"a data change fires an ExistsW watch on an existing node", existsW, EventNodeDataChanged, true},
		{"a delete fires an ExistsW watch on an existing node", existsW, EventNodeDeleted, true},
		{"a create fires an ExistsW watch on a missing node", existsWAbsent, EventNodeCreated, true},
		{"a children change does not fire an ExistsW watch", existsWAbsent, EventNodeChildrenChanged, false},
		{"a children change fires a ChildrenW watch", childrenW, EventNodeChildrenChanged, true},
		{"a delete fires a ChildrenW watch", childrenW, EventNodeDeleted, true},
		{"a data change does not fire a ChildrenW watch", childrenW, EventNodeDataChanged, false},
		{"a create does not fire a ChildrenW watch", childrenW, EventNodeCreated, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab watchTable
			tab.init()
			w := newWatch("/n", true)
			tab.register(w, tt.reg.op, tt.reg.code, 0)
			tab.fire(tt.event, "/other", 0, 1, nil, Stat{}, nil)
			tab.fire(tt.event, "/n", 0, 7, nil, Stat{}, nil)
			select {
			case ev, ok := <-w.ch:
				if !tt.fires {
					t.Fatalf("fired with %v", ev)
				}
				if !ok || ev.Type != tt.event || ev.Path != "/n" || ev.Zxid != 7 || ev.State != StateConnected || ev.Err != nil {
					t.Fatalf("got %v (open %v), want %s /n @7", ev, ok, tt.event)
				}
				if _, open := <-w.ch; open {
					t.Fatal("the channel was not closed after its event")
				}
				if n := countWatches(&tab); n != 0 {
					t.Fatalf("%d watches left after firing", n)
				}
			default:
				if tt.fires {
					t.Fatal("did not fire")
				}
			}
		})
	}
}

func TestAFailedWatchingReadLeavesNoWatch(t *testing.T) {
	var tab watchTable
	tab.init()
	tab.register(newWatch("/n", true), wire.OpGetData, wire.CodeNoNode, 0)
	tab.register(newWatch("/n", true), wire.OpGetChildren, wire.CodeNoNode, 0)
	tab.register(newWatch("/n", true), wire.OpExists, wire.CodeNoQuorum, 0)
	if n := countWatches(&tab); n != 0 {
		t.Errorf("%d watches registered by failed reads, want 0", n)
	}
}

func TestSeveralWatchesOnOnePathAllFireOnce(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	var chans []<-chan Event
	for range 3 {
		_, _, ch, _ := getW(t, c, p, "/shared")
		chans = append(chans, ch)
	}
	p.notify(wire.EventNodeDataChanged, "/shared", 10)
	p.notify(wire.EventNodeDataChanged, "/shared", 11)
	for i, ch := range chans {
		ev := wait(t, ch)
		if ev.Type != EventNodeDataChanged || ev.Zxid != 10 {
			t.Errorf("watch %d got %v, want the first change only", i, ev)
		}
		if _, open := <-ch; open {
			t.Errorf("watch %d still open", i)
		}
	}
}

func TestANotificationBeforeTheReplyDoesNotFireTheNewWatch(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	type out struct {
		ch  <-chan Event
		err error
	}
	done := make(chan out, 1)
	go func() {
		_, _, ch, err := c.GetW(context.Background(), "/n")
		done <- out{ch, err}
	}()
	req := p.expect(wire.OpGetData, "/n")
	// The change came before the read: the watch the read leaves must not
	// see it, and handling it must not block the reader.
	p.notify(wire.EventNodeDataChanged, "/n", 3)
	p.reply(wire.OpGetData, wire.Reply{Xid: req.Xid, Zxid: 3})
	o := wait(t, done)
	if o.err != nil {
		t.Fatal(o.err)
	}
	// The next change's event is the first the watch gets: the earlier
	// one, had it reached the watch, would have come before it.
	p.notify(wire.EventNodeDataChanged, "/n", 4)
	if ev := wait(t, o.ch); ev.Zxid != 4 {
		t.Errorf("got %v, want the change at zxid 4 (an event from before the read?)", ev)
	}
}

func TestWatchesAreRestoredBeforeAnyNewRequestAfterAReconnect(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	ctx := context.Background()
	getW(t, c, p, "/data")
	type watchCall func() (<-chan Event, error)
	answer := func(call watchCall, op wire.Op, path string, code wire.Code, zxid int64) <-chan Event {
		t.Helper()
		type out struct {
			ch  <-chan Event
			err error
		}
		done := make(chan out, 1)
		go func() { ch, err := call(); done <- out{ch, err} }()
		req := p.expect(op, path)
		p.reply(op, wire.Reply{Xid: req.Xid, Zxid: zxid, Err: code})
		o := wait(t, done)
		if o.err != nil || o.ch == nil {
			t.Fatalf("%s %s: %v (channel %v)", op, path, o.err, o.ch)
		}
		return o.ch
	}
	answer(func() (<-chan Event, error) { _, _, ch, err := c.ExistsW(ctx, "/absent"); return ch, err },
		wire.OpExists, "/absent", wire.CodeNoNode, 8)
	answer(func() (<-chan Event, error) { _, _, ch, err := c.ExistsW(ctx, "/present"); return ch, err },
		wire.OpExists, "/present", wire.CodeOK, 9)
	kids := answer(func() (<-chan Event, error) { _, _, ch, err := c.ChildrenW(ctx, "/dir"); return ch, err },
		wire.OpGetChildren, "/dir", wire.CodeOK, 6)

	p.nc.Close()
	waitState(t, c, StateDisconnected)
	later := async(func() error { return c.Sync(ctx, "/") })
	p2 := ps.accept()
	p2.handshake(wire.ConnectResponse{})
	sw := p2.read()
	if sw.Xid != wire.XidSetWatches || sw.Op != wire.OpSetWatches2 {
		t.Fatalf("first frame after the reconnect: %s xid %d, want setWatches", sw.Op, sw.Xid)
	}
	if sw.RelativeZxid != 9 || !slices.Equal(sw.DataWatches, []string{"/data", "/present"}) ||
		!slices.Equal(sw.ExistWatches, []string{"/absent"}) || !slices.Equal(sw.ChildWatches, []string{"/dir"}) {
		t.Errorf("setWatches zxid %d data %v exist %v child %v, want 9 [/data /present] [/absent] [/dir]",
			sw.RelativeZxid, sw.DataWatches, sw.ExistWatches, sw.ChildWatches)
	}
	p2.reply(wire.OpSetWatches2, wire.Reply{Xid: wire.XidSetWatches})
	req := p2.expect(wire.OpSync, "/")
	p2.reply(wire.OpSync, wire.Reply{Xid: req.Xid, Path: "/"})
	if err := wait(t, later); err != nil {
		t.Fatal(err)
	}
	// The restored watch fires as before.
	p2.notify(wire.EventNodeChildrenChanged, "/dir", 12)
	if ev := wait(t, kids); ev.Type != EventNodeChildrenChanged {
		t.Errorf("restored child watch got %v", ev)
	}
}

func TestManyWatchesAreRestoredInSeveralFrames(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	long := "/" + string(slices.Repeat([]byte("x"), 1000))
	var want []string
	for i := range 300 {
		path := long + string(rune('a'+i%26)) + string(rune('a'+i/26))
		want = append(want, path)
		c.watches.register(newWatch(path, true), wire.OpGetData, wire.CodeOK, 0)
	}
	slices.Sort(want)
	p.nc.Close()
	p2 := ps.accept()
	p2.handshake(wire.ConnectResponse{})
	var got []string
	frames := 0
	for len(got) < len(want) {
		sw := p2.read()
		if sw.Op != wire.OpSetWatches2 {
			t.Fatalf("got %s after %d of %d watches", sw.Op, len(got), len(want))
		}
		frames++
		got = append(got, sw.DataWatches...)
	}
	if !slices.Equal(got, want) || frames < 2 {
		t.Errorf("restored %d watches in %d frames, want all %d in more than one", len(got), frames, len(want))
	}
}

func TestTheSessionExpiresWhenAServerRefusesToReattachIt(t *testing.T) {
	for _, code := range []wire.Code{wire.CodeSessionExpired, wire.CodeBadPassword} {
		t.Run("refused with "+code.String(), func(t *testing.T) {
			ps := newPipes(t)
			c, p := dialPipe(t, ps)
			_, _, watch, _ := getW(t, c, p, "/w")
			p.nc.Close()
			ps.accept().handshake(wire.ConnectResponse{Err: code})
			waitState(t, c, StateExpired)
			ev := wait(t, watch)
			if ev.Type != EventSession || ev.State != StateExpired || !errors.Is(ev.Err, ErrSessionExpired) {
				t.Errorf("watch got %v, want an expired session event", ev)
			}
			_, _, err := c.Get(context.Background(), "/x")
			if !errors.Is(err, ErrSessionExpired) || !errors.Is(err, code.Err()) {
				t.Errorf("get after expiry: %v, want ErrSessionExpired and %v", err, code.Err())
			}
			_, _, late, err := c.ExistsW(context.Background(), "/y")
			if late != nil || !errors.Is(err, ErrSessionExpired) {
				t.Errorf("ExistsW after expiry: %v %v", late, err)
			}
			if s := drainStates(c); !slices.Equal(s, []State{StateConnected, StateDisconnected, StateExpired}) {
				t.Errorf("states %v", s)
			}
		})
	}
}

func TestAWatchRegisteredAfterTheEndGetsTheSessionEvent(t *testing.T) {
	var tab watchTable
	tab.init()
	tab.closeAll(Event{Type: EventSession, State: StateClosed, Err: ErrClosed})
	w := newWatch("/n", true)
	tab.register(w, wire.OpGetData, wire.CodeOK, 0)
	if ev := wait(t, w.channel()); ev.State != StateClosed {
		t.Errorf("got %v, want the closed session event", ev)
	}
}

func TestLastingWatchesSeeTheirEventsAndEndCleanly(t *testing.T) {
	var table watchTable
	table.init()
	persistent := newLastingWatch("/a", WatchPersistent, 8)
	recursive := newLastingWatch("/a", WatchPersistentRecursive, 2)
	root := newLastingWatch("/", WatchPersistentRecursive, 8)
	for _, w := range []*watchReg{persistent, recursive, root} {
		table.register(w, wire.OpAddWatch, wire.CodeOK, 0)
	}
	table.register(newLastingWatch("/b", WatchPersistent, 8), wire.OpAddWatch, wire.CodeNoAuth, 0) // refused: not kept
	if data, exist, child, p, r, _, _ := table.paths(); len(data)+len(exist)+len(child) != 0 ||
		!slices.Equal(p, []string{"/a"}) || !slices.Equal(r, []string{"/", "/a"}) {
		t.Fatalf("paths: %v %v %v %v %v", data, exist, child, p, r)
	}
	table.fire(EventNodeChildrenChanged, "/a", 0, 1, nil, Stat{}, nil) // persistent only
	table.fire(EventNodeCreated, "/a/b", 0, 2, nil, Stat{}, nil)       // the recursive ones
	table.fire(EventNodeDataChanged, "/ab", 0, 3, nil, Stat{}, nil)    // only the root's: /ab is not below /a
	table.fire(EventNodeDataChanged, "/a", 0, 4, nil, Stat{}, nil)     // all three; the /a recursive queue (2) is full
	table.fire(EventNodeDeleted, "/a/b", 0, 5, nil, Stat{}, nil)       // the /a recursive watch overflows

	got := func(w *watchReg) (evs []string) {
		for len(w.ch) > 0 {
			ev := <-w.ch
			evs = append(evs, fmt.Sprintf("%s %s %d", ev.Type, ev.Path, ev.Zxid))
			if ev.Err != nil && !errors.Is(ev.Err, ErrEventsLost) {
				t.Errorf("event %v: error %v", ev, ev.Err)
			}
		}
		return evs
	}
	if evs := got(persistent); !slices.Equal(evs, []string{"NodeChildrenChanged /a 1", "NodeDataChanged /a 4"}) {
		t.Errorf("persistent /a got %q", evs)
	}
	if evs := got(recursive); !slices.Equal(evs, []string{"NodeCreated /a/b 2", "NodeDataChanged /a 4", "PersistentWatchRemoved /a 5"}) {
		t.Errorf("recursive /a got %q", evs)
	}
	if _, open := <-recursive.ch; open {
		t.Error("an overflowed watch's channel is still open")
	}
	if evs := got(root); len(evs) != 4 {
		t.Errorf("recursive / got %q", evs)
	}

	// The server could not replay /a's events after a reconnect: /a's
	// watches end; the root's stays.
	table.fire(EventWatchRemoved, "/a", 0, 6, nil, Stat{}, nil)
	if ev := <-persistent.ch; ev.Type != EventWatchRemoved || !errors.Is(ev.Err, ErrEventsLost) {
		t.Errorf("persistent /a got %v", ev)
	}
	if _, open := <-persistent.ch; open {
		t.Error("a removed watch's channel is still open")
	}
	table.closeAll(Event{Type: EventSession, State: StateClosed, Err: ErrClosed})
	if ev := <-root.ch; ev.Type != EventSession {
		t.Errorf("at the session's end the root watch got %v", ev)
	}
	if _, open := <-root.ch; open {
		t.Error("the root watch's channel is still open after the session ended")
	}
}

func TestEventsOfARestoreOverSeveralFramesArriveInZxidOrder(t *testing.T) {
	ps := newPipes(t)
	c, p := dialPipe(t, ps)
	long := "/" + string(slices.Repeat([]byte("x"), 1000))
	var paths []string
	for i := range 300 {
		path := long + string(rune('a'+i%26)) + string(rune('a'+i/26))
		paths = append(paths, path)
		c.watches.register(newLastingWatch(path, WatchPersistent, 16), wire.OpAddWatch, wire.CodeOK, 0)
	}
	slices.Sort(paths)
	all := newLastingWatch("/", WatchPersistentRecursive, 16) // sees every event, in the order delivered
	c.watches.register(all, wire.OpAddWatch, wire.CodeOK, 0)
	p.nc.Close()
	p2 := ps.accept()
	p2.handshake(wire.ConnectResponse{})
	frames := 0
	for recursive := false; !recursive; frames++ {
		sw := p2.read()
		if sw.Op != wire.OpSetWatches2 {
			t.Fatalf("got %s after %d frames", sw.Op, frames)
		}
		recursive = len(sw.RecursiveWatches) > 0
	}
	if frames < 2 {
		t.Fatalf("the watches went in %d frame, want several", frames)
	}
	// The first frame is answered; a change at zxid 20 reaches its first
	// watch at once. Then the server takes the last frame and replays
	// what its recursive watch missed, a change at zxid 15, older.
	p2.reply(wire.OpSetWatches2, wire.Reply{Xid: wire.XidSetWatches, Zxid: 10})
	p2.notify(wire.EventNodeDataChanged, paths[0], 20)
	p2.notify(wire.EventNodeCreated, "/r/x", 15)
	for range frames - 1 {
		p2.reply(wire.OpSetWatches2, wire.Reply{Xid: wire.XidSetWatches, Zxid: 21})
	}
	first, second := wait(t, all.ch), wait(t, all.ch)
	if first.Zxid != 15 || second.Zxid != 20 {
		t.Errorf("the recursive watch got zxid %d then %d, want 15 then 20", first.Zxid, second.Zxid)
	}
}

// TestEachWatchSaysSinceWhenItHasSeenItsPath: what a restore sends with
// each path (setWatches2's WatchZxids): a one-shot watch's the zxid of the
// reply that set it, the oldest of a path's; a lasting watch's where its
// replay resumes, after the txn before its last event, or after the reply
// that set it. A watch that fires leaves no zxid behind.
func TestEachWatchSaysSinceWhenItHasSeenItsPath(t *testing.T) {
	var table watchTable
	table.init()
	table.register(newWatch("/d", true), wire.OpGetData, wire.CodeOK, 9)
	table.register(newWatch("/d", true), wire.OpGetData, wire.CodeOK, 5)
	table.register(newWatch("/e", true), wire.OpExists, wire.CodeNoNode, 6)
	table.register(newWatch("/c", true), wire.OpGetChildren, wire.CodeOK, 7)
	table.register(newWatch("/gone", true), wire.OpGetData, wire.CodeOK, 8)
	quiet, busy := newLastingWatch("/p", WatchPersistent, 8), newLastingWatch("/r", WatchPersistentRecursive, 8)
	table.register(quiet, wire.OpAddWatch, wire.CodeOK, 10)
	table.register(busy, wire.OpAddWatch, wire.CodeOK, 11)
	table.fire(EventNodeCreated, "/r/x", 0, 14, nil, Stat{}, nil)
	table.fire(EventNodeDeleted, "/gone", 0, 15, nil, Stat{}, nil)
	_, _, _, _, _, since, _ := table.paths()
	want := map[watchAt]int64{
		{listData, "/d"}: 5, {listExist, "/e"}: 6, {listChild, "/c"}: 7,
		{listPersistent, "/p"}: 10, {listRecursive, "/r"}: 13,
	}
	if !maps.Equal(since, want) {
		t.Errorf("since = %v, want %v", since, want)
	}
}
