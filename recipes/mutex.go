package recipes

import (
	"context"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// Mutex is a distributed lock on a path. Each contender makes an
// ephemeral-sequential node under the path and watches only the node just
// before its own, so a release wakes exactly one waiter, and waiters get the
// lock in the order they asked for it.
//
// A Mutex value is one owner: it is reentrant (a second Lock on a held
// value counts, and only the last Unlock releases), and goroutines that
// share a value share its hold. Give each independent owner its own value.
type Mutex struct {
	path string
	data []byte
	h    *hold
}

// NewMutex returns a Mutex on path for the session of c. The path and its
// missing ancestors are created as containers when first needed.
func NewMutex(c *client.Client, path string, opts ...Option) *Mutex {
	return newMutex(c, path, newOptions(opts))
}

func newMutex(c *client.Client, path string, o options) *Mutex {
	return &Mutex{path: path, data: o.lockRecord(), h: newLockHold(c, path, o)}
}

// Lock waits for the lock. When ctx ends first, the waiter's node is
// removed and ctx's error returned. When the session expires while
// waiting, the error matches client.ErrSessionExpired.
func (m *Mutex) Lock(ctx context.Context) error {
	_, err := m.h.acquire(ctx, lockq.Exclusive, m.data, true)
	return opError("lock", m.path, err)
}

// TryLock takes the lock if no one holds it or waits for it, and otherwise
// returns false at once, leaving nothing behind.
func (m *Mutex) TryLock(ctx context.Context) (bool, error) {
	ok, err := m.h.acquire(ctx, lockq.Exclusive, m.data, false)
	return ok, opError("trylock", m.path, err)
}

// Unlock gives up one hold of the lock and releases it after the last. It
// returns an error matching client.ErrSessionExpired if the session ended
// while the lock was held (see Lost), and ErrNotHeld if it is not held. If
// ctx ends before the server confirms the release, the release goes on in
// the background (or the session's end releases the lock).
func (m *Mutex) Unlock(ctx context.Context) error {
	return opError("unlock", m.path, m.h.release(ctx, lockq.Exclusive, false))
}

// Token returns the fencing token of the current hold (0 when not held):
// the zxid that created the holder's node. Successive holders of a lock
// path get strictly increasing tokens, so a resource that remembers the
// highest token it has seen can refuse a holder whose lock has passed on.
func (m *Mutex) Token() int64 { return m.h.fencingToken() }

// Lost returns a channel that is closed if the session ends while the lock
// is held by this hold: from then on another contender may hold it. Each
// hold has its own channel; read it after Lock.
func (m *Mutex) Lost() <-chan struct{} { return m.h.lostChan() }

// Held reports whether the value holds the lock (and its session has not
// ended).
func (m *Mutex) Held() bool { return m.h.held() != "" }

// LostReason says why the hold was lost, once Lost is closed (nil before):
// an error matching client.ErrSessionExpired (the session ended), or, for
// a hold WithLease, client.ErrLeaseExpired (its renewals stopped coming in
// time), ErrBroken (an admin broke the lock; the error names who and
// why) or ErrNodeDeleted (someone deleted its node; ErrBroken matches it
// too). A hold without a lease does not watch its node, which would cost
// a read and a notification per hold.
func (m *Mutex) LostReason() error { return m.h.lostReason() }

// Renew renews the hold's lease now (WithLease) and returns when it ends
// unless renewed again. The value renews it by itself at a third of its
// TTL; Renew is for a holder that wants to be sure before a long step. A
// renewal never changes the fencing token. It fails with
// client.ErrLeaseExpired once the lease has ended, ErrNoLease without
// WithLease and ErrNotHeld without a hold.
func (m *Mutex) Renew(ctx context.Context) (time.Time, error) {
	exp, err := m.h.renewNow(ctx)
	return exp, opError("renew", m.path, err)
}
