package client

import (
	"context"

	"github.com/arbor-coord/arbor/wire"
)

// ReadOption is an option of a read: Get, GetW, Exists, ExistsW, Children,
// ChildrenW, GetACL and CountDescendants.
type ReadOption func(*readOptions)

type readOptions struct {
	linearizable bool
	waiter       string
}

// Linearizable makes a read linearizable: the server answers only once it
// has applied every write committed, on any member, before the read was
// sent, so the read sees them all, as a read from the leader would. It
// costs the server a round of heartbeats from the leader to a quorum
// (reads sent at the same time share one) and, on a member behind the
// leader, the wait to catch up. Without it a read is served from what the
// member holds, which may be a little behind the leader (ZooKeeper's
// reads; Sync before a read gives the same guarantee in two steps). A
// member that cannot reach the leader answers ErrNoQuorum, or
// ErrOperationTimeout, rather than possibly stale data.
func Linearizable() ReadOption {
	return func(o *readOptions) { o.linearizable = true }
}

// Waiter marks the watch a GetW or ExistsW leaves as that of a lock
// waiter on the node it waits for: name is the waiter's own node, beside
// the watched one in the lock's queue (a lockq name). If the watched node
// is deleted, the event names the waiter in Event.Turns when its
// acquisition holds the lock by then, by the server's view of the queue
// at that change, so that the waiter takes its turn without a read. The
// server refuses a name with a slash, or one without a watch.
func Waiter(name string) ReadOption {
	return func(o *readOptions) { o.waiter = name }
}

// readRequest is the request of a read op.
func readRequest(op wire.Op, path string, watch bool, opts []ReadOption) wire.Request {
	var o readOptions
	for _, opt := range opts {
		opt(&o)
	}
	return wire.Request{Op: op, Path: path, Watch: watch, Linearizable: o.linearizable, Waiter: o.waiter}
}

// Ephemerals returns the paths of this session's ephemeral nodes whose path
// starts with prefix, sorted (ZooKeeper's getEphemerals). The match is on
// the string, not the subtree: "/app" also matches "/app2/x", and "/" gives
// all of them. prefix must be a valid path.
func (c *Client) Ephemerals(ctx context.Context, prefix string) ([]string, error) {
	if err := wire.ValidatePath(prefix, false); err != nil {
		return nil, opError("ephemerals", prefix, err)
	}
	rep, err := c.do(ctx, "ephemerals", prefix, wire.Request{Op: wire.OpGetEphemerals, Path: prefix}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Children, nil
}

// CountDescendants returns the number of nodes below path at any depth,
// path itself not counted (ZooKeeper's getAllChildrenNumber). The server
// walks the subtree to count it.
func (c *Client) CountDescendants(ctx context.Context, path string, opts ...ReadOption) (int, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return 0, opError("count", path, err)
	}
	rep, err := c.do(ctx, "count", path, readRequest(wire.OpGetAllChildrenNumber, path, false, opts), nil)
	if err != nil {
		return 0, err
	}
	return int(rep.Descendants), nil
}
