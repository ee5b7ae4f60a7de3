package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// Backups: the snapshot op (wire.OpSnapshot, `arbor snapshot save`). A
// member takes its state on raft's apply goroutine (raftnode.WithApplied):
// the tree does not change meanwhile, reads go on and applies wait, as
// during the member's own snapshots. The state goes to a file in the data
// directory, removed from the directory as soon as it is open, so that a
// crash leaves nothing behind, and the client fetches it in chunks, each
// well under a frame's limit. A member holds at most maxBackups at once;
// each ends after its last chunk, when its client releases it, or after
// backupIdle without a request.

const (
	snapshotChunk = 512 << 10
	maxBackups    = 2
	backupIdle    = time.Minute
)

// backup is a snapshot taken for a client and not yet fetched whole.
type backup struct {
	session int64              // the session that asked for it: only it may fetch it
	f       *os.File           // the snapshot, unlinked
	desc    wire.SnapshotChunk // its description, without a chunk
	idle    *time.Timer        // ends it after backupIdle without a request
}

// backups are the member's backups in progress.
type backups struct {
	mu     sync.Mutex
	byID   map[int64]*backup // mu guards byID and taking
	taking int               // being taken, not yet in byID
	closed bool
}

// reserve takes a place for a new backup, if there is one.
func (bs *backups) reserve() bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.closed || bs.taking+len(bs.byID) >= maxBackups {
		return false
	}
	bs.taking++
	return true
}

// add registers b, which had a place reserved (or gives the place back
// when b is nil), and returns its id.
func (bs *backups) add(b *backup, release func(id int64)) int64 {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.taking--
	if b == nil {
		return 0
	}
	if bs.closed {
		b.f.Close()
		return 0
	}
	if bs.byID == nil {
		bs.byID = map[int64]*backup{}
	}
	var id int64
	for id == 0 || bs.byID[id] != nil {
		var r [8]byte
		_, _ = rand.Read(r[:])
		id = int64(binary.BigEndian.Uint64(r[:]) >> 1)
	}
	b.desc.ID = id
	b.idle = time.AfterFunc(backupIdle, func() { release(id) })
	bs.byID[id] = b
	return id
}

// get returns the backup id of session, and keeps it from ending idle.
func (bs *backups) get(id, session int64) *backup {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.byID[id]
	if b == nil || b.session != session {
		return nil
	}
	b.idle.Reset(backupIdle)
	return b
}

// remove ends backup id and reports whether it was there.
func (bs *backups) remove(id int64) bool {
	bs.mu.Lock()
	b := bs.byID[id]
	delete(bs.byID, id)
	bs.mu.Unlock()
	if b == nil {
		return false
	}
	b.idle.Stop()
	b.f.Close()
	return true
}

// closeAll ends every backup, for good.
func (bs *backups) closeAll() {
	bs.mu.Lock()
	bs.closed = true
	ids := make([]int64, 0, len(bs.byID))
	for id := range bs.byID {
		ids = append(ids, id)
	}
	bs.mu.Unlock()
	for _, id := range ids {
		bs.remove(id)
	}
}

// snapshot answers a snapshot request (admin rights were checked).
func (s *Server) snapshot(c *conn, req *wire.SnapshotRequest, reply *wire.Reply) {
	var err error
	if req.ID == 0 {
		reply.Snapshot, err = s.takeBackup(c)
	} else {
		reply.Snapshot, err = s.backupChunk(c, req)
	}
	if err != nil {
		c.log.Info("backup failed", zap.Error(err))
	}
	reply.Err = wire.CodeOf(err)
}

// takeBackup takes a snapshot for c's session and returns its first chunk.
func (s *Server) takeBackup(c *conn) (wire.SnapshotChunk, error) {
	if !s.backups.reserve() {
		return wire.SnapshotChunk{}, wire.Errorf(wire.CodeThrottled, "this member is taking %d backups already; try again once one is done", maxBackups)
	}
	start := time.Now()
	b, err := s.writeBackup(c)
	id := s.backups.add(b, s.releaseIdleBackup)
	if err != nil {
		return wire.SnapshotChunk{}, err
	}
	if id == 0 {
		return wire.SnapshotChunk{}, wire.ErrShuttingDown
	}
	c.log.Info("backup taken", zap.String("backup", fmt.Sprintf("%x", id)), zap.Int64("index", b.desc.Index),
		zap.Int64("bytes", b.desc.Size), zap.Int64("znodes", b.desc.Znodes), zap.Duration("took", time.Since(start)))
	return s.backupChunk(c, &wire.SnapshotRequest{ID: id})
}

