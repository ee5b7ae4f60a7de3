package raftnode

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// testCacheBytes is the log cache of the stores the tests open: small, so
// that they read entries from pebble too.
const testCacheBytes = 1 << 10

// pattern is n bytes that differ from chunk to chunk and from seed to seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/snapChunkSize) ^ seed
	}
	return b
}

// logOf opens a store in dir holding entries 1..last, all committed.
func logOf(t *testing.T, dir string, last uint64) *Storage {
	t.Helper()
	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	var ents []raftpb.Entry
	for i := uint64(1); i <= last; i++ {
		ents = append(ents, raftpb.Entry{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	if err := s.Save(raftpb.HardState{Term: 1, Commit: last}, ents, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
	return s
}

func writer(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		// In pieces of odd sizes, as an encoder writes.
		for len(data) > 0 {
			n := min(len(data), 70001)
			if _, err := w.Write(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	}
}

// chunkKeys counts the keys of snapshot data: the current layout's and the
// old one's.
func chunkKeys(t *testing.T, s *Storage) (gens map[uint64]int, old int) {
	t.Helper()
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: s.ks.key(kindSnapData), UpperBound: s.ks.key(kindSnapChunk + 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer iter.Close()
	gens = map[uint64]int{}
	for iter.First(); iter.Valid(); iter.Next() {
		switch k := iter.Key(); k[len(s.ks.prefix)] {
		case kindSnapData:
			old++
		case kindSnapChunk:
			gens[s.ks.number(k)]++
		}
	}
	return gens, old
}

func TestAStreamedSnapshotReadsBackWholeAndReplacesTheLast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := logOf(t, dir, 10)
	cs := raftpb.ConfState{Voters: []uint64{1}}
	first := pattern(3*streamChunkSize+streamChunkSize/2, 1) // several batches, and a part chunk
	st, err := s.CreateSnapshot(5, &cs, writer(first), 3)
	if err != nil || !st.Saved || st.Bytes != len(first) {
		t.Fatalf("CreateSnapshot = %+v, %v; want saved, %d bytes", st, err, len(first))
	}
	second := pattern(3*streamChunkSize, 2)
	if st, err := s.CreateSnapshot(8, &cs, writer(second), 6); err != nil || !st.Saved {
		t.Fatalf("second CreateSnapshot = %+v, %v", st, err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Metadata.Index != 8 || snap.Metadata.Term != 1 || !bytes.Equal(snap.Data, second) {
		t.Fatalf("Snapshot() is at %d/%d with %d bytes, want 8/1 and the second snapshot's %d", snap.Metadata.Index, snap.Metadata.Term, len(snap.Data), len(second))
	}
	if gens, _ := chunkKeys(t, s); len(gens) != 1 || gens[s.gen.Load()] != 3 {
		t.Fatalf("chunks by generation %v, want only the last one's 3", gens)
	}
	if first, _ := s.FirstIndex(); first != 7 {
		t.Fatalf("first index %d after compacting to 6, want 7", first)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sr, err := s.ks.newSnapshotReader(s.db)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(sr)
	sr.Close()
	if err != nil || !bytes.Equal(got, second) {
		t.Fatalf("after reopening, the snapshot reads %d bytes (%v), want the second's %d", len(got), err, len(second))
	}
	if last, _ := s.LastIndex(); last != 10 {
		t.Fatalf("after reopening, last index %d, want 10", last)
	}
}

func TestASnapshotFromTheLeaderWinsOverOneBeingStreamed(t *testing.T) {
	t.Parallel()
	s := logOf(t, t.TempDir(), 10)
	defer s.Close()
	cs := raftpb.ConfState{Voters: []uint64{1}}
	received := pattern(snapChunkSize+10, 3)
	write := func(w io.Writer) error {
		if err := writer(pattern(2*snapChunkSize, 4))(w); err != nil {
			return err
		}
		// The raft goroutine stores a newer snapshot from the leader while
		// the apply goroutine is still writing its own.
		snap := raftpb.Snapshot{Data: received, Metadata: raftpb.SnapshotMetadata{Index: 20, Term: 2, ConfState: cs}}
		if err := s.Save(raftpb.HardState{Term: 2, Commit: 20}, nil, snap, true); err != nil {
			return err
		}
		return writer(pattern(snapChunkSize, 5))(w)
	}
	st, err := s.CreateSnapshot(7, &cs, write, 5)
	if err != nil || st.Saved {
		t.Fatalf("CreateSnapshot = %+v, %v; want it dropped", st, err)
	}
	snap, err := s.Snapshot()
	if err != nil || snap.Metadata.Index != 20 || !bytes.Equal(snap.Data, received) {
		t.Fatalf("Snapshot() at %d with %d bytes (%v), want the leader's at 20 with %d", snap.Metadata.Index, len(snap.Data), err, len(received))
	}
	if gens, _ := chunkKeys(t, s); len(gens) != 1 {
		t.Fatalf("chunks by generation %v, want the leader's snapshot's only", gens)
	}
}

func TestAStoreOfTheOldLayoutKeepsItsSnapshotUntilTheNext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := logOf(t, dir, 10)
	old := pattern(snapChunkSize+5, 6)
	// The layout before generations: the data under "d" + chunk number.
	b := s.db.NewBatch()
	meta, _ := (&raftpb.SnapshotMetadata{Index: 4, Term: 1, ConfState: raftpb.ConfState{Voters: []uint64{1}}}).Marshal()
	_ = b.Set(s.ks.key(kindSnapMeta), meta, nil)
	_ = b.Set(s.ks.key(kindSnapData, 0), old[:snapChunkSize], nil)
	_ = b.Set(s.ks.key(kindSnapData, 1), old[snapChunkSize:], nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	s.Close()

	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Snapshot()
	if err != nil || snap.Metadata.Index != 4 || !bytes.Equal(snap.Data, old) {
		t.Fatalf("Snapshot() at %d with %d bytes (%v), want the old layout's at 4 with %d", snap.Metadata.Index, len(snap.Data), err, len(old))
	}
	cs := raftpb.ConfState{Voters: []uint64{1}}
	if st, err := s.CreateSnapshot(9, &cs, writer([]byte("new")), 8); err != nil || !st.Saved {
		t.Fatalf("CreateSnapshot = %+v, %v", st, err)
	}
	if _, oldKeys := chunkKeys(t, s); oldKeys != 0 {
		t.Fatalf("%d chunks of the old layout left after a new snapshot", oldKeys)
	}
	if snap, _ := s.Snapshot(); string(snap.Data) != "new" {
		t.Fatalf("Snapshot() data %q, want %q", snap.Data, "new")
	}
}

// storedLog reopens the store in dir and returns its log's first and last
// index and each entry's term, as a restart would load them.
func storedLog(t *testing.T, dir string) (first, last uint64, terms map[uint64]uint64) {
	t.Helper()
	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ = s.FirstIndex()
	last, _ = s.LastIndex()
	ents, err := s.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	terms = map[uint64]uint64{}
	for _, e := range ents {
		terms[e.Index] = e.Term
	}
	return first, last, terms
}

func TestAReplacedTailIsGoneAfterARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := logOf(t, dir, 10)
	// A new leader of term 2 overwrites entries 6 and 7; 8-10 must go.
	ents := []raftpb.Entry{{Index: 6, Term: 2}, {Index: 7, Term: 2}}
	if err := s.Save(raftpb.HardState{Term: 2, Commit: 5}, ents, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
	// Appending after the tail drops nothing.
	if err := s.Save(raftpb.HardState{Term: 2, Commit: 5}, []raftpb.Entry{{Index: 8, Term: 2}}, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	first, last, terms := storedLog(t, dir)
	if first != 1 || last != 8 {
		t.Fatalf("log %d..%d after the restart, want 1..8", first, last)
	}
	for i := uint64(1); i <= 8; i++ {
		if want := map[bool]uint64{true: 1, false: 2}[i <= 5]; terms[i] != want {
			t.Errorf("entry %d has term %d, want %d", i, terms[i], want)
		}
	}
}

func TestASnapshotFromTheLeaderReplacesTheWholeLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := logOf(t, dir, 10)
	snap := raftpb.Snapshot{Data: []byte("state"), Metadata: raftpb.SnapshotMetadata{Index: 5, Term: 3,
		ConfState: raftpb.ConfState{Voters: []uint64{1}}}}
	ents := []raftpb.Entry{{Index: 6, Term: 3}}
	if err := s.Save(raftpb.HardState{Term: 3, Commit: 5}, ents, snap, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	first, last, terms := storedLog(t, dir)
	if first != 6 || last != 6 || terms[6] != 3 {
		t.Fatalf("log %d..%d with terms %v after the restart, want only entry 6 of term 3", first, last, terms)
	}
}

// TestAnUnfinishedSnapshotLeavesNoSSTable: a snapshot whose write fails
// removes its sstable, and one a crash left is removed at the next open.
func TestAnUnfinishedSnapshotLeavesNoSSTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := logOf(t, dir, 10)
	cs := raftpb.ConfState{Voters: []uint64{1}}
	boom := errors.New("boom")
	fail := func(w io.Writer) error {
		if err := writer(pattern(2*streamChunkSize, 6))(w); err != nil {
			return err
		}
		return boom
	}
	if _, err := s.CreateSnapshot(5, &cs, fail, 3); !errors.Is(err, boom) {
		t.Fatalf("CreateSnapshot = %v, want the write's error", err)
	}
	if left := ingestFiles(t, dir); len(left) != 0 {
		t.Fatalf("a failed snapshot left %v", left)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "snapshot-99"+ingestSuffix)
	if err := os.WriteFile(crashed, []byte("half an sstable"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left := ingestFiles(t, dir); len(left) != 0 {
		t.Fatalf("the store opened with %v left", left)
	}
	if st, err := s.CreateSnapshot(5, &cs, writer(pattern(10, 7)), 3); err != nil || !st.Saved {
		t.Fatalf("CreateSnapshot after the crash = %+v, %v", st, err)
	}
}

func ingestFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+ingestSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return names
}
