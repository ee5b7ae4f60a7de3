package fence

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

const (
	tempPrefix  = ".tmp-"  // a write in progress, not yet renamed into place
	tokenRecord = ".token" // a lock's token record, written by Advance
	dirLock     = ".lock"  // held with flock while a Dir has the directory open
	maxName     = 255      // the longest lock name or key: a file name's limit
)

// Dir keeps objects in a directory, each guarded by a lock, with the
// highest fencing token seen for each lock. Each write replaces one file,
// which holds both the object and the token it was written with, so a
// crash leaves either the old object and token or the new ones, never a
// mix. A write rewrites its whole object and a read returns it whole:
// a Dir is for objects that fit in memory.
//
// The guard is per lock: once a write under a lock has been accepted with
// token t, every later write under that lock with a token below t is
// refused, whichever object it is for. An object belongs to the lock it
// is written under: the same key under two locks is two objects. Lock
// names and keys are 1 to 255 ASCII letters, digits, '.', '_' and '-', not
// beginning with '.', so each is one file name; others are refused with
// ErrInvalid.
//
// The files: PATH/LOCK/KEY is an object, a header naming its lock, key
// and token, then its data; PATH/LOCK/.token is a lock's token record
// (see Advance); PATH/LOCK/.tmp-* are writes that a crash interrupted,
// deleted when the lock is next used. A lock's highest token is the
// largest token in its files, read when the lock is first used after
// Open. Nothing in the directory should be removed or changed by hand.
//
// A Dir is safe for concurrent use. Writes under one lock are serialized,
// each waiting for the one before it to reach the disk; writes under
// different locks run in parallel; reads wait for no write. Only one Dir
// at a time may have a directory open: Open takes an exclusive flock on
// PATH/.lock (on Unix), so that a second process cannot keep tokens of its
// own.
type Dir struct {
	path string
	lock *os.File // holds the flock

	mu     sync.Mutex // guards locks and closed
	locks  map[string]*guard
	closed bool

	// hook, set by tests only, is called at each step of a file's
	// replacement; an error it returns is the write's, and a panic
	// stands for a crash at that step.
	hook func(step, lock string, token int64) error
}

// guard is one lock's state. mu serializes the writes under the lock and
// guards the other fields.
type guard struct {
	mu        sync.Mutex
	loaded    bool  // highest has been read from the files
	highest   int64 // the highest token seen for the lock
	dirSynced bool  // the lock's directory is known to be on disk
	err       error // a write whose outcome on disk is unknown; refuses further writes
}

