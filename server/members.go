package server

import (
	"context"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"
)

// The members view: every member sends the others a card of itself (its
// addresses, version, raft figures and health) about once a second over
// the peer transport, and keeps the latest card of each. Members puts the
// cards together with the member's own live figures, for
// GET /api/v1/members. Cards are for people to read; the server decides
// on them only whether every member knows a feature before it uses it
// (everyMemberKnows).

// cardInterval is how often a member sends its card to the others.
const cardInterval = time.Second

// heardWithin is how recently a member must have been heard from to count
// as healthy, and toward a quorum: three cards may be lost in a row.
const heardWithin = 3 * time.Second

// memberCard is what a member tells the others of itself. Fields are
// added, never renamed: a member skips the fields it does not know.
type memberCard struct {
	ID         uint64 `msgpack:"id"`
	ClientAddr string `msgpack:"client,omitempty"`
	HTTPAddr   string `msgpack:"http,omitempty"`
	ZKAddr     string `msgpack:"zk,omitempty"`
	Version    string `msgpack:"version,omitempty"`
	Leader     uint64 `msgpack:"leader"` // the leader it knows, 0 if none
	Term       uint64 `msgpack:"term"`
	Commit     uint64 `msgpack:"commit"`
	Applied    uint64 `msgpack:"applied"`
	Zxid       int64  `msgpack:"zxid"`
	StartedAt  int64  `msgpack:"started"` // Unix milliseconds
	Healthy    bool   `msgpack:"healthy"` // raft runs and knows a leader
	// Synced, on the leader's card, are the members that follow its log
	// (raftnode's Synced), for a reconfig asked of another member.
	Synced []uint64 `msgpack:"synced,omitempty"`
	// Features are what the member's version knows that the cluster may
	// use only once every member knows it (features, shards.go).
	Features []string `msgpack:"features,omitempty"`
}

// heardCard is a peer's latest card and when it arrived.
type heardCard struct {
	card memberCard
	at   time.Time
}

// peerCards holds the latest card of each peer.
type peerCards struct {
	mu    sync.Mutex
	heard map[uint64]heardCard // mu guards heard
}

// MembersView is the cluster as one member sees it.
type MembersView struct {
	Self    uint64       `json:"self"`
	Leader  uint64       `json:"leader"`  // 0: none known
	Quorum  bool         `json:"quorum"`  // a leader is known and a majority of voters were heard from within the last 3 s (self counts)
	Members []MemberView `json:"members"` // sorted by id; every member of the raft configuration, and only those
}

// MemberView is one member as another sees it: from its latest card, or
// for the member itself from its live figures.
type MemberView struct {
	ID         uint64 `json:"id"`
	PeerAddr   string `json:"peer_addr"`
	Learner    bool   `json:"learner,omitempty"`
	Role       string `json:"role"` // "leader", "follower", "learner", or "unknown" when no card was heard
	ClientAddr string `json:"client_addr,omitempty"`
	HTTPAddr   string `json:"http_addr,omitempty"`
	ZKAddr     string `json:"zk_addr,omitempty"`
	Version    string `json:"version,omitempty"`
	Term       uint64 `json:"term"`
	Commit     uint64 `json:"commit"`
	Applied    uint64 `json:"applied"`
	Zxid       int64  `json:"zxid"`
	Lag        int64  `json:"lag"`                  // leader's applied minus this member's, from the freshest figures known (0 for the leader; -1 when unknown)
	Healthy    bool   `json:"healthy"`              // heard within the last 3 s and its card says healthy
	HeardMsAgo int64  `json:"heard_ms_ago"`         // 0 for self; -1 never heard
	StartedAt  string `json:"started_at,omitempty"` // RFC 3339
}

