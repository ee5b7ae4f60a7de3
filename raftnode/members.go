package raftnode

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"go.uber.org/zap"
)

// Membership errors.
var (
	ErrRemoved              = errors.New("raftnode: this member was removed from the cluster")
	ErrConfChangeInProgress = errors.New("raftnode: another membership change is in progress")
	ErrUnknownMember        = errors.New("raftnode: no such member")
	ErrMemberExists         = errors.New("raftnode: member already exists")
)

// PeerBook is the optional ability of a Transport to learn and forget peer
// addresses as membership changes are applied.
type PeerBook interface {
	AddPeer(id uint64, addr string)
	RemovePeer(id uint64)
}

// Member is one member of the group.
type Member struct {
	ID      uint64
	Addr    string // peer address, "" if this member never learned it
	Learner bool
}

// Members returns the group's members, ordered by id: the voters and
// learners of the configuration as of the applied index (the incoming one
// during a joint configuration, a voter that is leaving it as a learner
// then listed as one).
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.membersLocked(n.members)
}

func (n *Node) membersLocked(cs raftpb.ConfState) []Member {
	var out []Member
	for _, id := range cs.Voters {
		out = append(out, Member{ID: id, Addr: n.addrs[id]})
	}
	for _, id := range slices.Concat(cs.Learners, cs.LearnersNext) {
		out = append(out, Member{ID: id, Addr: n.addrs[id], Learner: true})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// AddMember adds a voter, or a learner, with its peer address, and waits
// until the change is applied here. One change at a time.
func (n *Node) AddMember(ctx context.Context, id uint64, addr string, learner bool) error {
	if n.isMember(id) {
		return ErrMemberExists
	}
	return n.ChangeMembers(ctx, []MemberChange{{ID: id, Addr: addr, Learner: learner}}, nil).Err
}

// PromoteMember makes a learner a voter.
func (n *Node) PromoteMember(ctx context.Context, id uint64) error {
	if !slices.Contains(n.Members(), Member{ID: id, Addr: n.addr(id), Learner: true}) {
		return fmt.Errorf("%w: %d is not a learner", ErrUnknownMember, id)
	}
	return n.ChangeMembers(ctx, []MemberChange{{ID: id, Addr: n.addr(id)}}, nil).Err
}

// RemoveMember removes a voter or a learner.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	if !n.isMember(id) {
		return fmt.Errorf("%w: %d", ErrUnknownMember, id)
	}
	return n.ChangeMembers(ctx, []MemberChange{{ID: id, Remove: true}}, nil).Err
}

func (n *Node) isMember(id uint64) bool {
	return slices.ContainsFunc(n.Members(), func(m Member) bool { return m.ID == id })
}

func (n *Node) addr(id uint64) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs[id]
}

// MemberChange is one change of a membership change (ChangeMembers).
type MemberChange struct {
	ID uint64
	// Addr is the member's peer address, for a member that comes in, or
	// a new one for a member that stays; "" keeps the one known.
	Addr    string
	Learner bool // the member is (or becomes) a learner; else a voter
	Remove  bool // the member leaves
}

// MembershipApplier is the optional ability of a StateMachine to follow
// the membership: ApplyMembers is called for every membership change
// applied (a new group's first members included), on the apply goroutine
// in log order like Apply, with the members after it and the meta its
// proposer gave to ChangeMembers (nil for none). The ids and roles are
// the log's, the same on every member; the peer addresses are this
// member's own (--peers may name a member differently on each), so a
// state machine that must be the same everywhere goes by the ids, the
// roles and the meta. What it returns is the proposer's Outcome.Result.
// A state machine restored from a snapshot is not told of the changes
// before it: its snapshot holds what it made of them.
type MembershipApplier interface {
	ApplyMembers(index uint64, members []Member, meta []byte) any
}

