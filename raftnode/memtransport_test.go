package raftnode

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// waitFor polls cond until it holds, failing the test after a deadline far
// beyond what a loaded machine needs: it waits for a condition, never for
// a time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
	}
}

// recv takes the next value from ch, failing the test after 30s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("nothing arrived in 30s")
		var zero T
		return zero
	}
}

// memEnd is a member of a MemNetwork without a raft node: what reaches it
// lands in got, and what its transport tells its node lands in reports.
type memEnd struct {
	tr      *MemTransport
	got     chan raftpb.Message
	touched chan []int64
	reports chan report
	step    func(raftpb.Message) error // nil: put in got
}

func joinEnd(t *testing.T, nw *MemNetwork, id uint64) *memEnd {
	t.Helper()
	e := &memEnd{tr: nw.NewTransport(id), got: make(chan raftpb.Message, 1000),
		touched: make(chan []int64, 10), reports: make(chan report, 1000)}
	e.tr.Attach(nil, func(ids []int64) { e.touched <- ids })
	e.tr.mu.Lock()
	e.tr.nodes = map[uint64]memNode{0: {
		step: func(m raftpb.Message, _ time.Duration) error {
			if e.step != nil {
				return e.step(m)
			}
			e.got <- m
			return nil
		},
		report: func(to uint64, snap bool, status raft.SnapshotStatus) { e.reports <- report{to, snap, status} },
	}}
	e.tr.mu.Unlock()
	t.Cleanup(func() { e.tr.Close() })
	return e
}

// send sends one message of type typ, numbered by its index, to member to.
func (e *memEnd) send(to uint64, typ raftpb.MessageType, index uint64) {
	e.tr.Send([]raftpb.Message{{Type: typ, From: e.tr.id, To: to, Index: index}})
}

// next waits for the next message or report, whichever is first.
func (e *memEnd) next(t *testing.T) (*raftpb.Message, *report) {
	t.Helper()
	select {
	case m := <-e.got:
		return &m, nil
	case r := <-e.reports:
		return nil, &r
	case <-time.After(30 * time.Second):
		t.Fatal("neither a message nor a report in 30s")
		return nil, nil
	}
}

// A message across the network either arrives or its sender hears it was
// lost: the tests below wait for one or the other, never for a time.
func TestTheMemoryNetworkDeliversWhatItsFaultsLetThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		faults  func(nw *MemNetwork)
		from    uint64
		to      uint64
		arrives bool
	}{
		{"a message reaches its member", func(*MemNetwork) {}, 1, 2, true},
		{"a partition cuts the links between groups", func(nw *MemNetwork) { nw.Partition([]uint64{1}, []uint64{2, 3}) }, 1, 2, false},
		{"a partition cuts them both ways", func(nw *MemNetwork) { nw.Partition([]uint64{1}, []uint64{2, 3}) }, 2, 1, false},
		{"a partition keeps the links within a group", func(nw *MemNetwork) { nw.Partition([]uint64{1}, []uint64{2, 3}) }, 2, 3, true},
		{"a member in no group keeps its links", func(nw *MemNetwork) { nw.Partition([]uint64{1}, []uint64{2}) }, 3, 1, true},
		{"heal lifts a partition", func(nw *MemNetwork) { nw.Partition([]uint64{1}, []uint64{2, 3}); nw.Heal() }, 1, 2, true},
		{"a link dropping everything drops its messages", func(nw *MemNetwork) { nw.Drop(1, 2, 1) }, 1, 2, false},
		{"a dropping link drops one way only", func(nw *MemNetwork) { nw.Drop(1, 2, 1) }, 2, 1, true},
		{"a rule from any member covers every sender", func(nw *MemNetwork) { nw.Drop(AnyMember, 2, 1) }, 3, 2, false},
		{"a rule to any member covers every receiver", func(nw *MemNetwork) { nw.Drop(1, AnyMember, 1) }, 1, 3, false},
		{"the rule naming the link wins over a wider one", func(nw *MemNetwork) { nw.Drop(AnyMember, AnyMember, 1); nw.Drop(1, 2, 0) }, 1, 2, true},
		{"heal lifts drops", func(nw *MemNetwork) { nw.Drop(AnyMember, AnyMember, 1); nw.Heal() }, 1, 2, true},
		{"a member's filter stops what it sends", func(nw *MemNetwork) {
			nw.members[1].SetFilter(func(from, to uint64) bool { return to != 2 })
		}, 1, 2, false},
		{"a member's filter stops what it receives", func(nw *MemNetwork) {
			nw.members[2].SetFilter(func(from, to uint64) bool { return from != 1 })
		}, 1, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw := NewMemNetwork()
			ends := map[uint64]*memEnd{}
			for id := uint64(1); id <= 3; id++ {
				ends[id] = joinEnd(t, nw, id)
			}
			tt.faults(nw)
			ends[tt.from].send(tt.to, raftpb.MsgApp, 7)
			var got *raftpb.Message
			var rep *report
			select {
			case m := <-ends[tt.to].got:
				got = &m
			case r := <-ends[tt.from].reports:
				rep = &r
			case <-time.After(30 * time.Second):
				t.Fatal("neither a delivery nor a report in 30s")
			}
			switch {
			case tt.arrives && got == nil:
				t.Fatalf("lost (reported %+v), want it delivered", *rep)
			case !tt.arrives && got != nil:
				t.Fatalf("delivered %v, want it lost", got.Type)
			case got != nil && (got.From != tt.from || got.Index != 7):
				t.Fatalf("delivered %+v, want the message %d sent", got, tt.from)
			case rep != nil && (rep.to != tt.to || rep.snap):
				t.Fatalf("reported %+v, want %d unreachable", *rep, tt.to)
			}
		})
	}
}

