package client

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// A restore replays from the txn before the last one the client saw an
// event of, and a lasting watch drops what it had: every event of an
// older txn and those it got of that txn, and keeps the rest of it, which
// a connection that broke in the middle of the txn's notifications lost.
func TestALastingWatchSkipsWhatAReplayBringsAgain(t *testing.T) {
	type ev struct {
		zxid int64
		name string
	}
	for _, tc := range []struct {
		name         string
		live, replay []ev
		want         []string // what the watch gets in all
	}{
		{"the connection broke in the middle of a txn",
			[]ev{{5, "a"}, {7, "b"}},
			[]ev{{7, "b"}, {7, "c"}, {8, "d"}},
			[]string{"a", "b", "c", "d"}},
		{"the connection broke after a whole txn",
			[]ev{{5, "a"}, {7, "b"}, {7, "c"}},
			[]ev{{7, "b"}, {7, "c"}, {8, "d"}},
			[]string{"a", "b", "c", "d"}},
		{"an older server replays from further back",
			[]ev{{5, "a"}, {7, "b"}},
			[]ev{{5, "a"}, {7, "b"}, {9, "e"}},
			[]string{"a", "b", "e"}},
		{"nothing had come before",
			nil,
			[]ev{{3, "x"}},
			[]string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tab watchTable
			tab.init()
			w := newLastingWatch("/p", WatchPersistent, 100)
			tab.register(w, wire.OpAddWatch, wire.CodeOK, 0)
			for _, e := range tc.live {
				tab.fire(EventNodeDataChanged, "/p", 0, e.zxid, []byte(e.name), Stat{}, nil)
			}
			tab.rewind()
			for _, e := range tc.replay {
				tab.fire(EventNodeDataChanged, "/p", 0, e.zxid, []byte(e.name), Stat{}, nil)
			}
			var got []string
			for len(w.ch) > 0 {
				got = append(got, string((<-w.ch).Data))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the watch got %v, want %v", got, tc.want)
			}
		})
	}
}

// The restore resumes after the last zxid, unless the last notification
// is newer than every reply: the rest of its txn's notifications may be
// lost, so it resumes from the txn before.
func TestTheResumeZxid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []int64
		events  []int64
		want    int64
	}{
		{"a reply after the last event", []int64{3, 8}, []int64{7}, 8},
		{"a reply at the last event's zxid", []int64{7}, []int64{7}, 7},
		{"the last event newer than every reply", []int64{3}, []int64{5, 7}, 6},
		{"nothing yet", nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{}
			for _, z := range tc.replies {
				c.noteZxid(z, true)
			}
			for _, z := range tc.events {
				c.noteZxid(z, false)
			}
			if got := c.resumeZxid(); got != tc.want {
				t.Fatalf("resumeZxid = %d, want %d", got, tc.want)
			}
		})
	}
}

// A restore the server refused ends every lasting watch, with an event
// that says so, rather than leave them registered and dead.
func TestARefusedRestoreEndsTheLastingWatches(t *testing.T) {
	var tab watchTable
	tab.init()
	p := newLastingWatch("/p", WatchPersistent, 10)
	r := newLastingWatch("/", WatchPersistentRecursive, 10)
	tab.register(p, wire.OpAddWatch, wire.CodeOK, 0)
	tab.register(r, wire.OpAddWatch, wire.CodeOK, 0)
	tab.endLasting(9, wire.ErrQuotaExceeded)
	for _, w := range []*watchReg{p, r} {
		ev := <-w.ch
		if ev.Type != EventWatchRemoved || !errors.Is(ev.Err, ErrEventsLost) || !errors.Is(ev.Err, wire.ErrQuotaExceeded) {
			t.Fatalf("the %s watch on %s got %+v", w.mode, w.path, ev)
		}
	}
	if len(tab.lasting) != 0 {
		t.Fatalf("%d lasting watches left", len(tab.lasting))
	}
}

