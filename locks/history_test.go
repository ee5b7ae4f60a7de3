package locks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// brief is an event as the tests compare it: kind, node's id, times.
func brief(evs []wire.LockEvent) string {
	var out []string
	for _, ev := range evs {
		id := "?"
		if e, ok := lockq.Parse(ev.Node); ok {
			id = e.ID
		}
		s := fmt.Sprintf("%s %s %s@%d", ev.Lock, ev.Kind, id, ev.Time)
		switch {
		case ev.Kind == wire.LockAcquired:
			s += fmt.Sprintf(" waited %d", ev.WaitedMs)
		case ev.Kind != wire.LockDeadlock:
			s += fmt.Sprintf(" held %d", ev.HeldMs)
		}
		if ev.By != "" || ev.Reason != "" {
			s += fmt.Sprintf(" by %s (%s)", ev.By, ev.Reason)
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

func TestTheHistoryTellsHowEachHoldBeganAndEnded(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.session(2)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/l"})
	a := w.node(1000, "/l", "a", lockq.Exclusive, 1, "o1", "h1")
	w.node(1500, "/l", "b", lockq.Exclusive, 2, "o2", "h2")
	w.del(2000, a) // a releases; b holds
	// An admin breaks b's hold.
	w.apply(3000, tree.Txn{Type: wire.OpMulti, Cause: tree.CauseBreak, Reason: "stuck",
		Identities: []wire.Identity{{Scheme: "digest", ID: "admin:x"}},
		Ops:        []tree.Txn{{Type: wire.OpDelete, Path: "/l/" + w.x.HolderNodes("/l")[0], Version: -1}}})
	// A lease's holder is not renewed in time; a session's holder goes with
	// its session.
	w.apply(3000, tree.Txn{Type: tree.TxnCreateSession, Session: 7, LeaseTTL: 10_000, LeaseParent: 1})
	w.node(3100, "/l", "c", lockq.Exclusive, 7, "http", "")
	w.node(3200, "/l", "d", lockq.Exclusive, 2, "o2", "h4")
	w.apply(13000, tree.Txn{Type: tree.TxnCloseSession, Session: 7, LeaseVersion: 1})
	w.apply(14000, tree.Txn{Type: tree.TxnCloseSession, Session: 2})
	want := `/l acquired a@1000 waited 0
/l released a@2000 held 1000
/l acquired b@2000 waited 500
/l broken b@3000 held 1000 by digest:admin:x (stuck)
/l acquired c@3100 waited 0
/l expired c@13000 held 9900
/l acquired d@13000 waited 9800
/l session-ended d@14000 held 1000`
	if got := brief(w.x.History("/")); got != want {
		t.Fatalf("history:\n%s\nwant:\n%s", got, want)
	}
	evs := w.x.History("/l")
	if c := evs[4]; c.Lease != 7 || c.Session != 1 || c.Owner != "http" || c.Token == 0 {
		t.Errorf("the leased acquisition %+v: want lease 7 of session 1, its owner and token", c)
	}
	if e := evs[5]; e.Lease != 7 || e.Token != evs[4].Token {
		t.Errorf("its expiry %+v: want the lease and token of its acquisition", e)
	}
	if got := w.x.History("/other"); len(got) != 0 {
		t.Errorf("History(/other) = %v", got)
	}
}

func TestTheHistoryRecordsAWaitEndedForADeadlock(t *testing.T) {
	w := newWorld(t)
	w.session(1)
	w.session(2)
	w.node(1000, "", "a", lockq.Exclusive, 1, "o1", "h1")
	b := w.node(1500, "", "b", lockq.Exclusive, 2, "o2", "h2")
	c := w.node(1600, "", "c", lockq.Exclusive, 2, "o2", "h3")
	w.del(1700, c) // a wait that ends by itself is not in the history
	w.apply(2500, tree.Txn{Type: wire.OpDelete, Path: b, Version: -1, Cause: tree.CauseDeadlock})
	want := `/ acquired a@1000 waited 0
/ deadlock b@2500`
	if got := brief(w.x.History("/")); got != want {
		t.Fatalf("history:\n%s\nwant:\n%s", got, want)
	}
	if ev := w.x.History("/")[1]; ev.WaitedMs != 1000 || ev.Owner != "o2" || ev.Holder != "h2" {
		t.Errorf("the deadlock's event %+v: want its waiter, who waited 1000 ms", ev)
	}
}

func TestTheHistoryIsBoundedAndKeepsTheNewest(t *testing.T) {
	w := newWorld(t)
	w.x.SetHistoryLimit(5)
	w.session(1)
	for i := range 10 {
		p := w.node(int64(i*100), "", fmt.Sprint("n", i), lockq.Exclusive, 1, "o", "")
		w.del(int64(i*100+50), p)
	}
	evs := w.x.History("/")
	if len(evs) != 5 || evs[0].Kind != wire.LockReleased || evs[4].Time != 950 {
		t.Fatalf("history of 20 events kept to 5:\n%s", brief(evs))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Zxid <= evs[i-1].Zxid {
			t.Fatalf("not oldest first:\n%s", brief(evs))
		}
	}
	w.x.SetHistoryLimit(2)
	if got := w.x.History("/"); len(got) != 2 || got[1].Time != 950 {
		t.Errorf("lowered to 2:\n%s", brief(got))
	}
	long := strings.Repeat("x", 10_000)
	w.apply(2000, tree.Txn{Type: wire.OpCreate, Path: "/b"})
	w.node(2000, "/b", "z", lockq.Exclusive, 1, "o", "")
	w.apply(2100, tree.Txn{Type: wire.OpMulti, Cause: tree.CauseBreak, Reason: long,
		Ops: []tree.Txn{{Type: wire.OpDelete, Path: "/b/" + w.x.HolderNodes("/b")[0], Version: -1}}})
	if r := w.x.History("/b")[1].Reason; len(r) != lockq.MaxOwner {
		t.Errorf("a reason of %d bytes kept as %d, want %d", len(long), len(r), lockq.MaxOwner)
	}
}

// A member that restores a snapshot tells the history its peers tell, and
// its holders hold since when they began to, not since their node's
// creation, even when the history no longer has their acquisition; the
// estimated wait, from the recent hold times, is the same too.
func TestASavedIndexLoadsAsItWas(t *testing.T) {
	w := newWorld(t)
	w.x.SetHistoryLimit(4)
	w.session(1)
	w.session(2)
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/l"})
	w.apply(0, tree.Txn{Type: wire.OpCreate, Path: "/other"})
	a := w.node(1000, "/l", "a", lockq.Exclusive, 1, "o1", "h1")
	b := w.node(1500, "/l", "b", lockq.Read, 2, "o2", "h2")
	w.del(4000, a)     // b holds since 4000
	for i := range 2 { // b's acquisition leaves the history
		w.del(int64(5000+i*100), w.node(int64(5000+i*100), "/other", fmt.Sprint("x", i), lockq.Exclusive, 1, "o", ""))
	}
	x := New()
	x.SetHistoryLimit(4)
	if err := x.Load(w.x.Save()); err != nil {
		t.Fatal(err)
	}
	x.Rebuild(w.tr)
	got, _ := x.Info(w.tr, "/l")
	want, _ := w.x.Info(w.tr, "/l")
	if got.Holders[0].Since != 4000 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("loaded %+v\nwant   %+v (holding since 4000)", got, want)
	}
	// Both release b: they record the same end.
	w.apply(10_000, tree.Txn{Type: wire.OpDelete, Path: b, Version: -1})
	x.Apply(w.tr, w.zxid, 10_000, Cause{End: wire.LockReleased}, []tree.Event{{Type: wire.EventNodeDeleted, Path: b}})
	if got, want := brief(x.History("/")), brief(w.x.History("/")); got != want {
		t.Fatalf("loaded history:\n%s\nwant:\n%s", got, want)
	}
	if last := x.History("/l"); len(last) == 0 || last[len(last)-1].HeldMs != 6000 {
		t.Errorf("the loaded member's release of b: %+v, want held 6000", last)
	}
	for _, bad := range []string{"{", `{"format":2,"events":[]}`, `{"format":1,"events":[{"Zxid":"x"}]}`} {
		if err := New().Load([]byte(bad)); err == nil {
			t.Errorf("Load(%s) = nil, want an error", bad)
		}
	}
	if err := x.Load(nil); err != nil || len(x.History("/")) != 0 {
		t.Errorf("Load(nil) = %v, history %v", err, x.History("/"))
	}
	if New().Save() != nil {
		t.Error("an empty index saves something")
	}
}
