package fence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// openDir opens a Dir in a new temporary directory, closed at the end of
// the test.
func openDir(t *testing.T) *Dir {
	t.Helper()
	return reopen(t, filepath.Join(t.TempDir(), "store"))
}

// reopen opens the Dir at path, closed at the end of the test.
func reopen(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func mustWrite(t *testing.T, d *Dir, lock string, token int64, key, data string) {
	t.Helper()
	if err := d.Write(lock, token, key, []byte(data)); err != nil {
		t.Fatalf("Write(%s, %d, %s) = %v", lock, token, key, err)
	}
}

// wantObject checks what Read returns for lock and key.
func wantObject(t *testing.T, d *Dir, lock, key, data string, token int64) {
	t.Helper()
	got, gotToken, err := d.Read(lock, key)
	if err != nil || string(got) != data || gotToken != token {
		t.Fatalf("Read(%s, %s) = %q, %d, %v; want %q, %d", lock, key, got, gotToken, err, data, token)
	}
}

func wantHighest(t *testing.T, d *Dir, lock string, want int64) {
	t.Helper()
	if got, err := d.Highest(lock); err != nil || got != want {
		t.Fatalf("Highest(%s) = %d, %v; want %d", lock, got, err, want)
	}
}

func wantStale(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrStaleToken) {
		t.Fatalf("got %v, want ErrStaleToken", err)
	}
}

func TestALateWriteOfAnOlderHolderIsRefusedAndChangesNothing(t *testing.T) {
	d := openDir(t)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	mustWrite(t, d, "invoices", 7, "march", "by B")
	wantStale(t, d.Write("invoices", 5, "march", []byte("late by A")))
	wantObject(t, d, "invoices", "march", "by B", 7)
	wantHighest(t, d, "invoices", 7)
}

func TestTheSameHolderWritesAsOftenAsItLikes(t *testing.T) {
	d := openDir(t)
	for i := range 3 {
		mustWrite(t, d, "invoices", 7, "march", fmt.Sprint("version ", i))
	}
	wantObject(t, d, "invoices", "march", "version 2", 7)
}

func TestTheHighestTokenIsKeptPerLockAcrossItsObjects(t *testing.T) {
	d := openDir(t)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	mustWrite(t, d, "invoices", 7, "april", "by B")
	// March was last written with 5, but B holds the lock now.
	wantStale(t, d.Write("invoices", 5, "march", []byte("late by A")))
	wantObject(t, d, "invoices", "march", "by A", 5)
	// Another lock is another guard, and the same key under it another object.
	mustWrite(t, d, "payroll", 5, "march", "payroll by A")
	wantObject(t, d, "payroll", "march", "payroll by A", 5)
	wantObject(t, d, "invoices", "march", "by A", 5)
}

func TestAdvanceRefusesOlderHoldersBeforeTheNewOneWrites(t *testing.T) {
	d := openDir(t)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	if err := d.Advance("invoices", 7); err != nil {
		t.Fatal(err)
	}
	wantStale(t, d.Write("invoices", 5, "march", []byte("late by A")))
	wantStale(t, d.Advance("invoices", 6))
	if err := d.Advance("invoices", 7); err != nil {
		t.Fatalf("Advance with the highest token again = %v", err)
	}
	mustWrite(t, d, "invoices", 7, "march", "by B")
	wantObject(t, d, "invoices", "march", "by B", 7)
}

func TestTokensSurviveReopening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	d := reopen(t, path)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	mustWrite(t, d, "invoices", 7, "april", "by B")
	if err := d.Advance("payroll", 9); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = reopen(t, path)
	wantStale(t, d.Write("invoices", 5, "march", []byte("late by A")))
	wantStale(t, d.Write("payroll", 8, "march", []byte("late")))
	wantHighest(t, d, "invoices", 7)
	wantHighest(t, d, "payroll", 9)
	wantHighest(t, d, "unused", 0)
	wantObject(t, d, "invoices", "march", "by A", 5)
}

// crash is what the hook panics with to stop a write as a crash would:
// nothing after the step runs, not even the clean-up.
type crash struct{}

// writeAndCrash writes with d until the step named, and abandons d there.
func writeAndCrash(t *testing.T, d *Dir, step string, lock string, token int64, key, data string) {
	t.Helper()
	d.hook = func(s, _ string, _ int64) error {
		if s == step {
			panic(crash{})
		}
		return nil
	}
	defer func() {
		if r := recover(); r != (crash{}) {
			t.Fatalf("the write did not reach step %q (recovered %v)", step, r)
		}
		d.Close()
	}()
	d.Write(lock, token, key, []byte(data))
}

