package raftnode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

func TestWithAppliedSeesAStateThatDoesNotChangeWhileItRuns(t *testing.T) {
	t.Parallel()
	sm := &counter{}
	n := startNode(t, t.TempDir(), sm, 0)
	defer n.Stop()
	for range 3 {
		add(t, n, 1)
	}
	done := make(chan Outcome, 1)
	var seen, after uint64
	err := n.WithApplied(context.Background(), func(index uint64) error {
		if index != n.Applied() {
			return fmt.Errorf("called with index %d, the node applied %d", index, n.Applied())
		}
		seen = sm.value()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done <- n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 10)).Wait(ctx)
		}()
		// Raft commits the write meanwhile; it is not applied until fn
		// returns.
		for deadline := time.Now().Add(10 * time.Second); n.Commit() <= index; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("the write did not commit")
			}
		}
		after = sm.value()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 3 || after != 3 {
		t.Fatalf("the state was %d when fn began and %d once a write committed, want 3 both times", seen, after)
	}
	if o := <-done; o.Err != nil || o.Result.(uint64) != 13 {
		t.Fatalf("the write during fn: %+v, want it applied after, giving 13", o)
	}
}

func TestWithAppliedReturnsTheFunctionsError(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), &counter{}, 0)
	defer n.Stop()
	boom := errors.New("boom")
	if err := n.WithApplied(context.Background(), func(uint64) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("WithApplied = %v, want fn's error", err)
	}
	add(t, n, 1) // and the node goes on
}

func TestWithAppliedGivesUpAFunctionItsCallerNoLongerWaitsFor(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), &counter{}, 0)
	defer n.Stop()
	gate, running := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- n.WithApplied(context.Background(), func(uint64) error {
			close(running)
			<-gate
			return nil
		})
	}()
	<-running
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	second := make(chan error, 1)
	go func() { second <- n.WithApplied(ctx, func(uint64) error { ran = true; return nil }) }()
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("WithApplied after its context ended = %v, want context.Canceled", err)
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := n.WithApplied(context.Background(), func(uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("a function given up by its caller ran")
	}
}

// group is a raft group of counters over a MemNetwork, each member with
// a data directory the test keeps.
type group struct {
	t     *testing.T
	nw    *MemNetwork
	dirs  map[uint64]string
	nodes map[uint64]*Node
	sms   map[uint64]*counter
	trs   map[uint64]*MemTransport
}

func newGroup(t *testing.T) *group {
	return &group{t: t, nw: NewMemNetwork(), dirs: map[uint64]string{}, nodes: map[uint64]*Node{}, sms: map[uint64]*counter{}, trs: map[uint64]*MemTransport{}}
}

// start starts member id with cfg's ID, Dir, Transport and Logger filled
// in, and returns its error.
func (g *group) start(id uint64, cfg Config) error {
	g.t.Helper()
	if g.dirs[id] == "" {
		g.dirs[id] = g.t.TempDir()
	}
	tr := g.nw.NewTransport(id)
	cfg.ID, cfg.Dir, cfg.Transport, cfg.Logger = id, g.dirs[id], tr, zaptest.NewLogger(g.t).Named(fmt.Sprintf("n%d", id))
	cfg.TickInterval = 10 * time.Millisecond
	sm := &counter{}
	n, err := Start(cfg, sm)
	if err != nil {
		tr.Close()
		return err
	}
	tr.Attach(n, nil)
	g.nodes[id], g.sms[id], g.trs[id] = n, sm, tr
	g.t.Cleanup(func() { g.stop(id) })
	return nil
}

func (g *group) mustStart(id uint64, cfg Config) {
	g.t.Helper()
	if err := g.start(id, cfg); err != nil {
		g.t.Fatalf("start member %d: %v", id, err)
	}
}

func (g *group) stop(id uint64) {
	if n := g.nodes[id]; n != nil {
		n.Stop()
		g.trs[id].Close()
		delete(g.nodes, id)
	}
}

func (g *group) add(id, v uint64) Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return g.nodes[id].Propose(ctx, binary.BigEndian.AppendUint64(nil, v)).Wait(ctx)
}

// leads waits until member id leads.
func (g *group) leads(id uint64) {
	g.t.Helper()
	waitFor(g.t, fmt.Sprintf("member %d to lead", id), func() bool { return g.nodes[id].IsLeader() })
}

func peersOf(ids ...uint64) map[uint64]string {
	peers := map[uint64]string{}
	for _, id := range ids {
		peers[id] = ""
	}
	return peers
}

// appendUncommitted appends to the store in dir an entry adding v that the
// member holds but does not know committed: one a lost leader may have
// committed, and acknowledged, after this member wrote it.
func appendUncommitted(t *testing.T, dir string, v uint64) {
	t.Helper()
	s, err := openStorage(dir, 0, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	last, _ := s.LastIndex()
	hs := s.log.hs
	data := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 0), v) // request id 0, then the payload
	if err := s.Save(hs, []raftpb.Entry{{Term: hs.Term, Index: last + 1, Data: data}}, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
}

