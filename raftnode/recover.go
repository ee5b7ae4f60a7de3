package raftnode

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// What an operator does with a store when a cluster is lost
// (docs/reliability.md, "Disaster recovery"): ReadState tells what a
// stopped member's store holds, to pick the most advanced survivor;
// Config.ForceNewCluster starts that member as the only member of a new
// cluster with everything its store holds; RestoreStore makes a store for
// a member of a new cluster from a backup.

// StoreState is what a member's store holds.
type StoreState struct {
	Term, Vote, Commit uint64 // the HardState: Commit is what the member knew committed, which may lag the log
	SnapshotIndex      uint64 // the last snapshot's
	FirstIndex         uint64 // the first entry of the log after the snapshot; LastIndex+1 if there is none
	LastIndex          uint64 // the last entry the member holds, committed or not (the snapshot's index if none)
	LastTerm           uint64 // the term of that entry
	Voters, Learners   []uint64
	Peers              map[uint64]string // the peer addresses learned from membership changes (and a restore), not those of --peers
}

// ReadState reads the store in dir, read-only: the store must exist and no
// member may be running on it. The membership is the one the log's last
// entry makes, applied or not.
func ReadState(dir string) (StoreState, error) {
	var st StoreState
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		return st, fmt.Errorf("%s holds no member's store: %w", dir, err)
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: vfs.Default, ReadOnly: true, Logger: pebbleLogger{zap.NewNop().Sugar()}})
	if err != nil {
		return st, fmt.Errorf("open %s (is a member running on it? stop it first): %w", dir, err)
	}
	s, err := (&Store{db: db, dir: dir, open: map[uint64]bool{}}).Group(0, 0)
	if err != nil {
		db.Close()
		return st, err
	}
	s.ownsStore = true
	defer s.Close()
	cs, _, err := s.membersAtEnd()
	if err != nil {
		return st, err
	}
	if st.Peers, err = s.peers(); err != nil {
		return st, err
	}
	m := s.log
	st.Term, st.Vote, st.Commit = m.hs.Term, m.hs.Vote, m.hs.Commit
	st.SnapshotIndex, st.FirstIndex, st.LastIndex = m.snap.Index, m.firstIndex(), m.lastIndex()
	st.LastTerm, _ = m.term(m.lastIndex())
	st.Voters, st.Learners = sorted(cs.Voters), sorted(cs.Learners)
	return st, nil
}

func sorted(ids []uint64) []uint64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids
}

// membersAtEnd is the membership as of the last entry of the log: the
// snapshot's, changed by the membership changes in the log after it. Of a
// joint configuration it gives the incoming half (a voter that leaves as a
// learner a learner), and says it is joint: the leader had not yet
// appended (or committed) the entry that leaves it.
func (s *Storage) membersAtEnd() (raftpb.ConfState, bool, error) {
	snap := s.snapshotMeta().ConfState
	cs, joint := incomingOf(snap), len(snap.VotersOutgoing) > 0
	iter, err := s.db.NewIter(s.ks.between(kindEntry, s.snapshotIndex()+1, math.MaxUint64))
	if err != nil {
		return cs, joint, err
	}
	defer iter.Close()
	for iter.First(); iter.Valid(); iter.Next() {
		var e raftpb.Entry
		if err := e.Unmarshal(iter.Value()); err != nil {
			return cs, joint, fmt.Errorf("entry %x: %w", iter.Key(), err)
		}
		cc, ok, err := confChangeOf(&e)
		if err != nil {
			return cs, joint, err
		}
		if !ok {
			continue
		}
		if cc.LeaveJoint() {
			joint = false
		} else if _, ok := cc.EnterJoint(); ok {
			joint = true
		}
		cs = applyToIncoming(cs, cc)
	}
	if err := iter.Error(); err != nil {
		return cs, joint, err
	}
	return raftpb.ConfState{Voters: sorted(cs.Voters), Learners: sorted(cs.Learners)}, joint, nil
}

// confChangeOf decodes e's membership change, if it is one.
func confChangeOf(e *raftpb.Entry) (raftpb.ConfChangeV2, bool, error) {
	var cc raftpb.ConfChangeV2
	switch e.Type {
	case raftpb.EntryConfChange:
		var v1 raftpb.ConfChange
		if err := v1.Unmarshal(e.Data); err != nil {
			return cc, false, fmt.Errorf("conf change at %d: %w", e.Index, err)
		}
		return v1.AsV2(), true, nil
	case raftpb.EntryConfChangeV2:
		if err := cc.Unmarshal(e.Data); err != nil {
			return cc, false, fmt.Errorf("conf change at %d: %w", e.Index, err)
		}
		return cc, true, nil
	}
	return cc, false, nil
}