func TestAMemberOffTheNetworkIsReportedUnreachable(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	b.tr.Close()
	a.send(2, raftpb.MsgHeartbeat, 0)
	if _, r := a.next(t); r == nil || r.to != 2 || r.snap {
		t.Fatalf("report %+v, want 2 unreachable", r)
	}
	// A restarted member takes its place and gets what is sent to it.
	c := joinEnd(t, nw, 2)
	a.send(2, raftpb.MsgHeartbeat, 1)
	if m := recv(t, c.got); m.Index != 1 {
		t.Fatalf("the restarted member got %+v", m)
	}
}

func TestASnapshotsSenderHearsWhetherItWasDelivered(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: &raftpb.Snapshot{Data: []byte("state")}}})
	if m := recv(t, b.got); string(m.Snapshot.Data) != "state" {
		t.Fatalf("snapshot delivered as %+v", m.Snapshot)
	}
	if r := recv(t, a.reports); r != (report{2, true, raft.SnapshotFinish}) {
		t.Fatalf("report %+v, want the snapshot finished", r)
	}
	nw.Partition([]uint64{1}, []uint64{2})
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgSnap, From: 1, To: 2, Snapshot: &raftpb.Snapshot{Data: []byte("state")}}})
	want := []report{{2, false, 0}, {2, true, raft.SnapshotFailure}}
	if got := []report{recv(t, a.reports), recv(t, a.reports)}; !slices.Equal(got, want) {
		t.Fatalf("reports %+v, want %+v", got, want)
	}
}

func TestTheReceiverGetsItsOwnCopyOfAMessage(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	data := []byte("entry")
	a.tr.Send([]raftpb.Message{{Type: raftpb.MsgApp, From: 1, To: 2, Entries: []raftpb.Entry{{Index: 1, Data: data}}}})
	m := recv(t, b.got)
	data[0] = 'X'
	if string(m.Entries[0].Data) != "entry" {
		t.Fatalf("the receiver's entry changed with the sender's memory: %q", m.Entries[0].Data)
	}
}

func TestTouchesReachTheMembersHandler(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	a.tr.SendTouches(2, []int64{7, 8})
	if ids := recv(t, b.touched); !slices.Equal(ids, []int64{7, 8}) {
		t.Fatalf("touched %v, want [7 8]", ids)
	}
}

func TestADelayedLinkDeliversInOrderAfterItsDelay(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	const d = 50 * time.Millisecond
	nw.Delay(1, 2, d)
	sent := time.Now()
	for i := uint64(1); i <= 10; i++ {
		a.send(2, raftpb.MsgApp, i)
	}
	for i := uint64(1); i <= 10; i++ {
		if m := recv(t, b.got); m.Index != i {
			t.Fatalf("message %d arrived in place %d", m.Index, i)
		}
	}
	// A lower bound only: a slow machine makes it later, never sooner.
	if took := time.Since(sent); took < d {
		t.Fatalf("the messages arrived after %v, before the link's delay of %v", took, d)
	}
}

