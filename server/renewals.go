package server

import (
	"context"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/tree"
)

// Lease renewals are many and small: a lock service renews every held
// lease at a third of its TTL, tens of thousands a second. Each as an
// entry of its own would cost the log, every member's apply and the
// proposer's waiter as much as a create, for a few bytes of change. So a
// member proposes the renewals that arrive together as one txn
// (tree.TxnRenewLeases), group-commit style: a renewal that finds fewer
// than maxRenewalBatches batches in flight is proposed at once, in a batch
// with whatever else waits; otherwise it waits for the first of them to
// apply, and goes with the others that gathered meanwhile. An idle member
// adds no wait to a lone renewal; a busy one makes batches as large as its
// commits are slow.
//
// Each renewal in a batch is applied on its own and answered with its own
// result. Its time, from which its lease's new expiry counts, is the
// batch's, taken when the batch is proposed: after the renewal arrived,
// and so after its client sent it, as the holder's stop-by deadline needs
// (docs/locks.md).
const (
	maxRenewalBatches = 4    // batches in flight at once
	maxRenewalBatch   = 1024 // renewals in one batch
)

// renewals gathers the renewals waiting for a batch.
type renewals struct {
	node    *raftnode.Node
	timeout time.Duration // a batch's, from its proposal: the request timeout

	mu       sync.Mutex
	queue    []*renewal // mu guards queue and inflight
	inflight int        // batches proposed and not yet applied
}

// renewal is one lease's renewal on its way through a batch.
type renewal struct {
	lease, ttl int64 // ttl in ms; 0: the lease's own
	done       chan struct{}
	out        raftnode.Outcome // set before done closes
}

// Wait waits for the renewal's outcome, whose Result is its *tree.Result,
// or for ctx.
func (r *renewal) Wait(ctx context.Context) raftnode.Outcome {
	select {
	case <-r.done:
		return r.out
	case <-ctx.Done():
		return raftnode.Outcome{Err: ctx.Err()}
	}
}

// renew queues a renewal of lease for ttl ms (0: its own TTL), and
// proposes a batch if fewer than maxRenewalBatches are in flight.
func (b *renewals) renew(lease, ttl int64) *renewal {
	r := &renewal{lease: lease, ttl: ttl, done: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue = append(b.queue, r)
	if b.inflight < maxRenewalBatches {
		b.startLocked()
	}
	return r
}

// flush proposes every renewal still waiting, now, whatever is in flight:
// a connection does so before it proposes a write of its own after a
// renewal, so that its writes apply in the order it sent them. A renewal
// is either waiting or handed to raft (proposeLocked holds mu until raft
// has it), so none is missed.
func (b *renewals) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		b.startLocked()
	}
}

// startLocked proposes the next batch, before it returns, and answers it
// on a goroutine of its own, which goes on with the batches after it.
func (b *renewals) startLocked() {
	b.inflight++
	go b.run(b.proposeLocked())
}

// proposedBatch is a batch handed to raft, and its renewals.
type proposedBatch struct {
	p       *raftnode.Proposal
	ctx     context.Context
	cancel  context.CancelFunc
	members []*renewal
}

// proposeLocked takes the next batch off the queue and hands it to raft.
// It returns once raft has it, in order after every proposal made before.
func (b *renewals) proposeLocked() proposedBatch {
	n := min(len(b.queue), maxRenewalBatch)
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	txn := tree.Txn{Type: tree.TxnRenewLeases, Time: time.Now().UnixMilli(), Ops: make([]tree.Txn, len(batch))}
	for i, r := range batch {
		txn.Ops[i] = tree.Txn{Type: tree.TxnRenewLease, Session: r.lease, LeaseTTL: r.ttl}
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	return proposedBatch{p: b.node.Propose(ctx, tree.AppendTxn(nil, &txn)), ctx: ctx, cancel: cancel, members: batch}
}

// run waits for pb's outcome and answers its renewals, then proposes the
// renewals that gathered meanwhile, until none is left.
func (b *renewals) run(pb proposedBatch) {
	for {
		o := pb.p.Wait(pb.ctx)
		pb.cancel()
		res, _ := o.Result.(*tree.Result)
		for i, r := range pb.members {
			r.out = raftnode.Outcome{Index: o.Index, Err: o.Err}
			switch {
			case o.Err != nil:
			case i < len(res.Renewals):
				r.out.Result = &res.Renewals[i]
			default:
				r.out.Result = res // refused whole (a malformed txn)
			}
			close(r.done)
		}
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.inflight--
			b.mu.Unlock()
			return
		}
		pb = b.proposeLocked()
		b.mu.Unlock()
	}
}

// renewLease renews lease for ttl ms (0: its own TTL) through a batch, and
// waits for the outcome; its errors are write's.
func (s *Server) renewLease(ctx context.Context, lease, ttl int64) (*tree.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	o := s.renewals.renew(lease, ttl).Wait(ctx)
	if o.Err != nil {
		return nil, s.writeError(o.Err)
	}
	res := o.Result.(*tree.Result)
	return res, res.Err
}
