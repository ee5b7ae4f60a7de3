package locks

import (
	"fmt"
	"testing"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// world is a tree and its index, changed by txns applied at given times.
type world struct {
	t    testing.TB
	tr   *tree.Tree
	x    *Index
	zxid int64
}

func newWorld(t testing.TB) *world {
	return &world{t: t, tr: tree.New(), x: New()}
}

func (w *world) apply(time int64, txn tree.Txn) tree.Result {
	w.t.Helper()
	w.zxid++
	txn.Time = time
	cause := CauseOf(w.tr, &txn)
	res, events := w.tr.Apply(w.zxid, &txn)
	if res.Err != nil {
		w.t.Fatalf("%v: %v", txn.Type, res.Err)
	}
	w.x.Apply(w.tr, w.zxid, time, cause, events)
	return res
}

func (w *world) session(id int64) {
	w.apply(0, tree.Txn{Type: tree.TxnCreateSession, Session: id, TimeoutMs: 10_000})
}

// node makes a lock node of acquisition id and kind under dir, owned by
// session, and returns its path.
func (w *world) node(time int64, dir, id string, kind lockq.Kind, session int64, owner, holder string) string {
	w.t.Helper()
	res := w.apply(time, tree.Txn{Type: wire.OpCreate, Path: dir + "/" + lockq.Prefix(id, kind), Mode: wire.ModeEphemeralSequential,
		Session: session, Data: lockq.Record{Owner: owner, Holder: holder}.Encode()})
	return res.Path
}

func (w *world) del(time int64, p string) {
	w.apply(time, tree.Txn{Type: wire.OpDelete, Path: p, Version: -1})
}

func TestTheIndexKnowsWhoHoldsWhoWaitsAndSinceWhen(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.session(2)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/locks"})
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/locks/a"})
	a := w.node(1000, "/locks/a", "a1", lockq.Exclusive, 1, "web-1", "h1")
	w.node(2000, "/locks/a", "b1", lockq.Read, 2, "web-2", "h2")
	info, ok := w.x.Info(w.tr, "/locks/a")
	if !ok || len(info.Holders) != 1 || len(info.Waiters) != 1 {
		t.Fatalf("Info = %+v, %v", info, ok)
	}
	if h := info.Holders[0]; h.Owner != "web-1" || h.Session != 1 || h.Since != 1000 || h.Mode != string(lockq.Exclusive) || h.Token == 0 {
		t.Errorf("holder %+v", h)
	}
	if oldest, held := w.x.OldestHold(nil); !held || oldest != 1000 {
		t.Errorf("OldestHold = %d, %v; want 1000", oldest, held)
	}
	if wt := info.Waiters[0]; wt.Owner != "web-2" || wt.Since != 2000 || wt.Mode != string(lockq.Read) {
		t.Errorf("waiter %+v", wt)
	}
	w.del(5000, a) // held for 4 s
	info, _ = w.x.Info(w.tr, "/locks/a")
	if len(info.Holders) != 1 || info.Holders[0].Owner != "web-2" || info.Holders[0].Since != 5000 {
		t.Fatalf("after the release: %+v", info)
	}
	if info.EstimatedWaitMs != 4000 {
		t.Errorf("estimated wait %d ms, want the one hold time seen, 4000", info.EstimatedWaitMs)
	}
	if got := w.x.Paths("/"); fmt.Sprint(got) != "[/locks/a]" {
		t.Errorf("Paths = %v", got)
	}
	w.apply(6000, tree.Txn{Type: tree.TxnCloseSession, Session: 2})
	if _, ok := w.x.Info(w.tr, "/locks/a"); ok || len(w.x.Paths("/")) != 0 {
		t.Error("a lock with no node left is still known")
	}
}

func TestTheIndexShowsALeaseAndItsSession(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.apply(1000, tree.Txn{Type: tree.TxnCreateSession, Session: 7, LeaseTTL: 10_000, LeaseParent: 1})
	w.node(1000, "", "a", lockq.Exclusive, 7, "http-client", "")
	info, ok := w.x.Info(w.tr, "/")
	if !ok || len(info.Holders) != 1 {
		t.Fatalf("Info = %+v, %v", info, ok)
	}
	if h := info.Holders[0]; h.Lease != 7 || h.Session != 1 || h.Expires != 11_000 {
		t.Errorf("a leased holder %+v", h)
	}
}

func TestARebuiltIndexIsTheSameAsOneKeptUpToDate(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.session(2)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/l"})
	w.node(1000, "/l", "a", lockq.Read, 1, "o1", "h1")
	w.node(2000, "/l", "b", lockq.Read, 2, "o2", "h2")
	w.node(3000, "/l", "c", lockq.Write, 1, "o1", "h3")
	x := New()
	x.Rebuild(w.tr)
	got, _ := x.Info(w.tr, "/l")
	want, _ := w.x.Info(w.tr, "/l")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rebuilt %+v\nkept    %+v", got, want)
	}
}

