package raftnode

import (
	"encoding/binary"
	"slices"
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
// recently forwarded to it, so that a leader drops a proposal it already
// has (the first copy was slow, not lost) rather than append it twice. A
// leader change fails the pending proposals as before (ErrLeaderChanged):
// sending again covers a lost message within one leader's term.

// seenIDs is the set of the ids of the proposals forwarded to this member
// while it led, in two generations of window each (Config.ResendWindow:
// longer than any caller waits for a proposal, so that a copy sent again
// is never mistaken for a new one), so that forgetting is cheap. Only
// forwarded proposals are ever sent again, and a copy is taken only in the
// term of its first send, when its leader saw that first send itself. It
// costs about 30 bytes a forwarded write: some 10 MB at 20,000 of them a
// second with the server's window of its request timeout and 2 s.
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

// copyBit marks, in an entry's id, a copy sent again: its data is then
// the id, the raft term of the first send, and the payload. A leader takes
// a copy only in that term (dropSeen): within its own term it appended
// every entry itself, so its seen ids are complete, while an older term's
// entries may have reached it in its log at start or in a snapshot.
// Proposal ids stay below it.
const copyBit = 1 << 63

// entryData is the data of p's entry: its id and payload, with the term of
// the first send between them for a copy.
func entryData(p proposal) []byte {
	if !p.resend {
		data := make([]byte, 8+len(p.payload))
		binary.BigEndian.PutUint64(data, p.id)
		copy(data[8:], p.payload)
		return data
	}
	data := make([]byte, 16+len(p.payload))
	binary.BigEndian.PutUint64(data, p.id|copyBit)
	binary.BigEndian.PutUint64(data[8:], p.sent)
	copy(data[16:], p.payload)
	return data
}

// entryPayload is the proposal id and payload of a normal entry, and
// whether it has them (raft's own empty entries do not).
func entryPayload(e raftpb.Entry) (id uint64, payload []byte, ok bool) {
	if e.Type != raftpb.EntryNormal || len(e.Data) < 8 {
		return 0, nil, false
	}
	id = binary.BigEndian.Uint64(e.Data)
	if id&copyBit == 0 {
		return id, e.Data[8:], true
	}
	if len(e.Data) < 16 {
		return 0, nil, false
	}
	return id &^ copyBit, e.Data[16:], true
}

// entryID is the proposal id a normal entry carries, and whether it has
// one.
func entryID(e raftpb.Entry) (uint64, bool) {
	id, _, ok := entryPayload(e)
	return id, ok
}

// copyTerm is the term of the first send of a copy, and whether e is one.
func copyTerm(e raftpb.Entry) (uint64, bool) {
	if e.Type != raftpb.EntryNormal || len(e.Data) < 16 || binary.BigEndian.Uint64(e.Data)&copyBit == 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(e.Data[8:]), true
}

// noteEntries remembers the ids of the entries of a proposal the leader
// took.
func (n *Node) noteEntries(ents []raftpb.Entry) {
	now := time.Now()
	for _, e := range ents {
		if id, ok := entryID(e); ok {
			n.seen.add(id, now)
		}
	}
}

// dropSeen takes out of a proposal message, on the leader (leading), the
// entries already in its log and the copies of another term: it reports
// false when none is left to step. The leader notes the ids of the others
// once raft took them (step).
func (n *Node) dropSeen(m *raftpb.Message, leading bool) bool {
	if !leading {
		// Not the leader: raft would forward the proposal to the one it
		// knows, which may be of an older version that would append a
		// copy as it is. Copies go no further than here; the first
		// sends go on.
		m.Entries = slices.DeleteFunc(slices.Clone(m.Entries), func(e raftpb.Entry) bool {
			_, isCopy := copyTerm(e)
			return isCopy
		})
		return len(m.Entries) > 0
	}
	now, term := time.Now(), n.rn.BasicStatus().Term
	kept := m.Entries[:0:0]
	for _, e := range m.Entries {
		id, ok := entryID(e)
		sent, isCopy := copyTerm(e)
		switch {
		case !ok:
			kept = append(kept, e)
		case isCopy && sent != term, n.seen.has(id, now):
		default:
			if isCopy {
				// Into the log as the first send would have gone: no
				// member ever applies a copy's form.
				_, payload, _ := entryPayload(e)
				e.Data = entryData(proposal{id: id, payload: payload})
			}
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

// prober is a Transport that knows which peers answer its probes (the
// TCP and in-memory transports): members of a version that also takes
// copies of proposals.
type prober interface {
	AnswersProbes(id uint64) bool
}

// resend proposes p again, if this member is a follower (a leader's own
// proposal goes into its log at once and is not lost on the way) and its
// leader knows copies: a member of an older version would append a copy's
// form as it is.
func (n *Node) resend(p proposal) {
	pr, ok := n.cfg.Transport.(prober)
	if n.IsLeader() || !ok || !pr.AnswersProbes(n.Leader()) {
		return
	}
	p.resend = true
	n.props.push(p) // or, when full, the next retry
}
