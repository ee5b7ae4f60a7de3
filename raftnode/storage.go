package raftnode

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// Storage is raft's log and snapshot store (raft.Storage): durable in
// pebble, with an index of the log in memory (memLog: each entry's term
// and size, and the newest entries up to a number of bytes). Raft reads
// older entries from pebble. Every write goes to pebble first, in one
// synced batch, and only then to the index, so what raft reads is always
// durable.
//
// Its keys are its group's (keyspace.go): the HardState, the last
// snapshot's metadata and data (in chunks of up to 1 MiB, snapstore.go),
// the log entries, the members' peer addresses and the members removed.
//
// The raft goroutine writes the log (Save) and reads it through the
// raft.Storage methods; the apply goroutine writes snapshots and compacts
// the log (CreateSnapshot). mu guards the index; pebble is safe for
// concurrent use; the two writers touch different entries (a snapshot
// compacts only applied, hence committed, entries, and raft never rewrites
// those), and snapMu keeps them from writing snapshots at once. A read of
// entries from pebble holds mu's read lock, and a compaction moves the
// index's first entry under the write lock before it deletes the entries
// from pebble, so a reader never finds deleted entries where the index
// promised them. Snapshot reads the stored snapshot from one pebble
// snapshot, so it never sees the metadata of one with the data of another.
type Storage struct {
	db    *pebble.DB // the store's
	ks    keyspace   // the group's keys in db
	group uint64
	store *Store
	// ownsStore: the store was opened for this Storage alone (openStorage),
	// and closes with it.
	ownsStore bool
	snapMu    sync.Mutex    // held while a snapshot is made the stored one, in pebble then in the index
	gen       atomic.Uint64 // the last generation of snapshot data begun

	mu  sync.RWMutex // guards log
	log *memLog
}

const snapChunkSize = 1 << 20

// openStorage opens (or creates) the store in dir and indexes its log (of
// group 0), keeping the newest entries up to cacheBytes in memory; the last
// snapshot's data stays in the store (snapshotReader). Closing the Storage
// closes the store.
func openStorage(dir string, cacheBytes int, log *zap.Logger) (*Storage, error) {
	return openStorageOn(vfs.Default, dir, cacheBytes, log)
}

// openStorageOn is openStorage on the file system fs.
func openStorageOn(fs vfs.FS, dir string, cacheBytes int, log *zap.Logger) (*Storage, error) {
	st, err := openStoreOn(fs, dir, log)
	if err != nil {
		return nil, err
	}
	s, err := st.Group(0, cacheBytes)
	if err != nil {
		st.Close()
		return nil, err
	}
	s.ownsStore = true
	return s, nil
}

// Store is a member's pebble store. The logs of its raft groups live in it
// side by side (keyspace.go), each read and written through a Storage of
// its own. One store is one write-ahead log: the groups' synced writes of
// the same moment share pebble's fsyncs.
type Store struct {
	db  *pebble.DB
	fs  vfs.FS
	dir string

	mu   sync.Mutex
	open map[uint64]bool // the groups with a Storage open
}

// OpenStore opens (or creates) the store in dir.
func OpenStore(dir string, log *zap.Logger) (*Store, error) {
	return openStoreOn(vfs.Default, dir, log)
}

func openStoreOn(fs vfs.FS, dir string, log *zap.Logger) (*Store, error) {
	db, err := pebble.Open(dir, &pebble.Options{FS: walFS{fs}, Logger: pebbleLogger{log.Sugar()}, EventListener: stallListener(log)})
	if err != nil {
		return nil, fmt.Errorf("open raft store %s: %w", dir, err)
	}
	st := &Store{db: db, fs: fs, dir: dir, open: map[uint64]bool{}}
	if err := st.removeUningested(); err != nil {
		db.Close()
		return nil, fmt.Errorf("clean raft store %s: %w", dir, err)
	}
	return st, nil
}

// HoldsGroup reports whether the store holds a log or a snapshot of
// group, which must not be open: it was seeded, or has run.
func (st *Store) HoldsGroup(group uint64) (bool, error) {
	s, err := st.Group(group, 0)
	if err != nil {
		return false, err
	}
	defer s.Close()
	return !s.IsEmpty() || s.snapshotIndex() > 0, nil
}

// Group opens the Storage of group and indexes its log, keeping the newest
// entries up to cacheBytes in memory. A group has one Storage open at a
// time; closing it lets the group be opened again.
func (st *Store) Group(group uint64, cacheBytes int) (*Storage, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open[group] {
		return nil, fmt.Errorf("raft store %s: group %d is open already", st.dir, group)
	}
	s := &Storage{db: st.db, ks: groupKeys(group), group: group, store: st, log: newMemLog(cacheBytes)}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("load group %d of raft store %s: %w", group, st.dir, err)
	}
	st.open[group] = true
	return s, nil
}

// Close closes the store. Its groups' Storages go with it.
func (st *Store) Close() error { return st.db.Close() }