// writeBackup writes the member's state into a new unlinked file, once it
// caught up with the leader: the state then holds every write acknowledged
// before the request. Of a sharded cluster, it writes the meta group's
// state and then each shard's, each caught up with its own leader first:
// each shard's state is whole, and the cut across them is not one moment
// (as a listing across shards is not).
func (s *Server) writeBackup(c *conn) (*backup, error) {
	f, err := os.CreateTemp(s.cfg.DataDir, "backup-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	_ = os.Remove(f.Name()) // the open file stays readable; a crash leaves nothing
	b := &backup{session: c.session, f: f, desc: wire.SnapshotChunk{Member: int64(s.cfg.ID)}}
	sum := sha256.New()
	w := &countingWriter{w: io.MultiWriter(f, sum)}
	bw := bufio.NewWriterSize(w, 256<<10)
	err = s.writeGroupState(c.ctx, s.metaGroup, bw, func(index uint64, t *tree.Tree) {
		b.desc.Index, b.desc.Znodes, b.desc.Sessions = int64(index), int64(t.Count()), int64(t.SessionCount())
	})
	if m := s.routingMap(); m != nil {
		for _, sh := range m.Shards {
			if err == nil && sh.Group != shardmap.MetaGroup && s.group(sh.Group) == nil {
				err = wire.Errorf(wire.CodeNoQuorum, "shard %d does not run on this member yet: take the backup on another", sh.Group)
			}
		}
		for _, g := range s.runningGroups() {
			if err != nil {
				break
			}
			before := w.n + int64(bw.Buffered())
			shard := wire.SnapshotShard{Group: int64(g.id)}
			err = s.writeGroupState(c.ctx, g, bw, func(index uint64, t *tree.Tree) {
				shard.Index, shard.Znodes = int64(index), int64(t.Count())
			})
			shard.Size = w.n + int64(bw.Buffered()) - before
			b.desc.Shards = append(b.desc.Shards, shard)
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Close()
		if errors.Is(err, context.Canceled) {
			return nil, wire.ErrConnectionLoss
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, wire.ErrOperationTimeout
		}
		return nil, fmt.Errorf("backup: %w", s.writeError(err))
	}
	b.desc.Size, b.desc.Sum = w.n, sum.Sum(nil)
	for _, m := range s.node.Members() {
		b.desc.Members = append(b.desc.Members, wire.Member{ID: int64(m.ID), Addr: m.Addr, Learner: m.Learner})
	}
	return b, nil
}

// writeGroupState writes the state of group g, once it caught up with its
// leader, to w, and tells took its index and tree as it writes them.
func (s *Server) writeGroupState(ctx context.Context, g *group, w io.Writer, took func(index uint64, t *tree.Tree)) error {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	err := g.node.ReadIndex(rctx)
	cancel()
	if err != nil {
		return s.writeErrorIn(g, err)
	}
	var write func(io.Writer) error
	err = g.node.WithApplied(ctx, func(index uint64) error {
		// The apply goroutine: the only writer of the tree, idle now.
		took(index, g.fsm.tree)
		var err error
		write, err = g.fsm.Snapshot()
		return err
	})
	if err != nil {
		return err
	}
	// Txns are applied meanwhile: write writes the tree as it was.
	return write(w)
}

// backupChunk answers a request for a chunk of a backup; the last chunk
// ends it.
func (s *Server) backupChunk(c *conn, req *wire.SnapshotRequest) (wire.SnapshotChunk, error) {
	b := s.backups.get(req.ID, c.session)
	if b == nil {
		return wire.SnapshotChunk{}, wire.Errorf(wire.CodeNoNode,
			"no backup %x of this session on this member: it ended (fetched whole, released, or idle for %v), or another member took it", req.ID, backupIdle)
	}
	if req.Release {
		s.backups.remove(req.ID)
		return wire.SnapshotChunk{}, nil
	}
	out := b.desc
	if req.Offset < 0 || req.Offset > out.Size {
		return wire.SnapshotChunk{}, wire.Errorf(wire.CodeBadArguments, "offset %d of a backup of %d bytes", req.Offset, out.Size)
	}
	out.Offset = req.Offset
	out.Data = make([]byte, min(snapshotChunk, out.Size-req.Offset))
	if _, err := b.f.ReadAt(out.Data, req.Offset); err != nil {
		s.backups.remove(req.ID)
		return wire.SnapshotChunk{}, fmt.Errorf("backup: read: %w", err)
	}
	if out.Offset+int64(len(out.Data)) == out.Size {
		s.backups.remove(req.ID)
		c.log.Info("backup sent", zap.String("backup", fmt.Sprintf("%x", req.ID)), zap.Int64("bytes", out.Size))
	}
	return out, nil
}

// releaseIdleBackup ends a backup nobody asked a chunk of for backupIdle.
func (s *Server) releaseIdleBackup(id int64) {
	if s.backups.remove(id) {
		s.log.Info("backup released: no chunk asked for", zap.String("backup", fmt.Sprintf("%x", id)), zap.Duration("idle", backupIdle))
	}
}

// countingWriter counts what it writes.
type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}
