package raftnode

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// Peer frames: a 4-byte big-endian length, a 1-byte kind, then the payload.
const (
	frameRaft    byte = 1 // a raftpb.Message
	frameTouches byte = 2 // session ids heard from, for the leader's expiry (8 bytes each)
	frameCard    byte = 3 // a member card: the sender's id (8 bytes), then the card
	frameProbe   byte = 4 // after touches: the sender's id (8 bytes), which asks for a frameAck
	frameAck     byte = 5 // the answer to a probe: the sender's id (8 bytes)
	// A raft message of a group other than 0 (docs/scale-out.md): the
	// group (8 bytes), then the raftpb.Message. Group 0's go as frameRaft,
	// as before groups; a member that does not know groups skips these.
	frameGroupRaft byte = 6
	// The sender's id (8 bytes), sent to a peer that was sent nothing else
	// for a tick while a group of the member may go quiescent
	// (liveness.go); older members skip it.
	frameAlive byte = 7
)

// MaxCard bounds a member card, the opaque payload of SendCard: a member
// refuses a bigger one from a peer as a bad frame.
const MaxCard = 64 << 10

// maxPeerFrame bounds a peer frame: a snapshot travels in one message.
const maxPeerFrame = 1 << 30

// peerQueue is how many messages wait for one peer at most; past it they are
// dropped and raft retries.
const peerQueue = 4096

// Filter decides whether a message to a peer goes out. Tests use it to
// drop traffic and cut partitions; nil lets everything through.
type Filter func(from, to uint64) bool

// TCPTransport carries raft messages between members over TCP: one
// connection and one sender goroutine with a bounded queue per peer,
// redialled with backoff, and one reader goroutine per accepted connection.
type TCPTransport struct {
	id  uint64
	log *zap.Logger
	ln  net.Listener
	tls peerTLS // zero: plaintext

	mu     sync.Mutex
	peers  map[uint64]*peer // mu guards peers, node, groups, touch, card, filter, groupFilter, conns, refused
	node   *Node
	groups map[uint64]*Node // the nodes of the groups other than 0 (AttachGroup)
	touch  func(ids []int64)
	acks   touchAcks
	card   func(from uint64, card []byte)
	filter Filter
	// groupFilter, for tests, drops the raft messages of a group that come
	// in from a peer, while the peer's other frames keep it alive.
	groupFilter func(group, from, to uint64) bool
	delay       time.Duration // added before each write, for tests
	conns       map[net.Conn]struct{}
	refused     map[string]string // remote host -> the last TLS handshake failure logged for it
	stopped     bool
	live        liveness
	closing     chan struct{} // closed by Close
	wg          sync.WaitGroup
}

// outFrame is an encoded frame waiting for its peer.
type outFrame struct {
	b     []byte
	group uint64 // of a raft message
	raft  bool   // a raft message: raft hears when it could not be sent
	snap  bool   // a MsgSnap: raft hears whether it was sent
}

type peer struct {
	id    uint64
	addr  string
	queue chan outFrame
	stop  chan struct{}
	sent  atomic.Int64 // unix nanoseconds of the last frame queued

	lastTLSErr string // the last TLS failure dialing it, logged once (send's goroutine only)
}

// NewTCPTransport listens on addr for member id. peers maps every other
// member's id to its peer address.
func NewTCPTransport(id uint64, addr string, peers map[uint64]string, log *zap.Logger, opts ...TransportOption) (*TCPTransport, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for peers: %w", err)
	}
	t := &TCPTransport{id: id, log: log, ln: ln, peers: map[uint64]*peer{}, conns: map[net.Conn]struct{}{}, refused: map[string]string{}, closing: make(chan struct{})}
	for _, opt := range opts {
		opt(t)
	}
	if t.tls.listen != nil {
		t.ln = tls.NewListener(ln, t.tls.listen)
	}
	for pid, paddr := range peers {
		if pid != id {
			t.AddPeer(pid, paddr)
		}
	}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// Addr is the address the transport listens on.
func (t *TCPTransport) Addr() net.Addr { return t.ln.Addr() }

