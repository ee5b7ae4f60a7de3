package raftnode

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// walSizes is the size of each write-ahead log in dir.
func walSizes(t *testing.T, dir string) []int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, fi.Size())
	}
	return sizes
}

func saveEntries(t *testing.T, s *Storage, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		e := raftpb.Entry{Index: i, Term: 1, Data: pattern(300, byte(i))}
		if err := s.Save(raftpb.HardState{Term: 1, Commit: i}, []raftpb.Entry{e}, raftpb.Snapshot{}, true); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTheWALIsWrittenWithZerosAheadOfItsWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saveEntries(t, s, 1, 10)
	sizes := walSizes(t, dir)
	if len(sizes) == 0 {
		t.Fatal("no write-ahead log in the store")
	}
	// Ten 300-byte entries fill a few KiB; the log is as long as pebble's
	// preallocation (110% of its 4 MiB memtable), so the synced writes
	// overwrite and do not grow the file.
	if last := sizes[len(sizes)-1]; last < 4<<20 {
		t.Fatalf("the write-ahead log is %d bytes: its preallocation was not written", last)
	}
}

// crashCopy copies the files of the live store in dir as they are on
// disk, what a kill -9 would leave (every write here was synced), to a new
// directory.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	copied := filepath.Join(t.TempDir(), "crashed")
	if err := os.MkdirAll(copied, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copied, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return copied
}

// openLog opens the store in dir and checks that it holds entries 1..last,
// each with its data, and the commit index last.
func openLog(t *testing.T, dir string, last uint64) *Storage {
	t.Helper()
	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	got, _ := s.LastIndex()
	if first != 1 || got != last {
		t.Fatalf("the store holds entries %d..%d, want 1..%d", first, got, last)
	}
	ents, err := s.Entries(1, last+1, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !bytes.Equal(e.Data, pattern(300, byte(e.Index))) {
			t.Fatalf("entry %d has other data", e.Index)
		}
	}
	if hs, _, _ := s.InitialState(); hs.Commit != last {
		t.Fatalf("the store's commit index is %d, want %d", hs.Commit, last)
	}
	return s
}

func TestAStoreKilledWithZerosAfterItsLogsKeepsEveryWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := openStorage(dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	saveEntries(t, s, 1, 50)
	// A flush makes pebble start a new log (the first ends with its
	// end-of-file trailer, then zeros).
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	saveEntries(t, s, 51, 100)

	copied := crashCopy(t, dir)
	crashed := openLog(t, copied, 100)
	defer crashed.Close()
	// Killed again after the restart, which replayed a log that ended in
	// zeros with no trailer and started a new one.
	saveEntries(t, crashed, 101, 120)
	openLog(t, crashCopy(t, copied), 120).Close()
}
