package recipes

import (
	"context"
	"errors"

	"github.com/arbor-coord/arbor/client"
)

// ErrDeadlock is returned by a wait for a lock that the server ended
// because it was the youngest wait of a deadlock (arbord --end-deadlocks):
// the caller's holders waited for each other's locks. The wait holds
// nothing of the lock it waited for; let go of what the caller holds, then
// try again.
var ErrDeadlock = errors.New("the wait was ended to break a deadlock")

// goneWaiting is the error for me's node having vanished while it waited:
// ErrDeadlock if the lock history says that the server ended the wait for
// a deadlock (the node goes in the txn that records it, so the server that
// showed the node gone has the record), else what gone says.
func (q *queue) goneWaiting(ctx context.Context, me ticket) error {
	err := q.gone()
	if !errors.Is(err, errGone) {
		return err
	}
	evs, herr := q.c.LockHistory(ctx, q.dir, false)
	if herr != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Kind == client.LockDeadlock && ev.Lock == q.dir && ev.Node == me.Name {
			return ErrDeadlock
		}
	}
	return err
}
