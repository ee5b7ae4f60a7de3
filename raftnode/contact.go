package raftnode

import (
	"slices"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// contact is when the leader last heard from each peer, as the raft
// goroutine saw their answers (heartbeat and append responses): the
// leader's own evidence that it still leads a quorum. A leader whose raft
// goroutine stands still (a slow disk, no CPU) stops hearing, though its
// other goroutines run.
type contact struct {
	mu        sync.Mutex
	heard     map[uint64]time.Time // peer -> last answer taken by the raft goroutine
	leadSince time.Time            // when this member last became leader
}

// heardFrom notes m, taken by the raft goroutine.
func (c *contact) heardFrom(m raftpb.Message) {
	if m.Type != raftpb.MsgHeartbeatResp && m.Type != raftpb.MsgAppResp {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.heard == nil {
		c.heard = map[uint64]time.Time{}
	}
	c.heard[m.From] = now
}

// lead notes that this member became leader at now.
func (c *contact) lead(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leadSince = now
}

// quorumSince is the latest time since which this member, leading the
// voters, has heard from a quorum of them (itself included), or since it
// became leader if later.
func (c *contact) quorumSince(self uint64, voters []uint64, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var times []time.Time
	for _, id := range voters {
		switch {
		case id == self:
		case !c.heard[id].IsZero():
			times = append(times, c.heard[id])
		}
	}
	need := len(voters)/2 + 1 - 1 // peers besides this member
	if !slices.Contains(voters, self) {
		need++
	}
	if need <= 0 {
		return now
	}
	if len(times) < need {
		return c.leadSince
	}
	slices.SortFunc(times, func(a, b time.Time) int { return b.Compare(a) })
	since := times[need-1]
	if c.leadSince.After(since) {
		since = c.leadSince
	}
	return since
}

// QuorumContact is how long it has been since this member, as leader,
// last heard from a quorum of the voters through its raft goroutine: 0 on
// a single member, and on a member that does not lead.
func (n *Node) QuorumContact() time.Duration {
	if !n.IsLeader() {
		return 0
	}
	n.mu.Lock()
	voters := slices.Clone(n.members.Voters)
	n.mu.Unlock()
	now := time.Now()
	return now.Sub(n.contact.quorumSince(n.cfg.ID, voters, now))
}

// heardSince lists, sorted, the peers heard from at or after since and
// since the lead began.
func (c *contact) heardSince(since time.Time) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leadSince.After(since) {
		since = c.leadSince
	}
	var out []uint64
	for id, at := range c.heard {
		if !at.Before(since) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// PeersHeard lists, sorted, the members whose answers to this member's
// heartbeats and appends its raft goroutine took within the last d, since
// it became leader: the followers and learners it leads and hears from
// (ZooKeeper's synced learners). It is nil on a member that does not lead.
func (n *Node) PeersHeard(d time.Duration) []uint64 {
	if !n.IsLeader() {
		return nil
	}
	return n.contact.heardSince(time.Now().Add(-d))
}

// LeadingSince is when this member last became leader: the zero time on a
// member that does not lead.
func (n *Node) LeadingSince() time.Time {
	if !n.IsLeader() {
		return time.Time{}
	}
	n.contact.mu.Lock()
	defer n.contact.mu.Unlock()
	return n.contact.leadSince
}
