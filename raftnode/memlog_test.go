package raftnode

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// TestTheStoreAnswersAsAMemoryStorageWould drives Storage, whose cache
// holds a few entries and which reads the rest from pebble, and
// raft.MemoryStorage, which holds them all, through the same appends
// (tails replaced by a new leader's), snapshots, compactions and
// snapshots from a leader, and compares every answer raft could ask for.
func TestTheStoreAnswersAsAMemoryStorageWould(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			dir := t.TempDir()
			s, err := openStorage(dir, 300, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			model := raft.NewMemoryStorage()
			term := uint64(1)
			for step := range 200 {
				last, _ := model.LastIndex()
				first, _ := model.FirstIndex()
				stored, _ := model.Snapshot()
				snapAt := stored.Metadata.Index
				switch r := rng.IntN(10); {
				case r < 6: // append, maybe over a tail
					from := last + 1
					if r == 0 && last >= first {
						from = first + rng.Uint64N(last-first+1)
						term++
					}
					var ents []raftpb.Entry
					for i := range rng.IntN(5) + 1 {
						ents = append(ents, raftpb.Entry{Index: from + uint64(i), Term: term, Data: make([]byte, 1+rng.IntN(120))})
					}
					must(t, s.Save(raftpb.HardState{Term: term, Commit: from - 1}, ents, raftpb.Snapshot{}, true))
					must(t, model.Append(ents))
				case r < 8 && last > max(first, snapAt): // a snapshot here, with a compaction behind it
					lo := max(first, snapAt+1)
					at := lo + rng.Uint64N(last-lo+1)
					to := at - rng.Uint64N(at-first+1)
					cs := raftpb.ConfState{Voters: []uint64{1}}
					if _, err := s.CreateSnapshot(at, &cs, writer([]byte("state")), to); err != nil {
						t.Fatal(err)
					}
					if _, err := model.CreateSnapshot(at, &cs, nil); err != nil {
						t.Fatal(err)
					}
					if err := model.Compact(to); err != nil && !errors.Is(err, raft.ErrCompacted) {
						t.Fatal(err)
					}
				case r == 8: // a snapshot from the leader
					snap := raftpb.Snapshot{Data: []byte("leader"), Metadata: raftpb.SnapshotMetadata{
						Index: max(last, snapAt+1) + rng.Uint64N(5), Term: term, ConfState: raftpb.ConfState{Voters: []uint64{1}}}}
					must(t, s.Save(raftpb.HardState{Term: term, Commit: snap.Metadata.Index}, nil, snap, true))
					must(t, model.ApplySnapshot(snap))
				default: // reopen: the index is rebuilt from the store
					must(t, s.Close())
					if s, err = openStorage(dir, 300, zaptest.NewLogger(t)); err != nil {
						t.Fatal(err)
					}
					// The model forgets what a restart forgets: the
					// entries kept behind the snapshot.
					snap, _ := model.Snapshot()
					ents, _ := model.Entries(snap.Metadata.Index+1, last+1, noLimit)
					model = raft.NewMemoryStorage()
					if !raft.IsEmptySnap(snap) {
						must(t, model.ApplySnapshot(snap))
					}
					must(t, model.Append(ents))
				}
				compareStores(t, step, s, model)
			}
		})
	}
}

const noLimit = ^uint64(0)

func compareStores(t *testing.T, step int, s *Storage, model *raft.MemoryStorage) {
	t.Helper()
	first, _ := model.FirstIndex()
	last, _ := model.LastIndex()
	if f, _ := s.FirstIndex(); f != first {
		t.Fatalf("step %d: first index %d, want %d", step, f, first)
	}
	if l, _ := s.LastIndex(); l != last {
		t.Fatalf("step %d: last index %d, want %d", step, l, last)
	}
	for i := first - 1; i <= last+1; i++ {
		got, gerr := s.Term(i)
		want, werr := model.Term(i)
		if got != want || !errors.Is(gerr, werr) {
			t.Fatalf("step %d: term of %d: %d, %v; want %d, %v", step, i, got, gerr, want, werr)
		}
	}
	for lo := first; lo <= last; lo++ {
		for _, maxSize := range []uint64{0, 150, 400, noLimit} {
			got, err := s.Entries(lo, last+1, maxSize)
			if err != nil {
				t.Fatalf("step %d: entries from %d: %v", step, lo, err)
			}
			want, _ := model.Entries(lo, last+1, maxSize)
			if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("step %d: entries from %d up to %d bytes: %d entries, want %d", step, lo, maxSize, len(got), len(want))
			}
		}
	}
	if _, err := s.Entries(first-1, last+1, noLimit); first > 1 && !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("step %d: entries from the compacted %d: %v, want ErrCompacted", step, first-1, err)
	}
	if s.CachedBytes() > 300 {
		t.Fatalf("step %d: the cache holds %d bytes, over its 300", step, s.CachedBytes())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkMemLogAppend appends one entry at a time, as a leader under
// load does, to a log whose cache holds 100,000 entries: an append costs
// the same whatever the cache holds.
func BenchmarkMemLogAppend(b *testing.B) {
	m := newMemLog(1 << 30)
	data := make([]byte, 100)
	next := func() []raftpb.Entry {
		return []raftpb.Entry{{Index: m.lastIndex() + 1, Term: 1, Data: data}}
	}
	for range 100_000 {
		m.append(next())
	}
	b.ResetTimer()
	for range b.N {
		m.append(next())
	}
}

// TestHeldEntriesStayWhenTheTailIsReplaced: entries raft holds from the
// cache keep their terms when a new leader's entries replace the tail
// they came from, and when more come after.
func TestHeldEntriesStayWhenTheTailIsReplaced(t *testing.T) {
	t.Parallel()
	m := newMemLog(1 << 20)
	for i := uint64(1); i <= 5; i++ {
		m.append([]raftpb.Entry{{Index: i, Term: 1}})
	}
	held := m.cached(3, 6, math.MaxUint64)
	m.append([]raftpb.Entry{{Index: 4, Term: 2}, {Index: 5, Term: 2}})
	m.append([]raftpb.Entry{{Index: 6, Term: 2}})
	for _, e := range held {
		if e.Term != 1 {
			t.Fatalf("a held entry changed: %d has term %d, want 1", e.Index, e.Term)
		}
	}
	if got, _ := m.term(5); got != 2 {
		t.Fatalf("entry 5 has term %d, want the new leader's 2", got)
	}
}
