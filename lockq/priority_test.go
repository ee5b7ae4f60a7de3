package lockq

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestANameCarriesAPriorityAndAKey(t *testing.T) {
	tests := []struct {
		name     string
		id       string
		priority int
		key      string
	}{
		{"_c_ab.p9.k000000000515-lock-0000000017", "ab.p9.k000000000515", 9, "000000000515"},
		{"_c_ab.p9-read-0000000017", "ab.p9", 9, "0000000017"},
		{"_c_ab.k000000000515-write-0000000017", "ab.k000000000515", 0, "000000000515"},
		{"_c_ab-lock-0000000017", "ab", 0, "0000000017"},                             // today's names: no priority, the sequence
		{"_c_ab.p0-lock-0000000017", "ab.p0", 0, "0000000017"},                       // 0 is none
		{"_c_ab.p1000-lock-0000000017", "ab.p1000", 0, "0000000017"},                 // over MaxPriority
		{"_c_ab.p09-lock-0000000017", "ab.p09", 0, "0000000017"},                     // not as ID writes it
		{"_c_ab.k000000000510-lock-0000000017", "ab.k000000000510", 0, "0000000017"}, // a key ends with a digit but 0
		{"_c_ab.k0000000005-lock-0000000017", "ab.k0000000005", 0, "0000000017"},     // a key has a fraction
		{"_c_ab.k000000001715-lock-0000000017", "ab.k000000001715", 0, "0000000017"}, // not before its own sequence
		{"_c_ab.kx00000000515-lock-0000000017", "ab.kx00000000515", 0, "0000000017"}, // not digits
	}
	for _, tt := range tests {
		e, ok := Parse(tt.name)
		if !ok || e.ID != tt.id || e.Priority() != tt.priority || e.Key() != tt.key {
			t.Errorf("Parse(%q) = %+v, %v with priority %d, key %q; want id %q, priority %d, key %q",
				tt.name, e, ok, e.Priority(), e.Key(), tt.id, tt.priority, tt.key)
		}
	}
	if got := ID("ab", 9, "000000000515"); got != "ab.p9.k000000000515" {
		t.Errorf("ID = %q", got)
	}
}

func TestSortOrdersByKey(t *testing.T) {
	got := Sort([]string{
		"_c_d.p9.k000000000315-lock-0000000009",
		"_c_c-lock-0000000005",
		"_c_b-lock-0000000003",
		"_c_e.p5.k00000000032-lock-0000000012",
		"_c_a-lock-0000000001",
		"_c_b-write-0000000010", // b's second node: after its first, wherever that is
	})
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID+"/"+string(e.Kind))
	}
	want := "a/lock b/lock d.p9.k000000000315/lock e.p5.k00000000032/lock c/lock b/write"
	if strings.Join(ids, " ") != want {
		t.Errorf("Sort gave %v, want %s", ids, want)
	}
}

func TestBetweenIsStrictlyBetween(t *testing.T) {
	tests := [][2]string{
		{"0000000005", "0000000006"},
		{"0000000005", "0000000009"},
		{"0000000005", "00000000051"},
		{"0000000005", "000000000501"},
		{"00000000051", "00000000052"},
		{"00000000059", "0000000006"},
		{"0000000005", "0000000005000001"},
		{"00000000051", "0000000007"},
		{"00000000054", "00000000055"},
		{"000000000549", "00000000055"},
	}
	for _, tt := range tests {
		k := between(tt[0], tt[1])
		if !(tt[0] < k && k < tt[1]) || !validKey(k) {
			t.Errorf("between(%s, %s) = %s", tt[0], tt[1], k)
		}
	}
	// Placing again and again at one spot keeps working, and the keys
	// grow slowly.
	lo, hi := "0000000005", "0000000006"
	for i := range 200 {
		k := between(lo, hi)
		if !(lo < k && k < hi) || !validKey(k) {
			t.Fatalf("step %d: between(%s, %s) = %s", i, lo, hi, k)
		}
		if i%2 == 0 {
			hi = k
		} else {
			lo = k
		}
	}
	if len(hi) > SeqDigits+200 {
		t.Errorf("a key of %d digits after 200 placements", len(hi))
	}
}

// arrivals plays a lock's history from tokens, each of which advances the
// lock's cversion by one as the server's would: "aX" is acquisition a
// joining as an exclusive lock (R read, W write, X exclusive; a digit
// after the letter is a priority, placed by Place against the queue as it
// is), "-a" is a's nodes leaving, "+n" is n other changes (joins and
// leaves of other locks' worth). It returns the queue in order.
func arrivals(t *testing.T, spec string) []Entry {
	t.Helper()
	kinds := map[byte]Kind{'R': Read, 'W': Write, 'X': Exclusive}
	var names []string
	var seq int64
	for _, tok := range strings.Fields(spec) {
		switch tok[0] {
		case '-':
			names = slices.DeleteFunc(names, func(n string) bool { e, _ := Parse(n); return strings.HasPrefix(e.ID, tok[1:]+".") || e.ID == tok[1:] })
			seq++
			continue
		case '+':
			n, _ := strconv.Atoi(tok[1:])
			seq += int64(n)
			continue
		}
		k := strings.IndexAny(tok, "RWX")
		id, kind, prio := tok[:k], kinds[tok[k]], 0
		if k+1 < len(tok) {
			prio, _ = strconv.Atoi(tok[k+1:])
		}
		p := Place(Sort(names), kind, prio, seq)
		names = append(names, fmt.Sprintf("%s%010d", Prefix(ID(id, prio, p.Key), kind), seq))
		seq++
	}
	return Sort(names)
}