// A watch over several shards has a place in each: where its reply says it
// was set (wire.Reply.Positions), then the last event of each it got. The
// events of a shard that came before the reply are kept if they are after
// where it was set there; a restore resumes in each shard from its own
// place, and the watch drops what a replay brings again, shard by shard.
func TestASpanningWatchHasAPlaceInEachShard(t *testing.T) {
	var tab watchTable
	tab.init()
	w := newLastingWatch("/", WatchPersistentRecursive, 100)
	for _, e := range []shardEvent{
		{Event{Type: EventNodeCreated, Path: "/a", Zxid: 10}, 1}, // at where it was set in shard 1: before it
		{Event{Type: EventNodeCreated, Path: "/b", Zxid: 11}, 1},
		{Event{Type: EventNodeCreated, Path: "/c", Zxid: 3}, 2}, // before it was set in shard 2
	} {
		w.early = append(w.early, e)
	}
	w.setAt([]int64{wire.Position(0, 20), wire.Position(1, 10), wire.Position(2, 5)})
	w.takeReplayed()
	tab.register(w, wire.OpAddWatch, wire.CodeOK, 20)

	type ev struct {
		group uint64
		zxid  int64
		path  string
	}
	fire := func(evs ...ev) {
		for _, e := range evs {
			tab.fire(EventNodeCreated, e.path, e.group, e.zxid, nil, Stat{}, nil)
		}
	}
	fire(ev{2, 6, "/d"}, ev{1, 12, "/e"}, ev{0, 21, "/f"}, ev{3, 40, "/g"}) // shard 3 split off after the watch was set
	_, _, _, _, recursive, _, at := tab.paths()
	want := map[uint64]int64{0: 20, 1: 11, 2: 5, 3: 39}
	if k := (watchAt{listRecursive, "/"}); !slices.Equal(recursive, []string{"/"}) || !maps.Equal(at[k], want) {
		t.Fatalf("restores %v from %v, want / from %v", recursive, at[k], want)
	}
	tab.rewind()
	fire(ev{1, 12, "/e"}, ev{1, 13, "/h"}, ev{2, 6, "/d"}, ev{2, 7, "/i"}, ev{0, 21, "/f"}, ev{3, 40, "/g"}, ev{0, 22, "/j"})
	var got []string
	for len(w.ch) > 0 {
		got = append(got, (<-w.ch).Path)
	}
	if want := []string{"/b", "/d", "/e", "/f", "/g", "/h", "/i", "/j"}; !slices.Equal(got, want) {
		t.Fatalf("the watch got %v, want %v", got, want)
	}

	// Two watches of one path resume in each shard from the older of
	// their places, and only in the shards both have one in.
	other := newLastingWatch("/", WatchPersistentRecursive, 100)
	other.setAt([]int64{wire.Position(0, 30), wire.Position(1, 5)})
	tab.register(other, wire.OpAddWatch, wire.CodeOK, 30)
	_, _, _, _, _, _, at = tab.paths()
	if k, want := (watchAt{listRecursive, "/"}), map[uint64]int64{0: 21, 1: 5}; !maps.Equal(at[k], want) {
		t.Fatalf("two watches restore from %v, want %v", at[k], want)
	}
}

// A watch set in one shard gets events of another once what it watches
// is split (or a parent below it partitioned): each shard's zxids go on
// from where the split was, so the new shard's events may carry zxids
// below those the watch already had of the first one. Each shard has its
// own place, and none is dropped.
func TestAWatchSetInOneShardKeepsTheEventsOfASplitOffOne(t *testing.T) {
	var tab watchTable
	tab.init()
	w := newLastingWatch("/", WatchPersistentRecursive, 100)
	w.setAt([]int64{wire.Position(0, 10)})
	w.takeReplayed()
	tab.register(w, wire.OpAddWatch, wire.CodeOK, 10)
	tab.fire(EventNodeCreated, "/a", 0, 12, nil, Stat{}, nil)
	tab.fire(EventNodeCreated, "/z", 1, 11, nil, Stat{}, nil) // the shard split off at 10
	tab.fire(EventNodeCreated, "/b", 0, 13, nil, Stat{}, nil)
	var got []string
	for len(w.ch) > 0 {
		got = append(got, (<-w.ch).Path)
	}
	if want := []string{"/a", "/z", "/b"}; !slices.Equal(got, want) {
		t.Fatalf("the watch got %v, want %v", got, want)
	}
	if w.resumeZxid() != 10 {
		t.Errorf("resumes on its own from %d, want 10 (the place furthest behind: before /z's txn)", w.resumeZxid())
	}
}
