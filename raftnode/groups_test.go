package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// groupMember is a member running several raft groups over one store and
// one transport.
type groupMember struct {
	id     uint64
	dir    string
	store  *Store
	tr     groupsTransport
	nodes  map[uint64]*Node
	states map[uint64]*setMachine
}

// setMachine is a state machine that keeps the set of the payloads
// applied to it, so that a proposal whose outcome is unknown can be made
// again.
type setMachine struct {
	mu  sync.Mutex
	set map[string]bool
}

func (s *setMachine) Apply(_ uint64, payload []byte) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set[string(payload)] = true
	return nil
}

func (s *setMachine) Snapshot() (func(io.Writer) error, error) {
	s.mu.Lock()
	data := strings.Join(slices.Sorted(maps.Keys(s.set)), "\n")
	s.mu.Unlock()
	return func(w io.Writer) error {
		_, err := io.WriteString(w, data)
		return err
	}, nil
}

func (s *setMachine) Restore(r io.Reader, _ uint64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = map[string]bool{}
	for _, v := range strings.Split(string(data), "\n") {
		if v != "" {
			s.set[v] = true
		}
	}
	return nil
}

func (s *setMachine) equals(want map[string]bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Equal(s.set, want)
}

func (s *setMachine) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(slices.Sorted(maps.Keys(s.set)))
}

// listen makes member id's transport, on addr.
func listen(t *testing.T, id uint64, addr string) *TCPTransport {
	t.Helper()
	tr, err := NewTCPTransport(id, addr, nil, zaptest.NewLogger(t).Named(fmt.Sprint("t", id)))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// groupsTransport is a member's transport of several groups: TCPTransport
// or MemTransport.
type groupsTransport interface {
	Group(g uint64) Transport
	AttachGroup(g uint64, n *Node)
	Close() error
}

// groupOptions are what startGroupMember's groups may have besides their
// defaults.
type groupOptions struct {
	prefer  map[uint64]uint64 // each group's preferred leader
	quiesce bool
	join    bool // wait for the leader instead of bootstrapping
}

// startGroupMember starts member id's groups on the store in dir, over tr.
func startGroupMember(t *testing.T, id uint64, dir string, tr groupsTransport, addrs map[uint64]string, groups []uint64, opts groupOptions) *groupMember {
	t.Helper()
	log := zaptest.NewLogger(t).Named(fmt.Sprint("m", id))
	store, err := OpenStore(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if book, ok := tr.(PeerBook); ok {
		for pid, addr := range addrs {
			if pid != id {
				book.AddPeer(pid, addr)
			}
		}
	}
	m := &groupMember{id: id, dir: dir, store: store, tr: tr, nodes: map[uint64]*Node{}, states: map[uint64]*setMachine{}}
	for _, g := range groups {
		m.states[g] = &setMachine{set: map[string]bool{}}
		n, err := Start(Config{ID: id, Peers: addrs, Store: store, Group: g, Transport: tr.Group(g), PreferredLeader: opts.prefer[g], Quiesce: opts.quiesce, Join: opts.join,
			TickInterval: 10 * time.Millisecond, Logger: log.Named(fmt.Sprint("g", g))}, m.states[g])
		if err != nil {
			t.Fatal(err)
		}
		tr.AttachGroup(g, n)
		m.nodes[g] = n
	}
	return m
}

func (m *groupMember) stop(t *testing.T) {
	t.Helper()
	for g, n := range m.nodes {
		m.tr.AttachGroup(g, nil)
		if err := n.Stop(); err != nil {
			t.Errorf("member %d, group %d: stop: %v", m.id, g, err)
		}
	}
	m.tr.Close()
	if err := m.store.Close(); err != nil {
		t.Error(err)
	}
}

// startGroupCluster starts three members of groups over TCP on loopback,
// and stops those in members when the test ends (restarted ones too).
func startGroupCluster(t *testing.T, groups []uint64, opts groupOptions) (members map[uint64]*groupMember, addrs map[uint64]string) {
	t.Helper()
	addrs = map[uint64]string{}
	trs := map[uint64]*TCPTransport{}
	for id := uint64(1); id <= 3; id++ {
		trs[id] = listen(t, id, "127.0.0.1:0")
		addrs[id] = trs[id].Addr().String()
	}
	members = map[uint64]*groupMember{}
	for id := uint64(1); id <= 3; id++ {
		members[id] = startGroupMember(t, id, t.TempDir(), trs[id], addrs, groups, opts)
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.stop(t)
		}
	})
	return members, addrs
}

