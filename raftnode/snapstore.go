package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// A snapshot's data is stored in chunks under a generation of its own:
//
//	"g"                          the generation of the last snapshot's data
//	"s" + be64(gen) + be64(i)    chunk i of generation gen
//
// so that a snapshot taken here can be streamed into the store in several
// batches, with no copy of the whole state in memory, while the previous
// snapshot stays intact: the last, synced, batch sets the metadata and the
// generation and deletes the other generations (and what a crash left of
// an unfinished one). Stores written before generations keep their data
// under "d" + be64(i) with no "g" key; it is read as it is and deleted by
// the next snapshot.

const (
	// streamChunkSize is the size of a streamed snapshot's chunks (a
	// snapshot of any chunk size reads back the same).
	streamChunkSize = snapChunkSize - 64
)

// chunkBounds are the iterator bounds of the data of a generation, or of
// the old layout for generation 0.
func (k keyspace) chunkBounds(gen uint64) *pebble.IterOptions {
	if gen == 0 {
		return k.all(kindSnapData)
	}
	return &pebble.IterOptions{LowerBound: k.key(kindSnapChunk, gen, 0), UpperBound: k.key(kindSnapChunk, gen, math.MaxUint64)}
}

// snapGen reads the generation of the stored snapshot's data: 0 for none or
// for the old layout.
func (k keyspace) snapGen(r pebble.Reader) (uint64, error) {
	v, closer, err := r.Get(k.key(kindSnapGen))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("snapshot generation %x: not 8 bytes", v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// lastGen is the highest generation with chunks in the store, finished or
// not, so that a new one never reuses one a crash left behind.
func (k keyspace) lastGen(db *pebble.DB) (uint64, error) {
	iter, err := db.NewIter(k.all(kindSnapChunk))
	if err != nil {
		return 0, err
	}
	defer iter.Close()
	if !iter.Last() {
		return 0, iter.Error()
	}
	return k.number(iter.Key()), nil
}

// snapshotReader reads the chunks of the stored snapshot's data from r, in
// order, as one stream. Close it when done.
type snapshotReader struct {
	iter  *pebble.Iterator
	chunk []byte
}

func (k keyspace) newSnapshotReader(r pebble.Reader) (*snapshotReader, error) {
	gen, err := k.snapGen(r)
	if err != nil {
		return nil, err
	}
	iter, err := r.NewIter(k.chunkBounds(gen))
	if err != nil {
		return nil, err
	}
	sr := &snapshotReader{iter: iter}
	if iter.First() {
		sr.chunk = iter.Value()
	}
	return sr, nil
}

func (sr *snapshotReader) Read(p []byte) (int, error) {
	for len(sr.chunk) == 0 {
		if !sr.iter.Valid() || !sr.iter.Next() {
			if err := sr.iter.Error(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		sr.chunk = sr.iter.Value()
	}
	n := copy(p, sr.chunk)
	sr.chunk = sr.chunk[n:]
	return n, nil
}

func (sr *snapshotReader) Close() error { return sr.iter.Close() }

// snapshotData reads the whole of the stored snapshot's data from r.
func (k keyspace) snapshotData(r pebble.Reader) ([]byte, error) {
	sr, err := k.newSnapshotReader(r)
	if err != nil {
		return nil, err
	}
	defer sr.Close()
	return io.ReadAll(sr)
}

// chunkWriter writes a stream into the chunks of generation gen, of
// streamChunkSize bytes, in an sstable of their own, which finish syncs
// and ingests into the store: the snapshot goes into the LSM beside the
// log, not through the memtable and write-ahead log that the log's writes
// go through. Written through them, in unsynced batches, a snapshot of a
// million znodes (95 MB) filled memtables faster than pebble flushed them,
// and pebble stopped every write of the log until it had: 128 stalls of
// 10-30 ms in 12 s of writes. The synced batch that then makes the
// chunks the stored snapshot is the caller's.
type chunkWriter struct {
	db     *pebble.DB
	ks     keyspace
	fs     vfs.FS
	path   string // the sstable's, until it is ingested
	sst    *sstable.Writer
	closed bool // sst is closed
	gen    uint64
	buf    []byte
	next   uint64 // the next chunk's number
	total  int
	stored time.Duration // time spent writing the sstable and ingesting it
}

// newChunkWriter begins a snapshot's data under a new generation.
func (s *Storage) newChunkWriter() (*chunkWriter, error) {
	gen := s.gen.Add(1)
	fs := s.store.fs
	path := fs.PathJoin(s.store.dir, fmt.Sprintf("snapshot-%s%d%s", s.fileTag(), gen, ingestSuffix))
	f, err := fs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create the snapshot's sstable: %w", err)
	}
	sst := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
		TableFormat: s.db.FormatMajorVersion().MaxTableFormat(),
	})
	return &chunkWriter{db: s.db, ks: s.ks, fs: fs, path: path, sst: sst, gen: gen, buf: make([]byte, 0, streamChunkSize)}, nil
}

// ingestSuffix ends the name of a snapshot's sstable before its ingestion;
// a store opens after a crash with none left (removeUningested).
const ingestSuffix = ".ingest"

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		p = p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	w.total += n
	return n, nil
}

// flush adds the buffered chunk to the sstable.
func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	defer w.timed(time.Now())
	if err := w.sst.Set(w.ks.key(kindSnapChunk, w.gen, w.next), w.buf); err != nil {
		return err
	}
	w.next++
	w.buf = w.buf[:0]
	return nil
}

func (w *chunkWriter) timed(start time.Time) { w.stored += time.Since(start) }

