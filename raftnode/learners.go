package raftnode

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"
	"go.uber.org/zap"
)

// Learners configured at start (Config.Learners: ZooKeeper's observers).
// A new group bootstraps its voters alone; each learner starts as a member
// that joins, and the leader adds it, as a learner, once it leads. A
// learner that was removed is not added again: every member notes a
// removal in its store (under "r" + id) as it applies it, so that a
// member that leads later knows. (A member that caught up from a snapshot
// taken after the removal does not know of it, and may add the learner
// again if it is still running with its old flags.)

// learnerEvery is how often a leader looks for configured learners to add.
const learnerEvery = time.Second

func (s *Storage) setRemoved(id uint64) error {
	return s.db.Set(s.ks.key(kindRemoved, id), nil, pebble.Sync)
}

func (s *Storage) clearRemoved(id uint64) error {
	return s.db.Delete(s.ks.key(kindRemoved, id), pebble.Sync)
}

// removedMembers lists the members marked removed.
func (s *Storage) removedMembers() (map[uint64]bool, error) {
	out := map[uint64]bool{}
	err := s.eachID(kindRemoved, func(id uint64, _ []byte) { out[id] = true })
	return out, err
}

func (s *Storage) wasRemoved(id uint64) bool {
	_, closer, err := s.db.Get(s.ks.key(kindRemoved, id))
	if err != nil {
		return false
	}
	closer.Close()
	return true
}

// isLearner reports whether this member is one of the configured learners.
func (c *Config) isLearner(id uint64) bool { return slices.Contains(c.Learners, id) }

// addLearners runs until the node stops: while this member leads, it adds
// each configured learner that is not a member and was never removed.
func (n *Node) addLearners() {
	tick := time.NewTicker(learnerEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-n.donec:
			return
		}
		for _, id := range n.cfg.Learners {
			if !n.IsLeader() || n.isMember(id) || n.storage.wasRemoved(id) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*n.retryAfter())
			err := n.AddMember(ctx, id, n.cfg.Peers[id], true)
			cancel()
			switch {
			case err == nil:
				n.log.Info("added a configured learner", zap.Uint64("id", id))
			case !errors.Is(err, ErrMemberExists):
				n.log.Debug("adding a configured learner", zap.Uint64("id", id), zap.Error(err))
			}
		}
	}
}
