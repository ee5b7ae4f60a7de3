package recipes

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// Option configures a recipe.
type Option func(*options)

type options struct {
	data    []byte
	owner   string
	holder  string
	lease   time.Duration
	maxHold time.Duration
	acl     []client.CreateOption // client.WithACL, or none for the server's default ACL
	prio    int                   // WithPriority
	delay   time.Duration         // WithLockDelay
	// WithClockDrift and WithSafetyMargin, if given.
	drift     float64
	driftSet  bool
	margin    time.Duration
	marginSet bool
}

// WithData sets the data stored in the nodes a recipe creates (default:
// none). A lock's nodes store their owner instead (see WithOwner): given
// to a Mutex or an RWMutex, data is taken as the owner, as text.
func WithData(data []byte) Option {
	return func(o *options) { o.data = slices.Clone(data) }
}

// WithOwner names who takes a Mutex or an RWMutex (default: this host's
// name and the process id, "host:pid"). Operators see it next to each
// holder and waiter (`arbor locks`), and the server's wait-for graph
// names the owners in a deadlock by it. The owner is cut at
// lockq.MaxOwner bytes.
func WithOwner(owner string) Option {
	return func(o *options) { o.owner = owner }
}

// WithHolder gives a Mutex, an RWMutex or a MultiLock the holder id id
// (default: one of its own, random). The server's wait-for graph, which
// finds deadlocks (Client.Deadlocks), has a vertex per holder: values that
// act for one caller (the Mutexes one goroutine takes in turn, say) should
// share an id, so that a wait of one and a hold of another are the same
// vertex's.
func WithHolder(id string) Option {
	return func(o *options) { o.holder = id }
}

// WithLease binds each hold of a Mutex, an RWMutex or a MultiLock to a
// lease of ttl (1 s to 1 h), which the value renews at a third of ttl (or
// of the session's timeout, if that is shorter: the lease ends with the
// session) while it holds: if the renewals stop coming in time (a process
// stuck, or cut off from the cluster, while its session's heartbeats go
// on), the lease ends, the lock goes to the next waiter, whose token is
// higher, and Lost is closed: at the hold's stop-by deadline
// (Mutex.Deadline), before the lease ends, with LostReason
// ErrDeadlinePassed, or with client.ErrLeaseExpired if the holder hears
// of the end first. Renew renews at once. Without it a hold lasts as long
// as the session, and its deadline rests on an assumption about the
// cluster's election timeout (see Mutex.Deadline).
func WithLease(ttl time.Duration) Option {
	return func(o *options) { o.lease = ttl }
}

// WithMaxHold ends each hold of a Mutex, an RWMutex or a MultiLock d
// after it began to wait (1 s to 7 days), however it is renewed: the lock
// goes to the next waiter, and Lost closes with LostReason
// client.ErrLeaseExpired. A hold that renewals would keep alive forever
// (a holder stuck in a loop that still renews) so ends; its stop-by
// deadline (Mutex.Deadline) comes before. It binds the hold to a lease
// (WithLease; of 30 s unless WithLease says).
func WithMaxHold(d time.Duration) Option {
	return func(o *options) { o.maxHold = d }
}

// WithLockDelay asks for a lock-delay (Chubby's) of d, at most
// lockq.MaxLockDelay (a longer one is cut): if this holder is lost without
// releasing (its session or lease expires, or an admin breaks the lock),
// the server holds the lock for d before the next waiter may, so that a
// resource that cannot check fencing tokens sees the lost holder's last
// requests drain first. An Unlock hands over at once. The server reaps
// the delay within a second after d; servers that predate it ignore it.
func WithLockDelay(d time.Duration) Option {
	return func(o *options) { o.delay = d }
}

// defaultLeaseTTL is the TTL of a hold's lease WithMaxHold without
// WithLease.
const defaultLeaseTTL = 30 * time.Second

// ownerName is who takes a lock: WithOwner's, WithData's as text, or
// host:pid.
func (o options) ownerName() string {
	switch {
	case o.owner != "":
		return o.owner
	case o.data != nil:
		return string(o.data)
	}
	return defaultOwner
}

// lockRecord returns the data of a lock's nodes: the owner, and an id of
// the holder, the value that holds, unique to it.
func (o options) lockRecord() []byte {
	holder := o.holder
	if holder == "" {
		holder = randomID()
	}
	return lockq.Record{Owner: o.ownerName(), Holder: holder, DelayMs: o.delay.Milliseconds()}.Encode()
}