// SetDelay(0) takes the member's own delay away, as on TCP, and leaves the
// network's wider one in place.
func TestAMembersDelayRemovedLeavesTheNetworksDelay(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	const d = 50 * time.Millisecond
	nw.Delay(AnyMember, AnyMember, d)
	a.tr.SetDelay(time.Hour)
	a.tr.SetDelay(0)
	sent := time.Now()
	a.send(2, raftpb.MsgApp, 1)
	recv(t, b.got) // not an hour later
	if took := time.Since(sent); took < d {
		t.Fatalf("the message arrived after %v, before the network's delay of %v", took, d)
	}
}

func TestALossyLinkDropsAboutItsShare(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	nw.Drop(1, 2, 0.5)
	const n = 400
	for i := range uint64(n) {
		a.send(2, raftpb.MsgHeartbeat, i)
	}
	delivered, lost := 0, 0
	for delivered+lost < n {
		select {
		case <-b.got:
			delivered++
		case <-a.reports:
			lost++
		case <-time.After(30 * time.Second):
			t.Fatalf("%d delivered and %d lost of %d after 30s", delivered, lost, n)
		}
	}
	// The losses come from a fixed seed: the bounds are wide, not lucky.
	if delivered < n/4 || lost < n/4 {
		t.Fatalf("%d delivered and %d lost of %d, want about half each", delivered, lost, n)
	}
}

// A partition is in effect once Partition returns, for the messages
// already queued too: it waits for a delivery under way, and the message
// queued behind it is lost.
func TestAPartitionIsInEffectWhenItReturns(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	b := joinEnd(t, nw, 2)
	entered, gate := make(chan struct{}), make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) }) // before the transports close
	b.step = func(m raftpb.Message) error {
		if m.Index == 1 {
			close(entered)
			<-gate
		}
		b.got <- m
		return nil
	}
	a.send(2, raftpb.MsgApp, 1)
	a.send(2, raftpb.MsgApp, 2)
	recv(t, entered) // message 1 is being delivered, 2 waits behind it
	parted := make(chan struct{})
	go func() {
		nw.Partition([]uint64{1}, []uint64{2})
		close(parted)
	}()
	// Partition waits for the delivery under way, and keeps the next one
	// out from then on.
	waitFor(t, "Partition to wait for the delivery", func() bool {
		if nw.cut.TryRLock() {
			nw.cut.RUnlock()
			return false
		}
		return true
	})
	select {
	case <-parted:
		t.Fatal("Partition returned while a delivery was under way")
	default:
	}
	open.Do(func() { close(gate) })
	recv(t, parted)
	if m := recv(t, b.got); m.Index != 1 {
		t.Fatalf("delivered %d first, want 1", m.Index)
	}
	if _, r := a.next(t); r == nil || r.to != 2 {
		t.Fatalf("report %+v, want message 2 lost", r)
	}
	select {
	case m := <-b.got:
		t.Fatalf("message %d crossed the partition", m.Index)
	default:
	}
}

// memGroup is a raft group of counters over a MemNetwork.
type memGroup struct {
	nw    *MemNetwork
	nodes map[uint64]*Node
	sms   map[uint64]*counter
}

func startMemGroup(t *testing.T, n int) *memGroup {
	t.Helper()
	return startMemGroupWith(t, n, nil)
}

// leader waits until the members in ids agree on a leader among them.
func (g *memGroup) leader(t *testing.T, ids ...uint64) uint64 {
	t.Helper()
	var lead uint64
	waitFor(t, fmt.Sprintf("a leader among %v", ids), func() bool {
		lead = g.nodes[ids[0]].Leader()
		for _, id := range ids {
			if g.nodes[id].Leader() != lead {
				return false
			}
		}
		return slices.Contains(ids, lead)
	})
	return lead
}

func (g *memGroup) add(t *testing.T, id, v uint64) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return g.nodes[id].Propose(ctx, binary.BigEndian.AppendUint64(nil, v)).Wait(ctx)
}

func TestAGroupOnTheMemoryNetworkReplicatesEveryWrite(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	lead := g.leader(t, 1, 2, 3)
	var last Outcome
	for i := uint64(1); i <= 10; i++ {
		if last = g.add(t, lead, i); last.Err != nil {
			t.Fatal(last.Err)
		}
	}
	for id, n := range g.nodes {
		waitFor(t, fmt.Sprintf("member %d to apply %d", id, last.Index), func() bool { return n.Applied() >= last.Index })
		if got := g.sms[id].value(); got != 55 {
			t.Fatalf("member %d counts %d, want 55", id, got)
		}
	}
}

