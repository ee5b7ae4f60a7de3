package recipes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// LockPart is one lock a MultiLock takes: the path of a Mutex or an
// RWMutex, exclusively (as a Mutex, or an RWMutex's writer) or, with Read,
// as a reader. With Intent it is an intention mode instead (intent-shared
// with Read, else intent-exclusive), which a hierarchical lock takes on
// the locks above its own (see HierarchyParts).
type LockPart struct {
	Path   string
	Read   bool
	Intent bool
}

// HierarchyParts returns the parts of a hierarchical lock on path, under
// root: a lock on a path covers its subtree. It takes path's own lock
// (as a reader with read, else exclusively) and, on every lock from root
// down to path's parent, the intention mode of the same kind, as a
// database's intention locks: a holder of /locks/orders excludes the
// holders of /locks/orders/42, and the other way round, while holders of
// different locks below /locks/orders do not exclude each other there
// (lockq.Conflicts). Every client of a tree of locks must take its locks
// this way: a Mutex on /locks/orders/42 alone takes no intention lock on
// /locks/orders, and is not excluded by its holder.
//
//	parts, err := recipes.HierarchyParts("/locks", "/locks/orders/42", false)
//	l, err := recipes.NewMultiLock(c, parts)
func HierarchyParts(root, path string, read bool) ([]LockPart, error) {
	root = strings.TrimSuffix(root, "/")
	if root == "" || path != root && !strings.HasPrefix(path, root+"/") || strings.HasSuffix(path, "/") {
		return nil, fmt.Errorf("hierarchy: %q is not a lock under the root %q (a node's path, not /)", path, root)
	}
	var parts []LockPart
	for p := root; p != path; {
		parts = append(parts, LockPart{Path: p, Read: read, Intent: true})
		next := strings.IndexByte(path[len(p)+1:], '/')
		if next < 0 {
			p = path
		} else {
			p = path[:len(p)+1+next]
		}
	}
	return append(parts, LockPart{Path: path, Read: read}), nil
}

// MultiLock takes several locks all or none. One write joins every lock's
// queue at once (a multi of creates, applied as one txn), and the
// MultiLock then waits its turn in each. Two MultiLocks over shared locks
// joined those queues in the order their writes were applied, the same in
// every queue, so neither can hold a lock the other waits for, whatever
// order their parts were given in: they never deadlock each other. It
// waits as one waiter, with one timeout (Lock's ctx), and a wait that
// ends leaves no node in any queue. On a sharded cluster, whose writes
// stay in one shard, it joins one shard's queues at a time and holds them
// before the next's (shardSegments). Each part is the same lock as a Mutex
// or an RWMutex on its path: they exclude each other.
//
// A MultiLock value is one holder (one vertex of the wait-for graph, one
// holder id in its nodes) and is reentrant, as a Mutex.
type MultiLock struct {
	parts []LockPart
	holds []*hold
	data  []byte
}

// NewMultiLock returns a MultiLock of parts for the session of c. It
// returns an error if parts is empty, or names a path twice, or opts give
// a priority: a priority would place it differently in each queue.
func NewMultiLock(c *client.Client, parts []LockPart, opts ...Option) (*MultiLock, error) {
	if len(parts) == 0 {
		return nil, errors.New("multilock: no locks")
	}
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b LockPart) int { return strings.Compare(a.Path, b.Path) })
	for i := 1; i < len(parts); i++ {
		if parts[i].Path == parts[i-1].Path {
			return nil, fmt.Errorf("multilock: %s named twice", parts[i].Path)
		}
	}
	o := newOptions(opts)
	if o.prio != 0 {
		return nil, errors.New("multilock: a MultiLock takes no priority (WithPriority): it joins every queue at the end, at once")
	}
	m := &MultiLock{parts: parts, data: o.lockRecord()}
	for _, p := range parts {
		m.holds = append(m.holds, newLockHold(c, p.Path, o))
	}
	return m, nil
}

func (p LockPart) kind() lockq.Kind {
	switch {
	case p.Intent && p.Read:
		return lockq.IntentShared
	case p.Intent:
		return lockq.IntentExclusive
	case p.Read:
		return lockq.Read
	}
	return lockq.Exclusive
}

// Lock takes every lock. If ctx ends or an error comes before it has them
// all, it leaves every queue and returns the error (matching ctx's when
// ctx ended).
func (m *MultiLock) Lock(ctx context.Context) error {
	_, err := m.lock(ctx, true)
	return err
}

// TryLock takes every lock if each is free now, and otherwise releases
// those it took and returns false.
func (m *MultiLock) TryLock(ctx context.Context) (bool, error) {
	return m.lock(ctx, false)
}

