package raftnode

import (
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// AnyMember, as from or to of MemNetwork.Drop and Delay, stands for every
// member (member id 0 is reserved, so it names nobody else).
const AnyMember uint64 = 0

// MemNetwork carries the raft traffic of members running in one process,
// for tests, as hashicorp/raft's InmemTransport does: each member's
// MemTransport joins it by id, and messages go to a member by id, addresses
// unused. It injects faults: Partition and Heal, and Drop and Delay on
// directed links. Each message is marshalled as on the wire and
// unmarshalled for its receiver, so members share no memory; each directed
// link has one goroutine and a bounded queue, so a slow member does not
// hold up the others and a full queue drops, as over TCP.
//
// A fault applies to the messages delivered after the call that sets it
// returns, those already queued included: once Partition returns, nothing
// crosses the cut.
type MemNetwork struct {
	// cut is held for reading by a delivery from its check of the
	// faults to its hand-off, and for writing by a change of the cuts, so
	// that a change is in effect when it returns.
	cut sync.RWMutex

	mu      sync.Mutex
	members map[uint64]*MemTransport // mu guards members, group, drop, delay, rng
	group   map[uint64]int           // a partition: each member's group; nil: none
	drop    map[memLink]float64      // the share of messages lost on a link
	delay   map[memLink]time.Duration
	rng     *rand.Rand
}

// memLink is a directed link; either end may be AnyMember.
type memLink struct{ from, to uint64 }

// NewMemNetwork returns a network without members or faults. Its losses
// are drawn from a fixed seed.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{
		members: map[uint64]*MemTransport{},
		drop:    map[memLink]float64{},
		delay:   map[memLink]time.Duration{},
		rng:     rand.New(rand.NewPCG(1, 2)),
	}
}

// NewTransport joins member id to the network, in place of a transport it
// had before (a restarted member), and returns its transport. Messages
// already queued for id go to the new one.
func (nw *MemNetwork) NewTransport(id uint64) *MemTransport {
	t := &MemTransport{id: id, nw: nw, links: map[uint64]*memQueue{}}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.members[id] = t
	return t
}

// Partition cuts every link between members of different groups, both
// ways. A member named in no group keeps its links to everyone. It
// replaces an earlier partition.
func (nw *MemNetwork) Partition(groups ...[]uint64) {
	g := map[uint64]int{}
	for i, members := range groups {
		for _, id := range members {
			g[id] = i
		}
	}
	nw.change(func() { nw.group = g })
}

// Heal lifts the partition and every drop and delay.
func (nw *MemNetwork) Heal() {
	nw.change(func() {
		nw.group = nil
		clear(nw.drop)
		clear(nw.delay)
	})
}

// Drop loses fraction (0 to 1) of the messages from member from to member
// to; either may be AnyMember. The most specific rule of a link applies:
// from and to named, then from, then to, then neither.
func (nw *MemNetwork) Drop(from, to uint64, fraction float64) {
	nw.change(func() { nw.drop[memLink{from, to}] = fraction })
}

// Delay holds the messages from member from to member to for d before
// delivering them, in order; either may be AnyMember, as in Drop. It
// applies to messages sent after it returns.
func (nw *MemNetwork) Delay(from, to uint64, d time.Duration) {
	nw.change(func() { nw.delay[memLink{from, to}] = d })
}

func (nw *MemNetwork) change(f func()) {
	nw.cut.Lock()
	defer nw.cut.Unlock()
	nw.mu.Lock()
	defer nw.mu.Unlock()
	f()
}

// ruleLocked is the rule of rules that applies to the link from -> to;
// the caller holds mu.
func ruleLocked[V any](rules map[memLink]V, from, to uint64) V {
	for _, l := range []memLink{{from, to}, {from, AnyMember}, {AnyMember, to}, {AnyMember, AnyMember}} {
		if v, ok := rules[l]; ok {
			return v
		}
	}
	var zero V
	return zero
}

// delayOf is how long a message sent now from -> to waits.
func (nw *MemNetwork) delayOf(from, to uint64) time.Duration {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return ruleLocked(nw.delay, from, to)
}

// pass decides whether a message from -> to gets through now, and returns
// its receiver if it does (nil if not, or if to is not on the network).
// The caller holds cut for reading.
func (nw *MemNetwork) pass(from, to uint64) *MemTransport {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.group != nil {
		gf, inF := nw.group[from]
		gt, inT := nw.group[to]
		if inF && inT && gf != gt {
			return nil
		}
	}
	if f := ruleLocked(nw.drop, from, to); f > 0 && nw.rng.Float64() < f {
		return nil
	}
	return nw.members[to]
}

