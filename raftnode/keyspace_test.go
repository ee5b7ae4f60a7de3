package raftnode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"testing"

	"github.com/cockroachdb/pebble"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

func TestGroupZerosKeysAreThoseOfAStoreBeforeGroups(t *testing.T) {
	t.Parallel()
	s := logOf(t, t.TempDir(), 2)
	defer s.Close()
	if err := s.setPeer(3, "127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	for _, key := range [][]byte{
		[]byte("h"),
		binary.BigEndian.AppendUint64([]byte("e"), 1),
		binary.BigEndian.AppendUint64([]byte("e"), 2),
		binary.BigEndian.AppendUint64([]byte("a"), 3),
	} {
		if _, closer, err := s.db.Get(key); err != nil {
			t.Errorf("no key %q in group 0: %v", key, err)
		} else {
			closer.Close()
		}
	}
}

// groupState is what a test wrote to a group, and reads back.
type groupState struct {
	hs        raftpb.HardState
	first     uint64 // the first entry kept after the snapshot
	last      uint64
	snapIndex uint64
	snapData  []byte
	peers     map[uint64]string
	removed   map[uint64]bool
}

// fill writes a group's log, a snapshot and its members, each different
// from group to group (n is the group's own small number): entries
// 1..10+n of term g+1, a snapshot that keeps the last two entries, a peer
// and a removed member.
func fill(t *testing.T, s *Storage, g uint64, n byte) groupState {
	t.Helper()
	last := 10 + uint64(n)
	want := groupState{hs: raftpb.HardState{Term: g + 1, Vote: g + 1, Commit: last}, first: last - 1, last: last, snapIndex: last - 2,
		snapData: pattern(streamChunkSize+int(n), n), peers: map[uint64]string{g + 1: fmt.Sprintf("127.0.0.1:%d", n)}, removed: map[uint64]bool{g + 9: true}}
	var ents []raftpb.Entry
	for i := uint64(1); i <= last; i++ {
		ents = append(ents, raftpb.Entry{Index: i, Term: g + 1, Data: []byte{n, byte(i)}})
	}
	if err := s.Save(want.hs, ents, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
	cs := raftpb.ConfState{Voters: []uint64{g + 1}}
	if st, err := s.CreateSnapshot(want.snapIndex, &cs, writer(want.snapData), want.snapIndex); err != nil || !st.Saved {
		t.Fatalf("group %d: CreateSnapshot = %+v, %v", g, st, err)
	}
	if err := s.setPeer(g+1, want.peers[g+1]); err != nil {
		t.Fatal(err)
	}
	if err := s.setRemoved(g + 9); err != nil {
		t.Fatal(err)
	}
	return want
}

// check reads the group back and compares it with what fill wrote.
func check(t *testing.T, s *Storage, g uint64, n byte, want groupState) {
	t.Helper()
	hs, _, _ := s.InitialState()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if hs != want.hs || first != want.first || last != want.last {
		t.Errorf("group %d: HardState %+v, entries %d..%d; want %+v, %d..%d", g, hs, first, last, want.hs, want.first, want.last)
	}
	ents, err := s.Entries(first, last+1, math.MaxUint64)
	if err != nil || len(ents) != int(last-first+1) {
		t.Fatalf("group %d: Entries = %d, %v", g, len(ents), err)
	}
	for _, e := range ents {
		if e.Term != g+1 || !bytes.Equal(e.Data, []byte{n, byte(e.Index)}) {
			t.Errorf("group %d: entry %d is %+v, not its own", g, e.Index, e)
		}
	}
	snap, err := s.Snapshot()
	if err != nil || snap.Metadata.Index != want.snapIndex || !bytes.Equal(snap.Data, want.snapData) {
		t.Errorf("group %d: snapshot at %d with %d bytes (%v), want at %d with %d", g, snap.Metadata.Index, len(snap.Data), err, want.snapIndex, len(want.snapData))
	}
	if peers, err := s.peers(); err != nil || !maps.Equal(peers, want.peers) {
		t.Errorf("group %d: peers %v (%v), want %v", g, peers, err, want.peers)
	}
	if removed, err := s.removedMembers(); err != nil || !maps.Equal(removed, want.removed) {
		t.Errorf("group %d: removed %v (%v), want %v", g, removed, err, want.removed)
	}
}

func TestTheGroupsOfOneStoreKeepToThemselvesAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	groups := []uint64{0, 1, 7, 1 << 40}
	st, err := OpenStore(dir, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]groupState{}
	open := map[uint64]*Storage{}
	for _, g := range groups {
		if open[g], err = st.Group(g, testCacheBytes); err != nil {
			t.Fatal(err)
		}
	}
	// Each group's writes, compactions and snapshots (whose deletes are
	// ranges) go in turn, so that one that reached past its group would
	// delete what another wrote before it.
	for i, g := range groups {
		want[g] = fill(t, open[g], g, byte(i))
	}
	for i, g := range groups {
		check(t, open[g], g, byte(i), want[g])
	}
	if _, err := st.Group(1, testCacheBytes); err == nil {
		t.Error("group 1 opened twice")
	}
	for _, s := range open {
		s.Close()
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = OpenStore(dir, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i, g := range groups {
		s, err := st.Group(g, testCacheBytes)
		if err != nil {
			t.Fatal(err)
		}
		check(t, s, g, byte(i), want[g])
	}
	s, err := st.Group(2, testCacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsEmpty() {
		t.Error("group 2, never written, is not empty")
	}
}

func TestAGroupsSnapshotFromItsLeaderReplacesOnlyItsOwnLog(t *testing.T) {
	t.Parallel()
	st, err := OpenStore(t.TempDir(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, _ := st.Group(3, testCacheBytes)
	b, _ := st.Group(4, testCacheBytes)
	wantB := fill(t, b, 4, 2)
	fill(t, a, 3, 1)
	// A snapshot received whole deletes the group's whole log (a range).
	snap := raftpb.Snapshot{Data: []byte("from the leader"), Metadata: raftpb.SnapshotMetadata{Index: 100, Term: 9, ConfState: raftpb.ConfState{Voters: []uint64{1}}}}
	if err := a.Save(raftpb.HardState{Term: 9, Commit: 100}, nil, snap, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.Snapshot(); got.Metadata.Index != 100 || string(got.Data) != "from the leader" {
		t.Errorf("group 3's snapshot at %d: %q", got.Metadata.Index, got.Data)
	}
	check(t, b, 4, 2, wantB)
	iter, err := st.db.NewIter(&pebble.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer iter.Close()
	for iter.First(); iter.Valid(); iter.Next() {
		if k := iter.Key(); !bytes.HasPrefix(k, groupKeys(3).prefix) && !bytes.HasPrefix(k, groupKeys(4).prefix) {
			t.Errorf("key %q belongs to neither group", k)
		}
	}
}
