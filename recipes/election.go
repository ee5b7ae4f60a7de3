package recipes

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// ErrNoLeader is returned by Election.Leader when no candidate campaigns.
var ErrNoLeader = errors.New("no leader")

// Election is leader election on a path. Each candidate makes an
// ephemeral-sequential node holding its value; the lowest is the leader,
// and each other candidate watches only the candidate just before it, so a
// leader's departure wakes exactly its successor.
type Election struct {
	path string
	q    *queue
	h    *hold
}

// NewElection returns an Election on path for the session of c. Of the
// options, WithACL, WithClockDrift and WithSafetyMargin apply (a
// candidate's node holds the value given to Campaign).
func NewElection(c *client.Client, path string, opts ...Option) *Election {
	o := newOptions(opts)
	q := newQueue(c, path, options{acl: o.acl})
	return &Election{path: path, q: q, h: newHold(q, false, o)}
}

// Campaign enters the election with value and waits until this candidate
// leads. When ctx ends first, the candidacy is withdrawn. Campaign on a
// leader returns at once.
func (e *Election) Campaign(ctx context.Context, value []byte) error {
	_, err := e.h.acquire(ctx, lockq.Candidate, value, true)
	return opError("campaign", e.path, err)
}

// Resign gives up the leadership, which passes to the next candidate.
func (e *Election) Resign(ctx context.Context) error {
	return opError("resign", e.path, e.h.release(ctx, lockq.Candidate, true))
}

// IsLeader reports whether this candidate leads (and its session lives).
func (e *Election) IsLeader() bool { return e.h.held() != "" }

// Token returns the fencing token of the current leadership (0 when not
// leading): successive leaders get strictly increasing tokens.
func (e *Election) Token() int64 { return e.h.fencingToken() }

// Lost returns a channel closed if the session ends while this candidate
// leads, or its stop-by deadline (Deadline) passes first: from then on
// another may lead.
func (e *Election) Lost() <-chan struct{} { return e.h.lostChan() }

// Deadline returns the leadership's stop-by deadline (see
// Mutex.Deadline, for a hold of the session alone): the last moment at
// which no other candidate can have been elected. It is the zero time
// when this candidate does not lead.
func (e *Election) Deadline() time.Time { return e.h.deadline() }

// Leader returns the value of the current leader, or ErrNoLeader.
func (e *Election) Leader(ctx context.Context) ([]byte, error) {
	for {
		es, err := e.q.entries(ctx)
		if err != nil {
			return nil, opError("leader", e.path, err)
		}
		if len(es) == 0 {
			return nil, opError("leader", e.path, ErrNoLeader)
		}
		data, _, err := e.q.c.Get(ctx, e.q.path(es[0]))
		if errors.Is(err, client.ErrNoNode) || errors.Is(err, client.ErrConnectionLoss) {
			continue
		}
		return data, opError("leader", e.path, err)
	}
}

// Observe returns a channel that receives the current leader's value, and
// then the value of each new leader (or a leader's changed value), until
// ctx ends or the session does; then it is closed. While there is no
// leader it receives nothing. Values are not queued: a reader that falls
// behind gets the latest when it reads. Observing watches only the
// leader's node (and, while there is none, the election's children).
// Follow does the same and says why it stopped.
func (e *Election) Observe(ctx context.Context) <-chan []byte {
	ch := make(chan []byte)
	go func() {
		defer close(ch)
		_ = e.Follow(ctx, func(value []byte) error {
			select {
			case ch <- value:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return ch
}

// Follow calls fn with the current leader's value, and then with the value
// of each new leader (or a leader's changed value), as Observe sends them,
// until ctx ends (it returns nil), fn returns an error (it returns that),
// the session ends, or the election cannot be read (it returns why).
func (e *Election) Follow(ctx context.Context, fn func(value []byte) error) error {
	var lastNode string
	var last []byte
	for {
		var ferr error
		ev, err := e.nextLeader(ctx, func(node string, value []byte) bool {
			if node == lastNode && bytes.Equal(value, last) {
				return true
			}
			if ferr = fn(value); ferr != nil {
				return false
			}
			lastNode, last = node, value
			return true
		})
		switch {
		case ferr != nil:
			return ferr
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return opError("follow", e.path, err)
		}
		select {
		case ev := <-ev:
			if ev.Type == client.EventSession {
				return opError("follow", e.path, ev.Err)
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// nextLeader finds the leader, tells report its node and value, and
// returns a watch that fires when the leader may have changed.
func (e *Election) nextLeader(ctx context.Context, report func(node string, value []byte) bool) (<-chan client.Event, error) {
	for {
		es, err := e.q.entries(ctx)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			// Wait for a candidate: a child watch on the election's
			// node, or an exists watch while the node is missing.
			names, _, ev, err := e.q.c.ChildrenW(ctx, e.path)
			switch {
			case errors.Is(err, client.ErrNoNode):
				// Assigned, not declared: the node made since the
				// ChildrenW (ok) must list the queue again, not end
				// the observer with that stale ErrNoNode.
				var ok bool
				ok, _, ev, err = e.q.c.ExistsW(ctx, e.path)
				if err == nil && !ok {
					return ev, nil
				}
			case err == nil && len(lockq.Sort(names)) == 0:
				return ev, nil
			}
			if err != nil && !errors.Is(err, client.ErrConnectionLoss) {
				return nil, err
			}
			continue
		}
		value, _, ev, err := e.q.c.GetW(ctx, e.q.path(es[0]))
		switch {
		case errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrConnectionLoss):
			continue
		case err != nil:
			return nil, err
		}
		if !report(es[0].Name, value) {
			return nil, nil // report says why
		}
		return ev, nil
	}
}
