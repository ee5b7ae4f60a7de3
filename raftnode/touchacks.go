package raftnode

import (
	"sync"
	"time"
)

// Whether the session touches a member forwards reach the leader. A member
// whose messages are lost on their way to the leader while it still hears
// the leader (a one-way cut) would go on answering its clients' pings
// while the leader, hearing nothing of their sessions, expires them. So
// each batch of touches, and each member card (sent to every peer once a
// second, so that a member soon knows which peers answer probes), is
// followed on the same ordered link by a probe that the receiving member
// answers at once with an ack: a probe left unanswered tells the sender
// that what it sends is not arriving. (A follower also probes its leader
// every 100 ms when it has no touches to send, so that one probe lost in
// a short outage is soon followed by one that is answered.)

// touchAcks tracks the probes sent to each peer.
type touchAcks struct {
	mu      sync.Mutex
	pending map[uint64]time.Time // peer -> when its oldest unanswered probe was sent
	knows   map[uint64]bool      // peers that answered a probe once: members that know probes
}

// sent notes a probe sent to member to.
func (a *touchAcks) sent(to uint64, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending, a.knows = map[uint64]time.Time{}, map[uint64]bool{}
	}
	if _, ok := a.pending[to]; !ok {
		a.pending[to] = now
	}
}

// acked notes member from's answer to every probe sent to it before.
func (a *touchAcks) acked(from uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending, a.knows = map[uint64]time.Time{}, map[uint64]bool{}
	}
	delete(a.pending, from)
	a.knows[from] = true
}

// answers reports whether member id has answered a probe.
func (a *touchAcks) answers(id uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.knows[id]
}

// unanswered is how long the oldest probe sent to member to has waited
// for its answer: 0 when none waits, or when to never answered one (a
// member of an older version, which skips probes, cannot be told from
// one cut off since it started).
func (a *touchAcks) unanswered(to uint64, now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	since, ok := a.pending[to]
	if !ok || !a.knows[to] {
		return 0
	}
	return now.Sub(since)
}
