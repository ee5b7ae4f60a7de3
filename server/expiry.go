package server

import (
	"context"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// expiryInterval is how often the leader looks for expired sessions; a
// silent session is closed within its timeout plus this.
const expiryInterval = 100 * time.Millisecond

// reapInterval is how often the leader looks for empty containers and
// expired TTL nodes.
const reapInterval = time.Second

// expiryLoop runs on every server but acts only on the leader, which owns
// expiry: it proposes the close of each session that missed its deadline
// and the reaping of containers and TTL nodes.
func (s *Server) expiryLoop() {
	defer s.wg.Done()
	tick := time.NewTicker(expiryInterval)
	defer tick.Stop()
	var ledTerm uint64                // the term whose leadership reset the deadlines
	refusing := false                 // the member refuses clients: it said so once
	proposed := map[int64]time.Time{} // closes proposed and not yet applied
	var lastReap time.Time
	for {
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		}
		now := time.Now()
		if err := s.vouchForSessions(); err != nil {
			// Cut off from any leader, or unheard by it, this member
			// cannot keep sessions alive: its clients go to members that
			// can, as ZooKeeper's do when their server loses the leader.
			// Those it serves read-only stay (readOnlySession).
			if !refusing {
				s.log.Warn("closing client connections", zap.Error(err))
			}
			refusing = true
			s.dropConns(wire.CodeNoQuorum, func(c *conn) bool { return !c.readOnly.Load() })
			if !s.node.IsLeader() {
				s.forwardHeard() // its probe tells when the leader hears this member again
			}
			continue
		}
		if s.readOnlyConns.Load() > 0 && s.leaderAnswers() {
			// Read-write again: the read-only clients go, to come back
			// (here or elsewhere) as read-write ones. At every tick, not
			// only when it stops refusing: a handshake may have made one
			// during a gap between two leaders that this loop never saw.
			s.dropConns(wire.CodeConnectionLoss, func(c *conn) bool { return c.readOnly.Load() })
		}
		refusing = false
		term := s.node.Term() // read before IsLeader: a later term only fails the proposals
		leader := s.node.IsLeader()
		if leader && term != ledTerm {
			// A new leader cannot know when sessions were last heard
			// from: each gets a full timeout from now. (A term has one
			// leader, so a new term is a new leadership, even of a
			// member that led before it.)
			s.sessions.ResetAll(now)
			ledTerm = term
		}
		if !leader {
			s.forwardHeard()
			continue
		}
		expired := s.sessions.Expired(now)
		live := make(map[int64]time.Time, len(expired))
		for _, id := range expired {
			at, ok := proposed[id]
			if !ok || now.Sub(at) > s.cfg.RequestTimeout {
				// A lease is closed at the version seen: a renewal that
				// commits first keeps it.
				version, lease := s.sessions.LeaseVersion(id)
				if !s.delayBeforeClose(id, now, term) {
					continue // tried again at the next tick
				}
				s.log.Info("session expired", zap.Int64("session", id), zap.Bool("lease", lease))
				s.proposeAsync(&tree.Txn{Type: tree.TxnCloseSession, Session: id, LeaseVersion: version, Time: now.UnixMilli(),
					Cause: tree.CauseExpiry}, term)
				at = now
			}
			live[id] = at
		}
		proposed = live
		if now.Sub(lastReap) >= reapInterval {
			lastReap = now
			var due bool
			s.fsm.read(func(t *tree.Tree) { due = len(t.Reapable(now.UnixMilli())) > 0 })
			if due {
				s.proposeAsync(&tree.Txn{Type: tree.TxnReap, Time: now.UnixMilli()}, term)
			}
		}
	}
}

// proposeAsync proposes a housekeeping txn, decided as the leader of
// term, without waiting for it; if it is lost the loop proposes it again.
// It enters the log only while this member still leads in term: a leader
// that was stopped may decide on deadlines its successor has moved, and
// raft would forward its proposal to that successor.
func (s *Server) proposeAsync(txn *tree.Txn, term uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	s.node.ProposeAsLeader(ctx, tree.AppendTxn(nil, txn), term)
}

// heardFrom records that a client of session id spoke: its deadline moves
// here, and a follower forwards it to the leader, which owns expiry.
func (s *Server) heardFrom(id int64) {
	s.sessions.Touch(id, time.Now())
	if s.transport == nil || s.node.IsLeader() {
		return
	}
	s.mu.Lock()
	s.heard[id] = struct{}{}
	s.mu.Unlock()
}

