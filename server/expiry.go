package server

import (
	"context"
	"time"

	"github.com/arbor-coord/arbor/tree"
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
	wasLeader := false
	proposed := map[int64]time.Time{} // closes proposed and not yet applied
	var lastReap time.Time
	for {
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		}
		now := time.Now()
		leader := s.node.IsLeader()
		if leader && !wasLeader {
			// A new leader cannot know when sessions were last heard
			// from: each gets a full timeout from now.
			s.sessions.ResetAll(now)
		}
		wasLeader = leader
		if !leader {
			continue
		}
		expired := s.sessions.Expired(now)
		live := make(map[int64]time.Time, len(expired))
		for _, id := range expired {
			at, ok := proposed[id]
			if !ok || now.Sub(at) > s.cfg.RequestTimeout {
				s.log.Info("session expired", zap.Int64("session", id))
				s.proposeAsync(&tree.Txn{Type: tree.TxnCloseSession, Session: id, Time: now.UnixMilli()})
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
				s.proposeAsync(&tree.Txn{Type: tree.TxnReap, Time: now.UnixMilli()})
			}
		}
	}
}

// proposeAsync proposes a housekeeping txn without waiting for it; if it is
// lost the loop proposes it again.
func (s *Server) proposeAsync(txn *tree.Txn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	s.node.Propose(ctx, tree.AppendTxn(nil, txn))
}
