package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/cockroachdb/pebble"
	"go.uber.org/zap/zaptest"
)

// testHistory opens a history in a fresh directory, closed at the test's
// end.
func testHistory(t *testing.T, limits historyLimits) *watchHistory {
	t.Helper()
	return reopenHistory(t, t.TempDir(), limits)
}

func reopenHistory(t *testing.T, dir string, limits historyLimits) *watchHistory {
	t.Helper()
	h, err := openHistory(filepath.Join(dir, "history"), limits, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.close() })
	return h
}

// zxidsSince lists the zxid of every event after from, or the error.
func zxidsSince(h *watchHistory, from int64) ([]int64, error) {
	var zs []int64
	err := h.since(from, func(z int64, _ tree.Event) { zs = append(zs, z) })
	return zs, err
}

func TestTheHistoryKeepsWithinItsLimitsDroppingWholeTxns(t *testing.T) {
	t.Parallel()
	path := "/p/" + string(make([]byte, 50))
	size := int64(len(eventKey(1, 0)) + len(appendEventValue(nil, tree.Event{Type: wire.EventNodeCreated, Path: path}, 12_000)))
	for _, tc := range []struct {
		name     string
		limits   historyLimits
		txns     int   // each of two events, 1 s apart
		wantFrom int64 // the oldest zxid a watch can resume from
	}{
		{"under every limit, everything is kept", historyLimits{events: 100, age: time.Hour, bytes: 1 << 20}, 40, 0},
		{"past the event limit, it drops to a tenth below it", historyLimits{events: 100, age: time.Hour, bytes: 1 << 20}, 51, 6},
		{"an odd limit never cuts a txn in half", historyLimits{events: 11, age: time.Hour, bytes: 1 << 20}, 6, 2},
		{"past the age, the oldest go", historyLimits{events: 1000, age: 10 * time.Second}, 12, 2},
		{"past the bytes, the oldest go", historyLimits{events: 1000, bytes: 20 * size}, 11, 2},
		{"no limit of a kind is no limit", historyLimits{events: -1, age: -1, bytes: 1 << 30}, 300, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testHistory(t, tc.limits)
			for z := int64(1); z <= int64(tc.txns); z++ {
				h.record(z, z*1000, []tree.Event{{Type: wire.EventNodeCreated, Path: path}, {Type: wire.EventNodeDeleted, Path: path}})
			}
			count, bytes, from := h.stats()
			if from != tc.wantFrom {
				t.Errorf("resumes from %d, want %d (%d events, %d bytes)", from, tc.wantFrom, count, bytes)
			}
			if l := tc.limits; l.events > 0 && count > l.events || l.bytes > 0 && bytes > l.bytes {
				t.Errorf("%d events of %d bytes, over the limits %+v", count, bytes, l)
			}
			zs, err := zxidsSince(h, from)
			if err != nil || len(zs) != count || count != 2*(tc.txns-int(from)) {
				t.Fatalf("since %d: %d events, %v; want %d", from, len(zs), err, count)
			}
			for i, z := range zs {
				if z != from+1+int64(i/2) {
					t.Fatalf("event %d has zxid %d: not in order", i, z)
				}
			}
			if _, err := zxidsSince(h, from-1); from > 0 && !errors.Is(err, wire.ErrHistoryCompacted) {
				t.Errorf("since %d, before the oldest: %v, want ErrHistoryCompacted", from-1, err)
			}
		})
	}
}