// A lock service's members look for deadlocks every second among
// thousands of held locks, few with waiters, under the state machine's read
// lock, which holds apply up meanwhile.
func BenchmarkDeadlocksAmongManyHeldLocks(b *testing.B) {
	w := newWorld(b)
	w.session(1)
	w.session(2)
	for i := range 10_000 {
		dir := fmt.Sprintf("/l%d", i)
		w.apply(0, tree.Txn{Type: wire.OpCreate, Path: dir})
		w.node(1000, dir, fmt.Sprintf("h%d", i), lockq.Exclusive, 1, "p1", fmt.Sprintf("h%d", i))
		if i%500 == 0 { // a few with a waiter
			w.node(2000, dir, fmt.Sprintf("w%d", i), lockq.Exclusive, 2, "p2", fmt.Sprintf("w%d", i))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if c := w.x.Deadlocks(w.tr); len(c) != 0 {
			b.Fatalf("deadlocks: %+v", c)
		}
	}
}

func TestATwoHolderDeadlockIsACycle(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.session(2)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/a"})
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/b"})
	w.node(1000, "/a", "x1", lockq.Exclusive, 1, "p1", "A")
	w.node(1000, "/b", "y1", lockq.Exclusive, 2, "p2", "B")
	if c := w.x.Deadlocks(w.tr); len(c) != 0 {
		t.Fatalf("deadlocks before any wait: %+v", c)
	}
	w.node(2000, "/b", "x2", lockq.Exclusive, 1, "p1", "A") // A waits for B's lock
	if c := w.x.Deadlocks(w.tr); len(c) != 0 {
		t.Fatalf("a wait is not a deadlock: %+v", c)
	}
	w.node(3000, "/a", "y2", lockq.Exclusive, 2, "p2", "B") // B waits for A's: a cycle
	cycles := w.x.Deadlocks(w.tr)
	if len(cycles) != 1 || len(cycles[0]) != 2 {
		t.Fatalf("deadlocks = %+v, want one cycle of two", cycles)
	}
	if first := cycles[0][0]; first.Waiter.Holder != "B" || first.Lock != "/a" || first.Holder.Holder != "A" {
		t.Errorf("the cycle starts at %+v, want B's wait for /a, the youngest", first)
	}
	// Two holders of one owner that do not wait for each other are not a
	// cycle, though they share the owner.
	w2 := newWorld(t)
	w2.session(1)
	w2.node(1000, "", "x", lockq.Exclusive, 1, "proc", "h1")
	w2.node(2000, "", "y", lockq.Exclusive, 1, "proc", "h2")
	if c := w2.x.Deadlocks(w2.tr); len(c) != 0 {
		t.Errorf("one owner's two holders, one waiting: %+v", c)
	}
	// But two holders of one owner that wait for each other are.
	w2.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/b"})
	w2.node(3000, "/b", "z", lockq.Exclusive, 1, "proc", "h2")
	w2.node(4000, "/b", "v", lockq.Exclusive, 1, "proc", "h1")
	if c := w2.x.Deadlocks(w2.tr); len(c) != 1 {
		t.Errorf("one owner's two holders waiting for each other: %+v, want a cycle", c)
	}
}

func TestTheIndexReportsAcquisitionsReleasesAndGiveUps(t *testing.T) {
	w := newWorld(t)
	var waited, held []int64
	gaveUp := 0
	w.x.Observe = Observer{
		Acquired: func(ms int64) { waited = append(waited, ms) },
		Released: func(ms int64) { held = append(held, ms) },
		GaveUp:   func() { gaveUp++ },
	}
	w.session(1)
	a := w.node(1000, "", "a", lockq.Exclusive, 1, "o", "h1")
	b := w.node(1500, "", "b", lockq.Exclusive, 1, "o", "h2")
	c := w.node(1600, "", "c", lockq.Exclusive, 1, "o", "h3")
	w.del(1700, b) // gives up
	w.del(4000, a) // held 3 s; c waited 2.4 s
	w.del(4500, c)
	if fmt.Sprint(waited) != "[0 2400]" || fmt.Sprint(held) != "[3000 500]" || gaveUp != 1 {
		t.Errorf("waited %v, held %v, gave up %d; want [0 2400], [3000 500], 1", waited, held, gaveUp)
	}
	if _, held := w.x.OldestHold(nil); held {
		t.Error("OldestHold with nothing held")
	}
	if qs, n := w.x.Longest(5, nil); len(qs) != 0 || n != 0 {
		t.Errorf("Longest of no lock = %v, %d", qs, n)
	}
}

func TestLongestListsTheLongestQueuesFirst(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	for _, dir := range []string{"/a", "/b", "/c"} {
		w.apply(0, tree.Txn{Type: wire.OpCreate, Path: dir})
	}
	for i, n := range map[string]int{"/a": 1, "/b": 3, "/c": 2} {
		for j := range n {
			w.node(1000, i, fmt.Sprintf("%s%d", i[1:], j), lockq.Exclusive, 1, "o", "")
		}
	}
	qs, n := w.x.Longest(2, nil)
	if n != 3 || fmt.Sprint(qs) != "[{/b 2} {/c 1}]" {
		t.Errorf("Longest(2) = %v, %d", qs, n)
	}
}

func TestTheIndexOrdersAQueueByItsNodesKeys(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/l"})
	a := w.node(1000, "/l", "a", lockq.Exclusive, 1, "low-1", "h1")
	w.node(2000, "/l", "b", lockq.Exclusive, 1, "low-2", "h2")
	// A waiter of priority 9 placed before b: its key says so, and the
	// index, from the names alone, agrees.
	names, st, _ := w.tr.Children("/l")
	p := lockq.Place(lockq.Sort(names), lockq.Exclusive, 9, int64(st.Cversion))
	if p.Key == "" {
		t.Fatal("the waiter of priority 9 was not placed before b")
	}
	w.node(3000, "/l", lockq.ID("c", 9, p.Key), lockq.Exclusive, 1, "payments", "h3")
	info, _ := w.x.Info(w.tr, "/l")
	if len(info.Waiters) != 2 || info.Waiters[0].Owner != "payments" {
		t.Fatalf("waiters %+v, want payments first", info.Waiters)
	}
	w.del(4000, a)
	info, _ = w.x.Info(w.tr, "/l")
	if len(info.Holders) != 1 || info.Holders[0].Owner != "payments" || info.Holders[0].Since != 4000 {
		t.Fatalf("after the release: holders %+v, want payments", info.Holders)
	}
}

func TestAWaiterThatJoinsAgainHasNotGivenUp(t *testing.T) {
	w := newWorld(t)
	gaveUp := 0
	w.x.Observe.GaveUp = func() { gaveUp++ }
	w.session(1)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/l"})
	w.node(1000, "/l", "a", lockq.Exclusive, 1, "holder", "h1")
	w.node(1000, "/l", "b", lockq.Exclusive, 1, "m", "h2")
	old := w.node(1000, "/l", "c", lockq.Exclusive, 1, "batch", "h3")
	// c joins again at priority 9 (it inherited it), ahead of b: one multi.
	names, st, _ := w.tr.Children("/l")
	es := lockq.Sort(names)
	p := lockq.Place(es[:2], lockq.Exclusive, 9, int64(st.Cversion))
	w.apply(2000, tree.Txn{Type: wire.OpMulti, Ops: []tree.Txn{
		{Type: wire.OpCreate, Path: "/l/" + lockq.Prefix(lockq.ID("c", 9, p.Key), lockq.Exclusive), Mode: wire.ModeEphemeralSequential, Session: 1,
			Data: lockq.Record{Owner: "batch", Holder: "h3"}.Encode()},
		{Type: wire.OpDelete, Path: old, Version: -1},
	}})
	info, _ := w.x.Info(w.tr, "/l")
	if gaveUp != 0 || len(info.Waiters) != 2 || info.Waiters[0].Owner != "batch" {
		t.Fatalf("%d waits given up, waiters %+v; want none given up, batch first", gaveUp, info.Waiters)
	}
	w.del(3000, "/l/"+lockq.Sort(names)[1].Name) // b gives up
	if gaveUp != 1 {
		t.Errorf("%d waits given up, want 1", gaveUp)
	}
}

func TestHoldsNamesTheFirstNodesOfTheHolders(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/l"})
	name := func(p string) string { return p[len("/l/"):] }
	a := w.node(1, "/l", "a1", lockq.Exclusive, 1, "o", "")
	r1 := w.node(2, "/l", "r1", lockq.Read, 1, "o", "")
	r2 := w.node(3, "/l", "r2", lockq.Read, 1, "o", "")
	wr := w.node(4, "/l", "w1", lockq.Write, 1, "o", "")
	holds := func() []bool {
		var out []bool
		for _, p := range []string{a, r1, r2, wr} {
			out = append(out, w.x.Holds("/l", name(p)))
		}
		return out
	}
	if got := fmt.Sprint(holds()); got != "[true false false false]" {
		t.Fatalf("with the exclusive lock held: %s", got)
	}
	w.del(5, a)
	if got := fmt.Sprint(holds()); got != "[false true true false]" {
		t.Fatalf("after its release, the two readers: %s", got)
	}
	for _, tc := range []struct{ dir, name string }{
		{"/l", "not-a-lock-node"},
		{"/l", lockq.Prefix("r1", lockq.Read) + "0000000099"}, // its id, another node
		{"/other", name(r1)},
	} {
		if w.x.Holds(tc.dir, tc.name) {
			t.Errorf("Holds(%q, %q) = true", tc.dir, tc.name)
		}
	}
}