// Attach connects the transport to the node it delivers to, and to the
// handler of forwarded session touches.
func (t *TCPTransport) Attach(n *Node, touch func(ids []int64)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.node, t.touch = n, touch
}

// AttachGroup connects the transport to the node of raft group g, whose
// messages travel through Group(g); nil detaches it. The messages of a
// group with no node are dropped (raft sends them again).
func (t *TCPTransport) AttachGroup(g uint64, n *Node) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case g == 0:
		t.node = n
	case n == nil:
		delete(t.groups, g)
	default:
		if t.groups == nil {
			t.groups = map[uint64]*Node{}
		}
		t.groups[g] = n
	}
}

// nodeOf is the node of group g, nil if none is attached, and how long a
// message for it may wait for the node to take it (stepWait).
func (t *TCPTransport) nodeOf(g uint64) (*Node, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nodeLocked(g)
}

// nodeLocked is nodeOf with t.mu held.
func (t *TCPTransport) nodeLocked(g uint64) (*Node, time.Duration) {
	wait := stepWait(len(t.groups) > 0)
	if g == 0 {
		return t.node, wait
	}
	return t.groups[g], wait
}

// stepWait is how long a peer's reader waits for a busy node to take a
// message before it drops it (raft takes that as a message lost): a
// second when the member runs one group, and not at all when it runs
// several, whose messages share the connection, so that a group whose
// node stands still (a long fsync, a snapshot's restore) holds up only
// its own messages.
func stepWait(groups bool) time.Duration {
	if groups {
		return 0
	}
	return time.Second
}

// Group is the transport of raft group g's messages, over the same
// connections to the same peers: its frames name the group. Group 0's is
// the transport itself, whose frames are those of a member before groups.
func (t *TCPTransport) Group(g uint64) Transport {
	if g == 0 {
		return t
	}
	return groupSender{t.sendRaft, g, t, t}
}

// groupSender is a transport's Group: its sender, with the group; what
// the member's transport knows of its peers, which a group's node asks
// as a member's only node would: whether a peer takes copies of
// proposals (resend.go), and the peers' liveness if the transport judges
// it.
type groupSender struct {
	send   func(group uint64, msgs []raftpb.Message)
	group  uint64
	probes prober
	live   livenessTransport // nil: none
}

func (g groupSender) Send(msgs []raftpb.Message) { g.send(g.group, msgs) }

func (g groupSender) AnswersProbes(id uint64) bool { return g.probes.AnswersProbes(id) }

func (g groupSender) peerAlive(id uint64) bool { return g.live != nil && g.live.peerAlive(id) }

func (g groupSender) watchLiveness(n *Node) {
	if g.live != nil {
		g.live.watchLiveness(n)
	}
}

// peerAlive reports whether a frame of member id came within the
// liveness timeout (liveness.go); false before anything asked for it.
func (t *TCPTransport) peerAlive(id uint64) bool { return t.live.alive(id, time.Now()) }

// watchLiveness starts judging the peers' lives, with n's tick and
// election timeout, if nothing started it before.
func (t *TCPTransport) watchLiveness(n *Node) {
	if !t.live.start(time.Duration(n.cfg.ElectionTicks) * n.cfg.TickInterval) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.wg.Add(1)
	go t.keepAlive(n.cfg.TickInterval)
}

// keepAlive, every interval, sends an alive frame to each peer that was
// queued nothing else in that time, and tells every node when peers stop
// being heard from, so that a quiescent follower whose leader died wakes
// and elects another.
func (t *TCPTransport) keepAlive(every time.Duration) {
	defer t.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.closing:
			return
		case now := <-tick.C:
			t.mu.Lock()
			peers := make([]*peer, 0, len(t.peers))
			for _, p := range t.peers {
				peers = append(peers, p)
			}
			nodes := make([]*Node, 0, 1+len(t.groups))
			if t.node != nil {
				nodes = append(nodes, t.node)
			}
			for _, n := range t.groups {
				nodes = append(nodes, n)
			}
			t.mu.Unlock()
			for _, p := range peers {
				if now.UnixNano()-p.sent.Load() >= int64(every) {
					t.enqueue(p.id, outFrame{b: t.idFrame(frameAlive)})
				}
			}
			if len(t.live.sweep(now)) > 0 {
				for _, n := range nodes {
					n.livenessChanged()
				}
			}
		}
	}
}