// base is the unique part of an acquisition's id.
func base(id string) string { b, _, _ := strings.Cut(id, "."); return b }

func TestAHigherPriorityWaiterIsServedFirstButNeverBeforeAHolder(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		order string // the acquisitions in queue order; * marks those that hold
	}{
		{"it goes before the waiters of lower priority", "aX bX cX dX9", "a* d b c"},
		{"it never goes before the holder", "aX bX9", "a* b"},
		{"the same priority is first come, first served", "aX bX5 cX5", "a* b c"},
		{"a higher priority goes before a lower one", "aX bX3 cX5 dX4", "a* c d b"},
		{"it does not go before a waiter of higher priority, nor what is ahead of it", "aX bX cX9 dX eX5", "a* c e b d"},
		{"it never goes before readers that hold", "aR bR cW dR9", "a* b* d* c"},
		{"a read placed among reads shares with them", "aW bR cR dR9", "a* d b c"},
		{"a write placed before waiting reads", "aW bR cR dW9", "a* d b c"},
		{"it goes before a waiting upgrade's followers, not the upgrader", "aR bR aW cX dX9", "a* b* d c"},
		{"with the holder gone, the first waiter holds and is not passed", "aX bX -a cX9", "b* c"},
		{"a priority without a place to go waits at the end", "aX9 bX9", "a* b"},
		{"aging: a waiter AgingWindow behind is still passed", "aX bX +63 cX9", "a* c b"},
		{"aging: a waiter further behind is not", "aX bX +64 cX9", "a* b c"},
		{"aging: the run stops at the first waiter too old to pass", "aX bX +40 cX +30 dX9", "a* b d c"},
		{"today's names order as they did", "aX bR cW", "a* b c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := arrivals(t, tt.spec)
			var got []string
			for _, a := range Acquisitions(es) {
				s := base(a.First.ID)
				if Holds(es, a.First.ID) {
					s += "*"
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tt.order {
				t.Errorf("queue %v, want %s", got, tt.order)
			}
		})
	}
}

func TestAHighPriorityWaiterBehindTenLowOnesHoldsNext(t *testing.T) {
	es := arrivals(t, "hX l0X l1X l2X l3X l4X l5X l6X l7X l8X l9X pX9")
	var order []string
	for _, a := range Acquisitions(es) {
		order = append(order, base(a.First.ID))
	}
	if want := "h p l0 l1 l2 l3 l4 l5 l6 l7 l8 l9"; strings.Join(order, " ") != want {
		t.Fatalf("queue %v, want %s", order, want)
	}
	// p watches the holder, and so did l0: p's create rewrites the
	// holder's node, so that l0 looks again and comes to watch p.
	p := Place(arrivals(t, "hX l0X l1X l2X l3X l4X l5X l6X l7X l8X l9X"), Exclusive, 9, 12)
	if p.Touch != 0 {
		t.Errorf("Touch = %d, want 0 (the holder's node)", p.Touch)
	}
	if b := Blocker(es, es[slices.IndexFunc(es, func(e Entry) bool { return e.ID == "l0" })].ID); base(es[b].ID) != "p" {
		t.Errorf("l0 waits for %s, want p", es[b].ID)
	}
}

func TestANewcomerTouchesOnlyWhenItChangesAWaitersBlocker(t *testing.T) {
	tests := []struct {
		name  string
		spec  string // the queue before the newcomer
		kind  Kind
		touch string // the acquisition whose node it rewrites, "" none
	}{
		{"a lock placed before a lock", "aX bX", Exclusive, "a"},
		{"a write placed before reads that wait for a writer", "aW bR cR", Write, "a"},
		{"a read placed before reads that wait for a writer", "aW bR cR", Read, ""},
		{"a read placed before a writer", "aW bW", Read, "a"},
		{"placed at the end", "aX", Exclusive, ""},
		{"a lock placed before a waiter that waits for a waiter", "aX bX9 cX", Exclusive, "b"},
	}
	for _, tt := range tests {
		es := arrivals(t, tt.spec)
		p := Place(es, tt.kind, 5, 10)
		got := ""
		if p.Touch >= 0 {
			got = base(es[p.Touch].ID)
		}
		if got != tt.touch {
			t.Errorf("%s: touches %q, want %q", tt.name, got, tt.touch)
		}
	}
}