// vouchForSessions says whether this member may tell its clients that
// their sessions live, as a ping's answer does. The leader keeps the
// sessions' deadlines, so only while this member knows a leader, and has
// evidence that raft is live between them:
//   - as a follower, that the leader hears the touches it forwards
//     (raftnode's touch probes). A member whose messages are lost on their
//     way to the leader while it still hears the leader (a one-way cut)
//     would otherwise answer pings while the leader expires the sessions.
//   - as the leader, that its raft goroutine heard from a quorum lately. A
//     leader cut off from the others, or whose raft goroutine stands still
//     (a slow disk, no CPU), would otherwise extend sessions that a new
//     leader elected meanwhile is expiring; raft's check-quorum makes it
//     step down, but only once its raft goroutine runs.
//
// Without that evidence for contactTimeout, it refuses, and the expiry
// loop drops its clients: they move to a member that can vouch. A
// follower in an election (raft knows no leader) is judged by its last
// leader's evidence for half an election timeout: an election ends in
// far less (a round of votes), and dropping the clients at once sent
// those of every member of a cluster whose leader was killed to reconnect
// at the same moment; with 10,000 sessions, some ran out of session
// timeout before they were back. An election that lasts longer is one
// this member cannot win or hear of (a partition), and then it refuses.
// A leader that stepped down has no such grace: QuorumContact no longer
// tells it anything.
func (s *Server) vouchForSessions() error {
	now := time.Since(s.started)
	leader := s.node.Leader()
	s.leaderMu.Lock()
	if leader != 0 && now > s.leaderSeen {
		s.lastLeader, s.leaderSeen = leader, now
	}
	last, seen := s.lastLeader, s.leaderSeen
	s.leaderMu.Unlock()
	w := witness{
		self: s.node.ID(), leader: leader, last: last, alone: s.transport == nil,
		leaderless: now - seen, timeout: s.contactTimeout(),
		grace: time.Duration(s.cfg.ElectionTicks) * s.cfg.TickInterval / 2,
	}
	if !w.alone {
		w.quorumContact = s.node.QuorumContact
		w.unanswered = s.transport.TouchesUnanswered
	}
	return w.vouch()
}

// witness is what vouchForSessions judges by.
type witness struct {
	self, leader, last uint64                        // this member, raft's leader (0: none), the last leader known
	alone              bool                          // a member with no peers
	leaderless         time.Duration                 // since raft last knew a leader
	timeout, grace     time.Duration                 // contactTimeout, and an election's grace
	quorumContact      func() time.Duration          // as leader, since it heard from a quorum
	unanswered         func(id uint64) time.Duration // since id left this member's probes unanswered
}

func (w witness) vouch() error {
	leader := w.leader
	if leader == 0 && !w.alone && w.last != w.self && w.leaderless <= w.grace {
		leader = w.last // an election: the last leader's evidence stands, a little while
	}
	switch {
	case leader == 0:
		return wire.Errorf(wire.CodeNoQuorum, "no leader")
	case w.alone:
		return nil
	case leader == w.self:
		if d := w.quorumContact(); d > w.timeout {
			return wire.Errorf(wire.CodeNoQuorum, "this leader has not heard from a quorum for %v", d.Round(time.Millisecond))
		}
	default:
		if d := w.unanswered(leader); d > w.timeout {
			return wire.Errorf(wire.CodeNoQuorum, "the leader (member %d) has not answered this member for %v", leader, d.Round(time.Millisecond))
		}
	}
	return nil
}

// leaderAnswers reports whether this member leads, or has no probe of the
// leader's waiting for its answer. Back from a partition, a member vouches
// for sessions while the probes it sent into the cut are younger than
// contactTimeout, before the leader answered any: its read-only clients
// wait for that answer, or they would come back read-write only to be
// dropped again when those probes age past the timeout.
func (s *Server) leaderAnswers() bool {
	if s.transport == nil || s.node.IsLeader() {
		return true
	}
	return s.transport.TouchesUnanswered(s.node.Leader()) == 0
}

// contactTimeout is how long a member goes without news from the others
// before it stops vouching for sessions: two election timeouts, so that a
// short hiccup of a loaded machine does not send clients away.
func (s *Server) contactTimeout() time.Duration {
	return 2 * time.Duration(s.cfg.ElectionTicks) * s.cfg.TickInterval
}

// forwardHeard sends the leader the sessions heard from since the last
// call. It runs every expiryInterval, far more often than any session
// timeout.
func (s *Server) forwardHeard() {
	leader := s.node.Leader()
	if s.transport == nil || leader == 0 {
		return
	}
	s.mu.Lock()
	ids := make([]int64, 0, len(s.heard))
	for id := range s.heard {
		ids = append(ids, id)
	}
	clear(s.heard)
	s.mu.Unlock()
	if len(ids) > 0 {
		s.transport.SendTouches(leader, ids)
	} else {
		// A probe every round, touches or not: an answer soon clears one
		// lost earlier, so that only a link that goes on losing
		// everything keeps one unanswered (vouchForSessions).
		s.transport.Probe(leader)
	}
}

// touchSessions takes the sessions a follower heard from.
func (s *Server) touchSessions(ids []int64) {
	now := time.Now()
	for _, id := range ids {
		s.sessions.Touch(id, now)
	}
}
