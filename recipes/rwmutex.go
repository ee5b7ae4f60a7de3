package recipes

import (
	"context"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// RWMutex is a distributed reader/writer lock on a path: readers share it,
// a writer holds it alone. Contenders queue in one FIFO order, so readers
// that come after a waiting writer wait for it too and a stream of readers
// cannot starve a writer. A reader watches the nearest writer ahead of it,
// a writer the node just ahead of it: a release wakes only those it lets
// through. A Mutex on the same path is a writer (see package lockq for
// the rules).
//
// An RWMutex value holds one mode at a time; asking it for the other mode
// while it holds one fails with ErrHeldInOtherMode. Like Mutex, it is
// reentrant within a mode.
type RWMutex struct {
	path string
	data []byte
	h    *hold
}

// NewRWMutex returns an RWMutex on path for the session of c.
func NewRWMutex(c *client.Client, path string, opts ...Option) *RWMutex {
	o := newOptions(opts)
	return &RWMutex{path: path, data: o.lockRecord(), h: newLockHold(c, path, o)}
}

// RLock waits for a read hold.
func (rw *RWMutex) RLock(ctx context.Context) error {
	_, err := rw.h.acquire(ctx, lockq.Read, rw.data, true)
	return opError("rlock", rw.path, err)
}

// TryRLock takes a read hold if no writer holds or waits, else returns
// false at once.
func (rw *RWMutex) TryRLock(ctx context.Context) (bool, error) {
	ok, err := rw.h.acquire(ctx, lockq.Read, rw.data, false)
	return ok, opError("tryrlock", rw.path, err)
}

// RUnlock gives up a read hold, as Mutex.Unlock.
func (rw *RWMutex) RUnlock(ctx context.Context) error {
	return opError("runlock", rw.path, rw.h.release(ctx, lockq.Read, false))
}

// Lock waits for the write hold.
func (rw *RWMutex) Lock(ctx context.Context) error {
	_, err := rw.h.acquire(ctx, lockq.Write, rw.data, true)
	return opError("lock", rw.path, err)
}

// TryLock takes the write hold if no one holds or waits, else returns
// false at once.
func (rw *RWMutex) TryLock(ctx context.Context) (bool, error) {
	ok, err := rw.h.acquire(ctx, lockq.Write, rw.data, false)
	return ok, opError("trylock", rw.path, err)
}

// Unlock gives up the write hold, as Mutex.Unlock.
func (rw *RWMutex) Unlock(ctx context.Context) error {
	return opError("unlock", rw.path, rw.h.release(ctx, lockq.Write, false))
}

// Upgrade turns the read hold into the write hold without letting go: it
// waits until the other readers that hold have left, while the readers
// that come after it wait for it, and writers queued behind it stay
// behind it. Only one holder of a lock can be upgrading at a time: while
// another one is, Upgrade returns ErrUpgradeInProgress at once (the two
// would wait for each other). A wait ended by ctx or an error leaves the
// read hold as it was. It returns ErrNotHeld without a read hold.
func (rw *RWMutex) Upgrade(ctx context.Context) error {
	return opError("upgrade", rw.path, rw.h.change(ctx, lockq.Read, lockq.Write, rw.data))
}

// Downgrade turns the write hold into a read hold without letting go: the
// readers queued behind it come in at once, writers go on waiting. It
// returns ErrNotHeld without the write hold.
func (rw *RWMutex) Downgrade(ctx context.Context) error {
	return opError("downgrade", rw.path, rw.h.change(ctx, lockq.Write, lockq.Read, rw.data))
}

// Token returns the fencing token of the current hold, read or write (see
// Mutex.Token). A writer's token is higher than that of every holder before
// it; a hold that changed mode has the token of the change.
func (rw *RWMutex) Token() int64 { return rw.h.fencingToken() }

// Lost returns a channel closed if the current hold ends by itself (see
// Mutex.Lost).
func (rw *RWMutex) Lost() <-chan struct{} { return rw.h.lostChan() }

// Deadline returns the current hold's stop-by deadline, read or write
// (see Mutex.Deadline); the zero time when nothing is held.
func (rw *RWMutex) Deadline() time.Time { return rw.h.deadline() }

// LostReason says why the hold was lost (see Mutex.LostReason).
func (rw *RWMutex) LostReason() error { return rw.h.lostReason() }

// Renew renews the hold's lease now (see Mutex.Renew).
func (rw *RWMutex) Renew(ctx context.Context) (time.Time, error) {
	exp, err := rw.h.renewNow(ctx)
	return exp, opError("renew", rw.path, err)
}