// removeUningested removes the sstables of snapshots that a crash stopped
// before they were ingested (chunkWriter).
func (st *Store) removeUningested() error {
	names, err := st.fs.List(st.dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, ingestSuffix) {
			if err := st.fs.Remove(st.fs.PathJoin(st.dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Storage) load() error {
	gen, err := s.ks.snapGen(s.db)
	if err != nil {
		return err
	}
	last, err := s.ks.lastGen(s.db)
	if err != nil {
		return err
	}
	s.gen.Store(max(gen, last))
	var snap raftpb.SnapshotMetadata
	if err := s.get(s.ks.key(kindSnapMeta), &snap); err != nil {
		return err
	}
	if snap.Index > 0 {
		s.log.applySnapshot(snap)
	}
	if err := s.get(s.ks.key(kindHardState), &s.log.hs); err != nil {
		return err
	}
	iter, err := s.db.NewIter(s.ks.between(kindEntry, snap.Index+1, math.MaxUint64))
	if err != nil {
		return err
	}
	defer iter.Close()
	ent := make([]raftpb.Entry, 1)
	for iter.First(); iter.Valid(); iter.Next() {
		ent[0] = raftpb.Entry{}
		if err := ent[0].Unmarshal(iter.Value()); err != nil {
			return fmt.Errorf("entry %x: %w", iter.Key(), err)
		}
		if want := s.log.lastIndex() + 1; ent[0].Index != want {
			return fmt.Errorf("entry %d where %d belongs: the log has a gap", ent[0].Index, want)
		}
		s.log.append(ent)
		ent = make([]raftpb.Entry, 1) // the cache keeps the last
	}
	return iter.Error()
}

// unmarshaler is what gogoproto messages implement.
type unmarshaler interface{ Unmarshal([]byte) error }

// get reads key into m; a missing key leaves m as it is.
func (s *Storage) get(key []byte, m unmarshaler) error {
	return get(s.db, key, m)
}

func get(r pebble.Reader, key []byte, m unmarshaler) error {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	return m.Unmarshal(v)
}

// IsEmpty reports whether the store has never been written: a new member
// that must be bootstrapped.
func (s *Storage) IsEmpty() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return raft.IsEmptyHardState(s.log.hs) && s.log.lastIndex() == 0
}

// InitialState returns the stored HardState and the membership of the
// last snapshot (raft.Storage).
func (s *Storage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.hs, s.log.snap.ConfState, nil
}

// FirstIndex is the index of the first entry in the log (raft.Storage).
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.firstIndex(), nil
}

// LastIndex is the index of the last entry in the log (raft.Storage).
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.lastIndex(), nil
}

// Term is the term of entry i, which may be the last compacted one
// (raft.Storage).
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.term(i)
}

// Entries returns the entries from lo to hi (exclusive), at most maxSize
// bytes of them but at least one (raft.Storage): from the cache, and
// those older than it from pebble. The caller may not change them.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.log
	switch {
	case lo <= m.offset:
		return nil, raft.ErrCompacted
	case hi > m.lastIndex()+1:
		return nil, fmt.Errorf("entries up to %d asked for, the log ends at %d", hi-1, m.lastIndex())
	case lo >= hi:
		return nil, nil
	}
	cf := m.cacheFirst()
	if lo >= cf {
		return m.cached(lo, hi, maxSize), nil
	}
	ents, size, err := s.readEntries(lo, min(hi, cf), maxSize)
	if err != nil || hi <= cf || uint64(len(ents)) < min(hi, cf)-lo {
		return ents, err
	}
	for _, e := range m.cached(cf, hi, math.MaxUint64) {
		if size += uint64(e.Size()); size > maxSize {
			break
		}
		ents = append(ents, e)
	}
	return ents, nil
}

// readEntries reads the entries from lo to hi (exclusive) from pebble, up
// to maxSize bytes but at least one, and returns them with their size.
// The caller holds mu (read).
func (s *Storage) readEntries(lo, hi, maxSize uint64) ([]raftpb.Entry, uint64, error) {
	iter, err := s.db.NewIter(s.ks.between(kindEntry, lo, hi))
	if err != nil {
		return nil, 0, err
	}
	defer iter.Close()
	var ents []raftpb.Entry
	var size uint64
	for iter.First(); iter.Valid(); iter.Next() {
		var e raftpb.Entry
		if err := e.Unmarshal(iter.Value()); err != nil {
			return nil, 0, fmt.Errorf("entry %x: %w", iter.Key(), err)
		}
		if e.Index != lo+uint64(len(ents)) {
			return nil, 0, fmt.Errorf("entry %d where %d belongs: the log has a gap", e.Index, lo+uint64(len(ents)))
		}
		if size += uint64(e.Size()); len(ents) > 0 && size > maxSize {
			size -= uint64(e.Size())
			break
		}
		ents = append(ents, e)
	}
	if err := iter.Error(); err != nil {
		return nil, 0, err
	}
	if len(ents) == 0 {
		return nil, 0, fmt.Errorf("entries %d to %d are not in the store", lo, hi-1)
	}
	return ents, size, nil
}

// LogBytes is the size of the log's entries after index lo up to and
// including hi.
func (s *Storage) LogBytes(lo, hi uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.bytesBetween(lo, hi)
}

// CachedBytes is the size of the entries the index keeps in memory.
func (s *Storage) CachedBytes() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.cacheBytes
}

