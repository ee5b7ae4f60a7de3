package recipes

import (
	"context"
	"errors"
	"sync"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// ErrNotHeld is returned by a release of what the value does not hold.
var ErrNotHeld = errors.New("not held")

// ErrHeldInOtherMode is returned when an RWMutex value that holds one mode
// is asked for the other.
var ErrHeldInOtherMode = errors.New("held in the other mode")

// ErrUpgradeInProgress is returned at once by an Upgrade while another
// holder of the lock is upgrading: the two would wait for each other's
// read hold forever. The caller keeps its read hold.
var ErrUpgradeInProgress = errors.New("another holder is upgrading the lock")

// hold is what a Mutex, RWMutex or Election value holds: one node of its
// queue, a hold count, the node's czxid as the fencing token and the
// channel closed if the session ends during the hold.
type hold struct {
	q         *queue
	reentrant bool          // a second acquire counts (locks) or is a no-op (an election)
	turnstile chan struct{} // capacity 1: one acquire or release at a time

	mu    sync.Mutex // guards the fields below
	t     ticket     // the held node; t.Name is "" when nothing is held
	mode  lockq.Kind // what is held: t's kind, or what the hold changed to
	count int
	lost  chan struct{} // closed if the session ends during the hold
	freed chan struct{} // closed at release: stops watching for the session's end
}

func newHold(q *queue, reentrant bool) *hold {
	return &hold{q: q, reentrant: reentrant, turnstile: make(chan struct{}, 1), lost: make(chan struct{})}
}

func (h *hold) enter(ctx context.Context) error {
	select {
	case h.turnstile <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hold) leave() { <-h.turnstile }

// acquire takes a node of kind with data and waits its turn by the queue's
// rules (or, with wait false, gives up at once when it would have to wait,
// returning false). A cancelled or failed wait removes the node.
func (h *hold) acquire(ctx context.Context, kind lockq.Kind, data []byte, wait bool) (bool, error) {
	if err := h.enter(ctx); err != nil {
		return false, err
	}
	defer h.leave()
	h.mu.Lock()
	if h.t.Name != "" {
		defer h.mu.Unlock()
		select {
		case <-h.lost:
			return false, h.q.c.Err() // the hold ended with the session
		default:
		}
		if h.mode != kind {
			return false, ErrHeldInOtherMode
		}
		if h.reentrant {
			h.count++
		}
		return true, nil
	}
	h.mu.Unlock()

	t, err := h.q.enqueue(ctx, kind, data)
	if err != nil {
		return false, err
	}
	if err := h.q.turn(ctx, t, wait); err != nil {
		if rerr := h.q.giveUp(ctx, t); rerr != nil && ctx.Err() == nil {
			err = errors.Join(err, rerr)
		}
		if errors.Is(err, errWouldBlock) {
			return false, nil
		}
		return false, err
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.t, h.mode, h.count = t, kind, 1
	h.lost, h.freed = watchSession(h.q.c, t.owner)
	return true, nil
}

// change turns a hold of mode from into one of mode to without letting
// go, waiting (for an upgrade) until the hold may have the new mode. A
// wait that fails or ends takes the change back: the hold keeps mode from.
func (h *hold) change(ctx context.Context, from, to lockq.Kind, data []byte) error {
	if err := h.enter(ctx); err != nil {
		return err
	}
	defer h.leave()
	h.mu.Lock()
	t, mode, lost := h.t, h.mode, h.lost
	h.mu.Unlock()
	switch {
	case t.Name == "" || mode != from:
		return ErrNotHeld
	case isClosed(lost):
		return h.q.c.Err()
	}
	t, err := h.q.change(ctx, t, to, data)
	if err != nil {
		return err
	}
	if err := h.q.turn(ctx, t, true); err != nil {
		t, rerr := h.q.unchange(context.WithoutCancel(ctx), t)
		h.mu.Lock()
		h.t = t
		h.mu.Unlock()
		if errors.Is(err, errUpgradeRefused) {
			err = ErrUpgradeInProgress
		}
		return errors.Join(err, rerr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.t, h.mode = t, to
	return nil
}

// watchSession returns a lost channel, closed if the session that created
// a node (owner) ends before the returned freed channel is closed.
func watchSession(c *client.Client, owner int64) (lost, freed chan struct{}) {
	lost, freed = make(chan struct{}), make(chan struct{})
	id, done := c.Session()
	if id != owner {
		close(lost) // a renewed client: the node's session is over already
		return lost, freed
	}
	go func() {
		select {
		case <-done:
			close(lost)
		case <-freed:
		}
	}()
	return lost, freed
}

// release gives up one hold of kind (all of them with all), deleting the
// node when the count reaches zero. If the session ended during the hold it
// says so: what the hold protected may have been changed by another holder.
func (h *hold) release(ctx context.Context, kind lockq.Kind, all bool) error {
	if err := h.enter(ctx); err != nil {
		return err
	}
	defer h.leave()
	h.mu.Lock()
	if h.t.Name == "" || h.mode != kind {
		h.mu.Unlock()
		return ErrNotHeld
	}
	if h.count--; h.count > 0 && !all {
		h.mu.Unlock()
		return nil
	}
	t, lost := h.t, h.lost
	h.t, h.mode, h.count = ticket{}, "", 0
	close(h.freed)
	h.mu.Unlock()

	select {
	case <-lost:
		return h.q.c.Err()
	default:
	}
	return h.q.leave(ctx, t)
}

// held returns the kind held, or "".
func (h *hold) held() lockq.Kind {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.t.Name == "" {
		return ""
	}
	select {
	case <-h.lost:
		return ""
	default:
		return h.mode
	}
}

func (h *hold) fencingToken() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t.czxid
}

func (h *hold) lostChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
