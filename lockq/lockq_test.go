package lockq

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseReadsQueueNodesAndNothingElse(t *testing.T) {
	tests := []struct {
		name string
		want Entry
		ok   bool
	}{
		{"_c_0123abcd-lock-0000000042", Entry{"_c_0123abcd-lock-0000000042", "0123abcd", Exclusive, 42}, true},
		{"_c_ff-read-0000000000", Entry{"_c_ff-read-0000000000", "ff", Read, 0}, true},
		{"_c_a-b-write-9999999999", Entry{"_c_a-b-write-9999999999", "a-b", Write, 9999999999}, true},
		{"_c_-n-0000000001", Entry{"_c_-n-0000000001", "", Candidate, 1}, true},
		{"lock-0000000042", Entry{}, false},       // not a queue node
		{"_c_ff-lock-00000042", Entry{}, false},   // short sequence
		{"_c_ff-lock0000000042", Entry{}, false},  // no dash before the sequence
		{"_c_fflock-0000000042", Entry{}, false},  // no kind
		{"_c_ff-lock--000000042", Entry{}, false}, // a negative sequence
		{"_c_ff-lock-+000000042", Entry{}, false}, // a sign
		{"_c_ff--0000000042", Entry{}, false},     // an empty kind
		{"ready", Entry{}, false},
	}
	for _, tt := range tests {
		got, ok := Parse(tt.name)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParse checks that a parsed name is exactly its prefix and sequence
// put back together, and that nothing panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"_c_0123abcd-lock-0000000042", "_c_-n-0000000001", "ready", "_c_x--0000000000", "_c_a-b-c-9999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e, ok := Parse(name)
		if !ok {
			return
		}
		if e.Name != name || e.Seq < 0 || e.Kind == "" || strings.Contains(string(e.Kind), "-") {
			t.Fatalf("Parse(%q) = %+v", name, e)
		}
		if want := fmt.Sprintf("%s%010d", Prefix(e.ID, e.Kind), e.Seq); want != name {
			t.Fatalf("Parse(%q) = %+v, which names %q", name, e, want)
		}
	})
}

func TestSortOrdersBySequenceAndSkipsOtherNames(t *testing.T) {
	got := Sort([]string{"_c_b-read-0000000007", "config", "_c_a-lock-0000000003", "_c_c-write-0000000012"})
	var seqs []int64
	for _, e := range got {
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[3 7 12]" {
		t.Fatalf("Sort gave sequences %v, want [3 7 12]", seqs)
	}
}

// queue makes a queue from tokens of an acquisition id and a kind letter
// (R read, W write, X exclusive, N candidate, L lease, M member), in order:
// "aR bW aW" is a's read, b's write, then a's upgrade.
func queue(spec string) []Entry {
	kinds := map[byte]Kind{'R': Read, 'W': Write, 'X': Exclusive, 'N': Candidate, 'L': Lease, 'M': Member, '?': "upgrade"}
	var es []Entry
	for i, tok := range strings.Fields(spec) {
		id, k := tok[:len(tok)-1], kinds[tok[len(tok)-1]]
		es = append(es, Entry{Name: fmt.Sprintf("%s%010d", Prefix(id, k), i), ID: id, Kind: k, Seq: int64(i)})
	}
	return es
}