// finish writes what is buffered, syncs the sstable and ingests it: the
// chunks are in the store, not yet the stored snapshot.
func (w *chunkWriter) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	defer w.timed(time.Now())
	w.closed = true
	if err := w.sst.Close(); err != nil { // syncs the file
		return fmt.Errorf("write the snapshot's sstable: %w", err)
	}
	if err := w.db.Ingest([]string{w.path}); err != nil { // removes the file
		return fmt.Errorf("ingest the snapshot's sstable: %w", err)
	}
	w.path = ""
	return nil
}

// abort drops an unfinished sstable; it does nothing once it is ingested.
func (w *chunkWriter) abort() {
	if w.path == "" {
		return
	}
	if !w.closed {
		_ = w.sst.Close()
	}
	_ = w.fs.Remove(w.path)
}

// putSnapshotMeta adds to b what makes generation gen the stored snapshot,
// with meta, and deletes every other snapshot's data.
func (s *Storage) putSnapshotMeta(b *pebble.Batch, meta raftpb.SnapshotMetadata, gen uint64) error {
	v, err := meta.Marshal()
	if err != nil {
		return err
	}
	if err := b.Set(s.ks.key(kindSnapMeta), v, nil); err != nil {
		return err
	}
	if err := b.Set(s.ks.key(kindSnapGen), binary.BigEndian.AppendUint64(nil, gen), nil); err != nil {
		return err
	}
	if err := b.DeleteRange(s.ks.key(kindSnapData), s.ks.key(kindSnapData+1), nil); err != nil {
		return err
	}
	// The generations below: older snapshots, and what a crash or a
	// newer snapshot from the leader left of one taken here. None above
	// lasts (a snapshot begun after gen is finished, or dropped by its
	// writer), and a delete of them would overlap the next snapshot's
	// sstable in the memtable, which pebble then flushes before it
	// ingests it, and the log's writes wait for that.
	return b.DeleteRange(s.ks.key(kindSnapChunk), s.ks.key(kindSnapChunk, gen, 0), nil)
}

// putSnapshot adds a snapshot received whole to b, replacing the stored
// one.
func (s *Storage) putSnapshot(b *pebble.Batch, meta raftpb.SnapshotMetadata, data []byte) error {
	gen := s.gen.Add(1)
	for i := uint64(0); len(data) > 0; i++ {
		n := min(len(data), snapChunkSize)
		if err := b.Set(s.ks.key(kindSnapChunk, gen, i), data[:n], nil); err != nil {
			return err
		}
		data = data[n:]
	}
	return s.putSnapshotMeta(b, meta, gen)
}

// SnapshotStats tells how CreateSnapshot went.
type SnapshotStats struct {
	Saved  bool          // false: a newer snapshot was stored already
	Bytes  int           // the snapshot's size
	Stored time.Duration // of the time, what writing to pebble took (the rest is the state machine's)
}

// CreateSnapshot durably records a snapshot of the state machine taken at
// index, which write streams out, then compacts the log up to compactTo
// (at most index), keeping the entries after it for followers that are a
// little behind. Entry index must be in the log. It keeps nothing (Saved
// false) when a snapshot at index or later (one received from the leader)
// is stored already.
func (s *Storage) CreateSnapshot(index uint64, cs *raftpb.ConfState, write func(io.Writer) error, compactTo uint64) (SnapshotStats, error) {
	var st SnapshotStats
	if s.snapshotIndex() >= index {
		return st, nil
	}
	term, err := s.Term(index)
	if errors.Is(err, raft.ErrCompacted) {
		return st, nil // a snapshot from the leader replaced the log meanwhile
	}
	if err != nil {
		return st, fmt.Errorf("term of %d: %w", index, err)
	}
	w, err := s.newChunkWriter()
	if err != nil {
		return st, err
	}
	defer w.abort()
	if err := write(w); err != nil {
		return st, err
	}
	if err := w.finish(); err != nil {
		return st, err
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if s.snapshotIndex() >= index {
		// A newer snapshot came from the leader meanwhile: drop this one.
		return st, s.db.DeleteRange(s.ks.key(kindSnapChunk, w.gen, 0), s.ks.key(kindSnapChunk, w.gen+1, 0), pebble.NoSync)
	}
	b := s.db.NewBatch()
	defer b.Close()
	meta := raftpb.SnapshotMetadata{Index: index, Term: term, ConfState: *cs}
	if err := s.putSnapshotMeta(b, meta, w.gen); err != nil {
		return st, err
	}
	synced := time.Now()
	if err := b.Commit(pebble.Sync); err != nil {
		return st, fmt.Errorf("sync snapshot: %w", err)
	}
	w.timed(synced)
	// The index first, then the store: a reader of entries from pebble
	// holds mu's read lock, and once the index begins after compactTo no
	// reader looks for the entries deleted below.
	s.mu.Lock()
	s.log.setSnapshot(meta)
	s.log.compact(compactTo)
	s.mu.Unlock()
	// A crash before this delete leaves entries that the next one deletes
	// (load indexes the log from the snapshot on).
	if err := s.db.DeleteRange(s.ks.key(kindEntry, 0), s.ks.key(kindEntry, compactTo+1), pebble.NoSync); err != nil {
		return st, err
	}
	return SnapshotStats{Saved: true, Bytes: w.total, Stored: w.stored}, nil
}

// snapshotIndex is the index of the last snapshot stored.
func (s *Storage) snapshotIndex() uint64 { return s.snapshotMeta().Index }

// snapshotMeta is the metadata of the last snapshot stored.
func (s *Storage) snapshotMeta() raftpb.SnapshotMetadata {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.log.snap
}
