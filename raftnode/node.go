// Package raftnode runs one member of a raft group (go.etcd.io/raft/v3) for
// a state machine: one goroutine drives a RawNode, makes each Ready durable
// in pebble with a single synced batch and sends its messages; another
// applies the committed entries and takes snapshots, so that the raft
// goroutine never waits for the state machine. Callers propose and wait
// for the apply result, and wait for linearizable reads with ReadIndex.
package raftnode

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/internal/quota"
	"github.com/cockroachdb/pebble/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"
)

// StateMachine is what the node replicates. Every method is called on the
// node's apply goroutine (Restore of the stored snapshot on Start's), one
// at a time, so the state machine needs no lock against itself; it needs
// one only for readers on other goroutines, and for the writes of its
// snapshots.
type StateMachine interface {
	// Apply applies the payload of the committed entry at index and returns
	// the result handed to the proposer. Entries come in log order, each
	// once.
	Apply(index uint64, payload []byte) any
	// Snapshot returns a writer of the state as of the last applied index.
	// It should return quickly: write is called once, on a goroutine of
	// its own, while Apply goes on, and must write that state whatever
	// Apply changes meanwhile (a copy-on-write view of it, say). It may be
	// given a writer that fails at once, when the snapshot is not needed
	// after all; it should let go of what it holds either way. A
	// snapshot of a large state takes a second or more, which writes
	// would otherwise wait for.
	Snapshot() (write func(io.Writer) error, err error)
	// Restore replaces the state with a snapshot taken at index.
	Restore(r io.Reader, index uint64) error
}

// Transport carries raft messages to the other members. Send must not
// block for long: it queues, and drops what it cannot deliver. Raft resends
// lost log entries and heartbeats, but not a proposal forwarded to the
// leader: its proposer learns of the loss by its deadline or by a leader
// change.
type Transport interface {
	Send(msgs []raftpb.Message)
}

// Errors returned to callers.
var (
	ErrStopped         = errors.New("raftnode: stopped")
	ErrProposalDropped = errors.New("raftnode: proposal dropped (no leader)")
	// ErrUncommittedFull refuses a proposal on a leader whose proposals
	// not yet committed are over Config.UncommittedBytes: the group is
	// taking writes faster than it commits them.
	ErrUncommittedFull = errors.New("raftnode: proposal dropped (uncommitted proposals over their limit)")
	// ErrLeaderChanged fails what was pending when the leader changed: the
	// old leader may have taken it with it, or the new one may still
	// commit it. The outcome is unknown, as after a timeout, but known
	// early.
	ErrLeaderChanged = errors.New("raftnode: leader changed; outcome unknown")
)

// applyQueue is how many Readys' committed entries may wait for the apply
// goroutine before the raft goroutine waits for it in turn.
const applyQueue = 1024

// inboxLimit is how many messages from peers may wait for the raft
// goroutine; past it they are dropped, as if lost, and raft sends again.
const inboxLimit = 4096

