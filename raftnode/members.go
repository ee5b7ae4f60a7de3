package raftnode

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble"
	"go.etcd.io/raft/v3/raftpb"
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

// Members returns the group's members, ordered by id.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []Member
	for _, id := range n.members.Voters {
		out = append(out, Member{ID: id, Addr: n.addrs[id]})
	}
	for _, id := range n.members.Learners {
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
	typ := raftpb.ConfChangeAddNode
	if learner {
		typ = raftpb.ConfChangeAddLearnerNode
	}
	return n.changeMembers(ctx, raftpb.ConfChangeSingle{Type: typ, NodeID: id}, addr)
}

// PromoteMember makes a learner a voter.
func (n *Node) PromoteMember(ctx context.Context, id uint64) error {
	if !slices.Contains(n.Members(), Member{ID: id, Addr: n.addr(id), Learner: true}) {
		return fmt.Errorf("%w: %d is not a learner", ErrUnknownMember, id)
	}
	return n.changeMembers(ctx, raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode, NodeID: id}, n.addr(id))
}

// RemoveMember removes a voter or a learner.
func (n *Node) RemoveMember(ctx context.Context, id uint64) error {
	if !n.isMember(id) {
		return fmt.Errorf("%w: %d", ErrUnknownMember, id)
	}
	return n.changeMembers(ctx, raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode, NodeID: id}, "")
}

func (n *Node) isMember(id uint64) bool {
	return slices.ContainsFunc(n.Members(), func(m Member) bool { return m.ID == id })
}

func (n *Node) addr(id uint64) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs[id]
}

// changeMembers proposes one change; its context carries the request id
// and the member's peer address, so every member learns the address.
func (n *Node) changeMembers(ctx context.Context, c raftpb.ConfChangeSingle, addr string) error {
	if !n.confPending.CompareAndSwap(false, true) {
		return ErrConfChangeInProgress
	}
	defer n.confPending.Store(false)
	cc := raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{c}}
	return n.propose1(ctx, proposal{cc: &cc, payload: []byte(addr)}).Wait(ctx).Err
}

// applyConfChange applies a committed membership change and tells the
// transport; a member that removed itself stops. It runs on the raft
// goroutine while the apply goroutine is idle.
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
	cs := *n.rn.ApplyConfChange(cc)
	var reqID uint64
	var addr string
	if len(cc.Context) >= 8 {
		reqID, addr = binary.BigEndian.Uint64(cc.Context), string(cc.Context[8:])
	}
	book, _ := n.cfg.Transport.(PeerBook)
	removedSelf := false
	for _, c := range cc.Changes {
		switch c.Type {
		case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
			if n.removed[c.NodeID] { // added again
				if err := n.storage.clearRemoved(c.NodeID); err != nil {
					return err
				}
				delete(n.removed, c.NodeID)
			}
			if addr != "" {
				if err := n.storage.setPeer(c.NodeID, addr); err != nil {
					return err
				}
				n.setAddr(c.NodeID, addr)
				if book != nil && c.NodeID != n.cfg.ID {
					book.AddPeer(c.NodeID, addr)
				}
			}
		case raftpb.ConfChangeRemoveNode:
			if err := n.storage.deletePeer(c.NodeID); err != nil {
				return err
			}
			if err := n.storage.setRemoved(c.NodeID); err != nil {
				return err
			}
			n.removed[c.NodeID] = true
			n.setAddr(c.NodeID, "")
			if book != nil {
				book.RemovePeer(c.NodeID)
			}
			removedSelf = removedSelf || c.NodeID == n.cfg.ID
		}
	}
	n.mu.Lock()
	n.members = cs
	n.mu.Unlock()
	if reqID != 0 {
		n.deliver(reqID, Outcome{Index: e.Index})
	}
	if removedSelf {
		return ErrRemoved
	}
	return nil
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

// Peer addresses learned from membership changes live under "a" + id, so a
// restarted member knows members added after its --peers was written.
const prefixPeer = 'a'

func (s *Storage) setPeer(id uint64, addr string) error {
	return s.db.Set(indexKey(prefixPeer, id), []byte(addr), pebble.Sync)
}

func (s *Storage) deletePeer(id uint64) error {
	return s.db.Delete(indexKey(prefixPeer, id), pebble.Sync)
}

// peers returns the stored peer addresses.
func (s *Storage) peers() (map[uint64]string, error) {
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPeer}, UpperBound: []byte{prefixPeer + 1}})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	out := map[uint64]string{}
	for iter.First(); iter.Valid(); iter.Next() {
		out[binary.BigEndian.Uint64(iter.Key()[1:])] = string(iter.Value())
	}
	return out, iter.Error()
}
