package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

func TestTheDiskFullFSFailsWritesOnlyWhileItsMarkerExists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "full")
	fs := diskFullFS(vfs.Default, marker)
	write := func(name string) error {
		f, err := fs.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write([]byte("data")); err != nil {
			return err
		}
		return f.Sync()
	}
	if err := write("before"); err != nil {
		t.Fatalf("a write with room on the disk: %v", err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := write("during"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a create on a full disk returned %v, want ENOSPC", err)
	}
	// A file opened before the disk filled cannot grow either, but it
	// can still be read, and a file can be removed.
	f, err := fs.OpenReadWrite(filepath.Join(dir, "before"))
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	if _, err := f.WriteAt([]byte("more"), 4); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write on a full disk returned %v, want ENOSPC", err)
	}
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "data" {
		t.Fatalf("a read on a full disk returned %q, %v", buf, err)
	}
	f.Close()
	if err := fs.Remove(filepath.Join(dir, "before")); err != nil {
		t.Fatalf("a removal on a full disk: %v", err)
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("making a directory that exists, on a full disk: %v", err)
	}
	if err := fs.MkdirAll(filepath.Join(dir, "new"), 0o755); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("making a new directory on a full disk returned %v, want ENOSPC", err)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := write("after"); err != nil {
		t.Fatalf("a write once the disk has room again: %v", err)
	}
	// A file recycled while there was room (pebble recycles its logs) can
	// no more grow on a full disk than one created then.
	reused, err := fs.ReuseForWrite(filepath.Join(dir, "after"), filepath.Join(dir, "reused"))
	if err != nil {
		t.Fatalf("reuse a file with room on the disk: %v", err)
	}
	defer reused.Close()
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reused.Write([]byte("data")); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "reused") {
		t.Fatalf("a write to a recycled file on a full disk returned %v, want ENOSPC naming the file", err)
	}
}

// A member restarted on a full disk cannot open its store: it must fail
// with the disk's error, not start, and leave the store as it was, so
// that it opens with every entry once the disk has room.
func TestAStoreOnAFullDiskOpensOnceTheDiskHasRoom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "full")
	fs := diskFullFS(vfs.Default, marker)
	s, err := openStorageOn(fs, dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	saveEntries(t, s, 1, 50)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Pebble must say so, not stop the process (zap would exit; here it
	// panics).
	panics := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WithFatalHook(zapcore.WriteThenPanic)))
	full, err := openStorageOn(fs, dir, testCacheBytes, panics)
	if !errors.Is(err, syscall.ENOSPC) {
		if err == nil {
			full.Close()
		}
		t.Fatalf("opening the store on a full disk returned %v, want ENOSPC", err)
	}
	t.Logf("on a full disk: %v", err)
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	s, err = openStorageOn(fs, dir, testCacheBytes, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("opening the store once the disk has room: %v", err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != 50 {
		t.Fatalf("the reopened store ends at entry %d, want 50", last)
	}
	ents, err := s.Entries(1, 51, 1<<30)
	if err != nil || len(ents) != 50 {
		t.Fatalf("the reopened store gave %d entries, %v", len(ents), err)
	}
}

// A write the store cannot make must never be taken for made: pebble
// cannot go on after a failed write of its log, and calls its logger's
// Fatalf, which stops arbord (zap exits; here it panics). Save must not
// return, and the log's index must not move.
func TestAWriteOnAFullDiskStopsTheMemberBeforeSaveReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "full")
	log := zap.NewNop().WithOptions(zap.WithFatalHook(zapcore.WriteThenPanic))
	s, err := openStorageOn(diskFullFS(vfs.Default, marker), dir, testCacheBytes, log)
	if err != nil {
		t.Fatal(err)
	}
	saveEntries(t, s, 1, 5)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stopped := func() (stop any) {
		defer func() { stop = recover() }()
		e := raftpb.Entry{Index: 6, Term: 1, Data: pattern(300, 6)}
		err := s.Save(raftpb.HardState{Term: 1, Commit: 6}, []raftpb.Entry{e}, raftpb.Snapshot{}, true)
		t.Fatalf("Save on a full disk returned (%v) instead of stopping the member", err)
		return nil
	}()
	if msg := fmt.Sprint(stopped); !strings.Contains(msg, "no space left on device") {
		t.Fatalf("the member stopped with %q, which does not name the full disk", msg)
	}
	if last, _ := s.LastIndex(); last != 5 {
		t.Fatalf("the log ends at %d after a write that failed, want 5", last)
	}
	_ = s.Close() // fails: pebble is stopped
}