// newLockHold returns the hold of a lock on path: reentrant, bound to a
// lease WithLease.
func newLockHold(c *client.Client, path string, o options) *hold {
	h := newHold(newQueue(c, path, o), true, o)
	if o.maxHold > 0 && o.lease == 0 {
		o.lease = defaultLeaseTTL
	}
	h.lease, h.maxHold, h.owner = o.lease, o.maxHold, o.ownerName()
	return h
}

// defaultOwner is this process: host:pid.
var defaultOwner = func() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}()

// randomID returns 32 hex digits, unique in practice.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// WithPriority gives each wait of a Mutex, an RWMutex or a MultiLock
// priority p, from 0 (the default: first come, first served) to
// lockq.MaxPriority (a p out of range is taken as the nearest end). A
// waiter is served before the waiters of lower priority that are still
// waiting when it comes, never before a holder; waiters of one priority
// keep their order. Aging keeps low priorities from starving: no waiter
// has more than lockq.AgingWindow later waiters placed before it. Its
// place is decided as it joins, against an exact list of the queue, and
// written into its node's name (see package lockq); every client of a
// lock that uses priorities must know them (this version of the recipes,
// or anything that orders by lockq.Sort). A wait with a priority costs a
// read of the queue, and sometimes a read of the node it comes to wait
// for, more than one without.
//
// Priorities are inherited: a value that waits for a lock while it holds
// others (or while values of this process with its WithHolder id do) is
// served at the highest priority waiting for the locks it holds, if that
// is higher than its own (see docs/locks.md).
func WithPriority(p int) Option {
	return func(o *options) { o.prio = min(max(p, 0), lockq.MaxPriority) }
}