// SetCardHandler installs h as the handler of the member cards that
// peers send (nil removes it). It is called on the transport's reader
// goroutines, one per peer connection and so possibly at once, with the
// id of the member that sent the card; h owns card, and must not block,
// for raft messages from that member wait behind it.
func (t *TCPTransport) SetCardHandler(h func(from uint64, card []byte)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.card = h
}

// SetFilter installs f (nil removes it).
func (t *TCPTransport) SetFilter(f Filter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.filter = f
}

// SetGroupFilter installs f on the raft messages that come in (nil removes
// it): a message of group g from a peer is taken only if f(g, from, to) is
// true. The peer's other frames still count as heard from it, so that a
// test can hold one group of a member back while its other groups and its
// liveness go on.
func (t *TCPTransport) SetGroupFilter(f func(group, from, to uint64) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.groupFilter = f
}

// SetDelay holds every outgoing batch of frames for d before writing it,
// for tests of slow networks (0 removes the delay).
func (t *TCPTransport) SetDelay(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.delay = d
}

// AddPeer starts sending to member id at addr (replacing its address).
func (t *TCPTransport) AddPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.peers[id]; old != nil {
		if old.addr == addr {
			return
		}
		close(old.stop)
	}
	p := &peer{id: id, addr: addr, queue: make(chan outFrame, peerQueue), stop: make(chan struct{})}
	t.peers[id] = p
	t.wg.Add(1)
	go t.send(p)
}

// RemovePeer stops sending to member id.
func (t *TCPTransport) RemovePeer(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[id]; p != nil {
		close(p.stop)
		delete(t.peers, id)
	}
}

// Send queues raft messages (of group 0) for their peers; it never
// blocks.
func (t *TCPTransport) Send(msgs []raftpb.Message) { t.sendRaft(0, msgs) }

func (t *TCPTransport) sendRaft(group uint64, msgs []raftpb.Message) {
	head, kind := 5, frameRaft
	if group != 0 {
		head, kind = 13, frameGroupRaft
	}
	for i := range msgs {
		m := &msgs[i]
		b := make([]byte, head+m.Size())
		if _, err := m.MarshalTo(b[head:]); err != nil {
			t.log.Error("marshal raft message", zap.Error(err))
			continue
		}
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		b[4] = kind
		if group != 0 {
			binary.BigEndian.PutUint64(b[5:], group)
		}
		f := outFrame{b: b, group: group, raft: true, snap: m.Type == raftpb.MsgSnap}
		if !t.enqueue(m.To, f) {
			t.failed(m.To, f)
		}
	}
}

// SendTouches forwards the ids of sessions heard from to member to.
func (t *TCPTransport) SendTouches(to uint64, ids []int64) {
	b := make([]byte, 5, 5+8*len(ids))
	binary.BigEndian.PutUint32(b, uint32(1+8*len(ids)))
	b[4] = frameTouches
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
	}
	t.enqueue(to, outFrame{b: b})
	t.Probe(to)
}

// Probe sends member to a probe, which it answers at once: what was
// queued for it before has arrived when the answer comes
// (TouchesUnanswered).
func (t *TCPTransport) Probe(to uint64) {
	t.acks.sent(to, time.Now())
	t.enqueue(to, outFrame{b: t.idFrame(frameProbe)})
}

// idFrame is a frame of kind that carries this member's id.
func (t *TCPTransport) idFrame(kind byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 9)
	b = append(b, kind)
	return binary.BigEndian.AppendUint64(b, t.id)
}

// AnswersProbes reports whether member id has answered a probe: it is of
// a version that knows them (and copies of proposals, resend.go).
func (t *TCPTransport) AnswersProbes(id uint64) bool { return t.acks.answers(id) }