// TestGroupsShareAMembersStoreAndTransport runs three raft groups on three
// members, each member with one pebble store and one peer transport for
// all three: each group elects its own leader and keeps its own log (an
// entry applied in another group's state shows), and a member restarted
// from its store catches up in every group.
func TestGroupsShareAMembersStoreAndTransport(t *testing.T) {
	t.Parallel()
	groups := []uint64{0, 1, 5}
	members, addrs := startGroupCluster(t, groups, groupOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := map[uint64]map[string]bool{}
	for _, g := range groups {
		want[g] = map[string]bool{}
	}
	// write adds to each group through each running member in turn (a
	// follower forwards to its group's leader), each value naming its
	// group. A proposal that fails (in an election) is made again: the
	// states are sets.
	written := 0
	write := func(rounds int, through ...uint64) {
		t.Helper()
		for r := range rounds {
			for _, g := range groups {
				m := members[through[r%len(through)]]
				v := fmt.Sprintf("g%d-%d", g, written)
				for o := m.nodes[g].Propose(ctx, []byte(v)).Wait(ctx); o.Err != nil; o = m.nodes[g].Propose(ctx, []byte(v)).Wait(ctx) {
					if ctx.Err() != nil {
						t.Fatalf("group %d through member %d: %v", g, m.id, o.Err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				want[g][v] = true
				written++
			}
		}
	}
	converged := func() {
		t.Helper()
		for _, g := range groups {
			for _, m := range members {
				for !m.states[g].equals(want[g]) {
					if ctx.Err() != nil {
						t.Fatalf("group %d on member %d holds %v, want %v", g, m.id, m.states[g], slices.Sorted(maps.Keys(want[g])))
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
	}
	// led waits until every running member knows a leader in every group.
	led := func() {
		t.Helper()
		for _, m := range members {
			for _, g := range groups {
				for m.nodes[g].Leader() == 0 {
					if ctx.Err() != nil {
						t.Fatalf("group %d on member %d knows no leader", g, m.id)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
	}
	led()
	write(9, 1, 2, 3)
	converged()

	dir3 := members[3].dir
	members[3].stop(t)
	delete(members, 3)
	write(6, 1, 2)
	members[3] = startGroupMember(t, 3, dir3, listen(t, 3, addrs[3]), addrs, groups, groupOptions{})
	led()
	converged()
	write(3, 3)
	converged()
}

func TestGroupsShareAMembersTransportOnTheMemoryNetwork(t *testing.T) {
	t.Parallel()
	groups := []uint64{0, 3}
	nw := NewMemNetwork()
	addrs := map[uint64]string{1: "m1", 2: "m2", 3: "m3"}
	var members []*groupMember
	for id := uint64(1); id <= 3; id++ {
		members = append(members, startGroupMember(t, id, t.TempDir(), nw.NewTransport(id), addrs, groups, groupOptions{}))
	}
	defer func() {
		for _, m := range members {
			m.stop(t)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, g := range groups {
		v := fmt.Sprint("only in group ", g)
		for o := members[0].nodes[g].Propose(ctx, []byte(v)).Wait(ctx); o.Err != nil; o = members[0].nodes[g].Propose(ctx, []byte(v)).Wait(ctx) {
			if ctx.Err() != nil {
				t.Fatalf("group %d: %v", g, o.Err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		want := map[string]bool{v: true}
		for _, m := range members {
			for !m.states[g].equals(want) {
				if ctx.Err() != nil {
					t.Fatalf("group %d on member %d holds %v, want %v", g, m.id, m.states[g], want)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

// TestEachGroupsLeadershipGoesToItsPreferredMember spreads three groups'
// leaderships over three members, one each, and checks that a group's
// leadership leaves its preferred member while it is down and comes back
// once it has caught up, and goes to another member once that one is
// preferred.
func TestEachGroupsLeadershipGoesToItsPreferredMember(t *testing.T) {
	t.Parallel()
	groups := []uint64{0, 1, 2}
	prefer := map[uint64]uint64{0: 3, 1: 1, 2: 2}
	members, addrs := startGroupCluster(t, groups, groupOptions{prefer: prefer})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// leads waits until member id's view of group g's leader passes ok.
	leads := func(g, id uint64, what string, ok func(leader uint64) bool) {
		t.Helper()
		for !ok(members[id].nodes[g].Leader()) {
			if ctx.Err() != nil {
				t.Fatalf("group %d, seen from member %d: leader %d, want %s", g, id, members[id].nodes[g].Leader(), what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, g := range groups {
		for id := range members {
			leads(g, id, fmt.Sprint(prefer[g]), func(l uint64) bool { return l == prefer[g] })
		}
	}

	dir2 := members[2].dir
	members[2].stop(t)
	delete(members, 2)
	leads(2, 1, "1 or 3", func(l uint64) bool { return l == 1 || l == 3 })
	if o := members[1].nodes[2].Propose(ctx, []byte("while 2 is down")).Wait(ctx); o.Err != nil {
		t.Fatal(o.Err)
	}
	members[2] = startGroupMember(t, 2, dir2, listen(t, 2, addrs[2]), addrs, groups, groupOptions{prefer: prefer})
	for id := range members {
		leads(2, id, "2 again", func(l uint64) bool { return l == 2 })
	}

	// An operator's move of the leadership (arbor shards lead): every
	// member prefers 3 now, and the leadership goes there at once.
	for _, m := range members {
		if err := m.nodes[2].SetPreferredLeader(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	for id := range members {
		leads(2, id, "3, preferred now", func(l uint64) bool { return l == 3 })
	}
}

func TestGroupFramesThatAreBadAreRefusedAndThoseOfAnUnknownGroupDropped(t *testing.T) {
	t.Parallel()
	msg, err := (&raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 3}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	group := func(g uint64, body []byte) []byte { return append(binary.BigEndian.AppendUint64(nil, g), body...) }
	for _, tc := range []struct {
		name string
		body []byte
		bad  bool
	}{
		{"shorter than its group", []byte{0, 0, 0, 1}, true},
		{"a group and no message", group(4, nil), false}, // an empty message is a valid one
		{"a message that does not decode", group(4, []byte{0xff, 0xff, 0xff}), true},
		{"a message of a group with no node here", group(4, msg), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&TCPTransport{}).deliver(frameGroupRaft, tc.body)
			if bad := err != nil; bad != tc.bad {
				t.Fatalf("deliver: %v; want refused: %v", err, tc.bad)
			}
		})
	}
}

// FuzzPeerFrame feeds a member frames of every kind as a peer's connection
// would carry them: a frame is taken or refused, never a crash.
func FuzzPeerFrame(f *testing.F) {
	msg, _ := (&raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, Entries: []raftpb.Entry{{Index: 1, Data: []byte("x")}}}).Marshal()
	f.Add(frameRaft, msg)
	f.Add(frameGroupRaft, append(binary.BigEndian.AppendUint64(nil, 7), msg...))
	f.Add(frameTouches, binary.BigEndian.AppendUint64(nil, 42))
	f.Add(frameCard, append(binary.BigEndian.AppendUint64(nil, 2), "card"...))
	f.Add(frameProbe, binary.BigEndian.AppendUint64(nil, 2))
	f.Add(frameAck, binary.BigEndian.AppendUint64(nil, 2))
	f.Add(frameAlive, binary.BigEndian.AppendUint64(nil, 2))
	f.Fuzz(func(t *testing.T, kind byte, body []byte) {
		tr := &TCPTransport{log: zaptest.NewLogger(t), peers: map[uint64]*peer{}}
		tr.live.start(time.Second)
		if checkFrameLength(kind, len(body)) != nil {
			return // refused before its body is read
		}
		_ = tr.deliver(kind, body)
	})
}

func TestTicksFallOnMultiplesOfTheTickSoThatGroupsTickTogether(t *testing.T) {
	t.Parallel()
	every := 50 * time.Millisecond
	base := time.Unix(1_800_000_000, 0) // a multiple of every
	for _, tc := range []struct {
		after, want time.Duration
	}{
		{0, every},
		{time.Nanosecond, every - time.Nanosecond},
		{20 * time.Millisecond, 30 * time.Millisecond},
		{every - time.Nanosecond, time.Nanosecond},
		{3*every + time.Millisecond, every - time.Millisecond},
	} {
		if got := untilTick(base.Add(tc.after), every); got != tc.want {
			t.Errorf("%v after a tick: the next in %v, want %v", tc.after, got, tc.want)
		}
	}
}

func TestAGroupsBusyNodeHoldsUpNoOtherGroupsMessages(t *testing.T) {
	t.Parallel()
	// A node whose raft goroutine stands still: nothing takes from its
	// queue, which holds nothing more.
	stuck := &Node{inbox: newQueue[raftpb.Message](0), donec: make(chan struct{})}
	if err := stuck.stepWithin(raftpb.Message{}, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a full node took a message, or said %v", err)
	}
	tr := listen(t, 1, "127.0.0.1:0")
	defer tr.Close()
	tr.AttachGroup(0, stuck)
	if _, wait := tr.nodeOf(0); wait != time.Second {
		t.Errorf("alone, a group's messages wait %v for its node, want a second", wait)
	}
	tr.AttachGroup(1, stuck)
	for _, g := range []uint64{0, 1} {
		if _, wait := tr.nodeOf(g); wait != 0 {
			t.Errorf("beside another group, group %d's messages wait %v for its node, want none", g, wait)
		}
	}
}

// TestASeededGroupStartsFromItsSnapshotAndGoesOnFromItsIndex seeds group
// 7 on two of three members' stores with the same state at index 100, as
// a split would: their nodes start with that state, elect a leader, and
// append after index 100; the third member, which missed the seed, joins
// and gets the state from the leader; a member restarted catches up; a
// group that holds a log is not seeded again.
func TestASeededGroupStartsFromItsSnapshotAndGoesOnFromItsIndex(t *testing.T) {
	t.Parallel()
	const group, at = 7, 100
	state := &setMachine{set: map[string]bool{"a": true, "b": true, "c": true}}
	write, _ := state.Snapshot()
	seed := func(dir string) error {
		store, err := OpenStore(dir, zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		return store.SeedGroup(group, at, []uint64{3, 1, 2}, write)
	}
	addrs := map[uint64]string{}
	trs := map[uint64]*TCPTransport{}
	dirs := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		trs[id] = listen(t, id, "127.0.0.1:0")
		addrs[id], dirs[id] = trs[id].Addr().String(), t.TempDir()
	}
	members := map[uint64]*groupMember{}
	for id := uint64(1); id <= 2; id++ {
		if err := seed(dirs[id]); err != nil {
			t.Fatal(err)
		}
		members[id] = startGroupMember(t, id, dirs[id], trs[id], addrs, []uint64{group}, groupOptions{})
		if want := map[string]bool{"a": true, "b": true, "c": true}; !members[id].states[group].equals(want) {
			t.Fatalf("member %d starts with %v, want the seeded %v", id, members[id].states[group], want)
		}
	}
	members[3] = startGroupMember(t, 3, dirs[3], trs[3], addrs, []uint64{group}, groupOptions{join: true})
	defer func() {
		for _, m := range members {
			m.stop(t)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	propose := func(id uint64, v string) Outcome {
		t.Helper()
		n := members[id].nodes[group]
		o := n.Propose(ctx, []byte(v)).Wait(ctx)
		for ; o.Err != nil; o = n.Propose(ctx, []byte(v)).Wait(ctx) {
			if ctx.Err() != nil {
				t.Fatalf("propose %s through member %d: %v", v, id, o.Err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return o
	}
	converged := func(want map[string]bool) {
		t.Helper()
		for id, m := range members {
			for !m.states[group].equals(want) {
				if ctx.Err() != nil {
					t.Fatalf("member %d holds %v, want %v", id, m.states[group], slices.Sorted(maps.Keys(want)))
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	if o := propose(1, "d"); o.Index <= at+1 {
		t.Errorf("the first write after the seed applied at index %d, want past %d (and the leader's own entry)", o.Index, at+1)
	}
	converged(map[string]bool{"a": true, "b": true, "c": true, "d": true})

	members[3].stop(t)
	delete(members, 3)
	if err := seed(dirs[3]); err == nil || !strings.Contains(err.Error(), "holds a log already") {
		t.Errorf("seeding a group that holds a log: %v", err)
	}
	propose(2, "e")
	members[3] = startGroupMember(t, 3, dirs[3], listen(t, 3, addrs[3]), addrs, []uint64{group}, groupOptions{})
	converged(map[string]bool{"a": true, "b": true, "c": true, "d": true, "e": true})

	store, err := OpenStore(t.TempDir(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, tc := range []struct {
		index  uint64
		voters []uint64
	}{{0, []uint64{1}}, {5, nil}, {5, []uint64{0, 1}}} {
		if err := store.SeedGroup(1, tc.index, tc.voters, write); err == nil {
			t.Errorf("SeedGroup at %d with voters %v: no error", tc.index, tc.voters)
		}
	}
}

// TestAGroupsProposalLostOnTheWayIsSentAgain: a follower of a group other
// than 0 sends its proposal again when the first send is lost, as the
// only group of a member does (resend.go): the group's transport tells
// which peers take copies.
func TestAGroupsProposalLostOnTheWayIsSentAgain(t *testing.T) {
	t.Parallel()
	const g = 5
	members, _ := startGroupCluster(t, []uint64{0, g}, groupOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var leader, follower uint64
	for leader == 0 {
		if ctx.Err() != nil {
			t.Fatal("no leader of group 5")
		}
		leader = members[1].nodes[g].Leader()
		time.Sleep(5 * time.Millisecond)
	}
	follower = leader%3 + 1
	f := members[follower]
	for !f.tr.(*TCPTransport).AnswersProbes(leader) || f.nodes[g].Leader() != leader {
		if ctx.Err() != nil {
			t.Fatal("the follower never learned that the leader takes copies")
		}
		f.tr.(*TCPTransport).Probe(leader) // as a server's member cards do
		time.Sleep(5 * time.Millisecond)
	}
	f.tr.(*TCPTransport).SetFilter(func(from, to uint64) bool { return to != leader })
	p := f.nodes[g].Propose(ctx, []byte("sent while cut off"))
	time.Sleep(100 * time.Millisecond)
	f.tr.(*TCPTransport).SetFilter(nil)
	if o := p.Wait(ctx); o.Err != nil {
		t.Fatalf("a proposal whose first send was lost: %v", o.Err)
	}
}