// Open opens the directory at path, creating it (but not its parents) if
// it does not exist. Tokens recorded by earlier Dirs in it are kept. It
// fails if another Dir has the directory open.
func Open(path string) (*Dir, error) {
	if err := os.Mkdir(path, 0o755); err == nil {
		if err := syncDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("fence: %w", err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("fence: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(path, dirLock), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fence: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("fence: %s is open in another Dir: %w", path, err)
	}
	return &Dir{path: path, lock: f, locks: make(map[string]*guard)}, nil
}

// Close releases the directory for another Dir to open. Call it once
// every call on d has returned; calls after it fail.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.lock.Close()
}

// Write replaces the object key under lock with data if token is at least
// the highest token seen for lock, and records token as the highest. An
// older token gets a *StaleTokenError (matching ErrStaleToken) and changes
// nothing. Write returns once the object and its token are on disk; it
// does not keep data.
//
// If Write fails before the new file is in place, everything is as it
// was. If it fails after (syncing the directory failed), whether the
// write survives a crash is unknown: every later write under the lock
// then fails, until the directory is opened again and what the disk kept
// is read.
func (d *Dir) Write(lock string, token int64, key string, data []byte) error {
	if err := checkToken(lock, token); err != nil {
		return err
	}
	if err := checkName("key", key); err != nil {
		return err
	}
	return d.accept(lock, token, func(g *guard) error { return d.replaceLocked(g, lock, key, token, data) })
}

// accept runs write under lock's guard if token passes the rule against
// the lock's highest token, loaded from disk if it was not yet.
func (d *Dir) accept(lock string, token int64, write func(g *guard) error) error {
	g, err := d.guardOf(lock)
	if err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := d.loadLocked(g, lock); err != nil {
		return err
	}
	if err := Check(lock, g.highest, token); err != nil {
		return err
	}
	return write(g)
}

// Advance records token as the highest seen for lock without writing an
// object, so that every write under lock with an older token is refused
// from then on. A new holder calls it before it reads what it will write
// back: otherwise the holder before it, unaware it lost the lock, could
// still write in between. A token older than the highest gets a
// *StaleTokenError; an equal one changes nothing.
func (d *Dir) Advance(lock string, token int64) error {
	if err := checkToken(lock, token); err != nil {
		return err
	}
	return d.accept(lock, token, func(g *guard) error {
		if token == g.highest {
			return nil
		}
		return d.replaceLocked(g, lock, "", token, nil)
	})
}

// Read returns the object key under lock and the token it was written
// with. The caller owns the returned slice. A missing object is an error
// matching fs.ErrNotExist. Read takes no token: fencing refuses writes,
// not reads.
func (d *Dir) Read(lock, key string) ([]byte, int64, error) {
	if err := checkName("lock name", lock); err != nil {
		return nil, 0, err
	}
	if err := checkName("key", key); err != nil {
		return nil, 0, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, 0, err
	}
	name := filepath.Join(d.path, lock, key)
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, 0, fmt.Errorf("fence: %w", err)
	}
	h, n, err := decodeHeader(b)
	if err == nil {
		err = checkPlace(h, lock, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("fence: %s: %w", name, err)
	}
	data := b[n:]
	if uint64(len(data)) != h.size || crc32.Checksum(data, castagnoli) != h.dataSum {
		return nil, 0, fmt.Errorf("fence: %s: %w: the data does not match its header", name, ErrCorrupt)
	}
	return data, h.token, nil
}

// Highest returns the highest token seen for lock: 0 if no write under
// it has been accepted.
func (d *Dir) Highest(lock string) (int64, error) {
	if err := checkName("lock name", lock); err != nil {
		return 0, err
	}
	g, err := d.guardOf(lock)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := d.loadLocked(g, lock); err != nil {
		return 0, err
	}
	return g.highest, nil
}

// guardOf returns lock's guard, made on first use.
func (d *Dir) guardOf(lock string) (*guard, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("fence: %s: %w", d.path, fs.ErrClosed)
	}
	g := d.locks[lock]
	if g == nil {
		g = &guard{}
		d.locks[lock] = g
	}
	return g, nil
}

func (d *Dir) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("fence: %s: %w", d.path, fs.ErrClosed)
	}
	return nil
}

// loadLocked reads lock's highest token from its files, once, and deletes
// the temporary files of writes a crash interrupted. A file it cannot read
// fails the call, and the next call tries again: writes under a lock whose
// highest token is unknown are refused.
func (d *Dir) loadLocked(g *guard, lock string) error {
	if g.err != nil {
		return g.err
	}
	if g.loaded {
		return nil
	}
	dir := filepath.Join(d.path, lock)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		g.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	var highest int64
	for _, e := range entries {
		name := e.Name()
		var key string
		switch {
		case strings.HasPrefix(name, tempPrefix):
			// Never renamed into place: the object it was for is as it was.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("fence: %w", err)
			}
			continue
		case name == tokenRecord:
			key = ""
		case checkName("key", name) == nil && e.Type().IsRegular():
			key = name
		default:
			continue // not a file of ours
		}
		h, err := readHeader(filepath.Join(dir, name))
		if err == nil {
			err = checkPlace(h, lock, key)
		}
		if err != nil {
			return fmt.Errorf("fence: lock %q: its highest token is unknown: %s: %w", lock, filepath.Join(dir, name), err)
		}
		highest = max(highest, h.token)
	}
	g.highest, g.loaded = highest, true
	return nil
}

