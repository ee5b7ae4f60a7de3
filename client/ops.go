package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// maxTTL is the longest TTL the server accepts, in ms (ZooKeeper's).
const maxTTL = 1<<40 - 1

// Create makes a node at path with data and returns its path (with the
// sequence number appended, for a sequential mode, to a path that may then
// end in "/"). The parent must exist. For the TTL modes use CreateTTL.
// The node gets the server's default ACL, or the one given WithACL.
func (c *Client) Create(ctx context.Context, path string, data []byte, mode CreateMode, opts ...CreateOption) (string, error) {
	p, _, err := c.create(ctx, newCreate(path, data, mode, 0, false, opts))
	return p, err
}

// CreateStat is Create that also returns the new node's Stat (ZooKeeper's
// create2): its Czxid, for example, orders it among all writes.
func (c *Client) CreateStat(ctx context.Context, path string, data []byte, mode CreateMode, opts ...CreateOption) (string, Stat, error) {
	return c.create(ctx, newCreate(path, data, mode, 0, false, opts))
}

// CreateTTL makes a node of mode PersistentTTL or PersistentSequentialTTL: a
// persistent node that the server deletes once it has had no children and
// no change for ttl (at least a millisecond; it is sent in whole
// milliseconds). The server must have TTL nodes enabled.
func (c *Client) CreateTTL(ctx context.Context, path string, data []byte, mode CreateMode, ttl time.Duration, opts ...CreateOption) (string, error) {
	p, _, err := c.create(ctx, newCreate(path, data, mode, ttl, true, opts))
	return p, err
}

func (c *Client) create(ctx context.Context, op Op) (string, Stat, error) {
	if err := op.check(); err != nil {
		return "", Stat{}, opError("create", op.req.Path, err)
	}
	rep, err := c.do(ctx, "create", op.req.Path, op.req, nil)
	if err != nil {
		return "", Stat{}, err
	}
	if op.turn != nil {
		*op.turn = rep.Turn
	}
	return rep.Path, rep.Stat, nil
}

// Get returns the data and Stat of the node at path.
func (c *Client) Get(ctx context.Context, path string, opts ...ReadOption) ([]byte, Stat, error) {
	data, st, _, err := c.get(ctx, path, false, opts)
	return data, st, err
}

// GetW is Get, and also leaves a watch on the node: the channel receives
// one event (NodeDataChanged or NodeDeleted, or a session event) and is then
// closed. No watch is left when GetW fails.
func (c *Client) GetW(ctx context.Context, path string, opts ...ReadOption) ([]byte, Stat, <-chan Event, error) {
	return c.get(ctx, path, true, opts)
}

func (c *Client) get(ctx context.Context, path string, watch bool, opts []ReadOption) ([]byte, Stat, <-chan Event, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return nil, Stat{}, nil, opError("get", path, err)
	}
	w := newWatch(path, watch)
	rep, err := c.do(ctx, "get", path, readRequest(wire.OpGetData, path, watch, opts), w)
	if err != nil {
		return nil, Stat{}, nil, err
	}
	return rep.Data, rep.Stat, w.channel(), nil
}

// Exists reports whether a node is at path, with its Stat if so. A missing
// node is not an error.
func (c *Client) Exists(ctx context.Context, path string, opts ...ReadOption) (bool, Stat, error) {
	ok, st, _, err := c.exists(ctx, path, false, opts)
	return ok, st, err
}

// ExistsW is Exists, and also leaves a watch, whether or not the node
// exists: the channel receives one event (NodeCreated, NodeDataChanged or
// NodeDeleted, or a session event) and is then closed.
func (c *Client) ExistsW(ctx context.Context, path string, opts ...ReadOption) (bool, Stat, <-chan Event, error) {
	return c.exists(ctx, path, true, opts)
}

func (c *Client) exists(ctx context.Context, path string, watch bool, opts []ReadOption) (bool, Stat, <-chan Event, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return false, Stat{}, nil, opError("exists", path, err)
	}
	w := newWatch(path, watch)
	rep, err := c.do(ctx, "exists", path, readRequest(wire.OpExists, path, watch, opts), w)
	switch {
	case rep != nil && rep.Err == wire.CodeNoNode:
		return false, Stat{}, w.channel(), nil
	case err != nil:
		return false, Stat{}, nil, err
	}
	return true, rep.Stat, w.channel(), nil
}

// Children returns the names of the children of the node at path, sorted,
// and the node's Stat.
func (c *Client) Children(ctx context.Context, path string, opts ...ReadOption) ([]string, Stat, error) {
	names, st, _, err := c.children(ctx, path, false, opts)
	return names, st, err
}

