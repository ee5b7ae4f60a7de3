package client

import (
	"context"
	"fmt"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// Lease is a lease of the client's session: a session without a
// connection, kept alive not by the client's heartbeats but by renewals.
// An ephemeral node created WithLease is the lease's: it goes when the
// lease ends, because a renewal did not come in time (the leader ends it
// then, as it ends a silent session), because it was closed, or because the
// client's session ended. A lock node bound to a lease is so freed for the
// next waiter when its holder stops renewing, even while the holder's
// session lives (a stuck process whose heartbeat goes on).
type Lease struct {
	ID       int64
	TTL      time.Duration // how long a renewal keeps it
	Expires  time.Time     // when it ends unless renewed, by the clock of the member that took the last renewal
	Version  int64         // 1 at creation, one more at each renewal
	MaxUntil time.Time     // when it ends whatever its renewals (MaxHold); zero: never
	// Node is, after a renewal with LookAt, whether the lease still has
	// that node: NodeHeld or NodeGone; NodeNotLooked otherwise, and from a
	// server too old to look.
	Node NodeState
}

// NodeState is what a renewal found of the node it was asked to look at.
type NodeState = wire.NodeState

// The node states of a renewal.
const (
	NodeNotLooked = wire.NodeNotLooked
	NodeHeld      = wire.NodeHeld // there, an ephemeral of the lease
	NodeGone      = wire.NodeGone // not there, or not the lease's
)

// LeaseOption is an option of CreateLease (MaxHold) or RenewLease (LookAt).
type LeaseOption func(*wire.Request)

// LookAt makes a renewal say whether the lease still has the node at path
// (Lease.Node), read on the member after the renewal applied: what an
// Exists sent right after it would tell, in the same round trip.
func LookAt(path string) LeaseOption {
	return func(r *wire.Request) { r.Path = path }
}

// MaxHold makes no renewal keep the lease past d from its creation (1 s to
// 7 days): a hold that renewals would otherwise keep alive forever ends.
func MaxHold(d time.Duration) LeaseOption {
	return func(r *wire.Request) { r.MaxHold = d.Milliseconds() }
}

// WithLease makes the new node, which must be ephemeral, the lease's rather
// than the session's (see Lease).
func WithLease(id int64) CreateOption {
	return func(o *createOptions) { o.lease = id }
}

// CreateLease makes a lease of the client's session for ttl (1 s to 1 h; 0
// for the server's default, 30 s). owner names who holds it, for
// operators.
func (c *Client) CreateLease(ctx context.Context, ttl time.Duration, owner string, opts ...LeaseOption) (Lease, error) {
	if ttl < 0 || ttl > 0 && ttl < time.Millisecond {
		return Lease{}, opError("createlease", owner, fmt.Errorf("%w: a lease's TTL of %v", ErrBadArguments, ttl))
	}
	req := wire.Request{Op: wire.OpLeaseCreate, TTL: ttl.Milliseconds(), Owner: owner}
	for _, opt := range opts {
		opt(&req)
	}
	return c.lease(ctx, "createlease", owner, req)
}

// RenewLease keeps lease id for another ttl from now (0: its own TTL). A
// renewal of a lease that has ended fails with ErrLeaseExpired, and changes
// nothing.
func (c *Client) RenewLease(ctx context.Context, id int64, ttl time.Duration, opts ...LeaseOption) (Lease, error) {
	req := wire.Request{Op: wire.OpLeaseRenew, Lease: id, TTL: ttl.Milliseconds()}
	for _, opt := range opts {
		opt(&req)
	}
	return c.lease(ctx, "renewlease", leaseName(id), req)
}

// CloseLease ends lease id now, and its ephemerals with it. Closing a
// lease that has ended fails with ErrLeaseExpired.
func (c *Client) CloseLease(ctx context.Context, id int64) error {
	_, err := c.do(ctx, "closelease", leaseName(id), wire.Request{Op: wire.OpLeaseClose, Lease: id}, nil)
	return err
}

// leaseName names a lease in errors, as a session id is named.
func leaseName(id int64) string { return fmt.Sprintf("lease %#x", id) }

func (c *Client) lease(ctx context.Context, name, what string, req wire.Request) (Lease, error) {
	rep, err := c.do(ctx, name, what, req, nil)
	if err != nil {
		return Lease{}, err
	}
	l := rep.Lease
	lease := Lease{ID: l.ID, TTL: time.Duration(l.TTLMs) * time.Millisecond, Expires: time.UnixMilli(l.Expires), Version: l.Version, Node: l.Node}
	if l.MaxUntil != 0 {
		lease.MaxUntil = time.UnixMilli(l.MaxUntil)
	}
	return lease, nil
}