func TestTheHistoryOutlivesARestartAndSkipsTheReplayedLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	limits := historyLimits{events: 1000}
	h := reopenHistory(t, dir, limits)
	secret := []wire.ACL{{Perms: wire.PermRead | wire.PermAdmin, Scheme: "digest", ID: "alice:x"}}
	h.record(1, 10, []tree.Event{{Type: wire.EventNodeCreated, Path: "/a", ACL: wire.OpenACL}})
	h.record(2, 20, nil)
	node := wire.Stat{Czxid: 1, Mzxid: 3, Ctime: 10, Mtime: 30, Version: 1, DataLength: 4}
	h.record(3, 30, []tree.Event{{Type: wire.EventNodeDataChanged, Path: "/a", ACL: secret, Data: []byte("kept"), Stat: node}})
	if err := h.sync(); err != nil {
		t.Fatal(err)
	}
	h.close()

	h = reopenHistory(t, dir, limits)
	// The member restores its own snapshot at 2 and replays 3 and 4.
	if err := h.restored(2); err != nil {
		t.Fatal(err)
	}
	h.record(3, 30, []tree.Event{{Type: wire.EventNodeDataChanged, Path: "/a", ACL: secret, Data: []byte("kept"), Stat: node}})
	h.record(4, 40, []tree.Event{{Type: wire.EventNodeDeleted, Path: "/a"}})
	var got []string
	if err := h.since(0, func(z int64, ev tree.Event) {
		got = append(got, fmt.Sprint(z, ev.Type, ev.Path, ev.ACL, ev.Data, ev.Stat))
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprint(1, wire.EventNodeCreated, "/a", wire.OpenACL, []byte(nil), wire.Stat{}),
		fmt.Sprint(3, wire.EventNodeDataChanged, "/a", secret, []byte("kept"), node),
		fmt.Sprint(4, wire.EventNodeDeleted, "/a", []wire.ACL(nil), []byte(nil), wire.Stat{}),
	}
	if !slices.Equal(got, want) {
		t.Errorf("after a restart: %q, want %q", got, want)
	}
	if count, _, from := h.stats(); count != 3 || from != 0 {
		t.Errorf("%d events from %d, want 3 from 0", count, from)
	}

	// A snapshot from the leader at 10 skips txns this member never saw.
	if err := h.restored(10); err != nil {
		t.Fatal(err)
	}
	if _, err := zxidsSince(h, 4); !errors.Is(err, wire.ErrHistoryCompacted) {
		t.Errorf("since 4 after a restore at 10: %v", err)
	}
	h.record(11, 50, []tree.Event{{Type: wire.EventNodeCreated, Path: "/b"}})
	if zs, err := zxidsSince(h, 10); err != nil || !slices.Equal(zs, []int64{11}) {
		t.Errorf("since 10: %v %v", zs, err)
	}
}

func TestAMalformedHistoryEventIsRefusedNotPanickedOn(t *testing.T) {
	t.Parallel()
	good := appendEventValue(nil, tree.Event{Type: wire.EventNodeCreated, Path: "/a/b", Data: []byte("v"),
		Stat: wire.Stat{Czxid: 9, Mzxid: 9, Ctime: -1, DataLength: 1},
		ACL:  []wire.ACL{{Perms: wire.PermRead, Scheme: "ip", ID: "127.0.0.1"}}}, 12345)
	if _, _, err := decodeEventValue(good); err != nil {
		t.Fatal(err)
	}
	for i := range len(good) {
		if _, _, err := decodeEventValue(good[:i]); err == nil {
			t.Errorf("a value cut to %d of %d bytes decoded", i, len(good))
		}
	}
	if _, _, err := decodeEventValue([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}); err == nil {
		t.Error("a path longer than the value decoded")
	}
}

// A damaged history does not keep the member from starting: it starts
// afresh, complete from the next txn it records.
func TestADamagedHistoryStartsAfresh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	limits := historyLimits{events: 1000}
	h := reopenHistory(t, dir, limits)
	h.record(1, 10, []tree.Event{{Type: wire.EventNodeCreated, Path: "/a"}})
	if err := h.db.Set(eventKey(2, 0), []byte{0xff, 0x01}, pebble.Sync); err != nil { // damaged
		t.Fatal(err)
	}
	h.close()

	h = reopenHistory(t, dir, limits)
	if _, err := zxidsSince(h, 0); !errors.Is(err, wire.ErrHistoryCompacted) {
		t.Fatalf("since 0 in a history started afresh: %v, want compacted", err)
	}
	h.record(5, 50, []tree.Event{{Type: wire.EventNodeCreated, Path: "/b"}})
	if zs, err := zxidsSince(h, 4); err != nil || !slices.Equal(zs, []int64{5}) {
		t.Fatalf("since 4: %v, %v; want [5]", zs, err)
	}
	if _, err := zxidsSince(h, 3); !errors.Is(err, wire.ErrHistoryCompacted) {
		t.Fatalf("since 3: %v, want compacted", err)
	}
}

