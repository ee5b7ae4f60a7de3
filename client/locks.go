package client

import (
	"context"

	"github.com/arbor-coord/arbor/wire"
)

// LockInfo is one lock as the server sees it: the queue of lock nodes
// (package lockq) under its path, whoever made them. See Locks.
type LockInfo = wire.LockInfo

// LockParty is a holder or a waiter of a lock.
type LockParty = wire.LockParty

// LockWait is one edge of a deadlock: Waiter waits for Lock, which Holder
// holds.
type LockWait = wire.LockWait

// Locks returns every lock at or under path that the client may read (READ
// on the lock's path), sorted by path: its holders (owner, session, token,
// since when, lease expiry), its waiters in queue order (since when they
// wait) and the wait a new waiter could expect from recent hold times. It
// reads the state of the server the client is connected to; with
// linearizable it syncs first, so that no holder that has left shows.
func (c *Client) Locks(ctx context.Context, path string, linearizable bool) ([]LockInfo, error) {
	if err := c.syncFirst(ctx, path, linearizable); err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, "locks", path, wire.Request{Op: wire.OpLocks, Path: path}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Locks, nil
}

// Deadlocks returns every cycle of the server's wait-for graph among the
// locks the client may read: holders (a lock value, or an HTTP client)
// that each wait for a lock another in the cycle holds. Each cycle starts
// with its youngest wait, the one to end to break it.
func (c *Client) Deadlocks(ctx context.Context, linearizable bool) ([][]LockWait, error) {
	if err := c.syncFirst(ctx, "/", linearizable); err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, "deadlocks", "", wire.Request{Op: wire.OpDeadlocks}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Deadlocks, nil
}

// LockEvent is one entry of the lock history.
type LockEvent = wire.LockEvent

// The kinds of LockEvent.
const (
	LockAcquired     = wire.LockAcquired     // began to hold
	LockReleased     = wire.LockReleased     // its holder let go
	LockExpired      = wire.LockExpired      // its lease was not renewed in time, or reached its maximum hold
	LockSessionEnded = wire.LockSessionEnded // its session ended while it held
	LockBroken       = wire.LockBroken       // an admin broke the lock
	LockDeadlock     = wire.LockDeadlock     // the server ended this wait, the youngest of a deadlock
)

// LockHistory returns the recent history of the locks at or under path
// that the client may read, oldest first: each acquisition that began to
// hold (who, token, how long it waited), each hold that ended and how
// (released, expired, session-ended, broken: by whom and why) and how long
// it lasted, and each wait the server ended for a deadlock. Every member
// keeps the same bounded history (arbord --lock-history); with
// linearizable it syncs first, so that the latest events show.
func (c *Client) LockHistory(ctx context.Context, path string, linearizable bool) ([]LockEvent, error) {
	if err := c.syncFirst(ctx, path, linearizable); err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, "lockhistory", path, wire.Request{Op: wire.OpLockHistory, Path: path}, nil)
	if err != nil {
		return nil, err
	}
	return rep.LockHistory, nil
}

// TokenCheck is the answer of CheckToken.
type TokenCheck struct {
	Current bool    // the token is a current holder's
	Holders []int64 // the tokens of the lock's holders (several for readers); none when it is free
}

// CheckToken says whether token is the fencing token of a current holder
// of the lock at path: what a resource guarded by the lock asks before it
// acts on a request that carries the token (docs/locks.md). The answer is
// linearizable: the server syncs with the leader first, so a holder that
// lost the lock is not current, whichever member the client is connected
// to. It needs READ on the lock; a lock nobody holds has no current token.
func (c *Client) CheckToken(ctx context.Context, path string, token int64) (TokenCheck, error) {
	var v TokenCheck
	infos, err := c.Locks(ctx, path, true)
	if err != nil {
		return v, err
	}
	for _, l := range infos {
		if l.Path != path {
			continue // a lock below it
		}
		for _, h := range l.Holders {
			v.Holders = append(v.Holders, h.Token)
			v.Current = v.Current || h.Token == token
		}
	}
	return v, nil
}

// syncFirst syncs the connection's server with the leader when asked: a
// read after it, on the same connection, sees every write committed
// before it.
func (c *Client) syncFirst(ctx context.Context, path string, do bool) error {
	if !do {
		return nil
	}
	return c.Sync(ctx, path)
}

// BreakLock frees the lock at path, for reason (which the server logs):
// the nodes of every acquisition that holds it are deleted, so the next
// waiter holds, with a higher token. A holder bound to a lease is told
// (recipes' LostReason: ErrBroken). It needs ADMIN and DELETE on the
// lock's path; a lock nobody holds is ErrNoNode. It returns the nodes it
// deleted.
func (c *Client) BreakLock(ctx context.Context, path, reason string) ([]string, error) {
	rep, err := c.do(ctx, "breaklock", path, wire.Request{Op: wire.OpLockBreak, Path: path, Reason: reason}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Children, nil
}