// ChangeMembers makes changes to the membership, all at once, and waits
// until they are applied here. One change, or none for raft (a voter
// added again, say, with a new address or meta), is one configuration
// change; several are one joint configuration change (raft's joint
// consensus: both the old and the new voters must agree to each entry
// meanwhile), which the leader leaves at once by a second entry, and
// ChangeMembers waits for that too. meta goes with the change to the
// state machine (MembershipApplier); the outcome's Index is the change's
// entry and its Result what ApplyMembers returned.
//
// Only one change is in flight at a time: ChangeMembers fails with
// ErrConfChangeInProgress while another one from here is, or while this
// member's log holds a change not yet applied or the configuration is
// joint. (A change the leader refuses because it has one pending that
// this member has not heard of yet is dropped by raft without a word, and
// fails at ctx's deadline.)
func (n *Node) ChangeMembers(ctx context.Context, changes []MemberChange, meta []byte) Outcome {
	if len(changes) == 0 {
		return Outcome{Err: errors.New("raftnode: a membership change without changes")}
	}
	if !n.confPending.CompareAndSwap(false, true) {
		return Outcome{Err: ErrConfChangeInProgress}
	}
	defer n.confPending.Store(false)
	cc := raftpb.ConfChangeV2{Changes: make([]raftpb.ConfChangeSingle, len(changes))}
	addrs := make([]string, len(changes))
	for i, c := range changes {
		typ := raftpb.ConfChangeAddNode
		switch {
		case c.Remove:
			typ = raftpb.ConfChangeRemoveNode
		case c.Learner:
			typ = raftpb.ConfChangeAddLearnerNode
		}
		cc.Changes[i], addrs[i] = raftpb.ConfChangeSingle{Type: typ, NodeID: c.ID}, c.Addr
	}
	o := n.propose1(ctx, proposal{cc: &cc, payload: confContext(addrs, meta)}).Wait(ctx)
	if o.Err != nil {
		return o
	}
	// A joint configuration is left by the entry the leader appends once
	// it applied the first.
	for n.joint() {
		n.mu.Lock()
		ch, err := n.appliedCh, n.err
		n.mu.Unlock()
		if err != nil {
			return Outcome{Err: err}
		}
		if !n.joint() {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return Outcome{Err: ctx.Err()}
		}
	}
	return o
}

// joint reports whether the applied configuration is joint.
func (n *Node) joint() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.members.VotersOutgoing) > 0
}