// TestARestoreOverSeveralFramesReplaysEachEventOnce: a change applied
// between two setWatches2 frames of one restore is seen once, though a
// watch of each frame sees it. (Restored frame by frame, the first frame's
// watch saw it live and the second's replayed it again.)
func TestARestoreOverSeveralFramesReplaysEachEventOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	writer := dialRaw(t, s)
	writer.connect(wire.ConnectRequest{})
	created := writer.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/a"})
	if created.Err != wire.CodeOK {
		t.Fatal(created.Err)
	}
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	first := c.call(wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: created.Zxid,
		RecursiveWatches: []string{"/"}, MoreWatches: true})
	set := writer.call(wire.Request{Xid: 2, Op: wire.OpSetData, Path: "/a", Data: []byte("x"), Version: -1})
	if first.Err != wire.CodeOK || set.Err != wire.CodeOK {
		t.Fatal(first.Err, set.Err)
	}
	c.write(wire.AppendRequest(nil, &wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RelativeZxid: created.Zxid,
		PersistentWatches: []string{"/a"}}))
	var got []string
	for {
		r, err := c.reply(wire.OpSetWatches2)
		if err != nil {
			t.Fatal(err)
		}
		if r.Xid == wire.XidSetWatches {
			break
		}
		got = append(got, fmt.Sprint(r.Zxid, " ", r.EventType, " ", r.Path, " ", string(r.Data)))
	}
	if want := []string{fmt.Sprint(set.Zxid, " NodeDataChanged /a x")}; !slices.Equal(got, want) {
		t.Errorf("notifications %q, want %q", got, want)
	}
	// Both watches are in place now.
	writer.call(wire.Request{Xid: 3, Op: wire.OpDelete, Path: "/a", Version: -1})
	if r, err := c.reply(0); err != nil || r.EventType != wire.EventNodeDeleted {
		t.Errorf("after the restore: %+v %v", r, err)
	}
}

// FuzzDecodeHistoryEvent: a damaged history value is refused, never
// panicked on.
func FuzzDecodeHistoryEvent(f *testing.F) {
	f.Add(appendEventValue(nil, tree.Event{Type: wire.EventNodeDeleted, Path: "/a", ACL: wire.OpenACL}, 1))
	f.Add(appendEventValue(nil, tree.Event{Type: wire.EventNodeDataChanged, Path: "/a/b", Data: []byte("v"),
		Stat: wire.Stat{Czxid: 1, Mzxid: 2}, ACL: []wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}}}, 2))
	f.Fuzz(func(t *testing.T, v []byte) {
		ev, tm, err := decodeEventValue(v)
		if err != nil {
			return
		}
		again, tm2, err := decodeEventValue(appendEventValue(nil, ev, tm))
		if err != nil || tm2 != tm || again.Path != ev.Path || again.Type != ev.Type || string(again.Data) != string(ev.Data) {
			t.Fatalf("%+v at %d re-encoded to %+v at %d, %v", ev, tm, again, tm2, err)
		}
	})
}

// A replay is sent in two parts, the bulk without the fsm's lock and the
// rest with it: a change applied between them comes once, in order.
func TestAReplayInTwoPartsSendsEachEventOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	write := func(req wire.Request) int64 {
		t.Helper()
		txn := tree.TxnFromRequest(&req, 0, time.Now().UnixMilli(), nil)
		res, err := s.write(ctx, &txn)
		if err != nil {
			t.Fatal(err)
		}
		return res.Stat.Mzxid
	}
	set := func(v string) { write(wire.Request{Op: wire.OpSetData, Path: "/w", Data: []byte(v), Version: -1}) }
	from := write(wire.Request{Op: wire.OpCreate, Path: "/w", Data: []byte("v0")})
	set("v1")
	set("v2")
	var once sync.Once
	s.afterPreReplay = func() { once.Do(func() { set("between") }) }

	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.write(wire.AppendRequest(nil, &wire.Request{Xid: 1, Op: wire.OpAddWatch, Path: "/w",
		AddWatchMode: wire.AddWatchPersistent, FromZxid: from}))
	var got []string
	for {
		body, err := wire.ReadFrame(c.br, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		xid, _ := wire.PeekXid(body)
		var r wire.Reply
		if err := wire.DecodeReply(body, wire.OpAddWatch, &r); err != nil {
			t.Fatal(err)
		}
		if xid == wire.XidReplay {
			got = append(got, string(r.Data))
			continue
		}
		if r.Xid != 1 || r.Err != wire.CodeOK {
			t.Fatalf("the addWatch's reply: %+v", r)
		}
		break
	}
	if want := []string{"v1", "v2", "between"}; !slices.Equal(got, want) {
		t.Fatalf("replayed %q, want %q", got, want)
	}
}