func TestALeaderCutOffByAPartitionIsReplacedAndCatchesUpAfterHeal(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	old := g.leader(t, 1, 2, 3)
	var rest []uint64
	for id := uint64(1); id <= 3; id++ {
		if id != old {
			rest = append(rest, id)
		}
	}
	g.nw.Partition([]uint64{old}, rest)
	lead := g.leader(t, rest...)
	if g.nodes[lead].Term() <= g.nodes[old].Term() {
		t.Fatalf("the new leader %d is in term %d, the old %d in %d", lead, g.nodes[lead].Term(), old, g.nodes[old].Term())
	}
	o := g.add(t, lead, 5)
	if o.Err != nil {
		t.Fatal(o.Err)
	}
	if g.nodes[old].Applied() >= o.Index {
		t.Fatalf("the member cut off applied %d, past the majority's write at %d", g.nodes[old].Applied(), o.Index)
	}
	g.nw.Heal()
	waitFor(t, "the old leader to catch up", func() bool { return g.nodes[old].Applied() >= o.Index })
	if got := g.sms[old].value(); got != 5 {
		t.Fatalf("the old leader counts %d after the heal, want 5", got)
	}
}

func TestAGroupCommitsOverLinksThatLoseAndDelay(t *testing.T) {
	t.Parallel()
	g := startMemGroup(t, 3)
	g.nw.Drop(AnyMember, AnyMember, 0.2)
	g.nw.Delay(AnyMember, AnyMember, 2*time.Millisecond)
	committed := 0
	for attempt := 0; committed < 20; attempt++ {
		if attempt == 500 {
			t.Fatalf("%d of 500 writes committed", committed)
		}
		if o := g.add(t, g.leader(t, 1, 2, 3), 1); o.Err == nil {
			committed++
		}
	}
	g.nw.Heal()
	// A leader change ends what was pending with its outcome unknown: such
	// a write may still commit, so the members count at least 20, and all
	// the same once they applied a write made after every other.
	last := g.add(t, g.leader(t, 1, 2, 3), 0)
	if last.Err != nil {
		t.Fatal(last.Err)
	}
	var counts []uint64
	for id, n := range g.nodes {
		waitFor(t, fmt.Sprintf("member %d to apply %d", id, last.Index), func() bool { return n.Applied() >= last.Index })
		counts = append(counts, g.sms[id].value())
	}
	if counts[0] < 20 || slices.Min(counts) != slices.Max(counts) {
		t.Fatalf("the members count %v, want the same, at least 20", counts)
	}
}

// Touches are followed by a probe the receiver answers: the sender can
// tell when what it sends stops arriving, though it still hears the
// receiver.
func TestUnansweredTouchesShowAOneWayCut(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	joinEnd(t, nw, 2)
	if d := a.tr.TouchesUnanswered(2); d != 0 {
		t.Fatalf("before any touch: unanswered for %v", d)
	}
	a.tr.SendTouches(2, []int64{7})
	waitFor(t, "the first probe's answer", func() bool {
		a.tr.acks.mu.Lock()
		defer a.tr.acks.mu.Unlock()
		return a.tr.acks.knows[2]
	})
	if d := a.tr.TouchesUnanswered(2); d != 0 {
		t.Fatalf("after the answer: unanswered for %v", d)
	}
	nw.Drop(1, 2, 1) // 1's messages are lost; 2's still reach 1
	a.tr.SendTouches(2, []int64{7})
	time.Sleep(50 * time.Millisecond)
	if d := a.tr.TouchesUnanswered(2); d < 50*time.Millisecond {
		t.Fatalf("touches lost for 50ms: unanswered for %v", d)
	}
	nw.Heal()
	a.tr.SendTouches(2, []int64{7})
	waitFor(t, "an answer after the heal", func() bool { return a.tr.TouchesUnanswered(2) == 0 })
}

// A member that never answered a probe may be of a version that skips
// them: its silence says nothing.
func TestAMemberThatNeverAnsweredIsNotCutOff(t *testing.T) {
	t.Parallel()
	nw := NewMemNetwork()
	a := joinEnd(t, nw, 1)
	nw.Drop(1, 2, 1)
	joinEnd(t, nw, 2)
	a.tr.SendTouches(2, []int64{7})
	time.Sleep(30 * time.Millisecond)
	if d := a.tr.TouchesUnanswered(2); d != 0 {
		t.Fatalf("unanswered for %v by a member that never answered", d)
	}
}
