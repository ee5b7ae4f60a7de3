package raftnode

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Linearizable reads. Each asks raft for a read index (the leader's commit
// index, confirmed by a round of heartbeats to a quorum) and waits until
// this member has applied it. The reads that arrive while one such round
// is under way share the next one, so a thousand reads at once cost a
// round or two of heartbeats rather than a thousand (etcd does the same).
// A round begins after every read that joins it arrived, so its index
// covers every write committed before any of them.

// readRound is one raft read index, shared by the reads that joined it.
type readRound struct {
	done    chan struct{}
	index   uint64
	err     error
	waiting atomic.Int32 // the reads still waiting for it
}

// ReadIndex waits until this member has applied everything committed
// before the call: a read served after it is linearizable. It fails at
// once when this member knows no leader (ErrProposalDropped).
func (n *Node) ReadIndex(ctx context.Context) error {
	n.readMu.Lock()
	r := n.readNext
	if r == nil {
		r = &readRound{done: make(chan struct{})}
		n.readNext = r
	}
	r.waiting.Add(1)
	start := !n.readBusy
	if start {
		n.readBusy, n.readNext = true, nil
	}
	n.readMu.Unlock()
	if start {
		go n.runReads(r)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		r.waiting.Add(-1)
		return ctx.Err()
	}
	if r.err != nil {
		return r.err
	}
	return n.WaitApplied(ctx, r.index)
}

// runReads runs rounds, one at a time, until no read waits for another.
func (n *Node) runReads(r *readRound) {
	for r != nil {
		r.index, r.err = n.readRound(r)
		close(r.done)
		n.readMu.Lock()
		r, n.readNext = n.readNext, nil
		n.readBusy = r != nil
		n.readMu.Unlock()
	}
}

// readRound asks raft for a read index until it gets one, fails for good,
// or no read waits for it any more. A leader change fails raft's pending
// requests (their leader may be gone), so the round asks the new one.
func (n *Node) readRound(r *readRound) (uint64, error) {
	for {
		index, err := n.readIndexOnce()
		switch {
		case err == nil:
			return index, nil
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrLeaderChanged):
			return 0, err
		case r.waiting.Load() <= 0:
			return 0, err
		}
	}
}

// readIndexOnce asks raft for one read index and waits retryAfter at most
// for its answer.
func (n *Node) readIndexOnce() (uint64, error) {
	n.readRounds.Add(1)
	id := n.reqIDs.Add(1)
	w := &pending{done: make(chan struct{})}
	n.mu.Lock()
	if n.err != nil {
		n.mu.Unlock()
		return 0, n.err
	}
	w.epoch = n.epoch
	n.reads[id] = w
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.reads, id)
		n.mu.Unlock()
	}()
	// Raft does not resend a read index request that a follower forwarded
	// and the network lost: after retryAfter the round asks again, which
	// is safe, since a later read index covers all an earlier one would.
	timer := time.NewTimer(n.retryAfter())
	defer timer.Stop()
	select {
	case n.readc <- id:
	case <-timer.C:
		return 0, context.DeadlineExceeded
	case <-n.donec:
		return 0, n.stopErr()
	}
	select {
	case <-w.done:
		return w.out.Index, w.out.Err
	case <-timer.C:
		return 0, context.DeadlineExceeded
	case <-n.donec:
		return 0, n.stopErr()
	}
}
