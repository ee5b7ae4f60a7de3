package recipes

import (
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
// as a reader.
type LockPart struct {
	Path string
	Read bool
}

// MultiLock takes several locks all or none. It takes them one by one in
// the order of their paths, whatever order they were given in, so two
// MultiLocks over shared locks cannot each hold one the other waits for.
// Each part is the same lock as a Mutex or an RWMutex on its path: they
// exclude each other.
//
// A MultiLock value is one holder (one vertex of the wait-for graph, one
// holder id in its nodes) and is reentrant, as a Mutex.
type MultiLock struct {
	parts []LockPart
	holds []*hold
	data  []byte
}

// NewMultiLock returns a MultiLock of parts for the session of c. It
// returns an error if parts is empty, or names a path twice.
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
	m := &MultiLock{parts: parts, data: o.lockRecord()}
	for _, p := range parts {
		m.holds = append(m.holds, newLockHold(c, p.Path, o))
	}
	return m, nil
}

func (p LockPart) kind() lockq.Kind {
	if p.Read {
		return lockq.Read
	}
	return lockq.Exclusive
}

// Lock takes every lock, in path order. If ctx ends or an error comes
// before it has them all, it releases those it took and returns the
// error (matching ctx's when ctx ended).
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
	for i, p := range m.parts {
		ok, err := m.holds[i].acquire(ctx, p.kind(), m.data, wait)
		if err == nil && ok {
			continue
		}
		if rerr := m.release(context.WithoutCancel(ctx), i); rerr != nil && err == nil {
			err = rerr
		}
		return false, opError("multilock", p.Path, err)
	}
	return true, nil
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