func setOf(ids []uint64) map[uint64]bool {
	m := map[uint64]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func idsOf(m map[uint64]bool) []uint64 {
	var ids []uint64
	for id, in := range m {
		if in {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// forceNewCluster rewrites the store so that member id is the only voter
// of its group, with everything the store holds, and reports the members
// it removed. It appends to the log the membership changes that make it
// so (a joint configuration left, id made a voter if it is a learner, then
// every other member removed, one change each: raft takes a change of one
// voter without a joint configuration, which the lost members could never
// leave), and sets the
// commit index to the new last entry: the whole log is then committed and
// applied, the entries the member holds but never learned were committed
// included. Those were either committed by the lost quorum (acknowledged
// to their writers) or of unknown outcome to their writers; none was
// refused, and a member elected with this log would have committed them
// too.
func (s *Storage) forceNewCluster(id uint64) (removed []uint64, err error) {
	cs, joint, err := s.membersAtEnd()
	if err != nil {
		return nil, err
	}
	voter, learner := slices.Contains(cs.Voters, id), slices.Contains(cs.Learners, id)
	if !voter && !learner {
		return nil, fmt.Errorf("member %d is not a member in its own store (voters %v, learners %v): wrong --id, or a member that was removed", id, cs.Voters, cs.Learners)
	}
	var changes [][]raftpb.ConfChangeSingle
	if joint {
		changes = append(changes, nil) // leave the joint configuration first: no change
	}
	if learner {
		changes = append(changes, []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddNode, NodeID: id}})
	}
	for _, other := range slices.Concat(cs.Voters, cs.Learners) {
		if other != id {
			changes = append(changes, []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode, NodeID: other}})
			removed = append(removed, other)
		}
	}
	slices.SortFunc(removed, cmp.Compare)
	s.mu.RLock()
	hs, last := s.log.hs, s.log.lastIndex()
	s.mu.RUnlock()
	var ents []raftpb.Entry
	for i, c := range changes {
		cc := raftpb.ConfChangeV2{Changes: c, Context: make([]byte, 8)} // request id 0: nobody waits
		data, err := cc.Marshal()
		if err != nil {
			return nil, err
		}
		ents = append(ents, raftpb.Entry{Type: raftpb.EntryConfChangeV2, Term: hs.Term, Index: last + 1 + uint64(i), Data: data})
	}
	hs.Commit = last + uint64(len(ents))
	if err := s.Save(hs, ents, raftpb.Snapshot{}, true); err != nil {
		return nil, err
	}
	return removed, nil
}

// forceNewCluster rewrites storage for Config.ForceNewCluster, and says
// what it did.
func forceNewCluster(storage *Storage, id uint64, log *zap.Logger) error {
	if storage.IsEmpty() {
		return errors.New("raftnode: cannot force a new cluster from an empty store: it keeps what a member holds, and this one holds nothing")
	}
	last, _ := storage.LastIndex()
	removed, err := storage.forceNewCluster(id)
	if err != nil {
		return fmt.Errorf("force a new cluster: %w", err)
	}
	log.Warn("forced a new cluster: this member is its only member, with every entry its log held; start it without --force-new-cluster from now on",
		zap.Uint64("member", id), zap.Uint64s("removed", removed), zap.Uint64("last_index", last))
	return nil
}

// RestoreStore makes dir, which must not exist or be empty, the store of
// a member of a new group whose state is data at index: data is what the
// state machine's Snapshot wrote, and the log begins after index. Every
// member in peers (id -> peer address) is a voter. Each member of the new
// group is made from the same data and peers; or one is, alone, and the
// others join it, as members added later do. groups, if any, are seeded
// so too, each at its own index (Store.SeedGroup), in the same store.
//
// The store is written in a new directory beside dir, synced, and renamed
// to dir only once whole: a failure leaves dir as it was.
func RestoreStore(dir string, index uint64, peers map[uint64]string, data io.Reader, groups ...RestoredGroup) error {
	if index == 0 {
		return errors.New("raftnode: restore at index 0")
	}
	if len(peers) == 0 || slices.Contains(keys(peers), 0) {
		return errors.New("raftnode: restore needs the members, none of them 0")
	}
	if err := checkEmptyDir(dir); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(dir)+".restore-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := writeRestoredStore(tmp, index, peers, data, groups); err != nil {
		return err
	}
	// An empty dir is replaced (os.Remove removes only an empty one).
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	done = true
	return syncDir(parent)
}