func TestAForcedMemberLeadsAloneWithEveryEntryItHeld(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	peers := peersOf(1, 2, 3)
	for id := uint64(1); id <= 3; id++ {
		g.mustStart(id, Config{Peers: peers})
	}
	waitFor(t, "a leader", func() bool { return g.nodes[1].Leader() != 0 })
	var last Outcome
	for i := uint64(1); i <= 10; i++ {
		if last = g.add(g.nodes[1].Leader(), i); last.Err != nil {
			t.Fatal(last.Err)
		}
	}
	waitFor(t, "member 2 to apply every write", func() bool { return g.nodes[2].Applied() >= last.Index })
	for id := uint64(1); id <= 3; id++ {
		g.stop(id)
	}
	// Members 1 and 3 are lost for good. Member 2 holds one more entry
	// than it knows committed.
	appendUncommitted(t, g.dirs[2], 100)
	before, err := ReadState(g.dirs[2])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before.Voters, []uint64{1, 2, 3}) || before.LastIndex <= before.Commit || before.LastTerm != before.Term {
		t.Fatalf("before the force: %+v; want voters 1, 2, 3 and an entry past the commit index", before)
	}

	g.mustStart(2, Config{Peers: peersOf(2), ForceNewCluster: true})
	g.leads(2)
	if got := g.nodes[2].Members(); !reflect.DeepEqual(got, []Member{{ID: 2}}) {
		t.Fatalf("members after the force: %+v, want member 2 alone", got)
	}
	if got := g.sms[2].value(); got != 55+100 {
		t.Fatalf("the forced member counts %d, want 155: every write, and the entry it held uncommitted", got)
	}
	if o := g.add(2, 1); o.Err != nil || o.Result.(uint64) != 156 || o.Index <= before.LastIndex {
		t.Fatalf("a write to the new cluster: %+v, want 156 at an index past %d", o, before.LastIndex)
	}

	// A member added the usual way joins it and catches up.
	if err := g.nodes[2].AddMember(context.Background(), 4, "", false); err != nil {
		t.Fatal(err)
	}
	g.mustStart(4, Config{Peers: peersOf(2, 4), Join: true})
	o := g.add(2, 1)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	waitFor(t, "the new member to catch up", func() bool { return g.nodes[4].Applied() >= o.Index })
	if got := g.sms[4].value(); got != 157 {
		t.Fatalf("the new member counts %d, want 157", got)
	}
	g.stop(2)
	g.stop(4)
	after, err := ReadState(g.dirs[2])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after.Voters, []uint64{2, 4}) || after.Commit != after.LastIndex {
		t.Fatalf("after the force and the join: %+v; want voters 2 and 4, everything committed", after)
	}
}

func TestAForcedLearnerBecomesTheOnlyVoter(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	g.mustStart(1, Config{Peers: peersOf(1)})
	g.leads(1)
	g.add(1, 5)
	if err := g.nodes[1].AddMember(context.Background(), 2, "", true); err != nil {
		t.Fatal(err)
	}
	g.mustStart(2, Config{Peers: peersOf(1, 2), Join: true})
	o := g.add(1, 5)
	waitFor(t, "the learner to apply", func() bool { return g.nodes[2].Applied() >= o.Index })
	g.stop(1)
	g.stop(2)
	g.mustStart(2, Config{Peers: peersOf(2), ForceNewCluster: true})
	g.leads(2)
	if got := g.nodes[2].Members(); !reflect.DeepEqual(got, []Member{{ID: 2}}) {
		t.Fatalf("members: %+v, want member 2 alone, a voter", got)
	}
	if o := g.add(2, 1); o.Err != nil || o.Result.(uint64) != 11 {
		t.Fatalf("a write: %+v, want 11", o)
	}
}