// TouchesUnanswered is how long the touches sent to member to have gone
// without their ack: 0 when they all arrived, and when to is a member
// that never answered (see touchAcks).
func (t *TCPTransport) TouchesUnanswered(to uint64) time.Duration {
	return t.acks.unanswered(to, time.Now())
}

// SendCard sends member to this member's card, an opaque payload for its
// card handler. It never blocks, and drops the card if it cannot be
// queued, or if it is over MaxCard: the peer would refuse it, and close a
// connection that also carries raft's messages. It does not keep card.
func (t *TCPTransport) SendCard(to uint64, card []byte) {
	if len(card) > MaxCard {
		t.log.Error("member card over its limit; not sent", zap.Int("bytes", len(card)), zap.Int("limit", MaxCard))
		return
	}
	b := make([]byte, 13, 13+len(card))
	binary.BigEndian.PutUint32(b, uint32(1+8+len(card)))
	b[4] = frameCard
	binary.BigEndian.PutUint64(b[5:], t.id)
	b = append(b, card...)
	t.enqueue(to, outFrame{b: b})
	t.Probe(to) // so that every member learns early which peers answer probes
}

func (t *TCPTransport) enqueue(to uint64, f outFrame) bool {
	t.mu.Lock()
	p, filter := t.peers[to], t.filter
	t.mu.Unlock()
	if p == nil || (filter != nil && !filter(t.id, to)) {
		return false
	}
	select {
	case p.queue <- f:
		p.sent.Store(time.Now().UnixNano())
		return true
	default:
		return false
	}
}

// failed tells raft that a message of its group to a peer did not go out.
func (t *TCPTransport) failed(to uint64, f outFrame) {
	n, _ := t.nodeOf(f.group)
	if !f.raft || n == nil {
		return
	}
	n.report(to, false, 0)
	if f.snap {
		n.report(to, true, raft.SnapshotFailure)
	}
}

// send is a peer's sender goroutine.
func (t *TCPTransport) send(p *peer) {
	defer t.wg.Done()
	var conn net.Conn
	var w *bufio.Writer
	backoff := 50 * time.Millisecond
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		var f outFrame
		select {
		case f = <-p.queue:
		case <-p.stop:
			return
		}
		if conn == nil {
			c, err := t.dial(p)
			if err != nil {
				t.failed(p.id, f)
				select {
				case <-time.After(backoff):
				case <-p.stop:
					return
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			conn, w, backoff = c, bufio.NewWriterSize(c, 64<<10), 50*time.Millisecond
		}
		if err := t.write(conn, w, f, p); err != nil {
			t.log.Debug("peer write failed", zap.Uint64("peer", p.id), zap.Error(err))
			conn.Close()
			conn = nil
		}
	}
}

// write writes f and whatever else is queued for p, then flushes. Raft hears
// of every message that could not be sent and of every snapshot.
func (t *TCPTransport) write(conn net.Conn, w *bufio.Writer, f outFrame, p *peer) error {
	t.mu.Lock()
	delay := t.delay
	t.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	batch := []outFrame{f}
	for more := true; more; {
		select {
		case f := <-p.queue:
			batch = append(batch, f)
		default:
			more = false
		}
	}
	var err error
	for _, f := range batch {
		if err == nil {
			_, err = w.Write(f.b)
		}
	}
	if err == nil {
		err = w.Flush()
	}
	for _, f := range batch {
		switch {
		case err != nil:
			t.failed(p.id, f)
		case f.snap:
			t.snapshotSent(p.id, f.group)
		}
	}
	return err
}

func (t *TCPTransport) snapshotSent(to uint64, group uint64) {
	if n, _ := t.nodeOf(group); n != nil {
		n.report(to, true, raft.SnapshotFinish)
	}
}

func (t *TCPTransport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.conns[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.receive(c)
	}
}

// receive reads frames from one peer connection.
func (t *TCPTransport) receive(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		c.Close()
	}()
	if !t.handshake(c) {
		return
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [5]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[:4]))
		if n < 1 || n > maxPeerFrame {
			t.log.Warn("bad peer frame; closing", zap.Int("length", n))
			return
		}
		if err := checkFrameLength(hdr[4], n-1); err != nil {
			t.log.Warn("bad peer frame; closing", zap.Error(err))
			return
		}
		body, err := readBody(r, n-1)
		if err != nil {
			return
		}
		if err := t.deliver(hdr[4], body); err != nil {
			t.log.Warn("bad peer frame; closing", zap.Error(err))
			return
		}
	}
}