// TestPlacingKeepsTheQueueRules plays random histories and checks, at
// each arrival, the rules the recipes rely on: the newcomer goes before
// no holder, and no holder stops holding; no waiter has more than
// AgingWindow later acquisitions placed before it; and every waiter whose
// blocker the newcomer changes watched the node it rewrites.
func TestPlacingKeepsTheQueueRules(t *testing.T) {
	kinds := []Kind{Read, Write, Exclusive}
	placed, touched := 0, 0
	for run := range 50 {
		r := rand.New(rand.NewPCG(uint64(run), 7))
		var names []string
		var seq int64
		passed := map[string]int{} // waiter id -> later acquisitions placed before it
		for step := range 120 {
			es := Sort(names)
			if len(es) > 0 && r.IntN(3) == 0 {
				// The first holder, or anyone, leaves.
				gone := es[0].ID
				if r.IntN(4) == 0 {
					gone = es[r.IntN(len(es))].ID
				}
				names = slices.DeleteFunc(names, func(n string) bool { e, _ := Parse(n); return e.ID == gone })
				seq++
				continue
			}
			kind, prio := kinds[r.IntN(3)], r.IntN(4)*r.IntN(3)
			p := Place(es, kind, prio, seq)
			if p.Key != "" {
				placed++
			}
			if p.Touch >= 0 {
				touched++
			}
			id := ID(fmt.Sprintf("n%d", step), prio, p.Key)
			name := fmt.Sprintf("%s%010d", Prefix(id, kind), seq)
			after := Sort(append(slices.Clone(names), name))
			at := slices.IndexFunc(after, func(e Entry) bool { return e.Name == name })
			for _, e := range after[at+1:] {
				if Holds(es, e.ID) {
					t.Fatalf("run %d step %d: %s placed before %s, which holds: %v", run, step, name, e.Name, names)
				}
				passed[e.ID]++
				if passed[e.ID] > AgingWindow {
					t.Fatalf("run %d step %d: %s passed more than %d times", run, step, e.Name, AgingWindow)
				}
			}
			for _, a := range Acquisitions(es) {
				id := a.First.ID
				if Holds(es, id) != Holds(after, id) && Holds(es, id) {
					t.Fatalf("run %d step %d: %s stopped holding when %s came", run, step, id, name)
				}
				if Holds(es, id) {
					continue
				}
				old, now := Blocker(es, id), Blocker(after, id)
				if (now < 0 || after[now].Name != es[old].Name) && (p.Touch < 0 || es[p.Touch].Name != es[old].Name) {
					t.Fatalf("run %d step %d: %s came to wait for %v instead of %s, whose node is not rewritten (touch %d)",
						run, step, id, now, es[old].Name, p.Touch)
				}
			}
			names = append(names, name)
			seq++
		}
	}
	if placed < 100 || touched < 50 {
		t.Errorf("only %d placements before waiters, %d of them rewriting a node: the histories test too little", placed, touched)
	}
}

// FuzzKey checks that any queue node's key is a key (ten digits or more,
// not after its own sequence number) and its priority in range.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"_c_ab.p9.k000000000515-lock-0000000017", "_c_ab-lock-0000000017", "_c_.k.p-read-0000000001", "_c_a.p1.k00000000001-lock-0000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e, ok := Parse(name)
		if !ok {
			return
		}
		k, seq := e.Key(), fmt.Sprintf("%010d", e.Seq)
		if len(k) < SeqDigits || strings.Trim(k, "0123456789") != "" || k[:SeqDigits] > seq || (k != seq && !validKey(k)) {
			t.Fatalf("%q has key %q", name, k)
		}
		if p := e.Priority(); p < 0 || p > MaxPriority {
			t.Fatalf("%q has priority %d", name, p)
		}
	})
}

func TestAHolderInheritsTheHighestPriorityThatWaitsForIt(t *testing.T) {
	tests := []struct {
		name string
		spec string
		id   string
		want int
	}{
		{"a holder inherits from the waiters", "aX bX3 cX9 dX5", "a", 9},
		{"readers that share the lock both inherit", "aR bR cW7", "b", 7},
		{"a waiter inherits nothing", "aX bX3 cX9", "b", 0},
		{"a holder without priority waiters inherits 0", "aX bX cX", "a", 0},
		{"the priorities of other holders do not count", "aR bR9 cW2", "a", 2},
	}
	for _, tt := range tests {
		es := arrivals(t, tt.spec)
		id := es[slices.IndexFunc(es, func(e Entry) bool { return base(e.ID) == tt.id })].ID
		if got := Inherited(es, id); got != tt.want {
			t.Errorf("%s: Inherited(%s) = %d, want %d", tt.name, tt.id, got, tt.want)
		}
	}
}

func TestPadSeqWritesWhatTheServerNames(t *testing.T) {
	for _, n := range []int64{0, 7, 42, 999_999_999, 1_000_000_000, 9_999_999_999, 12_345_678_901, -3} {
		if got, want := padSeq(n), fmt.Sprintf("%0*d", SeqDigits, n); got != want {
			t.Errorf("padSeq(%d) = %q, want %q", n, got, want)
		}
	}
}