func keys(m map[uint64]string) []uint64 {
	var ks []uint64
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// checkEmptyDir refuses a dir that exists and holds anything, or is not a
// directory.
func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: a restore makes a new data directory and never overwrites one", dir)
	}
	return nil
}

// writeRestoredStore writes the store of RestoreStore into dir.
func writeRestoredStore(dir string, index uint64, peers map[uint64]string, data io.Reader, groups []RestoredGroup) error {
	s, err := openStorage(dir, 0, zap.NewNop())
	if err != nil {
		return err
	}
	defer s.Close()
	copyOf := func(r io.Reader) func(io.Writer) error {
		return func(w io.Writer) error {
			if _, err := io.Copy(w, r); err != nil {
				return fmt.Errorf("write the state: %w", err)
			}
			return nil
		}
	}
	if err := s.seed(index, keys(peers), peers, copyOf(data)); err != nil {
		return err
	}
	for _, g := range groups {
		if g.Group == 0 || g.Index == 0 {
			return fmt.Errorf("raftnode: restore group %d at index %d", g.Group, g.Index)
		}
		if err := s.store.SeedGroup(g.Group, g.Index, keys(peers), copyOf(g.Data)); err != nil {
			return fmt.Errorf("restore group %d: %w", g.Group, err)
		}
	}
	return nil
}

// RestoredGroup is a group besides group 0 that RestoreStore seeds: a
// shard of a sharded cluster's backup, with its state at its own index.
type RestoredGroup struct {
	Group, Index uint64
	Data         io.Reader
}

// ErrGroupHoldsLog refuses to seed a group a store holds a log of.
var ErrGroupHoldsLog = errors.New("raftnode: the group holds a log already")

// SeedGroup makes group g of the store, of which it must hold nothing yet,
// begin from a state machine's snapshot taken at index, which write
// writes, with voters as its members: the group's log starts after index,
// so its entries' indexes (and a tree's zxids) go on from there. A split
// (docs/scale-out.md) seeds the new shard's group so on each of its
// replicas, from that replica's own state at the split's index: every
// replica must be seeded with the same state, index and voters. A Node
// started on the group then restores the state machine from the snapshot
// and elects a leader, as after a restore.
func (st *Store) SeedGroup(g, index uint64, voters []uint64, write func(io.Writer) error) error {
	if index == 0 {
		return errors.New("raftnode: seed a group at index 0")
	}
	if len(voters) == 0 || slices.Contains(voters, 0) {
		return errors.New("raftnode: a seeded group needs voters, none of them 0")
	}
	s, err := st.Group(g, 0)
	if err != nil {
		return err
	}
	defer s.Close()
	if !s.IsEmpty() || s.snapshotIndex() > 0 {
		return fmt.Errorf("group %d of raft store %s: %w", g, st.dir, ErrGroupHoldsLog)
	}
	return s.seed(index, sorted(voters), nil, write)
}

// seed makes s, which holds nothing, the start of a group whose state is
// what write writes, at index, with voters, and records peers' addresses:
// the snapshot's data, then in one synced batch its metadata and a
// HardState that commits it. It is term 1: the group's first leader is
// elected in term 2.
func (s *Storage) seed(index uint64, voters []uint64, peers map[uint64]string, write func(io.Writer) error) error {
	w, err := s.newChunkWriter()
	if err != nil {
		return err
	}
	defer w.abort()
	if err := write(w); err != nil {
		return err
	}
	if err := w.finish(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	meta := raftpb.SnapshotMetadata{Index: index, Term: 1, ConfState: raftpb.ConfState{Voters: voters}}
	if err := s.putSnapshotMeta(b, meta, w.gen); err != nil {
		return err
	}
	hs, err := (&raftpb.HardState{Term: 1, Commit: index}).Marshal()
	if err != nil {
		return err
	}
	if err := b.Set(s.ks.key(kindHardState), hs, nil); err != nil {
		return err
	}
	for id, addr := range peers {
		if addr == "" {
			continue
		}
		if err := b.Set(s.ks.key(kindPeer, id), []byte(addr), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("sync the store: %w", err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