func TestForcingANewClusterWithAnotherMembersIDChangesNothing(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	g.mustStart(1, Config{Peers: peersOf(1)})
	g.leads(1)
	g.add(1, 3)
	g.stop(1)
	before, err := ReadState(g.dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	g.dirs[5] = g.dirs[1]
	if err := g.start(5, Config{Peers: peersOf(5), ForceNewCluster: true}); err == nil {
		t.Fatal("a member forced a new cluster from another member's store")
	}
	if err := g.start(6, Config{Peers: peersOf(6), ForceNewCluster: true}); err == nil {
		t.Fatal("a member forced a new cluster from an empty store")
	}
	after, err := ReadState(g.dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the store changed: %+v, then %+v", before, after)
	}
}

func TestReadStateRefusesWhatIsNotAStoppedStore(t *testing.T) {
	t.Parallel()
	if _, err := ReadState(t.TempDir()); err == nil {
		t.Fatal("ReadState of an empty directory succeeded")
	}
	if _, err := ReadState(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("ReadState of a missing directory succeeded")
	}
	g := newGroup(t)
	g.mustStart(1, Config{Peers: peersOf(1)})
	if _, err := ReadState(g.dirs[1]); err == nil {
		t.Fatal("ReadState of a running member's store succeeded")
	}
}

func snapshotOf(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestARestoredMemberStartsANewClusterAtTheSnapshotsIndex(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	g.dirs[1] = filepath.Join(t.TempDir(), "data")
	if err := RestoreStore(g.dirs[1], 5000, map[uint64]string{1: "127.0.0.1:2381"}, bytes.NewReader(snapshotOf(77))); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(g.dirs[1])
	if err != nil {
		t.Fatal(err)
	}
	want := StoreState{Term: 1, Commit: 5000, SnapshotIndex: 5000, FirstIndex: 5001, LastIndex: 5000, LastTerm: 1,
		Voters: []uint64{1}, Peers: map[uint64]string{1: "127.0.0.1:2381"}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("the restored store: %+v, want %+v", st, want)
	}
	g.mustStart(1, Config{Peers: peersOf(1)})
	g.leads(1)
	if got := g.sms[1].value(); got != 77 || g.nodes[1].Applied() < 5000 {
		t.Fatalf("the restored member counts %d at %d, want 77 at 5000 or later", got, g.nodes[1].Applied())
	}
	if o := g.add(1, 1); o.Err != nil || o.Result.(uint64) != 78 || o.Index <= 5000 {
		t.Fatalf("a write: %+v, want 78 past index 5000", o)
	}
}

func TestThreeMembersRestoredFromOneSnapshotElectALeader(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	peers := peersOf(1, 2, 3)
	for id := uint64(1); id <= 3; id++ {
		g.dirs[id] = filepath.Join(t.TempDir(), "data")
		if err := RestoreStore(g.dirs[id], 40, peers, bytes.NewReader(snapshotOf(9))); err != nil {
			t.Fatal(err)
		}
	}
	for id := uint64(1); id <= 3; id++ {
		g.mustStart(id, Config{Peers: peers})
	}
	waitFor(t, "a leader", func() bool { return g.nodes[1].Leader() != 0 })
	o := g.add(g.nodes[1].Leader(), 1)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	for id, n := range g.nodes {
		waitFor(t, fmt.Sprintf("member %d to apply", id), func() bool { return n.Applied() >= o.Index })
		if got := g.sms[id].value(); got != 10 {
			t.Fatalf("member %d counts %d, want 10", id, got)
		}
	}
}

// failingReader fails after its bytes, as a file cut short by a disk
// error does.
type failingReader struct{ r io.Reader }

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("disk on fire")
	}
	return n, err
}

func TestARestoreThatCannotFinishLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	big := bytes.Repeat([]byte{7}, 3<<20) // several chunks
	if err := RestoreStore(dir, 10, peersOf(1), failingReader{bytes.NewReader(big)}); err == nil {
		t.Fatal("a restore from a failing reader succeeded")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("a failed restore left %v behind", entries)
	}
}

func TestARestoreNeverOverwritesAStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RestoreStore(dir, 10, peersOf(1), bytes.NewReader(snapshotOf(1))); err == nil {
		t.Fatal("a restore into a directory with a file in it succeeded")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "x" {
		t.Fatalf("the directory's file: %q, %v", b, err)
	}
	empty := t.TempDir()
	if err := RestoreStore(empty, 10, peersOf(1), bytes.NewReader(snapshotOf(1))); err != nil {
		t.Fatalf("a restore into an empty directory: %v", err)
	}
	if err := RestoreStore(filepath.Join(t.TempDir(), "x"), 0, peersOf(1), bytes.NewReader(snapshotOf(1))); err == nil {
		t.Fatal("a restore at index 0 succeeded")
	}
	if err := RestoreStore(filepath.Join(t.TempDir(), "x"), 10, nil, bytes.NewReader(snapshotOf(1))); err == nil {
		t.Fatal("a restore without members succeeded")
	}
}

// TestAMemberAddedAfterTheLastSnapshotCatchesUpFromOne: a member added
// once the log is compacted catches up only from a snapshot, and raft
// refuses a snapshot whose membership lacks it. Every member takes one
// after a membership change.
func TestAMemberAddedAfterTheLastSnapshotCatchesUpFromOne(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	g.mustStart(1, Config{Peers: peersOf(1), SnapshotEvery: 5, CatchUpEntries: 1})
	g.leads(1)
	for range 50 {
		if o := g.add(1, 1); o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	if err := g.nodes[1].AddMember(context.Background(), 2, "", false); err != nil {
		t.Fatal(err)
	}
	g.mustStart(2, Config{Peers: peersOf(1, 2), Join: true})
	// Until member 2 answers, member 1 leads a group of two alone and,
	// after an election timeout, steps down: a write in that time may
	// fail with its outcome unknown. Member 2 catches up first.
	joined := g.nodes[1].Applied()
	waitFor(t, "the new member to join", func() bool { return g.nodes[2].Applied() >= joined && g.nodes[1].IsLeader() })
	o := g.add(1, 1)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	waitFor(t, "the new member to catch up with the last write", func() bool { return g.nodes[2].Applied() >= o.Index })
	sm := g.sms[2]
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.sum != 51 || sm.restores != 1 {
		t.Fatalf("the new member counts %d after %d restores, want 51 after one", sm.sum, sm.restores)
	}
}