func TestWhoHoldsAndWhomEachWaiterWatches(t *testing.T) {
	tests := []struct {
		name  string
		queue string
		wait  string // each acquisition's blocker, "a:-" when it holds, in order
	}{
		{"a mutex queue", "aX bX cX", "a:- b:a c:b"},
		{"readers share", "aR bR cR", "a:- b:- c:-"},
		{"readers behind a writer", "aW bR cR", "a:- b:a c:a"},
		{"a writer waits for the reader just ahead", "aR bR cW dR", "a:- b:- c:b d:c"},
		{"a mutex excludes readers", "aX bR", "a:- b:a"},
		{"readers exclude a mutex", "aR bX cR", "a:- b:a c:b"},
		{"a mutex and a writer exclude each other", "aW bX", "a:- b:a"},
		{"an election", "aN bN", "a:- b:a"},
		{"a read waits for a kind it does not know", "a? bR", "a:- b:a"},
		{"a downgrade lets the readers behind in", "aW bR cW aR", "a:- b:- c:b"},
		{"an upgrade waits for a reader ahead", "aR bR bW", "a:- b:a"},
		{"an upgrade waits for a reader behind that holds", "aR bR cW aW", "a:b b:- c:b"},
		{"an upgrade holds back the readers that come after it", "aR bR aW cR", "a:b b:- c:a"},
		{"an upgrade alone holds at once", "aR aW bR", "a:- b:a"},
		{"an upgrade goes ahead of a writer that waits", "aR bW cR aW", "a:- b:a c:b"},
		{"a second upgrade counts as the read it was", "aR bR aW bW", "a:b b:-"},
		{"an upgrade taken back", "aR aW aR bW", "a:- b:a"},
		{"leases and members wait for nothing here", "aL bM", "a:- b:-"},
	}
	// The acquisitions that wait for an upgrade: they hold their read.
	upgraders := map[string]string{
		"an upgrade waits for a reader ahead":                  "b",
		"an upgrade waits for a reader behind that holds":      "a",
		"an upgrade holds back the readers that come after it": "a",
		"a second upgrade counts as the read it was":           "a",
	}
	for _, tt := range tests {
		es := queue(tt.queue)
		first := map[string]string{} // the first node's name: the id
		for _, e := range es {
			if _, ok := first[e.Name]; !ok {
				first[e.Name] = e.ID
			}
		}
		for _, want := range strings.Fields(tt.wait) {
			id, blocker, _ := strings.Cut(want, ":")
			got := "-"
			if b := Blocker(es, id); b >= 0 {
				got = es[b].ID
				if b != slices.IndexFunc(es, func(e Entry) bool { return e.ID == got }) {
					t.Errorf("%s: %s watches %s, not the first node of %s", tt.name, id, es[b].Name, got)
				}
			}
			if got != blocker {
				t.Errorf("%s: %s waits for %s, want %s", tt.name, id, got, blocker)
			}
			kind := es[slices.IndexFunc(es, func(e Entry) bool { return e.ID == id })].Kind
			upgrading := upgraders[tt.name] == id
			holds := Holds(es, id)
			if holds != (kind.Ordered() && (blocker == "-" || upgrading)) {
				t.Errorf("%s: Holds(%s) = %v", tt.name, id, holds)
			}
			if w := Waits(es, id); holds && w != -1 || !holds && w != Blocker(es, id) {
				t.Errorf("%s: Waits(%s) = %d, Holds %v, Blocker %d", tt.name, id, w, holds, Blocker(es, id))
			}
		}
		// Holders gives the acquisitions that Holds says hold, in order.
		var want []Acquisition
		for _, a := range Acquisitions(es) {
			if Holds(es, a.First.ID) {
				want = append(want, a)
			}
		}
		if got := Holders(es); !slices.Equal(got, want) {
			t.Errorf("%s: Holders = %v, want %v", tt.name, got, want)
		}
	}
}

func TestOnlyTheFirstUpgradeUnderWayCounts(t *testing.T) {
	es := queue("aR bR aW bW")
	if UpgradeRefused(es, "a") || !UpgradeRefused(es, "b") {
		t.Errorf("UpgradeRefused: a %v, b %v; want false, true", UpgradeRefused(es, "a"), UpgradeRefused(es, "b"))
	}
	if es := queue("aR aW aR bR bW"); UpgradeRefused(es, "b") {
		t.Error("an upgrade refused after the first one was taken back")
	}
}