// Members reports the members of the raft configuration as this member
// sees them: its own figures live, the others' from their latest cards.
// The leader is the one this member knows.
func (s *Server) Members() MembersView {
	now := time.Now()
	self := s.ownCard()
	heard := map[uint64]heardCard{}
	if s.cards != nil {
		s.cards.mu.Lock()
		for id, h := range s.cards.heard {
			heard[id] = h
		}
		s.cards.mu.Unlock()
	}
	heard[self.ID] = heardCard{card: self, at: now}

	v := MembersView{Self: self.ID, Leader: self.Leader}
	leaderApplied, leaderKnown := uint64(0), false
	if h, ok := heard[v.Leader]; ok && v.Leader != 0 {
		leaderApplied, leaderKnown = h.card.Applied, true
	}
	members := s.node.Members()
	v.Members = make([]MemberView, 0, len(members))
	voters, fresh := 0, 0
	for _, m := range members {
		mv := MemberView{ID: m.ID, PeerAddr: m.Addr, Learner: m.Learner, Role: "unknown", Lag: -1, HeardMsAgo: -1}
		h, ok := heard[m.ID]
		recent := ok && now.Sub(h.at) <= heardWithin
		if !m.Learner {
			voters++
			if recent {
				fresh++
			}
		}
		if ok {
			c := &h.card
			mv.Role = "follower"
			mv.ClientAddr, mv.HTTPAddr, mv.ZKAddr, mv.Version = c.ClientAddr, c.HTTPAddr, c.ZKAddr, c.Version
			mv.Term, mv.Commit, mv.Applied, mv.Zxid = c.Term, c.Commit, c.Applied, c.Zxid
			mv.Healthy = recent && c.Healthy
			mv.HeardMsAgo = now.Sub(h.at).Milliseconds()
			if c.StartedAt != 0 {
				mv.StartedAt = time.UnixMilli(c.StartedAt).UTC().Format(time.RFC3339)
			}
			if leaderKnown {
				// The leader's figure may be older than the member's:
				// a member is never ahead of what the leader committed.
				mv.Lag = max(int64(leaderApplied)-int64(c.Applied), 0)
			}
		}
		switch {
		case m.Learner:
			mv.Role = "learner"
		case m.ID == v.Leader:
			mv.Role, mv.Lag = "leader", 0
		}
		v.Members = append(v.Members, mv)
	}
	v.Quorum = v.Leader != 0 && fresh > voters/2
	return v
}

// ownCard is this member's card, its figures read now.
func (s *Server) ownCard() memberCard {
	c := memberCard{
		ID: s.cfg.ID, ClientAddr: s.Addr().String(), Version: buildVersion(),
		Leader: s.node.Leader(), Term: s.node.Term(), Commit: s.node.Commit(), Applied: s.node.Applied(),
		Zxid: s.fsm.lastZxid(), StartedAt: s.started.UnixMilli(), Features: features,
	}
	if a := s.HTTPAddr(); a != nil {
		c.HTTPAddr = a.String()
	}
	if a := s.ZKAddr(); a != nil {
		c.ZKAddr = a.String()
	}
	select {
	case <-s.node.Done():
	default:
		c.Healthy = c.Leader != 0
	}
	return c
}

// cardLoop sends this member's card to every other member at once and
// then every cardInterval, and forgets the cards of members gone from the
// configuration. It runs only in a cluster.
func (s *Server) cardLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(cardInterval)
	defer tick.Stop()
	for {
		s.sendCard()
		s.forgetCards(time.Now())
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		}
	}
}

// sendCard sends this member's card to every other member; the leader's
// names the members that follow its log.
func (s *Server) sendCard() {
	c := s.ownCard()
	if c.Leader == c.ID {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Synced, _ = s.node.Synced(ctx)
		cancel()
	}
	b, err := msgpack.Marshal(c)
	if err != nil {
		s.log.Error("encode member card", zap.Error(err))
		return
	}
	for _, m := range s.node.Members() {
		if m.ID != s.cfg.ID {
			s.transport.SendCard(m.ID, b)
		}
	}
}

// takeCard keeps the card a peer sent. It runs on the transport's
// goroutines.
func (s *Server) takeCard(from uint64, b []byte) {
	var c memberCard
	if err := msgpack.Unmarshal(b, &c); err != nil || c.ID != from {
		s.log.Debug("dropped a bad member card", zap.Uint64("from", from), zap.Uint64("card_id", c.ID), zap.Error(err))
		return
	}
	s.cards.mu.Lock()
	defer s.cards.mu.Unlock()
	s.cards.heard[from] = heardCard{card: c, at: time.Now()}
}

// forgetCards drops the cards of members not in the configuration, once
// they are no longer recent: a card from a member that is joining may
// arrive before its addition is applied here.
func (s *Server) forgetCards(now time.Time) {
	member := map[uint64]bool{}
	for _, m := range s.node.Members() {
		member[m.ID] = true
	}
	s.cards.mu.Lock()
	defer s.cards.mu.Unlock()
	for id, h := range s.cards.heard {
		if !member[id] && now.Sub(h.at) > heardWithin {
			delete(s.cards.heard, id)
		}
	}
}

// buildVersion is the version of the running binary: its main module's
// version, with the VCS revision it was built from (shortened) and
// "+dirty" if the tree had changes, or "devel" for a build without a
// version.
var buildVersion = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev string
	var dirty bool
	for _, st := range info.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			dirty = st.Value == "true"
		}
	}
	if rev == "" {
		return v
	}
	rev = rev[:min(len(rev), 12)]
	if strings.Contains(v, rev) {
		return v // a version the go command stamped from VCS: it names the revision (and +dirty) already
	}
	v += " " + rev
	if dirty {
		v += "+dirty"
	}
	return v
})

// handleMembersAPI registers GET /api/v1/members, the members view. It is
// open to every client, as the binary protocol's member list and /status
// are.
func (s *Server) handleMembersAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/members", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Members(), nil)
	})
	mux.HandleFunc("/api/v1/members", methodNotAllowed("GET"))
}