// WithACL gives acl to every node the recipe creates: its own nodes and
// the path and missing ancestors it creates for them (default: the
// server's default ACL). The ACL must let the recipe's own session (its
// identities, see client.WithAuth) do what the recipe does: read, create
// and delete children on the path, and also write the node of a
// ConfigValue or a Registration. client.AuthACL(client.PermAll) grants
// exactly the identities of the session that creates the nodes.
func WithACL(acl ...client.ACL) Option {
	return func(o *options) { o.acl = []client.CreateOption{client.WithACL(acl...)} }
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// errGone says that the node a recipe value waited or held with is gone:
// its session ended, or someone deleted it.
var errGone = errors.New("the recipe's node is gone")

// queue is a recipe's view of the ephemeral-sequential nodes under dir: it
// creates a node with a protected name, lists the nodes in sequence order
// and waits for a node's turn.
type queue struct {
	c    *client.Client
	dir  string
	data []byte
	acl  []client.CreateOption
	prio int // the priority of its lock nodes (WithPriority)
}

func newQueue(c *client.Client, dir string, o options) *queue {
	return &queue{c: c, dir: dir, data: o.data, acl: o.acl, prio: o.prio}
}

func (q *queue) path(e lockq.Entry) string { return q.dir + "/" + e.Name }

// entries lists the queue in queue order; a missing dir is an empty
// queue.
func (q *queue) entries(ctx context.Context) ([]lockq.Entry, error) {
	es, _, err := q.entriesStat(ctx)
	return es, err
}

// entriesStat lists the queue in queue order, with the dir's Stat; a
// missing dir is an empty queue.
func (q *queue) entriesStat(ctx context.Context) ([]lockq.Entry, client.Stat, error) {
	for {
		names, st, err := q.c.Children(ctx, q.dir)
		switch {
		case errors.Is(err, client.ErrNoNode):
			return nil, client.Stat{}, nil
		case errors.Is(err, client.ErrConnectionLoss):
			continue // the client waits for the reconnect
		case err != nil:
			return nil, client.Stat{}, err
		}
		return lockq.Sort(names), st, nil
	}
}

// ticket is one acquisition's node, its first: the acquisition's place in
// the queue. A hold that changed mode has a node more for each change.
type ticket struct {
	lockq.Entry
	more   []string // the names of the nodes it added since, in order
	prefix string   // the names of the acquisition's nodes start with it: lockq.IDPrefix
	czxid  int64    // the fencing token: the czxid of its latest node
	owner  int64    // the session that created the node
	lease  int64    // the lease its nodes are bound to; 0: the session's
	data   []byte   // its first node's data
	// lossy says that a create's answer was lost: the server may still
	// apply it after the retry, making a second node with prefix.
	lossy bool
	// turn is its node's turn in the queue when the create made it, if
	// the server said (client.TellTurn); wait takes it instead of a list.
	turn client.LockTurn
}

// sibling reports whether e is a node of t's acquisition that t does not
// know of: left by a create whose answer was lost.
func (t *ticket) sibling(e lockq.Entry) bool {
	return strings.HasPrefix(e.Name, t.prefix) && e.Name != t.Name && !slices.Contains(t.more, e.Name)
}

// nodes returns the names of t's nodes, the first one last: the order to
// delete them in, so that the waiters watching the first node wake when
// all of them are gone.
func (t *ticket) nodes() []string {
	names := slices.Clone(t.more)
	slices.Reverse(names)
	return append(names, t.Name)
}

// enqueue creates a node of kind with data, bound to lease (if not 0), and
// the dir if it is missing. A create whose answer was lost with the
// connection is found again by its protected name.
func (q *queue) enqueue(ctx context.Context, kind lockq.Kind, data []byte, lease int64) (ticket, error) {
	return q.enqueueAt(ctx, kind, data, lease, q.prio)
}

// enqueueAt is enqueue with priority prio for a lock's node: it places
// the node by lockq.Place.
func (q *queue) enqueueAt(ctx context.Context, kind lockq.Kind, data []byte, lease int64, prio int) (ticket, error) {
	id := randomID()
	t := ticket{prefix: lockq.IDPrefix(id), lease: lease, data: data}
	placed := prio > 0 && kind.IsLock()
	if placed {
		t.prefix = lockq.Mark + id + "." // its id is id.p<priority>, and a key if it goes before others
	}
	for {
		var p string
		var st client.Stat
		var err error
		if placed {
			p, st, err = q.createPlaced(ctx, &t, id, kind, data, prio)
		} else {
			opts := t.createOptions(q)
			if kind.IsLock() {
				opts = append(slices.Clip(opts), client.TellTurn(&t.turn))
			}
			p, st, err = q.c.CreateStat(ctx, q.dir+"/"+lockq.Prefix(id, kind), data, client.EphemeralSequential, opts...)
		}
		switch {
		case err == nil:
			t.Entry, _ = lockq.Parse(p[len(q.dir)+1:])
			t.czxid, t.owner = st.Czxid, st.EphemeralOwner
			return t, nil
		case errors.Is(err, client.ErrNoNode):
			if err := makeDirs(ctx, q.c, q.dir, q.acl); err != nil {
				return t, err
			}
		case retry(ctx, err):
			// The create may yet apply: look for it before another.
			t.lossy = true
			e, st, err := q.findOwn(ctx, t.prefix, t.nodeOwner(q))
			if err != nil || e.Name != "" {
				t.Entry, t.czxid, t.owner = e, st.Czxid, st.EphemeralOwner
				return t, err
			}
		default:
			return t, err
		}
	}
}

// unknownOutcome reports whether a write that failed with err may still
// apply, so that a recipe looks for its effect and tries again: its
// connection was lost, or its member could not reach a quorum in time (a
// leader change under way, say).
func unknownOutcome(err error) bool {
	return errors.Is(err, client.ErrConnectionLoss) || errors.Is(err, client.ErrOperationTimeout) ||
		errors.Is(err, client.ErrNoQuorum)
}

// retry reports whether a write that failed with err is to be tried again:
// its outcome is unknown, and ctx lives on past a pause (none after a lost
// connection: a new connection is its own pause).
func retry(ctx context.Context, err error) bool {
	return unknownOutcome(err) && (errors.Is(err, client.ErrConnectionLoss) || pause(ctx))
}

// pause waits before a write whose outcome was unknown is tried again (a
// quorum needs time to form), and reports false if ctx ended first.
func pause(ctx context.Context) bool {
	select {
	case <-time.After(retryPause):
		return true
	case <-ctx.Done():
		return false
	}
}

// createPlaced creates the node of t, an acquisition of kind with the
// unique id base and the queue's priority, where lockq.Place puts it:
// against the queue as listed, in a multi with a check that the queue is
// still that (its cversion, which will be the node's sequence number)
// and, if it changes whom waiters wait for, with a rewrite of the node
// they watch (with the data it has, which wakes them). If the queue
// changes under it lockq.PlaceTries times, or the node to rewrite is not
// writable to it (an ACL), it joins at the end, which is always right.
// Its errors are those of a create: ErrNoNode when the dir is missing,
// ErrConnectionLoss when the outcome is unknown.
func (q *queue) createPlaced(ctx context.Context, t *ticket, base string, kind lockq.Kind, data []byte, prio int) (string, client.Stat, error) {
	prefix := func(key string) string { return q.dir + "/" + lockq.Prefix(lockq.ID(base, prio, key), kind) }
	atEnd := func() (string, client.Stat, error) {
		return q.c.CreateStat(ctx, prefix(""), data, client.EphemeralSequential, t.createOptions(q)...)
	}
	for range lockq.PlaceTries {
		names, dst, err := q.c.Children(ctx, q.dir)
		if err != nil {
			return "", client.Stat{}, err
		}
		es := lockq.Sort(names)
		at := lockq.Place(es, kind, prio, int64(dst.Cversion))
		if at.Key == "" {
			return atEnd()
		}
		ops, err := q.placeOps(ctx, es, at, dst.Cversion)
		switch {
		case errors.Is(err, client.ErrNoNode):
			continue // the node to rewrite left: list again
		case err != nil:
			return "", client.Stat{}, err
		}
		ops = append(ops, client.CreateOp(prefix(at.Key), data, client.EphemeralSequential, t.createOptions(q)...))
		res, err := q.c.Multi(ctx, ops...)
		switch {
		case err == nil:
			return res[len(res)-1].Path, res[len(res)-1].Stat, nil
		case errors.Is(err, client.ErrBadVersion), errors.Is(err, client.ErrNoNode) && at.Touch >= 0:
			continue // the queue, or the node to rewrite, changed: list again
		case errors.Is(err, client.ErrNoAuth) && at.Touch >= 0:
			return atEnd() // it may not rewrite the node
		}
		return "", client.Stat{}, err
	}
	return atEnd()
}

// placeOps are the ops that go before the create of a node placed at at in
// the queue es, listed with cversion: a check that the queue is still that,
// and the rewrite, with the data it has, of the node whose watchers come
// to wait for the new node (lockq.Placement.Touch). ErrNoNode says that
// node has left: list again.
func (q *queue) placeOps(ctx context.Context, es []lockq.Entry, at lockq.Placement, cversion int32) ([]client.Op, error) {
	ops := []client.Op{client.CheckChildrenOp(q.dir, cversion)}
	if at.Touch < 0 {
		return ops, nil
	}
	touched := q.path(es[at.Touch])
	data, st, err := q.c.Get(ctx, touched)
	if err != nil {
		return nil, err
	}
	return append(ops, client.SetOp(touched, data, st.Version)), nil
}

// createOptions are the options of the creates of t's nodes: the queue's
// ACL, and t's lease.
func (t *ticket) createOptions(q *queue) []client.CreateOption {
	if t.lease == 0 {
		return q.acl
	}
	return append(slices.Clone(q.acl), client.WithLease(t.lease))
}

// nodeOwner is the ephemeral owner of t's nodes: its lease, or the session.
func (t *ticket) nodeOwner(q *queue) int64 {
	if t.lease != 0 {
		return t.lease
	}
	return q.c.SessionID()
}

// findOwn looks for a node named with prefix that owner (this session, or
// a lease of it) created and that is not one of known. A node with the
// prefix left by another session (one that has expired and not yet been
// cleaned up) is deleted, never adopted.
func (q *queue) findOwn(ctx context.Context, prefix string, owner int64, known ...string) (lockq.Entry, client.Stat, error) {
	es, err := q.entries(ctx)
	if err != nil {
		return lockq.Entry{}, client.Stat{}, err
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Name, prefix) || slices.Contains(known, e.Name) {
			continue
		}
		ok, st, err := q.c.Exists(ctx, q.path(e))
		switch {
		case errors.Is(err, client.ErrConnectionLoss):
			return q.findOwn(ctx, prefix, owner, known...)
		case err != nil:
			return lockq.Entry{}, client.Stat{}, err
		case !ok:
			continue
		case st.EphemeralOwner != owner:
			if err := q.remove(ctx, q.path(e)); err != nil {
				return lockq.Entry{}, client.Stat{}, err
			}
			continue
		}
		return e, st, nil
	}
	return lockq.Entry{}, client.Stat{}, nil
}