// ChildrenW is Children, and also leaves a watch on the node's children:
// the channel receives one event (NodeChildrenChanged or NodeDeleted, or a
// session event) and is then closed.
func (c *Client) ChildrenW(ctx context.Context, path string, opts ...ReadOption) ([]string, Stat, <-chan Event, error) {
	return c.children(ctx, path, true, opts)
}

func (c *Client) children(ctx context.Context, path string, watch bool, opts []ReadOption) ([]string, Stat, <-chan Event, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return nil, Stat{}, nil, opError("children", path, err)
	}
	w := newWatch(path, watch)
	rep, err := c.do(ctx, "children", path, readRequest(wire.OpGetChildren, path, watch, opts), w)
	if err != nil {
		return nil, Stat{}, nil, err
	}
	return rep.Children, rep.Stat, w.channel(), nil
}

// Set replaces the data of the node at path if its version is version (-1:
// any version) and returns its new Stat.
func (c *Client) Set(ctx context.Context, path string, data []byte, version int32) (Stat, error) {
	op := SetOp(path, data, version)
	if err := op.check(); err != nil {
		return Stat{}, opError("set", path, err)
	}
	rep, err := c.do(ctx, "set", path, op.req, nil)
	if err != nil {
		return Stat{}, err
	}
	return rep.Stat, nil
}

// Delete removes the node at path if its version is version (-1: any
// version). The node must have no children.
func (c *Client) Delete(ctx context.Context, path string, version int32) error {
	op := DeleteOp(path, version)
	if err := op.check(); err != nil {
		return opError("delete", path, err)
	}
	_, err := c.do(ctx, "delete", path, op.req, nil)
	return err
}

// Sync waits until the server this client is connected to has applied
// every write committed before the call, so that the reads that follow see
// them.
func (c *Client) Sync(ctx context.Context, path string) error {
	if err := wire.ValidatePath(path, false); err != nil {
		return opError("sync", path, err)
	}
	_, err := c.do(ctx, "sync", path, wire.Request{Op: wire.OpSync, Path: path}, nil)
	return err
}

// do sends req and waits for its reply. The error wraps the transport error
// or the reply's error code with name and path ("get /x: no node"); with a
// reply error the reply is returned too.
func (c *Client) do(ctx context.Context, name, path string, req wire.Request, w *watchReg) (*wire.Reply, error) {
	rep, err := c.call(ctx, req, w)
	switch {
	case err != nil:
	case rep.Err == wire.CodeHistoryCompacted:
		err = &HistoryCompactedError{Oldest: rep.OldestZxid}
	default:
		err = rep.Err.Err()
	}
	if err != nil {
		return rep, opError(name, path, err)
	}
	return rep, nil
}

