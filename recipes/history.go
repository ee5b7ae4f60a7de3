package recipes

import (
	"context"
	"errors"
	"fmt"

	"github.com/arbor-coord/arbor/client"
)

// ErrDeadlock is returned by a wait for a lock that the server ended
// because it was the youngest wait of a deadlock (arbord --end-deadlocks):
// the caller's holders waited for each other's locks. The wait holds
// nothing of the lock it waited for; let go of what the caller holds, then
// try again.
var ErrDeadlock = errors.New("the wait was ended to break a deadlock")

// ErrBroken is the reason a hold bound to a lease is lost when an admin
// broke the lock (arbor locks break): LostReason wraps it with who broke
// it and why. It matches ErrNodeDeleted too, as a break deletes the
// holders' nodes.
var ErrBroken = fmt.Errorf("the lock was broken by an admin: %w", ErrNodeDeleted)

// The server records in the lock history why it deleted a node that was
// not its owner's to delete, in the txn that deletes it: the server that
// shows the node gone has the record. The recipes read it only then, to
// say why.

// goneWaiting is the error for me's node having vanished while it waited:
// ErrDeadlock if the server ended the wait for a deadlock, else what gone
// says.
func (q *queue) goneWaiting(ctx context.Context, me ticket) error {
	err := q.gone()
	if !errors.Is(err, errGone) {
		return err
	}
	if ev, ok := q.lastEvent(ctx, me.Name); ok && ev.Kind == client.LockDeadlock {
		return ErrDeadlock
	}
	return err
}

// whyDeleted is the reason a hold whose node someone else deleted is lost:
// ErrBroken, with who and why, if an admin broke the lock, else
// ErrNodeDeleted.
func (q *queue) whyDeleted(ctx context.Context, t ticket) error {
	if ev, ok := q.lastEvent(ctx, t.Name); ok && ev.Kind == client.LockBroken {
		return fmt.Errorf("%w (by %s: %q)", ErrBroken, ev.By, ev.Reason)
	}
	return ErrNodeDeleted
}

// endedBefore says how the acquisition t ended when a release found its
// node gone: nil if the history says it was released (a release tried
// again after its reply was lost, say), else why it was lost before the
// release, so that its holder learns that the lock had moved on while it
// thought it held it. A history that no longer has the acquisition (it is
// bounded) says nothing: nil.
func (q *queue) endedBefore(ctx context.Context, t ticket) error {
	ev, ok := q.lastEvent(ctx, t.Name)
	if !ok {
		return nil
	}
	switch ev.Kind {
	case client.LockReleased:
		return nil
	case client.LockBroken:
		return fmt.Errorf("%w (by %s: %q)", ErrBroken, ev.By, ev.Reason)
	case client.LockExpired:
		return fmt.Errorf("%w: the lock was no longer held at the release", client.ErrLeaseExpired)
	case client.LockSessionEnded:
		return fmt.Errorf("%w: the lock was no longer held at the release", client.ErrSessionExpired)
	case client.LockDeadlock:
		return ErrDeadlock
	}
	return ErrNodeDeleted
}

// lastEvent returns the lock history's last event of the acquisition
// whose first node is named node, if the history has one.
func (q *queue) lastEvent(ctx context.Context, node string) (client.LockEvent, bool) {
	evs, err := q.c.LockHistory(ctx, q.dir, false)
	if err != nil {
		return client.LockEvent{}, false
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Lock == q.dir && evs[i].Node == node {
			return evs[i], true
		}
	}
	return client.LockEvent{}, false
}