func (nw *MemNetwork) leave(t *MemTransport) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.members[t.id] == t {
		delete(nw.members, t.id)
	}
}

// MemTransport is one member's transport on a MemNetwork. It is a
// Transport, and has TCPTransport's Attach, SendTouches, SendCard,
// SetCardHandler, SetFilter, SetDelay and Close, so that a server runs on
// either.
type MemTransport struct {
	id uint64
	nw *MemNetwork

	mu     sync.Mutex
	links  map[uint64]*memQueue // mu guards links, nodes, touch, card, filter, closed
	nodes  map[uint64]memNode   // by raft group (Attach: group 0; AttachGroup)
	touch  func(ids []int64)
	acks   touchAcks
	card   func(from uint64, card []byte)
	filter Filter
	closed bool
	wg     sync.WaitGroup
}

// memQueue is the queue of one directed link, drained by its goroutine.
type memQueue struct {
	to    uint64
	queue chan memFrame
	stop  chan struct{}
}

// memFrame is a message in a link's queue: a marshalled raft message,
// session touches, or a member card.
type memFrame struct {
	raft    []byte
	group   uint64 // of a raft message
	snap    bool   // a MsgSnap: its sender hears how it went
	touches []int64
	probe   bool      // after touches: asks for an ack
	ack     bool      // the answer to a probe
	card    []byte    // the sender's own copy; nil unless a card
	due     time.Time // when the link's delay has passed
}

// Attach connects the transport to the node it delivers to, and to the
// handler of forwarded session touches.
func (t *MemTransport) Attach(n *Node, touch func(ids []int64)) {
	t.mu.Lock()
	t.touch = touch
	t.mu.Unlock()
	if n != nil {
		t.AttachGroup(0, n)
	}
}

// memNode is what a transport delivers to for one group: its node's (or a
// test's) step and report.
type memNode struct {
	step   func(m raftpb.Message, wait time.Duration) error // wait: stepWait's
	report func(to uint64, snap bool, status raft.SnapshotStatus)
}

// AttachGroup connects the transport to the node of raft group g, as
// TCPTransport.AttachGroup does; nil detaches it.
func (t *MemTransport) AttachGroup(g uint64, n *Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n == nil {
		delete(t.nodes, g)
		return
	}
	if t.nodes == nil {
		t.nodes = map[uint64]memNode{}
	}
	t.nodes[g] = memNode{step: n.stepWithin, report: n.report}
}

// nodeOf is what group g's messages are delivered to, and how long one
// may wait for it (stepWait); ok is false if nothing is attached.
func (t *MemTransport) nodeOf(g uint64) (n memNode, wait time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodeLocked(g)
}

// nodeLocked is nodeOf with t.mu held.
func (t *MemTransport) nodeLocked(g uint64) (n memNode, wait time.Duration, ok bool) {
	n, ok = t.nodes[g]
	return n, stepWait(len(t.nodes) > 1), ok
}

// Group is the transport of raft group g's messages, as
// TCPTransport.Group is: the same links, each message naming its group.
func (t *MemTransport) Group(g uint64) Transport {
	if g == 0 {
		return t
	}
	return groupSender{t.sendRaft, g, t, nil}
}

// SetCardHandler installs h as the handler of the member cards that
// members send, as TCPTransport.SetCardHandler does (nil removes it). It
// is called on the goroutines of the links to this member, one per
// sender.
func (t *MemTransport) SetCardHandler(h func(from uint64, card []byte)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.card = h
}

// SetFilter installs f on this member's traffic both ways, as
// TCPTransport.SetFilter does (nil removes it). It is in effect when it
// returns.
func (t *MemTransport) SetFilter(f Filter) {
	t.nw.cut.Lock()
	defer t.nw.cut.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.filter = f
}

// SetDelay delays this member's outgoing messages by d, as
// TCPTransport.SetDelay does: it is Delay(id, AnyMember, d) of its
// network, and 0 removes that rule (Heal lifts it too).
func (t *MemTransport) SetDelay(d time.Duration) {
	t.nw.change(func() {
		if d == 0 {
			delete(t.nw.delay, memLink{t.id, AnyMember})
		} else {
			t.nw.delay[memLink{t.id, AnyMember}] = d
		}
	})
}

// Send queues raft messages (of group 0) for their members; it never
// blocks. Raft hears of a message that could not be queued.
func (t *MemTransport) Send(msgs []raftpb.Message) { t.sendRaft(0, msgs) }