// A restore over several frames one of which passes the watch limit is
// refused whole, up to its last frame; the next restore starts afresh.
func TestARestoreRefusedInOneFrameIsRefusedWhole(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir(), func(cfg *Config) { cfg.MaxWatches = 2 })
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	frame := func(more bool, paths ...string) wire.Code {
		t.Helper()
		r := c.call(wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, PersistentWatches: paths, MoreWatches: more})
		return r.Err
	}
	for i, tc := range []struct {
		more  bool
		paths []string
		want  wire.Code
	}{
		{true, []string{"/a", "/b", "/c"}, wire.CodeQuotaExceeded},
		{true, []string{"/d"}, wire.CodeQuotaExceeded},
		{false, []string{"/e"}, wire.CodeQuotaExceeded},
		{false, []string{"/f"}, wire.CodeOK}, // the next restore
	} {
		if got := frame(tc.more, tc.paths...); got != tc.want {
			t.Fatalf("frame %d: %v, want %v", i, got, tc.want)
		}
	}
	if _, _, n := s.watches.summary(); n != 1 {
		t.Fatalf("%d watches held, want the last restore's one", n)
	}
}

// TestShardsHistoriesKeepToThemselvesInOneStore: the meta group's history
// and two shards' share one store, each with its own zxids: what one
// records, trims, restores over or wipes, the others do not see, and each
// reads its own back after a restart.
func TestShardsHistoriesKeepToThemselvesInOneStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	limits := historyLimits{events: 3}
	open := func() (meta, one, two *watchHistory) {
		meta = reopenHistory(t, dir, limits)
		var err error
		if one, err = meta.shard(1, zaptest.NewLogger(t)); err == nil {
			two, err = meta.shard(2, zaptest.NewLogger(t))
		}
		if err != nil {
			t.Fatal(err)
		}
		return meta, one, two
	}
	meta, one, two := open()
	created := func(p string) []tree.Event { return []tree.Event{{Type: wire.EventNodeCreated, Path: p}} }
	for z := int64(1); z <= 5; z++ { // past the limit of 3 events: the oldest go
		meta.record(z, z, created("/m"))
	}
	one.record(7, 7, created("/one"))
	two.record(7, 7, created("/two"))
	two.record(8, 8, created("/two/a"))
	if err := one.restored(20); err != nil { // a snapshot past what shard 1 had
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for name, tc := range map[string]struct {
			h    *watchHistory
			from int64
			want string
		}{
			"meta": {meta, 2, "[3 4 5]"},
			"one":  {one, 20, "[]"},
			"two":  {two, 0, "[7 8]"},
		} {
			zs, err := zxidsSince(tc.h, tc.from)
			if err != nil || fmt.Sprint(zs) != tc.want && !(tc.want == "[]" && len(zs) == 0) {
				t.Errorf("%s: %s's events after %d: %v, %v; want %s", when, name, tc.from, zs, err, tc.want)
			}
		}
		if _, err := zxidsSince(one, 7); !errors.Is(err, wire.ErrHistoryCompacted) {
			t.Errorf("%s: shard 1's events after 7, restored over: %v, want HistoryCompacted", when, err)
		}
	}
	check("before a restart")
	for _, h := range []*watchHistory{one, two} {
		if err := h.sync(); err != nil {
			t.Fatal(err)
		}
		h.close()
	}
	if err := meta.sync(); err != nil {
		t.Fatal(err)
	}
	meta.close()
	meta, one, two = open()
	check("after a restart")
}
