package recipes

import (
	"context"
	"errors"
	"path"
	"slices"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// Barrier holds processes back until it is removed, as Curator's
// DistributedBarrier: Set raises it (a node at the path), Wait blocks while
// the node exists, Remove lowers it and wakes every waiter.
type Barrier struct {
	c    *client.Client
	path string
	acl  []client.CreateOption
}

// NewBarrier returns the Barrier at path for the session of c. Of the
// options, WithACL applies: to the barrier's node and the ancestors Set
// creates.
func NewBarrier(c *client.Client, path string, opts ...Option) *Barrier {
	return &Barrier{c: c, path: path, acl: newOptions(opts).acl}
}

// Set raises the barrier; raising a raised barrier is not an error. The
// barrier stays raised until Remove, whatever happens to the session.
func (b *Barrier) Set(ctx context.Context) error {
	if err := makeDirs(ctx, b.c, path.Dir(b.path), b.acl); err != nil {
		return opError("set barrier", b.path, err)
	}
	_, err := b.c.Create(ctx, b.path, nil, client.Persistent, b.acl...)
	if errors.Is(err, client.ErrNodeExists) {
		err = nil
	}
	return opError("set barrier", b.path, err)
}

// Remove lowers the barrier; lowering a lowered barrier is not an error.
func (b *Barrier) Remove(ctx context.Context) error {
	err := b.c.Delete(ctx, b.path, -1)
	if errors.Is(err, client.ErrNoNode) {
		err = nil
	}
	return opError("remove barrier", b.path, err)
}

// Wait returns once the barrier is down (at once if it is), or when ctx
// or the session ends.
func (b *Barrier) Wait(ctx context.Context) error {
	return opError("wait barrier", b.path, waitGone(ctx, b.c, b.path))
}

// waitGone waits until no node is at p.
func waitGone(ctx context.Context, c *client.Client, p string) error {
	for {
		ok, _, err := c.Exists(ctx, p) // no watch is left when the node is gone already
		if err == nil && ok {
			ok, _, ev, err2 := c.ExistsW(ctx, p)
			if err2 == nil && ok {
				if err := waitEvent(ctx, ev); err != nil {
					return err
				}
				continue
			}
			err = err2
		}
		switch {
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case err != nil:
			return err
		}
		return nil
	}
}

// waitEvent waits for the one event of a watch; a session event is the
// session's end.
func waitEvent(ctx context.Context, ev <-chan client.Event) error {
	select {
	case e := <-ev:
		if e.Type == client.EventSession {
			return e.Err
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DoubleBarrier lets a group of n processes start a computation together
// and finish it together, as in ZooKeeper's recipe and Curator's
// DistributedDoubleBarrier: Enter returns once n processes have entered,
// Leave once all of them have left.
type DoubleBarrier struct {
	c     *client.Client
	path  string
	n     int
	q     *queue
	ready string
	me    ticket // this value's node while it is inside
}

// NewDoubleBarrier returns the DoubleBarrier at path for a group of n.
func NewDoubleBarrier(c *client.Client, path string, n int, opts ...Option) *DoubleBarrier {
	o := newOptions(opts)
	return &DoubleBarrier{c: c, path: path, n: max(n, 1), q: newQueue(c, path, o), ready: path + "/ready"}
}

// Enter joins the group and waits until n members have joined. When ctx
// ends first, it leaves the group again.
func (d *DoubleBarrier) Enter(ctx context.Context) error {
	me, err := d.q.enqueue(ctx, lockq.Member, d.q.data, 0)
	if err != nil {
		return opError("enter", d.path, err)
	}
	d.me = me
	if err := d.enter(ctx); err != nil {
		d.me = ticket{}
		if rerr := d.q.giveUp(ctx, me); rerr != nil && ctx.Err() == nil {
			err = errors.Join(err, rerr)
		}
		return opError("enter", d.path, err)
	}
	return nil
}

func (d *DoubleBarrier) enter(ctx context.Context) error {
	for {
		// Watch for the ready node before counting, so that the member
		// who completes the group cannot create it unseen.
		ok, _, ev, err := d.c.ExistsW(ctx, d.ready)
		if errors.Is(err, client.ErrConnectionLoss) {
			continue
		}
		if err != nil || ok {
			return err
		}
		es, err := d.q.entries(ctx)
		if err != nil {
			return err
		}
		if len(es) >= d.n {
			_, err := d.c.Create(ctx, d.ready, nil, client.Persistent, d.q.acl...)
			if err == nil || errors.Is(err, client.ErrNodeExists) {
				return nil
			}
			if !errors.Is(err, client.ErrConnectionLoss) {
				return err
			}
			continue
		}
		if err := waitEvent(ctx, ev); err != nil {
			return err
		}
	}
}

// Leave leaves the group and waits until every member has left. The last
// to leave lowers the ready mark, so the barrier can be used again.
func (d *DoubleBarrier) Leave(ctx context.Context) error {
	if d.me.Name == "" {
		return opError("leave", d.path, ErrNotHeld)
	}
	err := d.leave(ctx)
	if err == nil {
		d.me = ticket{}
	}
	return opError("leave", d.path, err)
}

// leave is ZooKeeper's recipe: the lowest member waits for the highest;
// every other member deletes its node and waits for the lowest. So each
// departure wakes at most one member.
func (d *DoubleBarrier) leave(ctx context.Context) error {
	for {
		es, err := d.q.entries(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(es, func(e lockq.Entry) bool { return e.Name == d.me.Name })
		var watch lockq.Entry
		switch {
		case len(es) == 0:
			return nil
		case i == 0 && len(es) == 1:
			_, err := d.c.Multi(ctx, client.DeleteOp(d.q.path(d.me.Entry), -1), client.DeleteOp(d.ready, -1))
			if errors.Is(err, client.ErrNoNode) {
				err = d.q.remove(ctx, d.q.path(d.me.Entry)) // the ready mark is gone already
			}
			if errors.Is(err, client.ErrConnectionLoss) {
				continue
			}
			return err
		case i == 0:
			watch = es[len(es)-1]
		default:
			if i > 0 {
				if err := d.q.remove(ctx, d.q.path(d.me.Entry)); err != nil {
					return err
				}
			}
			watch = es[0]
		}
		_, _, ev, err := d.c.GetW(ctx, d.q.path(watch))
		switch {
		case errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrConnectionLoss):
			continue
		case err != nil:
			return err
		}
		if err := waitEvent(ctx, ev); err != nil {
			return err
		}
	}
}