// replaceLocked replaces the file of key under lock (the token record if
// key is empty) with one holding token and data: a temporary file,
// synced, renamed over the old one, and the directory synced. A crash
// leaves the old file or the new one.
func (d *Dir) replaceLocked(g *guard, lock, key string, token int64, data []byte) error {
	dir := filepath.Join(d.path, lock)
	if !g.dirSynced {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("fence: %w", err)
		}
		if err := syncDir(d.path); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
		g.dirSynced = true
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if err := d.writeTemp(f, newHeader(lock, key, token, data), data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("fence: %w", err)
	}
	name := key
	if key == "" {
		name = tokenRecord
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("fence: %w", err)
	}
	// The new file is in place: from here the lock refuses older tokens,
	// even if it does not reach the disk.
	g.highest = token
	err = d.step("renamed", lock, token)
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		g.err = fmt.Errorf("fence: lock %q: a write may not have reached the disk, and writes under the lock are refused until the directory is opened again: %w", lock, err)
		return g.err
	}
	return nil
}

// writeTemp writes the header and data to f, syncs and closes it.
func (d *Dir) writeTemp(f *os.File, h header, data []byte) error {
	if _, err := f.Write(appendHeader(nil, h)); err != nil {
		return err
	}
	if err := d.step("header", h.lock, h.token); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return d.step("synced", h.lock, h.token)
}

func (d *Dir) step(name, lock string, token int64) error {
	if d.hook == nil {
		return nil
	}
	return d.hook(name, lock, token)
}

// readHeader reads the header of the file name and checks the file's size
// against it.
func readHeader(name string) (header, error) {
	f, err := os.Open(name)
	if err != nil {
		return header{}, err
	}
	defer f.Close()
	b := make([]byte, maxHeader)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return header{}, err
	}
	h, n, err := decodeHeader(b[:m])
	if err != nil {
		return header{}, err
	}
	info, err := f.Stat()
	if err != nil {
		return header{}, err
	}
	if size := uint64(info.Size()); size-uint64(n) != h.size {
		return header{}, fmt.Errorf("%w: %d bytes of data, the header says %d", ErrCorrupt, size-uint64(n), h.size)
	}
	return h, nil
}

// checkPlace checks that a file's header names the lock and key of the
// place it was found in.
func checkPlace(h header, lock, key string) error {
	if h.lock != lock || h.key != key {
		return fmt.Errorf("%w: the file is for lock %q, key %q", ErrCorrupt, h.lock, h.key)
	}
	return nil
}

func syncDir(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// checkToken checks the lock name and token of a write.
func checkToken(lock string, token int64) error {
	if err := checkName("lock name", lock); err != nil {
		return err
	}
	if token < 0 {
		return fmt.Errorf("fence: lock %q: token %d is negative: %w", lock, token, ErrInvalid)
	}
	return nil
}

// checkName checks that s can name a lock or an object: 1 to 255 ASCII
// letters, digits, '.', '_' or '-', not beginning with '.'. So a name is
// one file name, never "." or "..", never one of the directory's own.
func checkName(what, s string) error {
	reason := ""
	switch {
	case s == "":
		reason = "is empty"
	case len(s) > maxName:
		reason = fmt.Sprintf("is longer than %d bytes", maxName)
	default:
		for _, c := range []byte(s) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				reason = fmt.Sprintf("has %q, and may have only letters, digits, '.', '_' and '-'", c)
				break
			}
		}
		if reason == "" && s[0] == '.' {
			reason = "begins with '.'"
		}
	}
	if reason != "" {
		return fmt.Errorf("fence: %s %q %s: %w", what, s, reason, ErrInvalid)
	}
	return nil
}