// Config configures a Node.
type Config struct {
	ID    uint64            // this member's id, not zero
	Peers map[uint64]string // the initial members and their peer addresses, this one included; empty for a single member
	Join  bool              // a new member of a running group: wait for the leader instead of bootstrapping
	// Learners are members of Peers that are learners for good (ZooKeeper's
	// observers): they replicate the log but never vote. A new group
	// bootstraps without them, and its leader adds them (learners.go).
	Learners []uint64
	Dir      string // the pebble store
	// Store and Group, instead of Dir: the node is group Group of a
	// member whose groups share one store (docs/scale-out.md); its
	// Transport is then the member's transport's Group(Group). The node
	// closes its group's part of the store, not the store.
	Store *Store
	Group uint64
	// PreferredLeader is the member this group's leadership goes to
	// whenever it is a voter caught up with the log (leader.go): a member
	// running many groups spreads their leaderships over the members so.
	// Zero: wherever elections put it.
	PreferredLeader uint64

	// Quiesce lets the group go quiet while it is idle (quiesce.go): its
	// members stop ticking and sending heartbeats until a proposal, a
	// read or a peer's message wakes it, or the member's liveness judges
	// its leader dead. Only over a transport that judges liveness (the
	// TCP transport); elsewhere the group never goes quiet. Not for the
	// group whose leader vouches for sessions by its followers' answers
	// (QuorumContact): a quiet leader hears none.
	Quiesce bool

	// ForceNewCluster makes this member, from what its store holds, the
	// only member of a new group, when a quorum of the old one is lost for
	// good (recover.go). Give it for one start only: at every start it
	// removes every other member again.
	ForceNewCluster bool

	TickInterval   time.Duration // default 50ms
	ElectionTicks  int           // default 10
	HeartbeatTicks int           // default 1
	SnapshotEvery  uint64        // applied entries between snapshots, default 10,000
	CatchUpEntries uint64        // entries kept behind a snapshot for slow followers, default 10,000
	MaxBatch       int           // proposals taken into one Ready at most, default 512
	// ResendWindow: a follower sends again a proposal it forwarded that is
	// not applied (resend.go), and a leader remembers the ids of the
	// proposals forwarded to it for this long, so that a copy is not
	// appended twice: longer than any caller waits for a proposal.
	// Default 30s.
	ResendWindow time.Duration

	// The bytes the node may hold in memory, each a bound of its own
	// (server.Config.MemoryBudget shares them out); zero means the
	// default.
	SnapshotBytes    uint64 // log bytes since the last snapshot that make a new one, default 128 MiB
	CatchUpBytes     uint64 // log bytes kept behind a snapshot for slow followers, default 64 MiB
	LogCacheBytes    int    // the newest log entries kept in memory (older ones are read from pebble), default 32 MiB
	ApplyQueueBytes  int64  // committed entries waiting for the apply goroutine, default 64 MiB
	UncommittedBytes uint64 // proposals not yet committed, on the leader; past it raft drops proposals, default 64 MiB
	InflightBytes    uint64 // entries sent to a follower and not yet acknowledged, default 32 MiB

	Transport Transport // nil for a single member
	Logger    *zap.Logger

	// DiskFullFile is for fault testing only (empty otherwise): while a
	// file of this name exists, every write to the store fails with
	// ENOSPC, as on a full disk. Pebble stops the process at its first
	// failed write (see docs/reliability.md, "A full disk").
	DiskFullFile string
	// StallFile is for fault testing only (empty otherwise): while a file
	// of this name exists, the raft goroutine stands still (stall.go).
	StallFile string
}

func (c *Config) setDefaults() {
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks == 0 {
		c.HeartbeatTicks = 1
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 10000
	}
	if c.CatchUpEntries == 0 {
		// A snapshot's interval: a follower a second behind under load
		// catches up from the log, not from a snapshot, whose install
		// closes its clients' connections (16 bytes an entry in memory,
		// and the entries in the store, within CatchUpBytes).
		c.CatchUpEntries = 10000
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 512
	}
	if c.ResendWindow == 0 {
		c.ResendWindow = 30 * time.Second
	}
	setDefault(&c.SnapshotBytes, 128<<20)
	setDefault(&c.CatchUpBytes, 64<<20)
	setDefault(&c.LogCacheBytes, 32<<20)
	setDefault(&c.ApplyQueueBytes, 64<<20)
	setDefault(&c.UncommittedBytes, 64<<20)
	setDefault(&c.InflightBytes, 32<<20)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if len(c.Peers) == 0 {
		c.Peers = map[uint64]string{c.ID: ""}
	}
}