// call sends req on the current connection and waits for its reply. While
// the client is disconnected it waits for the reconnect (within ctx). A
// request that could not be sent because the connection had just broken is
// sent again on the next one; one that was sent fails with the connection.
func (c *Client) call(ctx context.Context, req wire.Request, w *watchReg) (*wire.Reply, error) {
	r := newRequest(req, w)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cn, changed, err := c.current()
		if err != nil {
			return nil, err
		}
		if cn != nil && req.Linearizable && cn.version < wire.LinearizableReads {
			// A server older than the flag would skip it and answer from
			// what it holds: a sync first makes the read linearizable
			// there too. (Should the read go to another server, that one
			// has applied at least what the sync's reply showed, or it
			// would refuse the client.)
			if err := c.Sync(ctx, "/"); err != nil {
				return nil, err
			}
			r.req.Linearizable = false
		}
		if cn != nil && req.FromZxid != 0 && cn.version < wire.ResumableWatches {
			// A server older than the field would skip it and start the
			// watch live: the events in between would be lost unseen.
			return nil, fmt.Errorf("%w: resuming a watch from a zxid needs protocol version %d, the server speaks %d",
				ErrUnsupported, wire.ResumableWatches, cn.version)
		}
		if cn != nil && cn.send(r) == nil {
			return r.wait(ctx)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Op is one operation of a Multi. Make it with CreateOp, CreateTTLOp,
// DeleteOp, SetOp or CheckOp.
type Op struct {
	req  wire.Request
	err  error     // a mistake found when the Op was made
	turn *LockTurn // a create's TellTurn
}

// CreateOp is a Multi's Create. TTL modes need CreateTTLOp.
func CreateOp(path string, data []byte, mode CreateMode, opts ...CreateOption) Op {
	return newCreate(path, data, mode, 0, false, opts)
}

// CreateTTLOp is a Multi's CreateTTL.
func CreateTTLOp(path string, data []byte, mode CreateMode, ttl time.Duration, opts ...CreateOption) Op {
	return newCreate(path, data, mode, ttl, true, opts)
}

func newCreate(path string, data []byte, mode CreateMode, ttl time.Duration, withTTL bool, opts []CreateOption) Op {
	op := Op{req: wire.Request{Op: wire.OpCreate, Path: path, Data: data, Mode: mode}}
	if len(opts) > 0 {
		var o createOptions
		for _, opt := range opts {
			opt(&o)
		}
		op.req.ACL, op.req.Lease = o.acl, o.lease
		op.turn, op.req.TellTurn = o.turn, o.turn != nil
		if o.lease != 0 && !mode.IsEphemeral() {
			op.err = fmt.Errorf("%w: only an ephemeral node can be a lease's, not a %s one", ErrBadArguments, mode)
			return op
		}
		if o.aclSet && len(o.acl) == 0 {
			op.err = fmt.Errorf("%w: WithACL with no entries", ErrInvalidACL)
			return op
		}
	}
	switch {
	case !mode.Valid():
		op.err = fmt.Errorf("%w: unknown create mode %d", ErrBadArguments, int32(mode))
	case mode.IsTTL() && !withTTL:
		op.err = fmt.Errorf("%w: %s mode needs a TTL (use CreateTTL)", ErrBadArguments, mode)
	case withTTL && !mode.IsTTL():
		op.err = fmt.Errorf("%w: a TTL needs mode PersistentTTL or PersistentSequentialTTL, not %s",
			ErrBadArguments, mode)
	case withTTL && (ttl < time.Millisecond || ttl.Milliseconds() > maxTTL):
		op.err = fmt.Errorf("%w: ttl %v out of range (1ms to %d ms)", ErrBadArguments, ttl, int64(maxTTL))
	case withTTL:
		op.req.TTL = ttl.Milliseconds()
	}
	return op
}

// DeleteOp is a Multi's Delete.
func DeleteOp(path string, version int32) Op {
	return Op{req: wire.Request{Op: wire.OpDelete, Path: path, Version: version}}
}

// SetOp is a Multi's Set.
func SetOp(path string, data []byte, version int32) Op {
	return Op{req: wire.Request{Op: wire.OpSetData, Path: path, Data: data, Version: version}}
}

// CheckOp makes a Multi fail unless the node at path has version version.
func CheckOp(path string, version int32) Op {
	return Op{req: wire.Request{Op: wire.OpCheck, Path: path, Version: version}}
}

// CheckChildrenOp makes a Multi fail with ErrBadVersion unless the node at
// path has cversion cversion: unless its children are still those a
// Children call returned with that Stat.Cversion. Put first in a Multi with
// a sequential create under path, it also fixes the create's sequence
// number: cversion. It is Arbor's own (wire.CheckCversion); a ZooKeeper
// server has no such check.
func CheckChildrenOp(path string, cversion int32) Op {
	return Op{req: wire.Request{Op: wire.OpCheck, Path: path, Version: cversion, Mode: wire.CheckCversion}}
}

// name is the op's name in errors.
func (op Op) name() string {
	switch op.req.Op {
	case wire.OpCreate:
		return "create"
	case wire.OpDelete:
		return "delete"
	case wire.OpSetData:
		return "set"
	case wire.OpCheck:
		return "check"
	}
	return op.req.Op.String()
}

// check validates op before any round trip.
func (op Op) check() error {
	if !op.req.Op.InMulti() {
		return fmt.Errorf("%w: not an Op made by CreateOp, DeleteOp, SetOp or CheckOp", ErrBadArguments)
	}
	if op.err != nil {
		return op.err
	}
	return wire.ValidatePath(op.req.Path, op.req.Op == wire.OpCreate && op.req.Mode.IsSequential())
}

// OpResult is the outcome of one op of a Multi.
type OpResult struct {
	Path string // create: the created path
	Stat Stat   // create, set: the node's new Stat
	// Err is nil for an op that succeeded. In a failed multi it is the
	// failing op's sentinel for that op, nil for the ops before it and
	// ErrRuntimeInconsistency for the ops after it (none was applied).
	Err error
}

// Multi applies ops atomically: all of them or none. It returns one result
// per op. When an op fails, the error is a *MultiError that names the op's
// index and matches its sentinel (for example ErrBadVersion).
func (c *Client) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	reqs := make([]wire.Request, len(ops))
	for i, op := range ops {
		if err := op.check(); err != nil {
			return nil, &MultiError{Index: i, Op: op.name(), Path: op.req.Path, Err: err}
		}
		reqs[i] = op.req
	}
	rep, err := c.call(ctx, wire.Request{Op: wire.OpMulti, Ops: reqs}, nil)
	if err != nil {
		return nil, fmt.Errorf("multi: %w", err)
	}
	results := make([]OpResult, len(rep.Results))
	for i, res := range rep.Results {
		results[i] = OpResult{Path: res.Path, Stat: res.Stat, Err: res.Err.Err()}
	}
	if rep.Err == wire.CodeOK {
		return results, nil
	}
	return results, multiError(ops, rep)
}

// multiError names the op that failed: the first whose result is an error
// other than RuntimeInconsistency; else the reply's code stands alone.
func multiError(ops []Op, rep *wire.Reply) error {
	for i, res := range rep.Results {
		if res.Err == wire.CodeOK || res.Err == wire.CodeRuntimeInconsistency || i >= len(ops) {
			continue
		}
		return &MultiError{Index: i, Op: ops[i].name(), Path: ops[i].req.Path, Err: res.Err.Err()}
	}
	return &MultiError{Index: -1, Err: rep.Err.Err()}
}

// AddWatch leaves a persistent (WatchPersistent) or recursive
// (WatchPersistentRecursive) watch on path, which need not exist, and
// returns the channel of its events. The watch stays until RemoveWatch or
// the end of the session, across reconnects: the events missed while
// disconnected are delivered on reconnect, in order.
//
// With FromZxid(z), the channel first receives every event after zxid z
// the watch sees, in zxid order, then the live ones, with no gap and no
// duplicate. Replayed events carry no data (Stat.Czxid is 0). If the
// server's change history no longer goes back to z, AddWatch fails with
// an error matching ErrHistoryCompacted (a *HistoryCompactedError names
// the oldest zxid it can resume from); on a server of an older protocol
// version, with ErrUnsupported.
//
// A reader that falls DefaultWatchQueue events behind loses the watch: the
// channel gets a last event of Type EventWatchRemoved (Err matching
// ErrEventsLost) and is closed, so nothing is silently skipped. The same
// happens when, after a reconnect, the server no longer has all the events
// missed (Err then matches ErrHistoryCompacted too). Read the state again
// and add a new watch then.
func (c *Client) AddWatch(ctx context.Context, path string, mode AddWatchMode, opts ...WatchOption) (<-chan Event, error) {
	if err := wire.ValidatePath(path, false); err != nil {
		return nil, opError("addWatch", path, err)
	}
	if mode != WatchPersistent && mode != WatchPersistentRecursive {
		return nil, opError("addWatch", path, fmt.Errorf("%w: unknown mode %d", ErrBadArguments, mode))
	}
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.from < 0 {
		return nil, opError("addWatch", path, fmt.Errorf("%w: negative zxid %d", ErrBadArguments, o.from))
	}
	w := newLastingWatch(path, mode, DefaultWatchQueue)
	req := wire.Request{Op: wire.OpAddWatch, Path: path, AddWatchMode: mode, FromZxid: o.from}
	if _, err := c.do(ctx, "addWatch", path, req, w); err != nil {
		return nil, err
	}
	return w.ch, nil
}

// WatchOption is an option of AddWatch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	from int64
}

// FromZxid makes AddWatch resume from zxid: the watch first receives every
// event after it, then the live ones. 0 (the default) is live events only.
// A zxid from a reply or an event (Event.Zxid, Stat.Mzxid) says where to
// resume from; so does HistoryCompactedError.Oldest.
func FromZxid(zxid int64) WatchOption {
	return func(o *watchOptions) { o.from = zxid }
}

// RemoveWatch removes the persistent or recursive watches of mode on path
// that AddWatch left: their channels are closed. It fails with
// ErrNoWatcher if there were none.
func (c *Client) RemoveWatch(ctx context.Context, path string, mode AddWatchMode) error {
	typ := wire.WatcherPersistent
	if mode == WatchPersistentRecursive {
		typ = wire.WatcherPersistentRecursive
	}
	had := c.watches.removeLasting(lastingKey{path, mode})
	_, err := c.do(ctx, "removeWatches", path, wire.Request{Op: wire.OpRemoveWatches, Path: path, WatcherType: typ}, nil)
	if had && errors.Is(err, ErrNoWatcher) {
		err = nil // the server had dropped it already, after a reconnect it could not replay
	}
	return err
}
