package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// Storage is raft's log and snapshot store: durable in pebble, served from
// an in-memory mirror (raft.MemoryStorage) of the entries since the last
// compaction. Every write goes to pebble first, in one synced batch, and
// only then to the mirror, so what raft reads is always durable.
//
// Keys:
//
//	"h"               the HardState
//	"m"               the metadata of the last snapshot
//	"g", "s"...       the last snapshot's data, in chunks of up to 1 MiB (snapstore.go)
//	"e" + be64(index) a log entry
//
// The raft goroutine writes the log (Save) and reads it through the
// raft.Storage methods; the apply goroutine writes snapshots and compacts
// the log (CreateSnapshot). MemoryStorage locks itself; pebble is safe for
// concurrent use; the two writers touch different entries (a snapshot
// compacts only applied, hence committed, entries, and raft never rewrites
// those), and snapMu keeps them from writing snapshots at once. Snapshot
// reads the stored snapshot from one pebble snapshot, so it never sees the
// metadata of one with the data of another.
type Storage struct {
	*raft.MemoryStorage
	db     *pebble.DB
	snapMu sync.Mutex    // held while a snapshot is made the stored one, in pebble then in the mirror
	gen    atomic.Uint64 // the last generation of snapshot data begun
}

var (
	keyHardState = []byte("h")
	keySnapMeta  = []byte("m")
)

const (
	prefixSnapData = 'd' // the snapshot data of stores written before generations
	prefixEntry    = 'e'
	snapChunkSize  = 1 << 20
)

func indexKey(prefix byte, i uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], i)
	return k
}

// openStorage opens (or creates) the store in dir and loads the log into
// memory; the last snapshot's data stays in the store (snapshotReader).
func openStorage(dir string, log *zap.Logger) (*Storage, error) {
	db, err := pebble.Open(dir, &pebble.Options{FS: walFS{vfs.Default}, Logger: pebbleLogger{log.Sugar()}})
	if err != nil {
		return nil, fmt.Errorf("open raft store %s: %w", dir, err)
	}
	s := &Storage{MemoryStorage: raft.NewMemoryStorage(), db: db}
	if err := s.load(); err != nil {
		db.Close()
		return nil, fmt.Errorf("load raft store %s: %w", dir, err)
	}
	return s, nil
}

func (s *Storage) load() error {
	gen, err := snapGen(s.db)
	if err != nil {
		return err
	}
	last, err := lastGen(s.db)
	if err != nil {
		return err
	}
	s.gen.Store(max(gen, last))
	var snap raftpb.Snapshot
	if err := s.get(keySnapMeta, &snap.Metadata); err != nil {
		return err
	}
	if snap.Metadata.Index > 0 {
		if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	var hs raftpb.HardState
	if err := s.get(keyHardState, &hs); err != nil {
		return err
	}
	iter, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: indexKey(prefixEntry, snap.Metadata.Index+1),
		UpperBound: indexKey(prefixEntry, math.MaxUint64),
	})
	if err != nil {
		return err
	}
	defer iter.Close()
	var ents []raftpb.Entry
	for iter.First(); iter.Valid(); iter.Next() {
		var e raftpb.Entry
		if err := e.Unmarshal(iter.Value()); err != nil {
			return fmt.Errorf("entry %x: %w", iter.Key(), err)
		}
		ents = append(ents, e)
	}
	if err := iter.Error(); err != nil {
		return err
	}
	if err := s.MemoryStorage.Append(ents); err != nil {
		return err
	}
	if err := s.MemoryStorage.SetHardState(hs); err != nil {
		return err
	}
	return nil
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
	hs, _, _ := s.InitialState()
	last, _ := s.LastIndex()
	return raft.IsEmptyHardState(hs) && last == 0
}

// Snapshot returns the last stored snapshot with its data, which the
// mirror does not keep (raft asks for it only to send it to a follower
// that is behind). It reads both from one pebble snapshot: the apply
// goroutine may be writing a newer one.
func (s *Storage) Snapshot() (raftpb.Snapshot, error) {
	ps := s.db.NewSnapshot()
	defer ps.Close()
	var snap raftpb.Snapshot
	if err := get(ps, keySnapMeta, &snap.Metadata); err != nil || snap.Metadata.Index == 0 {
		return snap, err
	}
	var err error
	snap.Data, err = snapshotData(ps)
	return snap, err
}

// Save writes a Ready's state in one batch: the snapshot it carries (if
// any), its entries (dropping any conflicting tail) and its HardState. Then
// it updates the mirror. The store holds the same entries as the mirror,
// so a tail to drop is known without a read, and the common append
// writes no range deletion (pebble would keep one per write until its
// next compaction). The batch is fsynced when mustSync (raft's
// Ready.MustSync: new entries, a new term or a vote) or when it carries a
// snapshot; a HardState whose commit index alone moved need not be, as
// raft learns the commit index again from the leader after a crash.
func (s *Storage) Save(hs raftpb.HardState, ents []raftpb.Entry, snap raftpb.Snapshot, mustSync bool) error {
	b := s.db.NewBatch()
	defer b.Close()
	prevLast, _ := s.MemoryStorage.LastIndex() // never fails
	if !raft.IsEmptySnap(snap) {
		s.snapMu.Lock()
		defer s.snapMu.Unlock()
		if err := s.putSnapshot(b, snap.Metadata, snap.Data); err != nil {
			return err
		}
		// The snapshot replaces the whole log, as the mirror's
		// ApplySnapshot does; this Ready's entries follow it.
		if err := b.DeleteRange(indexKey(prefixEntry, 0), indexKey(prefixEntry, math.MaxUint64), nil); err != nil {
			return err
		}
		prevLast = 0
	}
	for i := range ents {
		// Encoded in place in the batch: no copy of the entry per write.
		op := b.SetDeferred(9, ents[i].Size())
		op.Key[0] = prefixEntry
		binary.BigEndian.PutUint64(op.Key[1:], ents[i].Index)
		if _, err := ents[i].MarshalToSizedBuffer(op.Value); err != nil {
			return err
		}
		if err := op.Finish(); err != nil {
			return err
		}
	}
	if last := lastIndex(ents); last > 0 && prevLast > last {
		// A new leader's entries replace a tail this member had.
		if err := b.DeleteRange(indexKey(prefixEntry, last+1), indexKey(prefixEntry, prevLast+1), nil); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(hs) {
		v, err := hs.Marshal()
		if err != nil {
			return err
		}
		if err := b.Set(keyHardState, v, nil); err != nil {
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
	if !raft.IsEmptySnap(snap) {
		snap.Data = nil // the mirror keeps metadata only; Snapshot reads the data back
		if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	if err := s.MemoryStorage.Append(ents); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(hs) {
		return s.MemoryStorage.SetHardState(hs)
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
func (s *Storage) Close() error { return s.db.Close() }

// pebbleLogger sends pebble's log lines to zap.
type pebbleLogger struct{ l *zap.SugaredLogger }

func (p pebbleLogger) Infof(format string, args ...any)  { p.l.Debugf(format, args...) }
func (p pebbleLogger) Errorf(format string, args ...any) { p.l.Errorf(format, args...) }
func (p pebbleLogger) Fatalf(format string, args ...any) { p.l.Fatalf(format, args...) }