func TestACrashLeavesTheOldObjectAndTokenOrTheNewOnesNeverAMix(t *testing.T) {
	tests := []struct {
		step  string
		data  string
		token int64
	}{
		{"header", "by A", 5},  // the temporary file has a header only
		{"synced", "by A", 5},  // the temporary file is complete, not yet renamed
		{"renamed", "by B", 7}, // the new file is in place, the directory not yet synced
	}
	for _, tt := range tests {
		t.Run("a crash at step "+tt.step, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store")
			d := reopen(t, path)
			mustWrite(t, d, "invoices", 5, "march", "by A")
			writeAndCrash(t, d, tt.step, "invoices", 7, "march", "by B")

			d = reopen(t, path)
			wantHighest(t, d, "invoices", tt.token)
			wantObject(t, d, "invoices", "march", tt.data, tt.token)
			if tmp := tempFiles(t, path); len(tmp) != 0 {
				t.Fatalf("temporary files left after reopening: %v", tmp)
			}
			mustWrite(t, d, "invoices", 7, "march", "by B again")
			wantObject(t, d, "invoices", "march", "by B again", 7)
		})
	}
}

func TestALeftoverTemporaryFileIsIgnored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	d := reopen(t, path)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	d.Close()
	// What a crash before the rename leaves: a complete file, never in place.
	tmp := filepath.Join(path, "invoices", tempPrefix+"123")
	data := []byte("by B")
	if err := os.WriteFile(tmp, append(appendHeader(nil, newHeader("invoices", "march", 99, data)), data...), 0o600); err != nil {
		t.Fatal(err)
	}

	d = reopen(t, path)
	wantHighest(t, d, "invoices", 5)
	wantObject(t, d, "invoices", "march", "by A", 5)
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temporary file is still there: %v", err)
	}
}

func TestAWriteThatFailsBeforeTheRenameChangesNothing(t *testing.T) {
	for _, step := range []string{"header", "synced"} {
		t.Run("a failure at step "+step, func(t *testing.T) {
			d := openDir(t)
			mustWrite(t, d, "invoices", 5, "march", "by A")
			failure := errors.New("disk full")
			d.hook = func(s, _ string, _ int64) error {
				if s == step {
					return failure
				}
				return nil
			}
			if err := d.Write("invoices", 7, "march", []byte("by B")); !errors.Is(err, failure) {
				t.Fatalf("Write = %v, want the failure", err)
			}
			wantObject(t, d, "invoices", "march", "by A", 5)
			wantHighest(t, d, "invoices", 5)
			if tmp := tempFiles(t, d.path); len(tmp) != 0 {
				t.Fatalf("temporary files left: %v", tmp)
			}
			d.hook = nil
			mustWrite(t, d, "invoices", 6, "march", "by C")
		})
	}
}

func TestAFailedSyncAfterTheRenameRefusesWritesUntilReopening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	d := reopen(t, path)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	failure := errors.New("I/O error")
	d.hook = func(s, _ string, _ int64) error {
		if s == "renamed" {
			return failure
		}
		return nil
	}
	if err := d.Write("invoices", 7, "march", []byte("by B")); !errors.Is(err, failure) {
		t.Fatalf("Write = %v, want the failure", err)
	}
	d.hook = nil
	err := d.Write("invoices", 8, "march", []byte("by C"))
	if !errors.Is(err, failure) || errors.Is(err, ErrStaleToken) {
		t.Fatalf("a write after the failure = %v, want the failure again", err)
	}
	mustWrite(t, d, "payroll", 8, "march", "payroll by C")
	d.Close()

	d = reopen(t, path)
	wantHighest(t, d, "invoices", 7)
	mustWrite(t, d, "invoices", 8, "march", "by C")
}

