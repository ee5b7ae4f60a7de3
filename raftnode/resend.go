package raftnode

import (
	"encoding/binary"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Proposals a follower forwarded, sent again. Raft forwards a follower's
// proposal to the leader once, and does not send it again when the
// network loses it: the write would wait out its caller's deadline, with
// an unknown outcome. So a follower whose proposal is not applied within
// retryAfter proposes it again, with the same id, until it is applied or
// its caller gives up; and every member keeps the ids of the entries
// recently in its log, so that a leader drops a proposal it already has
// (the first copy was slow, not lost) rather than append it twice. A
// leader change fails the pending proposals as before (ErrLeaderChanged):
// sending again covers a lost message within one leader's term.

// seenIDs is the set of proposal ids recently in this member's log, in two
// generations of window each (Config.ResendWindow: longer than any caller
// waits for a proposal, so that a copy sent again is never mistaken for a
// new one), so that forgetting is cheap. It costs about 30 bytes an
// entry: some 10 MB at 20,000 writes a second with the server's window of
// its request timeout and 2 s.
type seenIDs struct {
	mu       sync.Mutex
	window   time.Duration
	cur, old map[uint64]struct{}
	rotated  time.Time
}

func (s *seenIDs) add(id uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(now)
	s.cur[id] = struct{}{}
}

func (s *seenIDs) has(id uint64, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rotate(now)
	_, inCur := s.cur[id]
	_, inOld := s.old[id]
	return inCur || inOld
}

func (s *seenIDs) rotate(now time.Time) {
	switch {
	case s.cur == nil:
		s.cur, s.rotated = map[uint64]struct{}{}, now
	case now.Sub(s.rotated) >= s.window:
		s.old, s.cur, s.rotated = s.cur, make(map[uint64]struct{}, len(s.cur)), now
	}
}

// entryID is the proposal id a normal entry carries, and whether it has
// one (raft's own empty entries do not).
func entryID(e raftpb.Entry) (uint64, bool) {
	if e.Type != raftpb.EntryNormal || len(e.Data) < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(e.Data), true
}

// noteEntries remembers the ids of entries this member appends to its log.
func (n *Node) noteEntries(ents []raftpb.Entry) {
	now := time.Now()
	for _, e := range ents {
		if id, ok := entryID(e); ok {
			n.seen.add(id, now)
		}
	}
}

// dropSeen takes out of a proposal message, on the leader, the entries
// already in its log, and remembers the others: it reports false when
// none is left to step.
func (n *Node) dropSeen(m *raftpb.Message) bool {
	if m.Type != raftpb.MsgProp || n.leader.Load() != n.cfg.ID {
		return true
	}
	now := time.Now()
	kept := m.Entries[:0:0]
	for _, e := range m.Entries {
		id, ok := entryID(e)
		switch {
		case !ok:
			kept = append(kept, e)
		case n.seen.has(id, now):
		default:
			n.seen.add(id, now)
			kept = append(kept, e)
		}
	}
	m.Entries = kept
	return len(kept) > 0
}

// retryAfter is how long a member waits for raft before it asks again: a
// proposal it forwarded, or a read index. Two election timeouts: longer
// than any answer takes while the leader is up.
func (n *Node) retryAfter() time.Duration {
	return time.Duration(2*n.cfg.ElectionTicks) * n.cfg.TickInterval
}

// resend proposes p again, if this member is a follower: a leader's own
// proposal goes into its log at once and is not lost on the way.
func (n *Node) resend(p proposal) {
	if n.IsLeader() {
		return
	}
	p.resend = true
	select {
	case n.propc <- p:
	default: // busy: the next retry
	}
}