func TestOnlyTwoReadsShareALock(t *testing.T) {
	modes := []Kind{Exclusive, Read, Write}
	for _, a := range modes {
		for _, b := range modes {
			if got, want := Conflicts(a, b), !(a == Read && b == Read); got != want {
				t.Errorf("Conflicts(%s, %s) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestARecordReadsBackAndOldDataIsTakenAsTheOwner(t *testing.T) {
	tests := []struct {
		data []byte
		want Record
	}{
		{Record{Owner: "web-1:4242", Holder: "9f3a"}.Encode(), Record{Owner: "web-1:4242", Holder: "9f3a"}},
		{Record{Owner: strings.Repeat("é", 200)}.Encode(), Record{Owner: strings.Repeat("é", 128)}},
		{[]byte("arbor on web-1, pid 7"), Record{Owner: "arbor on web-1, pid 7"}},
		{[]byte("{not json"), Record{Owner: "{not json"}},
		{[]byte{0xff, 0xfe}, Record{}},
		{nil, Record{}},
		{[]byte(`{"owner":"` + strings.Repeat("a", 300) + `"}`), Record{Owner: strings.Repeat("a", MaxOwner)}},
	}
	for _, tt := range tests {
		if got := DecodeRecord(tt.data); got != tt.want {
			t.Errorf("DecodeRecord(%q) = %+v, want %+v", tt.data, got, tt.want)
		}
	}
}

// FuzzDecodeRecord checks that any data decodes without a panic to a
// record that encodes and decodes back to itself.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{`{"owner":"a:1","holder":"ff"}`, "arbor on x, pid 1", "", "{", `{"owner":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := DecodeRecord(data)
		if len(r.Owner) > MaxOwner || len(r.Holder) > MaxOwner {
			t.Fatalf("%+v: over %d bytes", r, MaxOwner)
		}
		if back := DecodeRecord(r.Encode()); back != r && utf8.ValidString(r.Owner) && utf8.ValidString(r.Holder) {
			t.Fatalf("%+v read back as %+v", r, back)
		}
	})
}

func TestALockDelayGoesFirstAndHoldsAgainstEveryMode(t *testing.T) {
	es := Sort([]string{
		"_c_a.p5.k00000000005-lock-0000000007", // placed with a priority
		"_c_b-read-0000000003",
		"_c_c-write-0000000004",
		"_c_d-delay-0000000009", // the newest node, first all the same
		"_c_e-read-0000000002",
	})
	if es[0].Kind != Delay {
		t.Fatalf("queue %v: the lock-delay is not first", es)
	}
	if !Holds(es, "d") {
		t.Error("the lock-delay does not hold")
	}
	for _, e := range es[1:] {
		if Holds(es, e.ID) {
			t.Errorf("%s holds beside the lock-delay", e.Name)
		}
	}
	if b := Blocker(es, es[1].ID); b != 0 {
		t.Errorf("the first after the lock-delay waits for %d, want it (0)", b)
	}
}

func TestARecordKeepsItsLockDelayWithinBounds(t *testing.T) {
	for _, tc := range []struct{ in, want int64 }{{0, 0}, {1500, 1500}, {-5, 0}, {10 * MaxLockDelay.Milliseconds(), MaxLockDelay.Milliseconds()}} {
		r := DecodeRecord(Record{Owner: "o", DelayMs: tc.in}.Encode())
		if r.DelayMs != tc.want || r.Owner != "o" {
			t.Errorf("DelayMs %d: decoded %+v, want %d", tc.in, r, tc.want)
		}
	}
}

func TestTheIntentionModesConflictAsADatabasesDo(t *testing.T) {
	modes := []Kind{IntentShared, IntentExclusive, Read, Exclusive, Write, Delay}
	// ok[a][b]: a holder of a and one of b may hold at once.
	ok := map[Kind]map[Kind]bool{
		IntentShared:    {IntentShared: true, IntentExclusive: true, Read: true},
		IntentExclusive: {IntentShared: true, IntentExclusive: true},
		Read:            {IntentShared: true, Read: true},
	}
	for _, a := range modes {
		for _, b := range modes {
			if got, want := Conflicts(a, b), !ok[a][b]; got != want {
				t.Errorf("Conflicts(%s, %s) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestIntentionModesQueueByWhatTheyConflictWith(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue []string // in order; the last is the one asked about
		holds bool
		waits int // the index it waits for, when it does not hold
	}{
		{"ix beside ix", []string{"_c_a-ix-0000000001", "_c_b-ix-0000000002"}, true, -1},
		{"is beside a read", []string{"_c_a-read-0000000001", "_c_b-is-0000000002"}, true, -1},
		{"ix behind a read", []string{"_c_a-read-0000000001", "_c_b-ix-0000000002"}, false, 0},
		{"ix behind an exclusive", []string{"_c_a-lock-0000000001", "_c_b-ix-0000000002"}, false, 0},
		{"exclusive behind ixs", []string{"_c_a-ix-0000000001", "_c_b-ix-0000000002", "_c_c-lock-0000000003"}, false, 1},
		{"is past a waiting ix", []string{"_c_a-read-0000000001", "_c_b-ix-0000000002", "_c_c-is-0000000003"}, true, -1},
		{"ix waits for the read, not the ix behind it", []string{"_c_a-read-0000000001", "_c_b-ix-0000000002", "_c_c-ix-0000000003"}, false, 0},
		{"a read behind an ix", []string{"_c_a-ix-0000000001", "_c_b-is-0000000002", "_c_c-read-0000000003"}, false, 0},
	} {
		es := Sort(tc.queue)
		me := es[len(es)-1].ID
		if got := Holds(es, me); got != tc.holds {
			t.Errorf("%s: Holds = %v, want %v", tc.name, got, tc.holds)
		}
		if !tc.holds {
			if got := Blocker(es, me); got != tc.waits {
				t.Errorf("%s: Blocker = %d, want %d", tc.name, got, tc.waits)
			}
		}
	}
}

func TestAnUpgradeWaitsForWhatAReadWouldAndForSharingHolders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue []string
		holds bool // the upgrader's read
		waits int  // the node its write waits for; -1: it holds the write
	}{
		{"beside an intent-shared holder", []string{"_c_r-read-0000000001", "_c_c-is-0000000002", "_c_r-write-0000000003"}, true, 1},
		{"behind a lock-delay", []string{"_c_d-delay-0000000009", "_c_r-read-0000000001", "_c_r-write-0000000003"}, false, 0},
		{"alone", []string{"_c_r-read-0000000001", "_c_r-write-0000000003"}, true, -1},
	} {
		es := Sort(tc.queue)
		if got := Holds(es, "r"); got != tc.holds {
			t.Errorf("%s: Holds = %v, want %v", tc.name, got, tc.holds)
		}
		if got := Blocker(es, "r"); got != tc.waits {
			t.Errorf("%s: Blocker = %d, want %d", tc.name, got, tc.waits)
		}
	}
}

func TestAPriorityNewcomerIsNotPlacedAgainstALockDelay(t *testing.T) {
	es := Sort([]string{"_c_d-delay-0000000009", "_c_w-lock-0000000003", "_c_v-lock-0000000004"})
	// It must not panic, and goes at the end or after the first waiter,
	// never right behind the delay.
	p := Place(es, Exclusive, 5, 10)
	if p.Key != "" && p.Key[:SeqDigits] < "0000000003" {
		t.Errorf("placed with key %q, before the next holder", p.Key)
	}
}
