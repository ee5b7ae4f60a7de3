// Package recipes builds coordination on the client: Mutex, RWMutex,
// MultiLock, Election, Semaphore, Barrier and DoubleBarrier. They use only
// the public API of package client, and they are herd-free: each contender
// makes an ephemeral-sequential node and watches only the one node that
// must go before it, so a release wakes exactly the contenders it lets
// through, however many wait.
//
//	m := recipes.NewMutex(c, "/locks/orders")
//	if err := m.Lock(ctx); err != nil {
//		return err
//	}
//	defer m.Unlock(ctx)
//	select {
//	case <-m.Lost():
//		return errors.New("lost the lock") // the session ended: someone else may hold it
//	default:
//	}
//	return store.Write(ctx, m.Token(), order) // the store refuses tokens lower than one it has seen
//
// # Waiting with a timeout
//
// Every wait takes a ctx: to try a lock for a while, give it a deadline.
//
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	if err := m.Lock(ctx); errors.Is(err, context.DeadlineExceeded) {
//		return errBusy // someone held it for 5 s
//	}
//
// A wait ended by its deadline or a cancel returns an error matching ctx's
// (context.DeadlineExceeded or context.Canceled), and by then its node is
// gone from the queue, so it wakes no one. If the connection is down at
// that moment, the error comes at once and the node is deleted at
// reconnect, or with the session when it expires. TryLock, TryRLock and
// TryAcquire are the zero wait: they never queue behind a holder.
//
// # Sessions
//
// What a recipe holds lives as long as the client's session: an expired
// session's nodes are deleted by the server, and the next contender goes
// ahead. The holder learns of it through Lost, closed at the hold's
// stop-by deadline at the latest (Mutex.Deadline): a moment, on the
// holder's monotonic clock, before which no other contender can have
// been granted the lock, counted from the send of the requests the
// cluster answered, less a clock drift and a margin (WithClockDrift,
// WithSafetyMargin). A hold bound to a lease (WithLease) has a deadline
// that holds whatever partition cuts it off; one of the session alone
// assumes that a member cut off from the quorum notices within a third of
// the session's timeout. Still, a holder that was paused (a long garbage
// collection, a stopped VM) may act after its deadline without having
// looked at Lost. A resource that must never accept a stale holder checks
// the fencing token (Token), which strictly increases from one holder to
// the next.
//
// A waiter whose session expires gets an error matching
// client.ErrSessionExpired. A connection loss is not a loss of the
// session: the recipes carry on through reconnections, and a node whose
// create was answered by a lost connection is found again by its protected
// name (a prefix unique to each acquisition), so it is neither left behind
// nor taken twice.
//
// # Nodes
//
// Node names are _c_<id>-<kind>-<sequence>, where id is unique to the
// acquisition and kind is lock, read, write, n (a candidate), lease or
// member; a lock waiter WithPriority carries its priority, and the key
// that places it before waiters of lower priority, in its id
// (_c_<id>.p<priority>.k<key>-<kind>-<sequence>). Package lockq holds the
// rules of the queue (who holds, whom each waiter watches, which modes
// conflict, where a priority goes). A recipe creates its path and missing ancestors as containers,
// which the server deletes once they are empty again. WithACL gives every
// node a recipe creates an ACL (the server's default otherwise). See
// docs/recipes.md for each recipe's algorithm.
package recipes