// compactPoint is the last entry to compact so that at most maxEntries
// entries and maxBytes bytes stay up to index upTo.
func (s *Storage) compactPoint(upTo, maxEntries, maxBytes uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.compactPoint(upTo, maxEntries, maxBytes)
}

// Snapshot returns the last stored snapshot with its data, which the
// index does not keep (raft asks for it only to send it to a follower
// that is behind). It reads both from one pebble snapshot: the apply
// goroutine may be writing a newer one.
func (s *Storage) Snapshot() (raftpb.Snapshot, error) {
	ps := s.db.NewSnapshot()
	defer ps.Close()
	var snap raftpb.Snapshot
	if err := get(ps, s.ks.key(kindSnapMeta), &snap.Metadata); err != nil || snap.Metadata.Index == 0 {
		return snap, err
	}
	var err error
	snap.Data, err = s.ks.snapshotData(ps)
	return snap, err
}

// Save writes a Ready's state in one batch: the snapshot it carries (if
// any), its entries (dropping any conflicting tail) and its HardState. Then
// it updates the index. The store holds the same entries as the index,
// so a tail to drop is known without a read, and the common append
// writes no range deletion (pebble would keep one per write until its
// next compaction). The batch is fsynced when mustSync (raft's
// Ready.MustSync: new entries, a new term or a vote) or when it carries a
// snapshot; a HardState whose commit index alone moved need not be, as
// raft learns the commit index again from the leader after a crash.
func (s *Storage) Save(hs raftpb.HardState, ents []raftpb.Entry, snap raftpb.Snapshot, mustSync bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	prevLast, _ := s.LastIndex() // never fails
	if !raft.IsEmptySnap(snap) {
		s.snapMu.Lock()
		defer s.snapMu.Unlock()
		if err := s.putSnapshot(b, snap.Metadata, snap.Data); err != nil {
			return err
		}
		// The snapshot replaces the whole log, as the index's
		// applySnapshot does; this Ready's entries follow it.
		if err := b.DeleteRange(s.ks.key(kindEntry, 0), s.ks.key(kindEntry, math.MaxUint64), nil); err != nil {
			return err
		}
		prevLast = 0
	}
	for i := range ents {
		// Encoded in place in the batch: no copy of the entry per write.
		op := b.SetDeferred(s.ks.entryKeyLen(), ents[i].Size())
		s.ks.putEntryKey(op.Key, ents[i].Index)
		if _, err := ents[i].MarshalToSizedBuffer(op.Value); err != nil {
			return err
		}
		if err := op.Finish(); err != nil {
			return err
		}
	}
	if last := lastIndex(ents); last > 0 && prevLast > last {
		// A new leader's entries replace a tail this member had.
		if err := b.DeleteRange(s.ks.key(kindEntry, last+1), s.ks.key(kindEntry, prevLast+1), nil); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		v, err := hs.Marshal()
		if err != nil {
			return err
		}
		if err := b.Set(s.ks.key(kindHardState), v, nil); err != nil {
			return err
		}
	}
	if b.Empty() {
		return nil
	}
	opts := pebble.NoSync
	if mustSync || !raft.IsEmptySnap(snap) {
		opts = pebble.Sync
	}
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("write raft store: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !raft.IsEmptySnap(snap) {
		s.log.applySnapshot(snap.Metadata) // Snapshot reads the data back
	}
	s.log.append(ents)
	if !raft.IsEmptyHardState(hs) {
		s.log.hs = hs
	}
	return nil
}

// lastIndex is the index of the last of ents, 0 if there are none.
func lastIndex(ents []raftpb.Entry) uint64 {
	if len(ents) == 0 {
		return 0
	}
	return ents[len(ents)-1].Index
}

// Close closes the pebble store.
// Close lets the group go; a Storage of openStorage closes its store too.
func (s *Storage) Close() error {
	s.store.mu.Lock()
	delete(s.store.open, s.group)
	s.store.mu.Unlock()
	if s.ownsStore {
		return s.store.Close()
	}
	return nil
}

// fileTag begins the names of the group's files in the store's directory
// (a snapshot's sstable before its ingestion): none for group 0, whose
// files are named as before groups.
func (s *Storage) fileTag() string {
	if s.group == 0 {
		return ""
	}
	return fmt.Sprintf("g%d-", s.group)
}

// pebbleLogger sends pebble's log lines to zap.
// stallListener logs pebble's write stalls: while one lasts, no write of
// the log goes through.
func stallListener(log *zap.Logger) *pebble.EventListener {
	var began time.Time // pebble calls the two in turn, from one writer at a time
	return &pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			began = time.Now()
			log.Warn("the raft store stalls its writes", zap.String("reason", info.Reason))
		},
		WriteStallEnd: func() {
			log.Warn("the raft store's write stall ended", zap.Duration("took", time.Since(began)))
		},
	}
}

type pebbleLogger struct{ l *zap.SugaredLogger }

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debugf(format, args...) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Errorf(format, args...) }
func (p pebbleLogger) Fatalf(format string, args ...any) { p.l.Fatalf(format, args...) }
