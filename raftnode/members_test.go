package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// membersHeard is a counter that records the membership changes it is
// told of (MembershipApplier).
type membersHeard struct {
	counter
	hmu   sync.Mutex
	heard []heardChange
}

type heardChange struct {
	index   uint64
	members []Member
	meta    string
}

func (m *membersHeard) ApplyMembers(index uint64, members []Member, meta []byte) any {
	m.hmu.Lock()
	defer m.hmu.Unlock()
	m.heard = append(m.heard, heardChange{index, members, string(meta)})
	return fmt.Sprintf("applied at %d", index)
}

func (m *membersHeard) changes() []heardChange {
	m.hmu.Lock()
	defer m.hmu.Unlock()
	return slices.Clone(m.heard)
}

// startHeardGroup starts members ids of a group over a MemNetwork, each
// with a membersHeard; those in join join a running group.
func startHeardGroup(t *testing.T, nw *MemNetwork, peers map[uint64]string, ids []uint64, join bool) (map[uint64]*Node, map[uint64]*membersHeard) {
	t.Helper()
	nodes, sms := map[uint64]*Node{}, map[uint64]*membersHeard{}
	for _, id := range ids {
		tr := nw.NewTransport(id)
		sm := &membersHeard{}
		n, err := Start(Config{ID: id, Peers: peers, Join: join, Dir: t.TempDir(), TickInterval: 10 * time.Millisecond,
			Transport: tr, Logger: zaptest.NewLogger(t).Named(fmt.Sprintf("n%d", id))}, sm)
		if err != nil {
			t.Fatal(err)
		}
		tr.Attach(n, nil)
		nodes[id], sms[id] = n, sm
		t.Cleanup(func() {
			n.Stop()
			tr.Close()
		})
	}
	return nodes, sms
}

func TestConfContextRoundTrips(t *testing.T) {
	t.Parallel()
	id := binary.BigEndian.AppendUint64(nil, 42)
	tests := []struct {
		name  string
		addrs []string
		meta  []byte
		ctx   []byte // the context's form after the id; nil: not checked
	}{
		{name: "one address alone keeps the form earlier versions read", addrs: []string{"10.0.0.4:2381"}, ctx: []byte("10.0.0.4:2381")},
		{name: "no address alone is empty", addrs: []string{""}, ctx: []byte{}},
		{name: "one address with meta", addrs: []string{"h:1"}, meta: []byte("server.4=h:1:0:participant")},
		{name: "several addresses, one of them none", addrs: []string{"h:1", "", "h:3"}, meta: []byte("m")},
		{name: "several addresses without meta", addrs: []string{"h:1", "h:2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := confContext(tt.addrs, tt.meta)
			if tt.ctx != nil && string(c) != string(tt.ctx) {
				t.Fatalf("context %q, want %q", c, tt.ctx)
			}
			gotID, addrs, meta := parseConfContext(append(slices.Clone(id), c...), len(tt.addrs))
			if gotID != 42 || !reflect.DeepEqual(addrs, tt.addrs) || string(meta) != string(tt.meta) {
				t.Fatalf("parsed %d %q %q", gotID, addrs, meta)
			}
		})
	}
	t.Run("a context it cannot read gives no addresses", func(t *testing.T) {
		for _, bad := range [][]byte{{0, 9}, {0, 1, 3, 1, 'a'}, {0, 1, 1, 200, 'a'}, {0}} {
			_, addrs, meta := parseConfContext(append(slices.Clone(id), bad...), 1)
			if addrs[0] != "" || meta != nil {
				t.Errorf("context %q: addresses %q, meta %q", bad, addrs, meta)
			}
		}
		if gotID, addrs, _ := parseConfContext([]byte{1, 2}, 2); gotID != 0 || len(addrs) != 2 {
			t.Errorf("a short context: id %d, addresses %q", gotID, addrs)
		}
	})
}

// FuzzParseConfContext: no context makes the decoder panic, and it always
// gives one address per change.
//
//	go test ./raftnode -run XXX -fuzz FuzzParseConfContext -fuzztime 1m
func FuzzParseConfContext(f *testing.F) {
	f.Add(append(make([]byte, 8), confContext([]string{"h:1", "h:2"}, []byte("meta"))...), 2)
	f.Add(append(make([]byte, 8), "h:1"...), 1)
	f.Fuzz(func(t *testing.T, ctx []byte, n int) {
		n = n & 0xff
		_, addrs, _ := parseConfContext(ctx, n)
		if len(addrs) != n {
			t.Fatalf("%d addresses for %d changes", len(addrs), n)
		}
	})
}

