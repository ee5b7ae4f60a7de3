package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap/zaptest"
)

func dialClient(t *testing.T, s *Server, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]client.Option{client.WithLogger(zaptest.NewLogger(t).Named("client"))}, opts...)
	c, err := client.Dial(ctx, []string{s.Addr().String()}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fill makes n nodes of size bytes each under /fill.
func fill(t *testing.T, c *client.Client, n, size int) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Create(ctx, "/fill", nil, client.Persistent); err != nil && !errors.Is(err, client.ErrNodeExists) {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.Create(ctx, fmt.Sprintf("/fill/n%04d", i), bytes.Repeat([]byte{byte(i)}, size), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
}

// takeBackup fetches a snapshot through c and returns its description and
// bytes.
func takeBackup(t *testing.T, c *client.Client) (client.SnapshotInfo, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err := c.OpenSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := snap.Copy(ctx, &b); err != nil {
		t.Fatal(err)
	}
	return snap.Info(), b.Bytes()
}

func TestABackupIsTheMembersWholeStateAtOneZxid(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialClient(t, s)
	fill(t, c, 40, 40<<10) // 1.6 MB: several chunks
	ctx := context.Background()
	if _, err := c.Create(ctx, "/eph", []byte("mine"), client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	info, data := takeBackup(t, c)
	st := s.Status()
	if info.Member != 1 || info.Index != int64(st.Applied) || info.Size != int64(len(data)) || info.Size < 3*snapshotChunk {
		t.Fatalf("backup %+v of %d bytes; the member applied %d", info, len(data), st.Applied)
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], info.Sum) {
		t.Fatal("the backup's bytes do not match its checksum")
	}
	if len(info.Members) != 1 || info.Members[0].ID != 1 {
		t.Fatalf("members %+v, want member 1", info.Members)
	}
	tr, snap, err := tree.RestoreWith(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if int64(tr.Count()) != info.Znodes || snap.Znodes != tr.Count() || int64(tr.SessionCount()) != info.Sessions || tr.Count() != 46 || info.Sessions != 1 {
		t.Fatalf("the backup holds %d znodes and %d sessions, says %d and %d; want 46 and 1", tr.Count(), tr.SessionCount(), info.Znodes, info.Sessions)
	}
	if fmt.Sprintf("%016x", tr.Digest()) != st.Digest {
		t.Fatalf("the backup's digest %016x, the member's %s", tr.Digest(), st.Digest)
	}
	_ = snap.Annex // the lock history: none here
	sess, _ := c.Session()
	if eph := tr.Ephemerals(sess); len(eph) != 1 || eph[0] != "/eph" {
		t.Fatalf("the session's ephemerals in the backup: %v", eph)
	}
	if entries, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, "backup-*")); len(entries) != 0 {
		t.Fatalf("the backup left %v in the data directory", entries)
	}
	if _, err := c.Create(ctx, "/after", nil, client.Persistent); err != nil {
		t.Fatalf("a write after the backup: %v", err)
	}
}

func TestBackupsNeedTheSuperuserOnceThereIsOne(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.SuperDigest = rootDigest })
	_, err := dialClient(t, s, client.WithAuth("digest", []byte("alice:secret"))).OpenSnapshot(context.Background())
	if !errors.Is(err, client.ErrNoAuth) {
		t.Fatalf("a backup by alice: %v, want ErrNoAuth", err)
	}
	takeBackup(t, dialClient(t, s, client.WithAuth("digest", []byte("root:rootpw"))))
}

func TestABackupIsFetchedOnlyByItsSessionAndEndsWhenReleased(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	a, b := authedSession(t, s), authedSession(t, s)
	a.must(wire.Request{Op: wire.OpSetData, Path: "/", Data: bytes.Repeat([]byte("x"), snapshotChunk)}) // two chunks
	first := a.must(wire.Request{Op: wire.OpSnapshot}).Snapshot
	if first.ID == 0 || first.Offset != 0 || len(first.Data) != snapshotChunk || first.Size <= snapshotChunk {
		t.Fatalf("the first chunk: %+v", first)
	}
	chunk := func(c *rawConn, id, offset int64) wire.Reply {
		return c.answer(wire.Request{Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: id, Offset: offset}})
	}
	if r := chunk(b, first.ID, 0); r.Err != wire.CodeNoNode {
		t.Fatalf("another session's request for the backup: %s, want NoNode", r.Err)
	}
	if r := chunk(a, first.ID, first.Size+1); r.Err != wire.CodeBadArguments {
		t.Fatalf("a chunk past the end: %s, want BadArguments", r.Err)
	}
	if r := chunk(a, first.ID, -1); r.Err != wire.CodeBadArguments {
		t.Fatalf("a chunk at -1: %s, want BadArguments", r.Err)
	}
	if r := chunk(a, first.ID, 1); r.Err != wire.CodeOK || !bytes.Equal(r.Snapshot.Data[:len(first.Data)-1], first.Data[1:]) || r.Snapshot.Offset != 1 {
		t.Fatalf("a chunk asked for again from byte 1: %s, %d bytes at %d", r.Err, len(r.Snapshot.Data), r.Snapshot.Offset)
	}
	last := chunk(a, first.ID, snapshotChunk)
	if last.Err != wire.CodeOK || int64(len(last.Snapshot.Data)) != first.Size-snapshotChunk || last.Snapshot.ID != first.ID || last.Snapshot.Index != first.Index {
		t.Fatalf("the last chunk: %s, %d bytes of %+v", last.Err, len(last.Snapshot.Data), last.Snapshot)
	}
	// That was the last chunk: the backup ended with it.
	if r := chunk(a, first.ID, 0); r.Err != wire.CodeNoNode {
		t.Fatalf("a chunk after the last was sent: %s, want NoNode", r.Err)
	}
}

func TestAMemberHoldsTwoBackupsAtOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := authedSession(t, s)
	c.must(wire.Request{Op: wire.OpSetData, Path: "/", Data: bytes.Repeat([]byte("x"), snapshotChunk)}) // more than one chunk
	var ids []int64
	for range maxBackups {
		ids = append(ids, c.must(wire.Request{Op: wire.OpSnapshot}).Snapshot.ID)
	}
	if r := c.answer(wire.Request{Op: wire.OpSnapshot}); r.Err != wire.CodeThrottled {
		t.Fatalf("a third backup: %s, want Throttled", r.Err)
	}
	c.must(wire.Request{Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: ids[0], Release: true}})
	if r := c.answer(wire.Request{Op: wire.OpSnapshot, Snapshot: wire.SnapshotRequest{ID: ids[0], Offset: 0}}); r.Err != wire.CodeNoNode {
		t.Fatalf("a released backup: %s, want NoNode", r.Err)
	}
	c.must(wire.Request{Op: wire.OpSnapshot})
}

func TestAFileABackupLeftBehindDoesNotKeepAMemberFromStarting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := startServer(t, dir)
	if _, err := dialClient(t, s).Create(context.Background(), "/a", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A crash between the file's creation and its removal.
	if err := os.WriteFile(filepath.Join(dir, "backup-123.tmp"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, dir)
	if _, _, err := dialClient(t, s).Get(context.Background(), "/a"); err != nil {
		t.Fatal(err)
	}
}

func TestAMemberClosesWithABackupHeld(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := authedSession(t, s)
	c.must(wire.Request{Op: wire.OpSetData, Path: "/", Data: bytes.Repeat([]byte("x"), snapshotChunk)})
	c.must(wire.Request{Op: wire.OpSnapshot})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.backups.reserve() {
		t.Fatal("a closed member takes backups")
	}
}

// TestAFollowerCatchesUpBeforeItsBackup slows the leader's messages down:
// a write is acknowledged once the other follower has it, and the
// follower asked for a backup learns it is committed only later. Its
// backup must hold it all the same.
func TestAFollowerCatchesUpBeforeItsBackup(t *testing.T) {
	t.Parallel()
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	members := map[uint64]*Server{}
	for id := uint64(1); id <= 3; id++ {
		members[id] = startServer(t, "", func(c *Config) {
			c.ID, c.Peers, c.HTTP = id, peers, "-"
			c.TickInterval, c.ElectionTicks = 20*time.Millisecond, 40 // the leader's messages, delayed below, keep it
		})
	}
	var leader, follower *Server
	for deadline := time.Now().Add(20 * time.Second); leader == nil || follower == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		leader, follower = nil, nil
		for _, s := range members {
			switch l := s.node.Leader(); {
			case l == 0:
			case s.node.IsLeader():
				leader = s
			case members[l] != nil && members[l].node.IsLeader():
				follower = s
			}
		}
	}
	w, c := dialClient(t, leader), dialClient(t, follower)
	leader.transport.SetDelay(500 * time.Millisecond)
	defer leader.transport.SetDelay(0)
	if _, err := w.Create(context.Background(), "/written", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	info, data := takeBackup(t, c)
	_, st, err := w.Get(context.Background(), "/written")
	if err != nil {
		t.Fatal(err)
	}
	if info.Member != follower.cfg.ID {
		t.Fatalf("the backup came from member %d, not the follower %d", info.Member, follower.cfg.ID)
	}
	tr, err := tree.Restore(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.Get("/written"); info.Index < st.Czxid || err != nil {
		t.Fatalf("the follower's backup at %d lacks the write acknowledged at %d before it (%v)", info.Index, st.Czxid, err)
	}
}