// Synced reports, on the leader, the members that follow its log: heard
// from within the last election timeout and sent each entry as it comes
// (raft's StateReplicate, not probing nor waiting for a snapshot), the
// leader included. Elsewhere it is nil: only the leader knows.
func (n *Node) Synced(ctx context.Context) ([]uint64, error) {
	out := make(chan []uint64, 1)
	f := func() {
		st := n.rn.Status()
		if st.RaftState != raft.StateLeader {
			out <- nil
			return
		}
		ids := []uint64{n.cfg.ID}
		for id, pr := range st.Progress {
			if id != n.cfg.ID && pr.RecentActive && pr.State == tracker.StateReplicate {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		out <- ids
	}
	select {
	case n.callc <- f:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.donec:
		return nil, n.stopErr()
	}
	return <-out, nil
}

// confChangePending reports, on the raft goroutine, whether raft would
// refuse a membership change now: the configuration is joint, this
// member's log holds a change not yet applied, or it leads and has not
// yet applied the log it took over (raft refuses a change until then, in
// case the log holds one).
func (n *Node) confChangePending() bool {
	applied := n.applied.Load()
	if n.joint() || n.rn.BasicStatus().RaftState == raft.StateLeader && n.leadFrom > applied {
		return true
	}
	last, _ := n.storage.LastIndex()
	if last <= applied {
		return false
	}
	ents, err := n.storage.Entries(applied+1, last+1, math.MaxUint64)
	if err != nil {
		return true // compacted under us, or unreadable: too soon to tell
	}
	return slices.ContainsFunc(ents, isConfChange)
}

// The context of a membership change's entry: its proposal's id, then
// the peer addresses of its changes and the state machine's meta. A change
// of one member without meta (every change before ChangeMembers took
// several) keeps the first form, the address alone, which members of
// earlier versions read; the second starts with a zero byte, which no
// address does.
//
//	id (8 bytes) | address
//	id (8 bytes) | 0 | 1 | uvarint n | n × (uvarint length | address) | meta
const confContextV2 = 1

// confContext is a context after the proposal id.
func confContext(addrs []string, meta []byte) []byte {
	if len(addrs) == 1 && meta == nil && !strings.HasPrefix(addrs[0], "\x00") {
		return []byte(addrs[0])
	}
	b := []byte{0, confContextV2}
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	for _, a := range addrs {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	return append(b, meta...)
}

// parseConfContext reads the context of a change of n members: its
// proposal id (0 for none), the peer address given for each change ("" for
// none) and the meta. A context it cannot read gives no addresses: every
// member applies the same entry the same way.
func parseConfContext(ctx []byte, n int) (id uint64, addrs []string, meta []byte) {
	addrs = make([]string, n)
	if len(ctx) < 8 {
		return 0, addrs, nil
	}
	id, rest := binary.BigEndian.Uint64(ctx), ctx[8:]
	if len(rest) == 0 || rest[0] != 0 {
		if n > 0 {
			addrs[0] = string(rest)
		}
		return id, addrs, nil
	}
	if len(rest) < 2 || rest[1] != confContextV2 {
		return id, addrs, nil
	}
	rest = rest[2:]
	count, k := binary.Uvarint(rest)
	if k <= 0 || count != uint64(n) {
		return id, addrs, nil
	}
	rest = rest[k:]
	got := make([]string, n)
	for i := range got {
		l, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < l {
			return id, addrs, nil
		}
		got[i], rest = string(rest[k:k+int(l)]), rest[k+int(l):]
	}
	return id, got, rest
}

// applyConfChange applies a committed membership change and tells the
// transport, then hands the change to the apply goroutine (the state
// machine's ApplyMembers, and the proposer's answer). A member that is
// no longer in the configuration (neither half of a joint one) is
// forgotten; one that removed itself stops, once the apply goroutine has
// done the change. It runs on the raft goroutine while the apply
// goroutine is idle.
func (n *Node) applyConfChange(e *raftpb.Entry) error {
	var cc raftpb.ConfChangeV2
	if e.Type == raftpb.EntryConfChange {
		var v1 raftpb.ConfChange
		if err := v1.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("conf change at %d: %w", e.Index, err)
		}
		cc = v1.AsV2()
	} else if err := cc.Unmarshal(e.Data); err != nil {
		return fmt.Errorf("conf change at %d: %w", e.Index, err)
	}
	n.mu.Lock()
	before := inConfig(n.members)
	n.mu.Unlock()
	cs := *n.rn.ApplyConfChange(cc)
	reqID, addrs, meta := parseConfContext(cc.Context, len(cc.Changes))
	book, _ := n.cfg.Transport.(PeerBook)
	for i, c := range cc.Changes {
		if c.Type != raftpb.ConfChangeAddNode && c.Type != raftpb.ConfChangeAddLearnerNode {
			continue
		}
		if n.removed[c.NodeID] { // added again
			if err := n.storage.clearRemoved(c.NodeID); err != nil {
				return err
			}
			delete(n.removed, c.NodeID)
		}
		if addr := addrs[i]; addr != "" {
			if err := n.storage.setPeer(c.NodeID, addr); err != nil {
				return err
			}
			n.setAddr(c.NodeID, addr)
			if book != nil && c.NodeID != n.cfg.ID {
				book.AddPeer(c.NodeID, addr)
			}
		}
	}
	after := inConfig(cs)
	removedSelf := false
	for _, id := range before {
		if slices.Contains(after, id) {
			continue
		}
		if err := n.storage.deletePeer(id); err != nil {
			return err
		}
		if err := n.storage.setRemoved(id); err != nil {
			return err
		}
		n.removed[id] = true
		n.setAddr(id, "")
		if book != nil {
			book.RemovePeer(id)
		}
		removedSelf = removedSelf || id == n.cfg.ID
	}
	n.mu.Lock()
	n.members = cs
	n.logMembers = applyToIncoming(n.logMembers, cc)
	members := n.membersLocked(n.logMembers)
	n.mu.Unlock()
	t := applyTask{conf: &confApplied{index: e.Index, members: members, meta: meta, reqID: reqID}}
	if err := n.handOver(t); err != nil {
		return err
	}
	if removedSelf {
		if err := n.waitIdle(); err != nil {
			return err
		}
		return ErrRemoved
	}
	return nil
}

// incomingOf is the incoming half of cs, as a configuration that is not
// joint: a voter that leaves as a learner is a learner.
func incomingOf(cs raftpb.ConfState) raftpb.ConfState {
	return raftpb.ConfState{Voters: slices.Clone(cs.Voters), Learners: slices.Concat(cs.Learners, cs.LearnersNext)}
}

// applyToIncoming applies cc's changes to cs, the incoming half of a
// configuration: the members the log says there are after cc, whatever
// raft's tracker holds (a bootstrap sets it whole before the first
// entries apply). The state machine hears these, so that every member,
// one that replays the log later included, hears the same.
func applyToIncoming(cs raftpb.ConfState, cc raftpb.ConfChangeV2) raftpb.ConfState {
	voters, learners := setOf(cs.Voters), setOf(cs.Learners)
	for _, c := range cc.Changes {
		switch c.Type {
		case raftpb.ConfChangeAddNode:
			voters[c.NodeID], learners[c.NodeID] = true, false
		case raftpb.ConfChangeAddLearnerNode:
			voters[c.NodeID], learners[c.NodeID] = false, true
		case raftpb.ConfChangeRemoveNode:
			voters[c.NodeID], learners[c.NodeID] = false, false
		}
	}
	return raftpb.ConfState{Voters: idsOf(voters), Learners: idsOf(learners)}
}

// inConfig lists every member of cs, voters and learners of either half.
func inConfig(cs raftpb.ConfState) []uint64 {
	ids := slices.Concat(cs.Voters, cs.VotersOutgoing, cs.Learners, cs.LearnersNext)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// confApplied is a membership change for the apply goroutine: the state
// machine hears of it (MembershipApplier), then its proposer.
type confApplied struct {
	index   uint64
	members []Member
	meta    []byte
	reqID   uint64
}

// applyMembers carries out a confApplied on the apply goroutine.
func (n *Node) applyMembers(c *confApplied) {
	var res any
	if ma, ok := n.sm.(MembershipApplier); ok {
		res = ma.ApplyMembers(c.index, c.members, c.meta)
	}
	n.setApplied(c.index)
	if c.reqID != 0 {
		n.deliver(c.reqID, Outcome{Index: c.index, Result: res})
	}
}

func (n *Node) setAddr(id uint64, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if addr == "" {
		delete(n.addrs, id)
	} else {
		n.addrs[id] = addr
	}
}

// Peer addresses learned from membership changes are stored (kindPeer),
// so a restarted member knows members added after its --peers was written.

func (s *Storage) setPeer(id uint64, addr string) error {
	return s.db.Set(s.ks.key(kindPeer, id), []byte(addr), pebble.Sync)
}

func (s *Storage) deletePeer(id uint64) error {
	return s.db.Delete(s.ks.key(kindPeer, id), pebble.Sync)
}

// peers returns the stored peer addresses.
func (s *Storage) peers() (map[uint64]string, error) {
	out := map[uint64]string{}
	err := s.eachID(kindPeer, func(id uint64, value []byte) { out[id] = string(value) })
	return out, err
}

// eachID calls fn with the id and the value of each key of the per-member
// kind; value is valid only during the call.
func (s *Storage) eachID(kind byte, fn func(id uint64, value []byte)) error {
	iter, err := s.db.NewIter(s.ks.all(kind))
	if err != nil {
		return err
	}
	defer iter.Close()
	for iter.First(); iter.Valid(); iter.Next() {
		fn(s.ks.number(iter.Key()), iter.Value())
	}
	return iter.Error()
}

// ErrBadConfChange is a membership change raft would not survive: one
// that leaves no voter, say, which raft panics on as it applies it, on
// every member and at every restart once it is in the log.
var ErrBadConfChange = errors.New("raftnode: a membership change raft cannot make")

// checkConfChange runs cc through raft's own change logic over the
// configuration this member has, as raft will when it applies it, and
// returns its refusal. It runs on the raft goroutine.
func (n *Node) checkConfChange(cc raftpb.ConfChangeV2) error {
	cfg := n.rn.Status().Config
	// The changer checks each member's progress against its role; only
	// those flags matter here, not where the members are.
	prs := tracker.ProgressMap{}
	for _, ids := range []map[uint64]struct{}{cfg.Voters[0], cfg.Voters[1], cfg.LearnersNext} {
		for id := range ids {
			prs[id] = &tracker.Progress{}
		}
	}
	for id := range cfg.Learners {
		prs[id] = &tracker.Progress{IsLearner: true}
	}
	ch := confchange.Changer{Tracker: tracker.ProgressTracker{Config: cfg.Clone(), Progress: prs}}
	var err error
	switch autoLeave, enter := cc.EnterJoint(); {
	case cc.LeaveJoint():
		_, _, err = ch.LeaveJoint()
	case enter:
		_, _, err = ch.EnterJoint(autoLeave, cc.Changes...)
	default:
		_, _, err = ch.Simple(cc.Changes...)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfChange, err)
	}
	return nil
}

// refusesConfChanges reports whether entries, a proposal a follower
// forwarded, hold a membership change raft cannot make (checkConfChange,
// which the follower ran on a configuration that may have been behind).
// The whole proposal is dropped: its proposer's wait ends at its deadline.
func (n *Node) refusesConfChanges(entries []raftpb.Entry) bool {
	for _, e := range entries {
		var cc raftpb.ConfChangeV2
		switch e.Type {
		case raftpb.EntryConfChange:
			var v1 raftpb.ConfChange
			if v1.Unmarshal(e.Data) != nil {
				return true
			}
			cc = v1.AsV2()
		case raftpb.EntryConfChangeV2:
			if cc.Unmarshal(e.Data) != nil {
				return true
			}
		default:
			continue
		}
		if err := n.checkConfChange(cc); err != nil {
			n.log.Warn("forwarded membership change dropped", zap.Error(err))
			return true
		}
	}
	return false
}