func (m *MultiLock) lock(ctx context.Context, wait bool) (bool, error) {
	for i, h := range m.holds {
		if err := h.enter(ctx); err != nil {
			for _, h := range m.holds[:i] {
				h.leave()
			}
			return false, err
		}
	}
	defer func() {
		for _, h := range m.holds {
			h.leave()
		}
	}()
	// Begin every part: each holds already (a reentrant Lock: counted),
	// or none does (a new acquisition).
	ps, counted := make([]*pending, len(m.holds)), make([]bool, len(m.holds))
	var err error
	held := 0
	for i, p := range m.parts {
		if ps[i], counted[i], err = m.holds[i].begin(ctx, p.kind(), m.data); err != nil {
			err = opError("multilock", p.Path, err)
			break
		}
		if counted[i] {
			held++
		}
	}
	if err == nil && held == len(ps) {
		return true, nil
	}
	if err == nil && held > 0 {
		err = opError("multilock", m.parts[0].Path, errors.New("some of the locks are held and others not"))
	}
	if err != nil {
		for i, c := range counted {
			if c {
				m.holds[i].uncount()
			}
		}
		return false, m.failFrom(ctx, ps, 0, nil, err)
	}
	ts := make([]ticket, len(ps))
	segs := [][]int{seq(len(ps))} // every queue at once, unless they are in several shards
	for s, bySharding := 0, false; s < len(segs); s++ {
		seg := segs[s]
		got, err := joinAll(ctx, pick(m.parts, seg), pick(ps, seg), m.data)
		for j, i := range seg[:len(got)] {
			ts[i] = got[j]
		}
		if errors.Is(err, client.ErrCrossShard) && !bySharding {
			// The locks are in several shards: one shard's at a time.
			bySharding = true
			if segs, err = shardSegments(ctx, ps[0].h.q.c, m.parts); err == nil {
				s = -1
				continue
			}
		}
		if err != nil {
			return false, m.failFrom(ctx, ps, 0, ts, err) // ts: the nodes it found, if any
		}
		for _, i := range seg {
			if err := m.holds[i].q.wait(ps[i].waitCtx, &ts[i], wait, nil); err != nil {
				return false, m.failFrom(ctx, ps, 0, ts, err)
			}
		}
	}
	for i, p := range ps {
		if err := p.install(ts[i]); err != nil { // its lease ended as it waited: its node is gone
			var rerr error
			for j := i - 1; j >= 0; j-- { // the parts installed: in the turnstile already
				rerr = cmp.Or(rerr, m.holds[j].releaseIn(context.WithoutCancel(ctx), m.parts[j].kind(), false))
			}
			return false, cmp.Or(m.failFrom(ctx, ps, i+1, ts, err), opError("multilock", m.parts[i].Path, err), rerr)
		}
	}
	return true, nil
}

// failFrom ends the pending acquisitions of the parts from on, with err,
// and their nodes ts if they were queued (those with a name), and returns
// the error to report: nil only for a TryLock that would have waited.
func (m *MultiLock) failFrom(ctx context.Context, ps []*pending, from int, ts []ticket, err error) error {
	var first error
	for i := from; i < len(ps); i++ {
		if ps[i] == nil {
			continue
		}
		var t *ticket
		if ts != nil && ts[i].Name != "" {
			t = &ts[i]
		}
		if ferr := ps[i].fail(ctx, t, err); ferr != nil && first == nil {
			first = opError("multilock", m.parts[i].Path, ferr)
		}
	}
	if first == nil && !errors.Is(err, errWouldBlock) {
		first = err
	}
	return first
}

// joinAll joins the queue of every part in one multi: a node for each,
// named with one acquisition id, bound to its part's lease if it has one.
// A multi whose answer was lost is found again by the nodes' names: it
// applied in every queue or in none. On an error, the tickets it returns
// name the nodes it found, for the caller to give up.
// shardSegments groups the indexes of parts by the shard of a sharded
// cluster (docs/scale-out.md) that serves each lock, in the order of the
// shards' groups, each shard's in path order. A MultiLock joins one
// shard's queues at once, in one txn, and holds them before it joins the
// next shard's: any two MultiLocks go through the shards in the same
// order, so a cycle of them waiting for each other would have to lie in
// one shard, where their joins are ordered by their txns, the same in
// every queue; they still never deadlock each other. (A lock whose shard
// a split changes between two MultiLocks' joins can make such a cycle,
// which deadlock detection ends.)
func shardSegments(ctx context.Context, c *client.Client, parts []LockPart) ([][]int, error) {
	m, err := c.Shards(ctx)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(parts))
	for i, p := range parts {
		paths[i] = p.Path
	}
	return m.ByShard(paths), nil
}

// seq is 0, 1, ... n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// pick is the elements of s at the indexes at.
func pick[T any](s []T, at []int) []T {
	out := make([]T, len(at))
	for j, i := range at {
		out[j] = s[i]
	}
	return out
}