func (t *MemTransport) sendRaft(group uint64, msgs []raftpb.Message) {
	for i := range msgs {
		m := &msgs[i]
		b, err := m.Marshal()
		f := memFrame{raft: b, group: group, snap: m.Type == raftpb.MsgSnap}
		if err != nil || !t.enqueue(m.To, f) {
			t.failed(m.To, f)
		}
	}
}

// SendTouches forwards the ids of sessions heard from to member to.
func (t *MemTransport) SendTouches(to uint64, ids []int64) {
	t.enqueue(to, memFrame{touches: ids})
	t.Probe(to)
}

// Probe is TCPTransport.Probe.
func (t *MemTransport) Probe(to uint64) {
	t.acks.sent(to, time.Now())
	t.enqueue(to, memFrame{probe: true})
}

// AnswersProbes is TCPTransport.AnswersProbes.
func (t *MemTransport) AnswersProbes(id uint64) bool { return t.acks.answers(id) }

// TouchesUnanswered is TCPTransport.TouchesUnanswered.
func (t *MemTransport) TouchesUnanswered(to uint64) time.Duration {
	return t.acks.unanswered(to, time.Now())
}

// SendCard sends member to this member's card, as TCPTransport.SendCard
// does; the receiver refuses a card over MaxCard. It does not keep card.
func (t *MemTransport) SendCard(to uint64, card []byte) {
	t.enqueue(to, memFrame{card: append([]byte{}, card...)})
	t.Probe(to)
}

func (t *MemTransport) enqueue(to uint64, f memFrame) bool {
	f.due = time.Now().Add(t.nw.delayOf(t.id, to))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || (t.filter != nil && !t.filter(t.id, to)) {
		return false
	}
	q := t.links[to]
	if q == nil {
		q = &memQueue{to: to, queue: make(chan memFrame, peerQueue), stop: make(chan struct{})}
		t.links[to] = q
		t.wg.Add(1)
		go t.carry(q)
	}
	select {
	case q.queue <- f:
		return true
	default:
		return false
	}
}

// carry is a link's goroutine: it delivers the link's frames in order,
// each once its delay has passed.
func (t *MemTransport) carry(q *memQueue) {
	defer t.wg.Done()
	for {
		var f memFrame
		select {
		case f = <-q.queue:
		case <-q.stop:
			return
		}
		if wait := time.Until(f.due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-q.stop:
				timer.Stop()
				return
			}
		}
		t.deliver(q.to, f)
	}
}

// deliver hands f to member to, if the faults let it through, and tells
// the sender's node of a message lost or a snapshot sent.
func (t *MemTransport) deliver(to uint64, f memFrame) {
	t.nw.cut.RLock()
	defer t.nw.cut.RUnlock()
	ok := false
	if r := t.nw.pass(t.id, to); r != nil {
		ok = r.receive(t.id, f)
	}
	switch {
	case f.raft == nil:
	case !ok:
		t.failed(to, f)
	case f.snap:
		t.reportTo(f.group, to, true, raft.SnapshotFinish)
	}
}

// receive takes a frame from member from, and reports whether it went in.
func (t *MemTransport) receive(from uint64, f memFrame) bool {
	t.mu.Lock()
	n, wait, ok := t.nodeLocked(f.group)
	touch, card, filter, closed := t.touch, t.card, t.filter, t.closed
	t.mu.Unlock()
	if closed || (filter != nil && !filter(from, t.id)) {
		return false
	}
	if f.card != nil {
		if len(f.card) > MaxCard {
			return false
		}
		if card != nil {
			card(from, f.card)
		}
		return true
	}
	switch {
	case f.probe:
		t.enqueue(from, memFrame{ack: true})
		return true
	case f.ack:
		t.acks.acked(from)
		return true
	case f.raft == nil:
		if touch != nil {
			touch(f.touches)
		}
		return true
	}
	var m raftpb.Message
	if !ok || m.Unmarshal(f.raft) != nil {
		return false
	}
	return n.step(m, wait) == nil
}

// failed tells raft that a message of f's group to member to was lost.
func (t *MemTransport) failed(to uint64, f memFrame) {
	t.reportTo(f.group, to, false, 0)
	if f.snap {
		t.reportTo(f.group, to, true, raft.SnapshotFailure)
	}
}

func (t *MemTransport) reportTo(group, to uint64, snap bool, status raft.SnapshotStatus) {
	if n, _, ok := t.nodeOf(group); ok {
		n.report(to, snap, status)
	}
}

// Close leaves the network, drops what is queued and waits for the link
// goroutines.
func (t *MemTransport) Close() error {
	t.nw.leave(t)
	t.mu.Lock()
	t.closed = true
	for to, q := range t.links {
		close(q.stop)
		delete(t.links, to)
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}