// change adds to t's acquisition a node of kind, with data, and rewrites
// the data of its first node in the same multi, so that the waiters
// watching it look again. It returns t with the node. A multi whose answer
// was lost with the connection is found again by its name.
func (q *queue) change(ctx context.Context, t ticket, kind lockq.Kind, data []byte) (ticket, error) {
	prefix := lockq.Prefix(t.ID, kind)
	for {
		res, err := q.c.Multi(ctx,
			client.CreateOp(q.dir+"/"+prefix, data, client.EphemeralSequential, t.createOptions(q)...),
			client.SetOp(q.path(t.Entry), data, -1))
		if err == nil {
			t.more = append(slices.Clone(t.more), res[0].Path[len(q.dir)+1:])
			t.czxid = res[0].Stat.Czxid
			return t, nil
		}
		if !errors.Is(err, client.ErrConnectionLoss) {
			return t, err
		}
		t.lossy = true
		e, st, err := q.findOwn(ctx, prefix, t.nodeOwner(q), append(t.more, t.Name)...)
		if err != nil || e.Name != "" {
			t.more = append(slices.Clone(t.more), e.Name)
			t.czxid = st.Czxid
			return t, err
		}
	}
}

// unchange takes back the last change of t: it deletes the node change
// added and rewrites the first node's data in the same multi, so that the
// waiters that came to watch it while the change was under way look
// again.
func (q *queue) unchange(ctx context.Context, t ticket, data []byte) error {
	last := q.dir + "/" + t.more[len(t.more)-1]
	for {
		_, err := q.c.Multi(ctx, client.DeleteOp(last, -1), client.SetOp(q.path(t.Entry), data, -1))
		switch {
		case err == nil:
			return nil
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case errors.Is(err, client.ErrNoNode):
			return nil // its session or lease ended, and its nodes with it
		}
		return err
	}
}