// readBody reads a frame body of n bytes. A long one is read a chunk at a
// time, so that memory follows what arrives: a peer that is not one of
// ours (a TLS member dialing a plaintext peer port, say) has its first
// bytes read as a length of hundreds of megabytes, and sends none of them.
func readBody(r io.Reader, n int) ([]byte, error) {
	const chunk = 1 << 20
	body := make([]byte, 0, min(n, chunk))
	for len(body) < n {
		m := min(n-len(body), chunk)
		body = slices.Grow(body, m)[:len(body)+m]
		if _, err := io.ReadFull(r, body[len(body)-m:]); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// checkFrameLength refuses a frame body whose length its kind does not
// allow, before the body is read.
func checkFrameLength(kind byte, n int) error {
	switch {
	case kind == frameCard && (n < 8 || n > 8+MaxCard):
		return fmt.Errorf("card frame of %d bytes (a card is at most %d)", n, MaxCard)
	case (kind == frameProbe || kind == frameAck || kind == frameAlive) && n != 8:
		return fmt.Errorf("probe, ack or alive frame of %d bytes", n)
	case kind == frameGroupRaft && n < 8:
		return fmt.Errorf("group raft frame of %d bytes", n)
	}
	return nil
}

func (t *TCPTransport) deliver(kind byte, body []byte) error {
	var group uint64 // of a raft message
	if kind == frameGroupRaft {
		if err := checkFrameLength(kind, len(body)); err != nil {
			return err
		}
		group, body = binary.BigEndian.Uint64(body), body[8:]
	}
	t.mu.Lock()
	n, wait := t.nodeLocked(group)
	touch, card, filter, groupFilter := t.touch, t.card, t.filter, t.groupFilter
	t.mu.Unlock()
	switch kind {
	case frameRaft, frameGroupRaft:
		var m raftpb.Message
		if err := m.Unmarshal(body); err != nil {
			return err
		}
		if filter != nil && !filter(m.From, t.id) {
			return nil
		}
		t.live.heardFrom(m.From, time.Now())
		if n == nil || groupFilter != nil && !groupFilter(group, m.From, t.id) {
			return nil
		}
		if err := n.stepWithin(m, wait); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil // the node is stopping
		}
	case frameTouches:
		if len(body)%8 != 0 {
			return fmt.Errorf("touch frame of %d bytes", len(body))
		}
		ids := make([]int64, len(body)/8)
		for i := range ids {
			ids[i] = int64(binary.BigEndian.Uint64(body[8*i:]))
		}
		if touch != nil {
			touch(ids)
		}
	case frameCard:
		if err := checkFrameLength(kind, len(body)); err != nil {
			return err
		}
		from := binary.BigEndian.Uint64(body)
		if filter != nil && !filter(from, t.id) {
			return nil
		}
		t.live.heardFrom(from, time.Now())
		if card != nil {
			card(from, body[8:])
		}
	case frameProbe, frameAck, frameAlive:
		from := binary.BigEndian.Uint64(body)
		switch {
		case filter != nil && !filter(from, t.id):
			return nil
		case kind == frameAlive:
		case kind == frameProbe:
			t.enqueue(from, outFrame{b: t.idFrame(frameAck)})
		default:
			t.acks.acked(from)
		}
		t.live.heardFrom(from, time.Now())
	default:
		// A kind a newer member sends (as cards were once new): skipped,
		// so that members of two versions keep their connection during a
		// rolling upgrade.
	}
	return nil
}

// Close stops the transport and waits for its goroutines.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if !t.stopped {
		close(t.closing)
	}
	t.stopped = true
	for id, p := range t.peers {
		close(p.stop)
		delete(t.peers, id)
	}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	err := t.ln.Close()
	t.wg.Wait()
	return err
}
