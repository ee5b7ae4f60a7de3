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
// returns the reason if the hold was lost while the lock was held (see
// Lost and LostReason; a hold whose deadline passed still deletes its
// node), and ErrNotHeld if it is not held. If
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

// Lost returns a channel that is closed if the hold ends by itself while
// the lock is held: the session ends, the hold's lease ends, or its
// stop-by deadline (Deadline) passes first. From then on another
// contender may hold it. Each hold has its own channel; read it after
// Lock.
func (m *Mutex) Lost() <-chan struct{} { return m.h.lostChan() }

// Deadline returns the hold's stop-by deadline, on this process's
// monotonic clock: the last moment at which this holder may still act as
// the holder, because no other contender can have been granted the lock
// before it, whatever the holder did not hear of (a partition, a server's
// death, its own pause). It is the zero time when nothing is held, or
// the hold was lost. Lost is closed at the deadline at the latest (with
// LostReason ErrDeadlinePassed), whatever else the client hears.
//
// It counts from the send, not the answer, of requests the cluster
// answered, less the clock drift (WithClockDrift) and a margin
// (WithSafetyMargin). For a hold WithLease: the send of the lease's
// latest successful renewal (or creation) plus its TTL or the session's
// timeout, whichever is shorter, and no later than WithMaxHold after the
// creation's send; each renewal moves it on. Renewals are writes a quorum
// took, so this deadline holds whatever partition cuts the holder off.
// For a hold of the session alone: the send of the latest request or
// ping a server answered (client.Client.LastHeard) plus two thirds of the
// session's timeout; this one assumes that a member cut off from the
// quorum stops answering within a third of the session timeout (see
// docs/locks.md, "The stop-by deadline").
//
// Before a step that must not run beside another holder's, check that
// time.Now() is well before Deadline(); a resource that must never accept
// a stale holder also checks the fencing token (Token).
func (m *Mutex) Deadline() time.Time { return m.h.deadline() }

// Held reports whether the value holds the lock (and its session has not
// ended).
func (m *Mutex) Held() bool { return m.h.held() != "" }

// LostReason says why the hold was lost, once Lost is closed (nil before):
// an error matching client.ErrSessionExpired (the session ended),
// ErrDeadlinePassed (its stop-by deadline passed before word came that it
// lasts: see Deadline), or, for a hold WithLease, client.ErrLeaseExpired
// (its renewals stopped coming in time), ErrBroken (an admin broke the
// lock; the error names who and why) or ErrNodeDeleted (someone deleted
// its node; ErrBroken matches it too). A hold without a lease does not
// watch its node, which would cost a read and a notification per hold.
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