// errWouldBlock is what turn returns when told not to wait.
var errWouldBlock = errors.New("would block")

// errUpgradeRefused is what turn returns to an upgrade that came after
// another one still under way.
var errUpgradeRefused = errors.New("upgrade refused")

// turn waits until lockq.Blocker finds nothing that me must wait for,
// watching only that one node each time. With wait false it returns
// errWouldBlock instead of waiting.
//
// The nodes ahead of me can only go away (a new node gets a higher
// sequence number; an acquisition that changes mode rewrites its first
// node, which wakes its watchers; a node with a priority that is placed
// ahead and changes whom I wait for rewrites the node I watch, see
// lockq.Place, and a rewrite before my watch was set shows in that node's
// mzxid, later than the queue I listed), so when the watched node is deleted,
// the list minus that node's acquisition still holds every node that can
// be ahead. If lockq.Blocker finds nothing in it to wait for, the turn is
// mine without a read: the waiter that listed the queue when only the
// holder was ahead of it. Otherwise the queue is listed again: the nodes
// left in the list are most likely gone too (a lock's holders leave in
// order), and asking after each of them would cost a round trip per node
// on every handoff.
//
// Two answers of the server spare those lists: the create's, which says
// where the new node stands (client.TellTurn), and the deletion's, which
// says whether the turn came (client.Waiter). A waiter that cannot trust
// them (a node of its own it does not know of, an upgrade under way) does
// not ask, and a server too old to answer leaves the list to the waiter.
func (q *queue) turn(ctx context.Context, me ticket, wait bool) error {
	return q.wait(ctx, &me, wait, nil)
}

