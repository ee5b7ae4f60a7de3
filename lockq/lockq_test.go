package lockq

import (
	"fmt"
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

// queue makes a queue of the given kinds, in order.
func queue(kinds ...Kind) []Entry {
	es := make([]Entry, len(kinds))
	for i, k := range kinds {
		es[i] = Entry{Name: fmt.Sprintf("%s%010d", Prefix(fmt.Sprint(i), k), i), ID: fmt.Sprint(i), Kind: k, Seq: int64(i)}
	}
	return es
}

func TestWhoHoldsAndWhomEachWaiterWatches(t *testing.T) {
	tests := []struct {
		name     string
		kinds    []Kind
		blockers []int  // Blocker of each entry
		holders  string // H for each entry that holds
	}{
		{"a mutex queue", []Kind{Exclusive, Exclusive, Exclusive}, []int{-1, 0, 1}, "H.."},
		{"readers share", []Kind{Read, Read, Read}, []int{-1, -1, -1}, "HHH"},
		{"readers behind a writer", []Kind{Write, Read, Read}, []int{-1, 0, 0}, "H.."},
		{"a writer waits for the reader just ahead", []Kind{Read, Read, Write, Read}, []int{-1, -1, 1, 2}, "HH.."},
		{"a mutex excludes readers", []Kind{Exclusive, Read}, []int{-1, 0}, "H."},
		{"readers exclude a mutex", []Kind{Read, Exclusive, Read}, []int{-1, 0, 1}, "H.."},
		{"a mutex and a writer exclude each other", []Kind{Write, Exclusive}, []int{-1, 0}, "H."},
		{"an election", []Kind{Candidate, Candidate}, []int{-1, 0}, "H."},
		{"a read waits for a kind it does not know", []Kind{"upgrade", Read}, []int{-1, 0}, ".."},
	}
	for _, tt := range tests {
		es := queue(tt.kinds...)
		for i := range es {
			if got := Blocker(es, i); got != tt.blockers[i] {
				t.Errorf("%s: Blocker of entry %d (%s) = %d, want %d", tt.name, i, es[i].Kind, got, tt.blockers[i])
			}
			wantHolds := tt.holders[i] == 'H'
			if got := Holds(es, i); got != wantHolds {
				t.Errorf("%s: Holds(%d) = %v, want %v", tt.name, i, got, wantHolds)
			}
		}
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

func TestLeasesAndMembersHoldNothingByTheQueue(t *testing.T) {
	es := queue(Lease, Member)
	for i := range es {
		if Holds(es, i) || Blocker(es, i) != -1 {
			t.Errorf("entry %d (%s): Holds %v, Blocker %d", i, es[i].Kind, Holds(es, i), Blocker(es, i))
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
