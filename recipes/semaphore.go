package recipes

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// Semaphore lets at most n holders at a time hold a lease on a path.
//
// It is Curator's semaphore: an Acquire first takes a Mutex on path/lock,
// so only one contender at a time looks at the leases; it makes its lease
// node under path/leases and, while more than n leases are there, waits for
// a change of the leases with the mutex held. So a released lease wakes
// only the one contender at the head of the line, never a herd. All the
// contenders on a path must agree on n.
type Semaphore struct {
	c      *client.Client
	path   string
	n      int
	opts   options
	leases string
}

// NewSemaphore returns a Semaphore on path allowing n holders (n < 1 is
// taken as 1).
func NewSemaphore(c *client.Client, path string, n int, opts ...Option) *Semaphore {
	o := newOptions(opts)
	return &Semaphore{c: c, path: path, n: max(n, 1), opts: o, leases: path + "/leases"}
}

// Lease is one holder's share of a Semaphore.
type Lease struct {
	q     *queue
	t     ticket
	lost  chan struct{}
	freed chan struct{}
	once  sync.Once
}

// Acquire waits for a lease. When ctx ends first, nothing is left behind.
func (s *Semaphore) Acquire(ctx context.Context) (*Lease, error) {
	l, err := s.acquire(ctx, true)
	return l, opError("acquire", s.path, err)
}

// TryAcquire takes a lease if one is free now, and otherwise returns a nil
// Lease at once.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	l, err := s.acquire(ctx, false)
	return l, opError("tryacquire", s.path, err)
}

func (s *Semaphore) acquire(ctx context.Context, wait bool) (*Lease, error) {
	m := newMutex(s.c, s.path+"/lock", s.opts)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	defer m.Unlock(context.WithoutCancel(ctx))

	q := newQueue(s.c, s.leases, s.opts)
	t, err := q.enqueue(ctx, lockq.Lease, s.opts.data, 0)
	if err != nil {
		return nil, err
	}
	if err := s.waitLease(ctx, q, t, wait); err != nil {
		if rerr := q.giveUp(ctx, t); rerr != nil && ctx.Err() == nil {
			err = errors.Join(err, rerr)
		}
		if errors.Is(err, errWouldBlock) {
			return nil, nil
		}
		return nil, err
	}
	l := &Lease{q: q, t: t}
	l.lost, l.freed = watchSession(s.c, t.owner)
	return l, nil
}

// waitLease waits, holding the mutex, until me is among the first n
// leases. Only the mutex holder ever waits here, so a release wakes one
// contender.
func (s *Semaphore) waitLease(ctx context.Context, q *queue, me ticket, wait bool) error {
	watch := false // the first look needs no watch: usually a lease is free
	for {
		var names []string
		var ev <-chan client.Event
		var err error
		if watch {
			names, _, ev, err = s.c.ChildrenW(ctx, s.leases)
		} else {
			names, _, err = s.c.Children(ctx, s.leases)
		}
		if errors.Is(err, client.ErrConnectionLoss) {
			continue
		}
		if err != nil {
			return err
		}
		es := lockq.Sort(names)
		i := slices.IndexFunc(es, func(e lockq.Entry) bool { return e.Name == me.Name })
		switch {
		case i < 0:
			return q.gone()
		case i < s.n:
			return nil
		case !wait:
			return errWouldBlock
		case !watch:
			watch = true
			continue
		}
		if err := waitEvent(ctx, ev); err != nil {
			return err
		}
	}
}

// Release gives the lease back. It returns an error matching
// client.ErrSessionExpired if the session ended while the lease was held.
// If ctx ends first, the release goes on in the background.
func (l *Lease) Release(ctx context.Context) error {
	err := ErrNotHeld
	l.once.Do(func() {
		close(l.freed)
		select {
		case <-l.lost:
			err = l.q.c.Err()
		default:
			err = l.q.leave(ctx, l.t)
		}
	})
	return opError("release", l.q.path(l.t.Entry), err)
}

// Token returns the lease's fencing token, the zxid that created it.
func (l *Lease) Token() int64 { return l.t.czxid }

// Lost returns a channel closed if the session ends while the lease is
// held.
func (l *Lease) Lost() <-chan struct{} { return l.lost }
