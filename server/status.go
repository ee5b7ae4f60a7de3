package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/tree"
)

// Status is a member's view of itself: enough to compare replicas (equal
// digests at equal zxids) and to see who leads.
type Status struct {
	ID       uint64 `json:"id"`
	Leader   uint64 `json:"leader"`
	Term     uint64 `json:"term"`
	Applied  uint64 `json:"applied"` // last raft entry applied
	Zxid     int64  `json:"zxid"`    // last txn applied to the tree
	Digest   string `json:"digest"`  // the tree's digest at Zxid, hex
	Sessions int    `json:"sessions"`
	Znodes   int    `json:"znodes"` // over every group
	// Shards are the member's groups besides the meta group, by id, once
	// the cluster is split (docs/scale-out.md); the fields above but
	// Znodes are the meta group's.
	Shards []GroupStatus `json:"shards,omitempty"`
}

// GroupStatus is a member's view of one of its shards' groups.
type GroupStatus struct {
	Group     uint64 `json:"group"`
	Leader    uint64 `json:"leader"`
	Preferred uint64 `json:"preferred_leader,omitempty"` // where the leadership goes when it can
	Term      uint64 `json:"term"`
	Applied   uint64 `json:"applied"`
	Zxid      int64  `json:"zxid"`
	Digest    string `json:"digest"`
}

// Status reports the member's state; the tree's fields are read together.
func (s *Server) Status() Status {
	st := Status{ID: s.cfg.ID, Leader: s.node.Leader(), Term: s.node.Term(), Applied: s.node.Applied()}
	st.Zxid = s.fsm.read(func(t *tree.Tree) {
		st.Digest = fmt.Sprintf("%016x", t.Digest())
		st.Sessions = t.SessionCount()
	})
	st.Znodes = s.counts().znodes
	s.groups.mu.Lock()
	running := slices.Collect(maps.Values(s.groups.running))
	s.groups.mu.Unlock()
	for _, g := range running {
		gs := GroupStatus{Group: g.id, Leader: g.node.Leader(), Preferred: g.node.PreferredLeader(), Term: g.node.Term(), Applied: g.node.Applied()}
		gs.Zxid = g.fsm.read(func(t *tree.Tree) { gs.Digest = fmt.Sprintf("%016x", t.Digest()) })
		st.Shards = append(st.Shards, gs)
	}
	slices.SortFunc(st.Shards, func(a, b GroupStatus) int { return cmp.Compare(a.Group, b.Group) })
	return st
}

func (s *Server) serveStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Status())
}

// SetPeerFilter installs a filter on this member's raft traffic, both ways:
// a message goes out or comes in only if f(from, to) is true. It is for
// fault-injection tests (partitions, loss); nil removes it. A single node
// has no peer traffic and ignores it.
func (s *Server) SetPeerFilter(f raftnode.Filter) {
	if s.transport != nil {
		s.transport.SetFilter(f)
	}
}

// SetPeerDelay delays this member's outgoing raft traffic by d, for
// fault-injection tests; 0 removes the delay.
func (s *Server) SetPeerDelay(d time.Duration) {
	if s.transport != nil {
		s.transport.SetDelay(d)
	}
}