func joinAll(ctx context.Context, parts []LockPart, ps []*pending, data []byte) ([]ticket, error) {
	id := randomID()
	ts := make([]ticket, len(parts))
	ops := make([]client.Op, len(parts))
	for i, p := range ps {
		q := p.h.q
		ts[i] = ticket{prefix: lockq.IDPrefix(id), lease: p.lease, data: data}
		ops[i] = client.CreateOp(q.dir+"/"+lockq.Prefix(id, parts[i].kind()), data, client.EphemeralSequential, ts[i].createOptions(q)...)
	}
	c := ps[0].h.q.c
	for {
		res, err := c.Multi(ctx, ops...)
		switch {
		case err == nil:
			for i, r := range res {
				ts[i].Entry, _ = lockq.Parse(r.Path[len(ps[i].h.q.dir)+1:])
				ts[i].czxid, ts[i].owner = r.Stat.Czxid, ps[i].session
			}
			return ts, nil
		case errors.Is(err, client.ErrNoNode):
			for _, p := range ps {
				if err := makeDirs(ctx, c, p.h.q.dir, p.h.q.acl); err != nil {
					return nil, err
				}
			}
		case retry(ctx, err):
			// The multi may yet apply: look for its nodes before another.
			// It applies whole, so nodes found in some queues and not in
			// others mean it applied between two of the listings: a second
			// look finds them all, unless some went since (a lease ended).
			found := 0
			for look := 0; look < 2 && (look == 0 || found > 0 && found < len(ps)); look++ {
				found = 0
				for i, p := range ps {
					ts[i].lossy = true
					e, st, err := p.h.q.findOwn(ctx, ts[i].prefix, ts[i].nodeOwner(p.h.q))
					if err != nil {
						return ts, err
					}
					ts[i].Entry, ts[i].czxid, ts[i].owner = e, st.Czxid, p.session
					if e.Name != "" {
						found++
					}
				}
			}
			switch found {
			case len(ps):
				return ts, nil
			case 0:
			default:
				return ts, errors.New("multilock: the nodes of the acquisition are gone in part")
			}
		default:
			return nil, err
		}
	}
}

// Unlock gives up one hold of every lock, and releases them after the
// last, as Mutex.Unlock.
func (m *MultiLock) Unlock(ctx context.Context) error {
	return m.release(ctx, len(m.parts))
}

// release gives up one hold of each of the first n parts, in reverse
// order, and returns the first error.
func (m *MultiLock) release(ctx context.Context, n int) error {
	var first error
	for i := n - 1; i >= 0; i-- {
		err := m.holds[i].release(ctx, m.parts[i].kind(), false)
		if err != nil && first == nil {
			first = opError("multiunlock", m.parts[i].Path, err)
		}
	}
	return first
}

// Token returns the fencing token of the lock at path (0 when it is not
// held, or not a part).
func (m *MultiLock) Token(path string) int64 {
	i := slices.IndexFunc(m.parts, func(p LockPart) bool { return p.Path == path })
	if i < 0 {
		return 0
	}
	return m.holds[i].fencingToken()
}

// Lost returns a channel closed if any of the locks is lost while they
// are held (the session ends, a lease ends, a deadline passes, a lock is
// broken): from then on others may hold it. Read it after Lock.
func (m *MultiLock) Lost() <-chan struct{} {
	freed := m.holds[0].freedChan()
	if freed == nil {
		return m.holds[0].lostChan() // nothing held: nothing to watch
	}
	lost := make(chan struct{})
	cases := make([]reflect.SelectCase, 0, len(m.holds)+1)
	for _, h := range m.holds {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.lostChan())})
	}
	// The release of the first part, at the last Unlock, ends the watch.
	released := reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(freed)}
	go func() {
		if i, _, _ := reflect.Select(append(cases, released)); i < len(cases) {
			close(lost)
		}
	}()
	return lost
}

// Deadline returns the earliest stop-by deadline of the locks (see
// Mutex.Deadline): the zero time unless all of them are held.
func (m *MultiLock) Deadline() time.Time {
	var first time.Time
	for _, h := range m.holds {
		d := h.deadline()
		if d.IsZero() {
			return time.Time{}
		}
		if first.IsZero() || d.Before(first) {
			first = d
		}
	}
	return first
}

// LostReason says why the locks were lost (see Mutex.LostReason): the
// reason of the first part that was.
func (m *MultiLock) LostReason() error {
	for _, h := range m.holds {
		if err := h.lostReason(); err != nil {
			return err
		}
	}
	return nil
}

// Renew renews the lease of every lock at once (WithLease), and returns
// the earliest new expiry.
func (m *MultiLock) Renew(ctx context.Context) (time.Time, error) {
	var first time.Time
	for i, h := range m.holds {
		exp, err := h.renewNow(ctx)
		if err != nil {
			return time.Time{}, opError("renew", m.parts[i].Path, err)
		}
		if first.IsZero() || exp.Before(first) {
			first = exp
		}
	}
	return first, nil
}
