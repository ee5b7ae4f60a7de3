package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// snapshotServer answers snapshot requests for state in chunks of size,
// as a member does, with change applied to each chunk before it is sent.
// It records the releases (under the fake server's mu, which answer runs
// under).
type snapshotServer struct {
	state    []byte
	sum      []byte
	chunk    int
	change   func(c *wire.SnapshotChunk)
	released int
}

func (ss *snapshotServer) answer(req wire.SnapshotRequest) (wire.SnapshotChunk, wire.Code) {
	if req.Release {
		ss.released++
		return wire.SnapshotChunk{}, wire.CodeOK
	}
	id := req.ID
	if id == 0 {
		id = 77
	}
	end := min(int(req.Offset)+ss.chunk, len(ss.state))
	c := wire.SnapshotChunk{ID: id, Member: 2, Index: 40, Size: int64(len(ss.state)), Sum: ss.sum, Znodes: 3, Sessions: 1,
		Members: []wire.Member{{ID: 2, Addr: "127.0.0.1:2382"}}, Offset: req.Offset, Data: bytes.Clone(ss.state[req.Offset:end])}
	if ss.change != nil {
		ss.change(&c)
	}
	return c, wire.CodeOK
}

func (ss *snapshotServer) releases(s *fakeServer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ss.released
}

func newSnapshotServer(t *testing.T, change func(c *wire.SnapshotChunk)) (*fakeServer, *snapshotServer) {
	state := bytes.Repeat([]byte("arbor state "), 1000)
	sum := sha256.Sum256(state)
	ss := &snapshotServer{state: state, sum: sum[:], chunk: 4096, change: change}
	s := newFakeServer(t)
	s.snapshot = ss.answer
	return s, ss
}

func TestASnapshotIsFetchedChunkByChunkAndChecked(t *testing.T) {
	s, ss := newSnapshotServer(t, nil)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	snap, err := c.OpenSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := snap.Info()
	if info.Member != 2 || info.Index != 40 || info.Size != int64(len(ss.state)) || info.Znodes != 3 || len(info.Members) != 1 {
		t.Fatalf("info %+v", info)
	}
	var b bytes.Buffer
	if err := snap.Copy(ctx, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), ss.state) {
		t.Fatalf("copied %d bytes, not the state's %d", b.Len(), len(ss.state))
	}
	if err := snap.Close(ctx); err != nil || ss.releases(s) != 0 {
		t.Fatalf("Close of a snapshot fetched whole: %v, %d releases sent; want none", err, ss.releases(s))
	}
	var offsets []int64
	for _, r := range s.received() {
		if r.Op == wire.OpSnapshot && r.Snapshot.ID != 0 {
			offsets = append(offsets, r.Snapshot.Offset)
		}
	}
	if want := (len(ss.state)+ss.chunk-1)/ss.chunk - 1; len(offsets) != want || offsets[0] != int64(ss.chunk) {
		t.Fatalf("chunks asked for at %v; want %d, from %d on", offsets, want, ss.chunk)
	}
}

func TestADamagedSnapshotIsRefusedAndGivenUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *wire.SnapshotChunk)
		want   error
	}{
		{"a changed byte", func(c *wire.SnapshotChunk) {
			if c.Offset == 8192 {
				c.Data[5] ^= 1
			}
		}, ErrSnapshotDamaged},
		{"a chunk of another snapshot", func(c *wire.SnapshotChunk) {
			if c.Offset == 8192 {
				c.Index++
			}
		}, nil},
		{"a chunk at another offset", func(c *wire.SnapshotChunk) {
			if c.Offset == 8192 {
				c.Offset = 4096
			}
		}, nil},
		{"an empty chunk before the end", func(c *wire.SnapshotChunk) {
			if c.Offset == 8192 {
				c.Data = nil
			}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ss := newSnapshotServer(t, tc.change)
			c := dialFake(t, []string{s.listen()})
			ctx := context.Background()
			snap, err := c.OpenSnapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = snap.Copy(ctx, &bytes.Buffer{})
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Copy = %v, want an error (%v)", err, tc.want)
			}
			if tc.want == nil && ss.releases(s) != 1 {
				t.Fatalf("%d releases after a bad chunk, want 1", ss.releases(s))
			}
		})
	}
}