func setDefault[T int | int64 | uint64](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Outcome is what a proposer learns: the index its entry was applied at and
// the state machine's result, or an error.
type Outcome struct {
	Index  uint64
	Result any
	Err    error
}

// Node is a running raft member.
type Node struct {
	cfg     Config
	log     *zap.Logger
	sm      StateMachine
	storage *Storage
	rn      *raft.RawNode

	props   *queue[proposal] // this member's proposals, for the raft goroutine
	readc   chan uint64
	callc   chan func()            // run on the raft goroutine
	inbox   *queue[raftpb.Message] // the messages from peers, for the raft goroutine
	reportc chan report
	livec   chan struct{}    // the transport's liveness judged a peer dead (livenessChanged)
	quiet   bool             // raft goroutine only: the group is quiescent on this member
	propBuf []proposal       // raft goroutine only: the proposals being taken
	msgBuf  []raftpb.Message // raft goroutine only: the messages being taken
	prefer  preferState      // raft goroutine only
	// preferred is the member this group's leadership goes to
	// (Config.PreferredLeader, or SetPreferredLeader's since).
	preferred atomic.Uint64
	stopc     chan struct{}
	donec     chan struct{}

	applyq     *queue[applyTask] // the apply goroutine's work, in log order
	applyBytes *quota.Pool       // bounds the bytes of the entries in applyq
	applyStop  chan struct{}     // closed by the raft goroutine when it ends
	applyDone  chan struct{}     // closed when the apply goroutine ends
	stop       sync.Once
	reqIDs     atomic.Uint64
	quiescent  atomic.Bool // quiet, for other goroutines

	applied     atomic.Uint64
	commit      atomic.Uint64 // raft's commit index, as of the last Ready
	leader      atomic.Uint64
	term        atomic.Uint64
	confPending atomic.Bool  // a membership change is in flight from here
	leadFrom    uint64       // raft goroutine only: the last index of the log this member took over as leader
	snapIndex   uint64       // apply goroutine only: the last snapshot's index
	snapping    *snapshotJob // apply goroutine only: the snapshot being written, if one is
	snapAgain   bool         // apply goroutine only: another snapshot once snapping is stored
	// lastPersisted is closed once the Ready of the last entries applied
	// is durable: the apply goroutine's.
	lastPersisted <-chan struct{}

	readMu     sync.Mutex
	readNext   *readRound      // the round new reads join; nil when none waits
	readBusy   bool            // a round is under way; readMu guards the three
	readRounds atomic.Uint64   // read index requests made of raft
	contact    contact         // the leader's last answers from its peers
	stalled    atomic.Bool     // the stall file exists (stall.go)
	seen       seenIDs         // the ids of the proposals recently forwarded to this leader (resend.go)
	removed    map[uint64]bool // members removed from the group: the raft goroutine's (step)

	mu        sync.Mutex
	waiters   map[uint64]*pending // mu guards waiters, reads, epoch, appliedCh, err
	reads     map[uint64]*pending
	epoch     uint64           // leader changes the raft goroutine has seen
	appliedCh chan struct{}    // closed and replaced whenever applied moves
	err       error            // why the node stopped
	members   raftpb.ConfState // as of the applied index; mu guards members, logMembers and addrs too
	// logMembers is the configuration as the log says it (the incoming
	// half of a joint one, non-joint): members is raft's, which a new
	// group's bootstrap sets whole before its first entries apply.
	logMembers raftpb.ConfState
	addrs      map[uint64]string // peer addresses
}

// report is the transport's news of a peer: unreachable, or how a snapshot
// send went.
type report struct {
	to     uint64
	snap   bool
	status raft.SnapshotStatus
}

// report hands the transport's news to the raft goroutine; it never blocks
// (raft only needs a hint).
func (n *Node) report(to uint64, snap bool, status raft.SnapshotStatus) {
	select {
	case n.reportc <- report{to, snap, status}:
	default:
	}
}

// proposal is an entry to propose: payload for a normal entry, or a
// membership change cc whose context will carry payload (a peer address).
type proposal struct {
	id      uint64
	payload []byte
	cc      *raftpb.ConfChangeV2
	leader  bool // propose only as the leader of term
	term    uint64
	resend  bool   // the same proposal again (resend.go)
	sent    uint64 // the raft term when it was first proposed (resend.go)
}

// Start opens the store in cfg.Dir (or its group of cfg.Store), restores
// the state machine from the last snapshot, and starts the node. A new
// store is bootstrapped with cfg.Peers as its members.
func Start(cfg Config, sm StateMachine) (*Node, error) {
	cfg.setDefaults()
	if cfg.ID == 0 {
		return nil, errors.New("raftnode: member id 0 is reserved")
	}
	if cfg.ForceNewCluster && cfg.Join {
		return nil, errors.New("raftnode: a member cannot both join a group and force a new one")
	}
	fs := vfs.Default
	if cfg.DiskFullFile != "" {
		fs = diskFullFS(fs, cfg.DiskFullFile)
	}
	var storage *Storage
	var err error
	if cfg.Store != nil {
		storage, err = cfg.Store.Group(cfg.Group, cfg.LogCacheBytes)
	} else {
		storage, err = openStorageOn(fs, cfg.Dir, cfg.LogCacheBytes, cfg.Logger)
	}
	if err != nil {
		return nil, err
	}
	if cfg.ForceNewCluster {
		if err := forceNewCluster(storage, cfg.ID, cfg.Logger); err != nil {
			storage.Close()
			return nil, err
		}
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger, sm: sm, storage: storage,
		props: newQueue[proposal](cfg.MaxBatch), readc: make(chan uint64, 64), callc: make(chan func()),
		inbox: newQueue[raftpb.Message](inboxLimit), reportc: make(chan report, 256), livec: make(chan struct{}, 1),
		stopc: make(chan struct{}), donec: make(chan struct{}),
		applyq: newQueue[applyTask](applyQueue), applyBytes: quota.New(cfg.ApplyQueueBytes), applyStop: make(chan struct{}), applyDone: make(chan struct{}),
		waiters: map[uint64]*pending{}, reads: map[uint64]*pending{}, seen: seenIDs{window: cfg.ResendWindow},
		appliedCh: make(chan struct{}), addrs: map[uint64]string{}, lastPersisted: closedChan,
	}
	n.preferred.Store(cfg.PreferredLeader)
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	n.reqIDs.Store(binary.BigEndian.Uint64(seed[:]) &^ copyBit) // room below copyBit for 2^62 ids at least
	if err := n.init(); err != nil {
		if n.rn != nil { // the apply goroutine started
			close(n.applyStop)
			<-n.applyDone
		}
		storage.Close()
		return nil, err
	}
	if lt, ok := cfg.Transport.(livenessTransport); ok && cfg.Quiesce {
		lt.watchLiveness(n)
	}
	go n.run()
	if cfg.StallFile != "" {
		go n.watchStall()
	}
	if len(cfg.Learners) > 0 {
		go n.addLearners()
	}
	return n, nil
}

func (n *Node) init() error {
	if snap := n.storage.snapshotMeta(); snap.Index > 0 {
		if err := n.restoreStored(snap.Index); err != nil {
			return fmt.Errorf("restore snapshot at %d: %w", snap.Index, err)
		}
		n.applied.Store(snap.Index)
		n.snapIndex = snap.Index
		n.members = snap.ConfState
		n.logMembers = incomingOf(snap.ConfState)
	}
	removed, err := n.storage.removedMembers()
	if err != nil {
		return err
	}
	n.removed = removed
	if err := n.loadPeers(); err != nil {
		return err
	}
	fresh := n.storage.IsEmpty() && !n.cfg.Join && !n.cfg.isLearner(n.cfg.ID)
	rn, err := raft.NewRawNode(&raft.Config{
		ID:              n.cfg.ID,
		ElectionTick:    n.cfg.ElectionTicks,
		HeartbeatTick:   n.cfg.HeartbeatTicks,
		Storage:         n.storage,
		Applied:         n.applied.Load(),
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		// Both bound memory: what a follower's queue on the leader may
		// hold (256 messages of 1 MiB otherwise), and what proposals hold
		// before they commit (past it raft drops proposals; the client
		// sees a timeout or NoQuorum).
		MaxInflightBytes:          max(n.cfg.InflightBytes, 1<<20),
		MaxUncommittedEntriesSize: n.cfg.UncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		// A leader made a learner (a voter turned observer) steps down;
		// one removed stops (ErrRemoved) once the change is applied.
		StepDownOnRemoval: true,
		Logger:            raftLogger{n.log.Sugar()},
	})
	if err != nil {
		return err
	}
	n.rn = rn
	// A Ready carries the HardState only when it changes: start from the
	// stored one.
	hs := rn.BasicStatus().HardState
	n.term.Store(hs.Term)
	n.commit.Store(hs.Commit)
	go n.runApply()
	if fresh {
		var peers []raft.Peer
		for id := range n.cfg.Peers {
			if !n.cfg.isLearner(id) {
				peers = append(peers, raft.Peer{ID: id})
			}
		}
		slices.SortFunc(peers, func(a, b raft.Peer) int { return cmp.Compare(a.ID, b.ID) })
		if err := rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	if err := n.processReady(); err != nil { // applies a bootstrap's membership
		return err
	}
	if _, alone := n.cfg.Peers[n.cfg.ID]; n.cfg.ForceNewCluster || alone && len(n.cfg.Peers) == 1+len(n.cfg.Learners) && !n.cfg.Join && !n.cfg.isLearner(n.cfg.ID) {
		// Alone, there is nobody to wait for: lead at once.
		if err := rn.Campaign(); err != nil {
			return err
		}
		return n.processReady()
	}
	return nil
}

// restoreStored restores the state machine from the stored snapshot,
// streamed from the store rather than read whole into memory first.
func (n *Node) restoreStored(index uint64) error {
	sr, err := n.storage.ks.newSnapshotReader(n.storage.db)
	if err != nil {
		return err
	}
	defer sr.Close()
	return n.sm.Restore(sr, index)
}

// loadPeers merges the configured peer addresses with those learned from
// membership changes, and tells the transport of the learned ones.
func (n *Node) loadPeers() error {
	stored, err := n.storage.peers()
	if err != nil {
		return err
	}
	book, _ := n.cfg.Transport.(PeerBook)
	for id, addr := range n.cfg.Peers {
		if addr != "" {
			n.addrs[id] = addr
		}
	}
	for id, addr := range stored {
		if n.addrs[id] != addr && book != nil && id != n.cfg.ID {
			book.AddPeer(id, addr)
		}
		n.addrs[id] = addr
	}
	return nil
}

// Propose submits payload for replication. The returned Proposal reports
// the outcome once the entry is applied on this member.
func (n *Node) Propose(ctx context.Context, payload []byte) *Proposal {
	return n.propose1(ctx, proposal{payload: payload})
}

// ProposeAsLeader is Propose for a decision this member took as the
// leader of term: the entry goes into the log only if the member still
// leads in that term when the raft goroutine takes it, and is never
// forwarded to another leader (ErrProposalDropped otherwise). A leader
// that was stopped and has not yet heard of its successor may decide on
// stale state; its entry then stays in its own log and is overwritten.
func (n *Node) ProposeAsLeader(ctx context.Context, payload []byte, term uint64) *Proposal {
	return n.propose1(ctx, proposal{payload: payload, leader: true, term: term})
}

// propose1 registers a waiter for p and hands p to the raft goroutine.
func (n *Node) propose1(ctx context.Context, p1 proposal) *Proposal {
	id := n.reqIDs.Add(1)
	p1.id, p1.sent = id, n.term.Load()
	p := &Proposal{n: n, id: id, p: p1, w: pending{done: make(chan struct{})}}
	n.mu.Lock()
	if n.err != nil {
		n.mu.Unlock()
		p.w.finish(Outcome{Err: n.err})
		return p
	}
	p.w.epoch = n.epoch
	n.waiters[id] = &p.w
	n.mu.Unlock()
	if !n.props.pushWait(p1, ctx.Done(), n.donec) {
		if err := ctx.Err(); err != nil {
			n.deliver(id, Outcome{Err: err})
		} else {
			n.deliver(id, Outcome{Err: n.stopErr()})
		}
	}
	return p
}

// Proposal is a submitted entry whose outcome is pending.
type Proposal struct {
	n  *Node
	id uint64
	p  proposal // to send again
	w  pending
}

// Wait waits for the outcome or for ctx. A proposal abandoned because of
// ctx may still be applied later. A follower's proposal not applied
// within retryAfter is sent again (resend.go).
func (p *Proposal) Wait(ctx context.Context) Outcome {
	var retry <-chan time.Time
	start := time.Now()
	if p.p.cc == nil && !p.p.leader {
		t := time.NewTicker(p.n.retryAfter())
		defer t.Stop()
		retry = t.C
	}
	for {
		select {
		case <-p.w.done:
			return p.w.out
		case <-retry:
			// Not past the window in which the leader knows a copy.
			if time.Since(start) < p.n.cfg.ResendWindow-p.n.retryAfter() {
				p.n.resend(p.p)
			}
		case <-ctx.Done():
			p.n.mu.Lock()
			delete(p.n.waiters, p.id)
			p.n.mu.Unlock()
			return Outcome{Err: ctx.Err()}
		}
	}
}

// WaitApplied waits until this member has applied index.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		n.mu.Lock()
		ch, err := n.appliedCh, n.err
		n.mu.Unlock()
		if n.applied.Load() >= index {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Applied is the index of the last entry applied.
func (n *Node) Applied() uint64 { return n.applied.Load() }

// Commit is raft's commit index as this member knows it: the last entry
// known committed, applied here or not yet.
func (n *Node) Commit() uint64 { return n.commit.Load() }

// MemoryHeld is what the node holds in memory of the log: the newest
// entries it caches, and the committed entries waiting to be applied.
func (n *Node) MemoryHeld() (logCache, applyQueue int64) {
	return int64(n.storage.CachedBytes()), n.applyBytes.Used()
}

// Leader is the id of the member this one believes leads, 0 if none.
func (n *Node) Leader() uint64 { return n.leader.Load() }

// PreferredLeader is the member this group's leadership goes to when it
// can, 0 for none: Config.PreferredLeader, or what SetPreferredLeader set.
func (n *Node) PreferredLeader() uint64 { return n.preferred.Load() }

// SetPreferredLeader makes id the member this group's leadership goes to
// (0: none). A leader on this member hands it over at its next look,
// without the wait of a new leader (preferLeader).
func (n *Node) SetPreferredLeader(ctx context.Context, id uint64) error {
	if n.preferred.Swap(id) == id {
		return nil
	}
	select {
	case n.callc <- func() { n.prefer = preferState{} }:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.donec:
		return n.stopErr()
	}
}

// IsLeader reports whether this member leads.
func (n *Node) IsLeader() bool { return n.leader.Load() == n.cfg.ID }

// Term is the current raft term.
func (n *Node) Term() uint64 { return n.term.Load() }

// ID is this member's id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// Store is the store the node's group keeps its log in: the one it opened
// in Config.Dir, or Config.Store. The member's other groups share it
// (docs/scale-out.md); it closes with the node that opened it.
func (n *Node) Store() *Store { return n.storage.store }

// Step hands the node a message from another member.
func (n *Node) Step(ctx context.Context, m raftpb.Message) error {
	select {
	case <-n.donec:
		return n.stopErr()
	default:
	}
	if n.inbox.pushWait(m, ctx.Done(), n.donec) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return n.stopErr()
}

// stepWithin hands m to the node as Step does, waiting at most d while the
// node is busy (raft takes a message dropped then as one lost on the
// network). The usual case, a node ready to take m, costs no timer: the
// transport calls it for every message a peer sends.
func (n *Node) stepWithin(m raftpb.Message, d time.Duration) error {
	select {
	case <-n.donec:
		return n.stopErr()
	default:
	}
	if n.inbox.push(m) {
		return nil
	}
	if d <= 0 {
		return context.DeadlineExceeded
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return n.Step(ctx, m)
}

// Stop stops the node, fails what is pending with ErrStopped, and closes
// the store.
func (n *Node) Stop() error {
	var err error
	n.stop.Do(func() {
		close(n.stopc)
		<-n.donec
		err = n.storage.Close()
	})
	return err
}

// Done is closed when the node has stopped, by Stop or by a fatal error.
func (n *Node) Done() <-chan struct{} { return n.donec }

// Err is why the node stopped: ErrStopped after Stop, else the fatal error.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

func (n *Node) stopErr() error {
	if err := n.Err(); err != nil {
		return err
	}
	return ErrStopped
}

func (n *Node) deliver(id uint64, o Outcome) {
	n.mu.Lock()
	w, ok := n.waiters[id]
	delete(n.waiters, id)
	n.mu.Unlock()
	if ok {
		w.finish(o)
	}
}

// fail stops the node for good and fails everything pending with err.
func (n *Node) fail(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err == nil {
		n.err = err
	}
	n.failPendingLocked(n.err, math.MaxUint64)
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
}

// pending is a proposal or read waiting for its outcome. Whoever takes it
// out of its map finishes it.
type pending struct {
	done  chan struct{} // closed once out is set
	out   Outcome
	epoch uint64 // the leader changes seen when it began
}

func (w *pending) finish(o Outcome) {
	w.out = o
	close(w.done)
}

// failPendingLocked fails every proposal and read waiting for an outcome
// that began before leader change epoch.
func (n *Node) failPendingLocked(err error, epoch uint64) {
	for id, w := range n.waiters {
		if w.epoch < epoch {
			w.finish(Outcome{Err: err})
			delete(n.waiters, id)
		}
	}
	for id, w := range n.reads {
		if w.epoch < epoch {
			w.finish(Outcome{Err: err})
			delete(n.reads, id)
		}
	}
}
