package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/arbor-coord/arbor/wire"
)

// SnapshotInfo describes a snapshot of a member's state.
type SnapshotInfo struct {
	Member   uint64   // the member that took it
	Index    int64    // the zxid (raft index) of the state
	Size     int64    // its bytes
	Sum      []byte   // their SHA-256
	Znodes   int64    // in the tree, the root included
	Sessions int64    // sessions and leases
	Members  []Member // the cluster's membership as that member knew it
	// Shards are a sharded cluster's groups besides the meta group, whose
	// states follow the meta group's, in this order (docs/scale-out.md);
	// Index, Znodes and Sessions are then the meta group's.
	Shards []SnapshotShard
}

// SnapshotShard is one shard's state in a snapshot of a sharded cluster.
type SnapshotShard = wire.SnapshotShard

// ErrSnapshotDamaged is a snapshot whose bytes do not match the checksum
// the member sent with them.
var ErrSnapshotDamaged = errors.New("client: the snapshot's bytes do not match its checksum")

// Snapshot is a snapshot of one member's state, taken by OpenSnapshot and
// fetched with Copy. Close it when done with it. Not safe for concurrent
// use.
type Snapshot struct {
	c      *Client
	id     int64
	info   SnapshotInfo
	first  []byte // the first chunk, which came with the description
	offset int64  // the bytes fetched so far
	sum    hash.Hash
	done   bool // every chunk fetched, or given up: the member holds it no more
}

// OpenSnapshot asks the member the client is connected to for a snapshot
// of its whole state (the tree with every node whatever its ACL, the
// sessions and leases, the lock history): one consistent state at one
// zxid, holding every write acknowledged before the call (the member
// catches up with the leader first). Writes go on meanwhile. It needs the rights to change the
// members (the superuser, or an admin certificate, from a loopback address
// unless the servers allow remote admins). The member holds the snapshot
// until it is fetched whole, closed, or left for a minute; the client must
// stay connected to that member meanwhile.
func (c *Client) OpenSnapshot(ctx context.Context) (*Snapshot, error) {
	rep, err := c.do(ctx, "snapshot", "", wire.Request{Op: wire.OpSnapshot}, nil)
	if err != nil {
		return nil, err
	}
	ch := &rep.Snapshot
	s := &Snapshot{c: c, id: ch.ID, sum: sha256.New(), info: SnapshotInfo{
		Member: uint64(ch.Member), Index: ch.Index, Size: ch.Size, Sum: ch.Sum, Znodes: ch.Znodes, Sessions: ch.Sessions, Members: ch.Members,
		Shards: ch.Shards,
	}}
	if err := s.check(ch); err != nil {
		s.Close(ctx)
		return nil, err
	}
	s.first = ch.Data
	return s, nil
}

// Info describes the snapshot.
func (s *Snapshot) Info() SnapshotInfo { return s.info }

// check checks that ch is the next chunk of s.
func (s *Snapshot) check(ch *wire.SnapshotChunk) error {
	i := &s.info
	switch {
	case ch.ID != s.id || uint64(ch.Member) != i.Member || ch.Index != i.Index || ch.Size != i.Size || !bytes.Equal(ch.Sum, i.Sum):
		return fmt.Errorf("client: a chunk of another snapshot (member %d, zxid %d) came for the snapshot of member %d at zxid %d", ch.Member, ch.Index, i.Member, i.Index)
	case ch.Offset != s.offset:
		return fmt.Errorf("client: the snapshot's chunk at %d came for the one at %d", ch.Offset, s.offset)
	case ch.Offset+int64(len(ch.Data)) > i.Size || len(ch.Data) == 0 && ch.Offset < i.Size:
		return fmt.Errorf("client: a snapshot chunk of %d bytes at %d, of %d in all", len(ch.Data), ch.Offset, i.Size)
	case len(i.Sum) != sha256.Size:
		return fmt.Errorf("client: a snapshot checksum of %d bytes", len(i.Sum))
	}
	return nil
}

// Copy fetches the snapshot's bytes, one chunk after another, into w, and
// checks them against the snapshot's checksum. The chunks all come from
// the member that took the snapshot: if the client moves to another member
// meanwhile, Copy fails and the snapshot must be taken again.
func (s *Snapshot) Copy(ctx context.Context, w io.Writer) error {
	if s.done || s.offset != 0 {
		return errors.New("client: a snapshot is copied once")
	}
	data := s.first
	s.first = nil
	for {
		if _, err := w.Write(data); err != nil {
			s.Close(ctx)
			return err
		}
		s.sum.Write(data)
		s.offset += int64(len(data))
		if s.offset == s.info.Size {
			break
		}
		rep, err := s.c.do(ctx, "snapshot", "", wire.Request{Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: s.id, Offset: s.offset}}, nil)
		if err != nil {
			s.Close(ctx)
			if errors.Is(err, ErrNoNode) {
				return fmt.Errorf("%w (did the client move to another member?)", err)
			}
			return err
		}
		if err := s.check(&rep.Snapshot); err != nil {
			s.Close(ctx)
			return err
		}
		data = rep.Snapshot.Data
	}
	s.done = true // the member ended it with the last chunk
	if !bytes.Equal(s.sum.Sum(nil), s.info.Sum) {
		return ErrSnapshotDamaged
	}
	return nil
}

// Close gives the snapshot up, if it was not fetched whole, so that the
// member holds it no more.
func (s *Snapshot) Close(ctx context.Context) error {
	if s.done {
		return nil
	}
	s.done = true
	_, err := s.c.do(ctx, "snapshot", "", wire.Request{Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: s.id, Release: true}}, nil)
	return err
}