// tempFiles lists the temporary files under path.
func tempFiles(t *testing.T, path string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			found = append(found, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestConcurrentWritersNeverLetAnOlderTokenOverwriteANewerOne(t *testing.T) {
	d := openDir(t)
	var mu sync.Mutex
	var accepted []int64 // the tokens of accepted writes under "invoices", in order
	d.hook = func(step, lock string, token int64) error {
		if step == "renamed" && lock == "invoices" {
			mu.Lock()
			accepted = append(accepted, token)
			mu.Unlock()
		}
		return nil
	}
	const holders, writes = 8, 10
	var wg sync.WaitGroup
	refused := make([]int, holders+1)
	for token := int64(1); token <= holders; token++ {
		wg.Go(func() {
			for i := range writes {
				key := []string{"march", "april"}[i%2]
				err := d.Write("invoices", token, key, []byte(fmt.Sprint("by ", token)))
				if errors.Is(err, ErrStaleToken) {
					refused[token]++
				} else if err != nil {
					t.Error(err)
				}
				if err := d.Write(fmt.Sprint("lock-", token), token, key, nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !slices.IsSorted(accepted) {
		t.Fatalf("accepted tokens out of order: %v", accepted)
	}
	if refused[holders] != 0 {
		t.Fatalf("the newest holder was refused %d times", refused[holders])
	}
	wantHighest(t, d, "invoices", holders)
	wantObject(t, d, "invoices", "march", fmt.Sprint("by ", holders), holders)
	wantObject(t, d, "invoices", "april", fmt.Sprint("by ", holders), holders)
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	d := openDir(t)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	before := listing(t, d.path)
	tests := []struct {
		name string
		call func() error
	}{
		{"an empty lock name", func() error { return d.Write("", 7, "march", nil) }},
		{"an empty key", func() error { return d.Write("invoices", 7, "", nil) }},
		{"a negative token", func() error { return d.Write("invoices", -1, "march", nil) }},
		{"a lock name that climbs out", func() error { return d.Write("../x", 7, "march", nil) }},
		{"a key that climbs out", func() error { return d.Write("invoices", 7, "../../x", nil) }},
		{"a lock name of '..'", func() error { return d.Write("..", 7, "march", nil) }},
		{"a key with a slash", func() error { return d.Write("invoices", 7, "a/b", nil) }},
		{"a key naming the token record", func() error { return d.Write("invoices", 7, tokenRecord, nil) }},
		{"a key naming a temporary file", func() error { return d.Write("invoices", 7, tempPrefix+"1", nil) }},
		{"a lock name naming the directory's lock", func() error { return d.Write(dirLock, 7, "march", nil) }},
		{"a key with a NUL", func() error { return d.Write("invoices", 7, "a\x00b", nil) }},
		{"a key that is not ASCII", func() error { return d.Write("invoices", 7, "märz", nil) }},
		{"a key over 255 bytes", func() error { return d.Write("invoices", 7, strings.Repeat("k", 256), nil) }},
		{"an advance with an empty lock name", func() error { return d.Advance("", 7) }},
		{"an advance with a negative token", func() error { return d.Advance("invoices", -7) }},
		{"a read that climbs out", func() error { _, _, err := d.Read("invoices", ".."); return err }},
		{"a highest of a lock that climbs out", func() error { _, err := d.Highest("../invoices"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if after := listing(t, d.path); !slices.Equal(after, before) {
				t.Fatalf("the directory changed from %v to %v", before, after)
			}
		})
	}
	wantHighest(t, d, "invoices", 5)
	if _, err := Open(filepath.Join(d.path, "missing", "store")); err == nil {
		t.Fatal("Open made a directory's parents")
	}
}

// listing lists the files under path with their contents.
func listing(t *testing.T, path string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Dir(path), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files = append(files, fmt.Sprintf("%s %q", p, b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestReadingAMissingObjectIsNotExist(t *testing.T) {
	d := openDir(t)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	for _, key := range [][2]string{{"invoices", "april"}, {"payroll", "march"}} {
		if _, _, err := d.Read(key[0], key[1]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Read(%s, %s) = %v, want fs.ErrNotExist", key[0], key[1], err)
		}
	}
}

func TestADirectoryOpensInOneDirAtATime(t *testing.T) {
	d := openDir(t)
	if d2, err := Open(d.path); err == nil {
		d2.Close()
		t.Fatal("a second Open of the directory succeeded")
	}
	d.Close()
	if err := d.Write("invoices", 5, "march", nil); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("Write after Close = %v, want fs.ErrClosed", err)
	}
	reopen(t, d.path)
}

func TestADamagedFileRefusesWritesUnderItsLockOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	d := reopen(t, path)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	mustWrite(t, d, "invoices", 7, "april", "by B")
	mustWrite(t, d, "payroll", 5, "march", "payroll by A")
	d.Close()
	// A bit of April's token flips on disk: the lock's highest is unknown.
	april := filepath.Join(path, "invoices", "april")
	b, err := os.ReadFile(april)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(april, flip(b, len(magic)+7), 0o600); err != nil {
		t.Fatal(err)
	}

	d = reopen(t, path)
	if err := d.Write("invoices", 5, "march", []byte("late by A")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Write under the damaged lock = %v, want ErrCorrupt", err)
	}
	if _, _, err := d.Read("invoices", "april"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of the damaged object = %v, want ErrCorrupt", err)
	}
	wantObject(t, d, "invoices", "march", "by A", 5)
	mustWrite(t, d, "payroll", 7, "march", "payroll by B")
}

func TestDamagedDataIsFoundOnRead(t *testing.T) {
	d := openDir(t)
	mustWrite(t, d, "invoices", 5, "march", "by A")
	name := filepath.Join(d.path, "invoices", "march")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, flip(b, len(b)-1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Read("invoices", "march"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read = %v, want ErrCorrupt", err)
	}
}

func TestAFileMovedToAnotherLockIsNotTakenForItsObject(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	d := reopen(t, path)
	mustWrite(t, d, "invoices", 9, "march", "by A")
	mustWrite(t, d, "payroll", 5, "april", "payroll by A")
	d.Close()
	if err := os.Rename(filepath.Join(path, "invoices", "march"), filepath.Join(path, "payroll", "march")); err != nil {
		t.Fatal(err)
	}

	d = reopen(t, path)
	if _, err := d.Highest("payroll"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Highest = %v, want ErrCorrupt", err)
	}
	if _, _, err := d.Read("payroll", "march"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read = %v, want ErrCorrupt", err)
	}
}