// A new group's members hear of its first members, with the addresses
// the bootstrap entries carry; every member hears the same.
func TestTheStateMachineHearsTheFirstMembers(t *testing.T) {
	t.Parallel()
	peers := map[uint64]string{1: "h:1", 2: "h:2", 3: "h:3"}
	nodes, sms := startHeardGroup(t, NewMemNetwork(), peers, []uint64{1, 2, 3}, false)
	waitFor(t, "a leader", func() bool { return nodes[1].Leader() != 0 })
	want := []Member{{ID: 1, Addr: "h:1"}, {ID: 2, Addr: "h:2"}, {ID: 3, Addr: "h:3"}}
	for id, sm := range sms {
		heard := sm.changes()
		if len(heard) != 3 || heard[2].index != 3 || !reflect.DeepEqual(heard[2].members, want) {
			t.Fatalf("member %d heard %+v", id, heard)
		}
	}
}

// Several changes at once go through raft's joint consensus: ChangeMembers
// returns once the joint configuration is left, with what the state
// machine made of the change, and every member heard the same change.
func TestSeveralChangesAtOnceGoThroughAJointConfiguration(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	peers := map[uint64]string{1: "h:1", 2: "h:2", 3: "h:3"}
	nodes, sms := startHeardGroup(t, nw, peers, []uint64{1, 2, 3}, false)
	waitFor(t, "a leader", func() bool { return nodes[1].Leader() != 0 })
	lead := nodes[1].Leader()
	gone := lead%3 + 1 // a follower leaves
	more, moreSMs := startHeardGroup(t, nw, peers, []uint64{4, 5}, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := nodes[lead].ChangeMembers(ctx, []MemberChange{
		{ID: 4, Addr: "h:4"}, {ID: 5, Addr: "h:5", Learner: true}, {ID: gone, Remove: true},
	}, []byte("the meta"))
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	if o.Result != fmt.Sprintf("applied at %d", o.Index) {
		t.Fatalf("result %v at %d", o.Result, o.Index)
	}
	if nodes[lead].joint() {
		t.Fatal("ChangeMembers returned in the joint configuration")
	}
	var want []Member
	for _, id := range []uint64{1, 2, 3, 4, 5} {
		if id != gone {
			want = append(want, Member{ID: id, Addr: fmt.Sprintf("h:%d", id), Learner: id == 5})
		}
	}
	if got := nodes[lead].Members(); !reflect.DeepEqual(got, want) {
		t.Fatalf("members %+v, want %+v", got, want)
	}
	select {
	case <-nodes[gone].Done():
		if !errors.Is(nodes[gone].Err(), ErrRemoved) {
			t.Fatalf("the removed member stopped with %v", nodes[gone].Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the removed member still runs")
	}
	// The new members take part: a write commits and reaches them.
	if o := (&memGroup{nodes: nodes}).add(t, lead, 5); o.Err != nil {
		t.Fatal(o.Err)
	}
	waitFor(t, "the new members to apply the write", func() bool {
		return more[4].Applied() >= o.Index && more[5].Applied() >= o.Index
	})
	all := map[uint64]*membersHeard{4: moreSMs[4], 5: moreSMs[5]}
	for id, sm := range sms {
		if id != gone {
			all[id] = sm
		}
	}
	for id, sm := range all {
		i := slices.IndexFunc(sm.changes(), func(h heardChange) bool { return h.index == o.Index })
		if i < 0 {
			t.Fatalf("member %d did not hear the change at %d: %+v", id, o.Index, sm.changes())
		}
		if h := sm.changes()[i]; h.meta != "the meta" || !reflect.DeepEqual(h.members, want) {
			t.Fatalf("member %d heard %+v", id, h)
		}
	}
}

// A change is refused while another is in flight: from this member, or
// in its log and not yet applied.
func TestAChangeWhileAnotherIsPendingIsRefused(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	nodes, _ := startHeardGroup(t, nw, map[uint64]string{1: "", 2: "", 3: ""}, []uint64{1, 2, 3}, false)
	waitFor(t, "a leader", func() bool { return nodes[1].Leader() != 0 })
	lead := nodes[1].Leader()
	var others []uint64
	for id := range nodes {
		if id != lead {
			others = append(others, id)
		}
	}
	nw.Partition([]uint64{lead}, others)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		first <- nodes[lead].ChangeMembers(ctx, []MemberChange{{ID: 9, Addr: "h:9", Learner: true}}, nil).Err
	}()
	waitFor(t, "the first change to be in flight", func() bool { return nodes[lead].confPending.Load() })
	if err := nodes[lead].ChangeMembers(context.Background(), []MemberChange{{ID: 8, Learner: true}}, nil).Err; !errors.Is(err, ErrConfChangeInProgress) {
		t.Fatalf("a second change from the same member: %v", err)
	}
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrLeaderChanged) {
		t.Fatalf("the first change without a quorum: %v", err)
	}
	// Its entry is still in the (old) leader's log, not applied.
	if err := nodes[lead].ChangeMembers(context.Background(), []MemberChange{{ID: 8, Learner: true}}, nil).Err; !errors.Is(err, ErrConfChangeInProgress) {
		t.Fatalf("a change while one is in the log: %v", err)
	}
}

// Synced names, on the leader, the members that follow its log; a member
// cut off drops out of it, and only the leader answers.
func TestSyncedNamesTheMembersThatFollowTheLeader(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	nodes, _ := startHeardGroup(t, nw, map[uint64]string{1: "", 2: "", 3: ""}, []uint64{1, 2, 3}, false)
	waitFor(t, "a leader", func() bool { return nodes[1].Leader() != 0 })
	lead := nodes[1].Leader()
	ctx := context.Background()
	if o := (&memGroup{nodes: nodes}).add(t, lead, 1); o.Err != nil {
		t.Fatal(o.Err)
	}
	waitFor(t, "every member synced", func() bool {
		ids, err := nodes[lead].Synced(ctx)
		return err == nil && reflect.DeepEqual(ids, []uint64{1, 2, 3})
	})
	follower := lead%3 + 1
	if ids, err := nodes[follower].Synced(ctx); ids != nil || err != nil {
		t.Fatalf("a follower's Synced: %v, %v", ids, err)
	}
	var rest []uint64
	for id := range nodes {
		if id != follower {
			rest = append(rest, id)
		}
	}
	nw.Partition([]uint64{follower}, rest)
	waitFor(t, "the cut-off member to drop out", func() bool {
		ids, err := nodes[lead].Synced(ctx)
		return err == nil && len(ids) == 2 && !slices.Contains(ids, follower)
	})
}

// A store whose log ends in a joint configuration gives its incoming half
// and says so; a forced recovery leaves it first, so that raft takes the
// removals that follow one by one.
func TestTheMembersAtTheLogsEndOfAJointConfiguration(t *testing.T) {
	t.Parallel()
	s, err := openStorage(t.TempDir(), 0, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ents []raftpb.Entry
	appendCC := func(changes ...raftpb.ConfChangeSingle) {
		cc := raftpb.ConfChangeV2{Changes: changes, Context: make([]byte, 8)}
		data, err := cc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, raftpb.Entry{Type: raftpb.EntryConfChangeV2, Term: 1, Index: uint64(len(ents) + 1), Data: data})
	}
	for id := uint64(1); id <= 3; id++ {
		appendCC(raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode, NodeID: id})
	}
	appendCC(raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode, NodeID: 4}, raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode, NodeID: 3})
	if err := s.Save(raftpb.HardState{Term: 1, Commit: uint64(len(ents))}, ents, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
	cs, joint, err := s.membersAtEnd()
	if err != nil || !joint || !reflect.DeepEqual(cs.Voters, []uint64{1, 2, 4}) {
		t.Fatalf("members at the end: %+v, joint %v, %v", cs, joint, err)
	}
	last := uint64(len(ents))
	if _, err := s.forceNewCluster(1); err != nil {
		t.Fatal(err)
	}
	leave, err := s.Entries(last+1, last+2, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	cc, ok, err := confChangeOf(&leave[0])
	if err != nil || !ok || !cc.LeaveJoint() {
		t.Fatalf("the first entry a forced recovery appends: %+v, %v, %v", cc, ok, err)
	}
	cs, joint, err = s.membersAtEnd()
	if err != nil || joint || !reflect.DeepEqual(cs.Voters, []uint64{1}) {
		t.Fatalf("members after the forced recovery: %+v, joint %v, %v", cs, joint, err)
	}
}

// A change raft would panic on as it applies it (one that leaves no
// voter) is refused before it is proposed, and the group goes on: in the
// log it would stop every member at every restart.
func TestAChangeThatLeavesNoVoterIsRefused(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	nodes, _ := startHeardGroup(t, nw, map[uint64]string{1: ""}, []uint64{1}, false)
	waitFor(t, "a leader", func() bool { return nodes[1].Leader() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := nodes[1].ChangeMembers(ctx, []MemberChange{{ID: 2, Addr: "h:2", Learner: true}}, nil).Err; err != nil {
		t.Fatalf("adding a learner: %v", err)
	}
	for _, tt := range []struct {
		name    string
		changes []MemberChange
	}{
		{"the last voter removed", []MemberChange{{ID: 1, Remove: true}}},
		{"the last voter made a learner", []MemberChange{{ID: 1, Learner: true}}},
		{"every voter removed at once", []MemberChange{{ID: 1, Remove: true}, {ID: 2, Remove: true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := nodes[1].ChangeMembers(ctx, tt.changes, nil).Err; !errors.Is(err, ErrBadConfChange) {
				t.Fatalf("got %v, want ErrBadConfChange", err)
			}
		})
	}
	if o := nodes[1].Propose(ctx, []byte("still here")).Wait(ctx); o.Err != nil {
		t.Fatalf("a write after the refusals: %v", o.Err)
	}
}