// wait is turn for the wait of *me, which inherits a priority by inh (nil:
// none): when that rises above the priority *me was placed with, it joins
// again at that priority (requeue), unless that puts it behind, and *me is its
// new node.
func (q *queue) wait(ctx context.Context, me *ticket, wait bool, inh *inheritance) error {
	var es []lockq.Entry   // the queue; nil: list it
	var listed int64       // when es was read (the dir's pzxid), or blocker (a zxid)
	var blocker string     // the node to wait for; "": the one es names
	tried := me.Priority() // the highest priority it was placed with, or tried
	if t := me.turn; t.Known && !me.lossy && len(me.more) == 0 {
		// The create said where its node stands: no list.
		if t.Holds {
			return nil
		}
		blocker, listed = t.Blocker, t.Zxid
	}
	me.turn = client.LockTurn{} // true of that moment only
	for {
		if p := inh.priority(); p > tried && wait && len(me.more) == 0 {
			tried = p
			moved, err := q.requeue(ctx, me, p)
			if err != nil {
				return err
			}
			if moved {
				es, blocker = nil, ""
			}
		}
		if blocker == "" {
			if es == nil {
				var err error
				if es, listed, err = q.list(ctx, me); err != nil {
					return err
				}
				if lockq.UpgradeRefused(es, me.ID) {
					return errUpgradeRefused
				}
			}
			b := lockq.Blocker(es, me.ID)
			if b < 0 {
				return nil
			}
			blocker = es[b].Name
		}
		if !wait {
			return errWouldBlock
		}
		var opts []client.ReadOption
		if !me.lossy && len(me.more) == 0 {
			// The server tells with the deletion whether it is our turn:
			// no list then (a node of its own it does not know of, or an
			// upgrade under way, needs one).
			opts = append(opts, client.Waiter(me.Name))
		}
		_, st, ev, err := q.c.GetW(ctx, q.dir+"/"+blocker, opts...)
		switch {
		case errors.Is(err, client.ErrNoNode):
			// Gone already: whether it was rewritten after the list
			// (a node placed ahead, see lockq.Place) is not known.
			es, blocker = nil, ""
			continue
		case errors.Is(err, client.ErrConnectionLoss):
			es, blocker = nil, ""
			continue
		case err != nil:
			return err
		case st.Mzxid > listed:
			es, blocker = nil, "" // rewritten since the list: a node may be ahead that es lacks
			continue
		}
		for ev != nil {
			select {
			case e := <-ev:
				switch e.Type {
				case client.EventSession:
					return e.Err
				case client.EventNodeDeleted:
					if slices.Contains(e.Turns, me.Name) {
						return nil
					}
					es = dropped(es, blocker, *me)
				default:
					es = nil
				}
				ev, blocker = nil, ""
			case <-inh.rose():
				if inh.priority() > tried {
					ev, es, blocker = nil, nil, "" // join again, then list again (the watch left is let go)
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// requeue joins the queue again for *me, a waiter, at priority prio,
// where lockq.Place puts it, unless that puts it behind where it is (at
// the same place, its name still tells the holders it waits for of the
// priority, which they inherit in turn): in one
// multi, a check that the queue is as listed, the rewrite of the node
// that waiters would come to wait for the new node watch (as
// createPlaced), the new node's create and the old node's delete. The
// waiters that watched the old node wake and list the queue again. It
// reports whether it moved, and *me is then the new node.
func (q *queue) requeue(ctx context.Context, me *ticket, prio int) (bool, error) {
	base := lockq.Base(me.ID)
	for range lockq.PlaceTries {
		names, dst, err := q.c.Children(ctx, q.dir)
		switch {
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case errors.Is(err, client.ErrNoNode):
			return false, q.goneWaiting(ctx, *me)
		case err != nil:
			return false, err
		}
		all := lockq.Sort(names)
		es := slices.DeleteFunc(slices.Clone(all), func(e lockq.Entry) bool { return e.ID == me.ID })
		if len(es) == len(all) {
			return false, q.goneWaiting(ctx, *me)
		}
		at := lockq.Place(es, me.Kind, prio, int64(dst.Cversion))
		id := lockq.ID(base, prio, at.Key)
		name := fmt.Sprintf("%s%0*d", lockq.Prefix(id, me.Kind), lockq.SeqDigits, dst.Cversion)
		if ahead(lockq.Sort(append(namesOf(es), name)), id) > ahead(all, me.ID) {
			return false, nil // it would be served later
		}
		ops, err := q.placeOps(ctx, es, at, dst.Cversion)
		switch {
		case errors.Is(err, client.ErrNoNode), errors.Is(err, client.ErrConnectionLoss):
			continue
		case err != nil:
			return false, err
		}
		ops = append(ops,
			client.CreateOp(q.dir+"/"+lockq.Prefix(id, me.Kind), me.data, client.EphemeralSequential, me.createOptions(q)...),
			client.DeleteOp(q.path(me.Entry), -1))
		res, err := q.c.Multi(ctx, ops...)
		switch {
		case err == nil:
			made := res[len(res)-2]
			me.Entry, _ = lockq.Parse(made.Path[len(q.dir)+1:])
			me.czxid, me.prefix = made.Stat.Czxid, lockq.Mark+base
			return true, nil
		case errors.Is(err, client.ErrConnectionLoss):
			// Applied or not? Its old node says.
			me.lossy, me.prefix = true, lockq.Mark+base
			e, st, ferr := q.findOwn(ctx, me.prefix, me.nodeOwner(q))
			switch {
			case ferr != nil:
				return false, ferr
			case e.Name == "":
				return false, q.goneWaiting(ctx, *me)
			case e.Name == me.Name:
				continue // not applied
			}
			me.Entry, me.czxid = e, st.Czxid
			return true, nil
		case errors.Is(err, client.ErrBadVersion), errors.Is(err, client.ErrNoNode):
			continue // the queue changed: list again (a node of its own gone shows then)
		case errors.Is(err, client.ErrNoAuth):
			return false, nil // it may not rewrite the node: it stays
		}
		return false, err
	}
	return false, nil
}

// ahead returns how many acquisitions are ahead of id in the queue es.
func ahead(es []lockq.Entry, id string) int {
	return slices.IndexFunc(lockq.Acquisitions(es), func(a lockq.Acquisition) bool { return a.First.ID == id })
}

func namesOf(es []lockq.Entry) []string {
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name
	}
	return names
}

// dropped drops the acquisition of the deleted node b from the queue es.
// It returns the rest if lockq.Blocker finds nothing in it for me to wait
// for, and nil, to list the queue again, if it does. An acquisition that
// changed mode (an upgrade) always lists again: it waits for the readers
// that hold, and a reader that was waiting in es may hold by now. So does
// a waiter whose deleted node was not a holder in es: a node with a
// priority may have been placed ahead of that one since es was listed,
// without a word to me (it rewrites only the node of a waiter whose
// blocker it becomes, and it never goes before a holder).
//
// So does a waiter whose deleted node was not the only node of its
// acquisition in es. A release deletes the first node last (ticket.nodes),
// but the first node also goes alone when it is a node the acquisition
// did not know of, left by a create whose answer was lost and found by
// its list (sibling): its create was applied after all, ahead of the node
// the retry made. That acquisition still holds with the node that
// remains (its fencing token is that node's), and the deletion says
// nothing of it: only a new list tells the two apart.
func dropped(es []lockq.Entry, name string, me ticket) []lockq.Entry {
	b := slices.IndexFunc(es, func(e lockq.Entry) bool { return e.Name == name })
	if b < 0 || len(me.more) > 0 || !lockq.Holds(es, es[b].ID) {
		return nil
	}
	gone := es[b].ID
	if slices.ContainsFunc(es, func(e lockq.Entry) bool { return e.ID == gone && e.Name != es[b].Name }) {
		return nil
	}
	es = slices.DeleteFunc(slices.Clone(es), func(e lockq.Entry) bool { return e.ID == gone })
	if lockq.Blocker(es, me.ID) >= 0 {
		return nil
	}
	return es
}

// list lists the queue for me's turn, and returns it with the dir's
// pzxid. Nodes of me's acquisition that it does not know of (left by a
// create whose answer was lost, perhaps applied only after the retry) are
// deleted; a requeue that applied after all is taken into *me.
func (q *queue) list(ctx context.Context, me *ticket) ([]lockq.Entry, int64, error) {
	all, st, err := q.entriesStat(ctx)
	if err != nil {
		return nil, 0, err
	}
	if me.lossy && !slices.ContainsFunc(all, func(e lockq.Entry) bool { return e.Name == me.Name }) {
		// A requeue whose answer was lost may have applied after all, after
		// its retry saw the old node: it deleted the old node and created
		// the new one in one txn, so the new one, of the same base and
		// another id, is the acquisition's now.
		e, est, err := q.findOwn(ctx, me.prefix, me.nodeOwner(q), me.Name)
		if err != nil {
			return nil, 0, err
		}
		if e.Name != "" && e.ID != me.ID && lockq.Base(e.ID) == lockq.Base(me.ID) {
			me.Entry, me.czxid = e, est.Czxid
		}
	}
	es := all[:0:0]
	found := false
	for _, e := range all {
		if me.sibling(e) {
			if err := q.remove(ctx, q.path(e)); err != nil {
				return nil, 0, err
			}
			continue
		}
		found = found || e.Name == me.Name
		es = append(es, e)
	}
	if !found {
		return nil, 0, q.goneWaiting(ctx, *me)
	}
	return es, st.Pzxid, nil
}

// gone is the error for this value's node having vanished: the session's
// end if that is why, else errGone.
func (q *queue) gone() error {
	if err := q.c.Err(); err != nil {
		return err
	}
	return errGone
}

// remove deletes the node at path, trying again through connection loss
// and through deletes whose outcome is unknown (timed out, or refused for
// want of a leader), until it is gone, the session is over (which deletes
// it too) or ctx ends: a node left behind by a live session would block
// every contender after it.
func (q *queue) remove(ctx context.Context, path string) error {
	_, err := q.delete(ctx, path)
	return err
}

// delete is remove, and reports whether the node was gone already when a
// delete reached the server: deleted by an earlier try whose reply was
// lost, or by someone else.
func (q *queue) delete(ctx context.Context, path string) (gone bool, err error) {
	for {
		err := q.c.Delete(ctx, path, -1)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, client.ErrNoNode):
			return true, nil
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case q.c.Err() != nil:
			return false, nil // the session's end deleted the node
		case retry(ctx, err):
			continue
		}
		return false, err
	}
}

// retryPause is the pause before a recipe tries a write again whose
// outcome was unknown for want of a quorum.
const retryPause = 100 * time.Millisecond

// leave deletes t's nodes for a caller that may have given up: it waits
// for the deletion while ctx lives, and lets it finish in the background
// after that. If t's create was retried, a second node of its acquisition
// may have appeared since it was last looked for: it goes too.
func (q *queue) leave(ctx context.Context, t ticket) error {
	done := make(chan error, 1)
	go func() {
		bg := context.WithoutCancel(ctx)
		var err, lost error
		for _, name := range t.nodes() {
			if err == nil {
				var gone bool
				gone, err = q.delete(bg, q.dir+"/"+name)
				if gone && name == t.Name {
					lost = q.endedBefore(bg, t)
				}
			}
		}
		if err == nil && t.lossy {
			err = q.sweep(bg, t)
		}
		if err == nil && t.lease != 0 {
			err = q.closeLease(bg, t.lease)
		}
		done <- cmp.Or(err, lost)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeLease ends lease, trying again through connection loss; a lease
// already ended is fine.
func (q *queue) closeLease(ctx context.Context, lease int64) error {
	for {
		err := q.c.CloseLease(ctx, lease)
		switch {
		case errors.Is(err, client.ErrConnectionLoss):
			continue
		case err == nil, errors.Is(err, client.ErrLeaseExpired), q.c.Err() != nil:
			return nil
		}
		return err
	}
}

// giveUp removes the node of a wait that failed or ended. While the client
// is connected it returns only once the node is gone (or the session's
// timeout has passed), even when ctx, the waiter's own, has ended: a
// caller whose wait timed out leaves nothing in the queue when it gets its
// error. While the client is disconnected, a waiter that gave up is not
// kept waiting: the delete goes in the background at reconnect, or the
// session's end removes the node.
func (q *queue) giveUp(ctx context.Context, t ticket) error {
	if ctx.Err() != nil && q.c.State() == client.StateConnected {
		bounded, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.c.SessionTimeout())
		defer cancel()
		ctx = bounded
	}
	return q.leave(ctx, t)
}

// sweep deletes the other nodes of t's acquisition.
func (q *queue) sweep(ctx context.Context, t ticket) error {
	es, err := q.entries(ctx)
	for _, e := range es {
		if err == nil && t.sibling(e) {
			err = q.remove(ctx, q.path(e))
		}
	}
	return err
}

// makeDirs creates dir and its missing ancestors as containers, which the
// server deletes once they are empty again, with acl (see WithACL).
func makeDirs(ctx context.Context, c *client.Client, dir string, acl []client.CreateOption) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		for {
			_, err := c.Create(ctx, dir[:i], nil, client.Container, acl...)
			if err == nil || errors.Is(err, client.ErrNodeExists) {
				break
			}
			if !retry(ctx, err) {
				return err
			}
		}
	}
	return nil
}

// opError names a recipe operation and path in err.
func opError(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}
