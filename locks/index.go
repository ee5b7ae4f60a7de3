// Package locks is the server's view of every lock: the queues of lock
// nodes (package lockq) under any path, whoever made them (a Go recipe, an
// HTTP client, a ZooKeeper client using the same names). It is derived
// from the tree and from the changes applied to it, the same on every
// member, and answers who holds, who waits and since when, the recent hold
// times, the recent history of holds (history.go), and which holders wait
// for each other (deadlocks). Index is pure: the time of a change comes
// with its txn, and nothing here reads the clock or starts a goroutine.
package locks

import (
	"cmp"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// Node is one node of a lock's queue.
type Node struct {
	Entry   lockq.Entry
	Session int64 // its ephemeral owner: a session, or a lease
	Token   int64 // its czxid, the fencing token of a hold it gives
	Created int64 // ms since the Unix epoch: when it began to wait
	Record  lockq.Record
}

// lock is one lock's queue and what the index remembers of it.
type lock struct {
	nodes    []Node  // in queue order (lockq.Compare)
	holds    holdSet // by acquisition id: its acquired event, who and since when (Time)
	modified int64   // the zxid of its last change (0 after a rebuild: unknown)
}

// holdSet is a lock's holds, sorted by acquisition id: most locks have
// one holder or none, which a slice keeps in far less memory than a map.
type holdSet []hold

// hold is an acquisition's hold: its acquired event less what every
// acquired event of its lock says alike (the lock's path, the kind), which
// a lock service holding a million locks keeps a million of.
type hold struct {
	id                        string
	node, mode, owner, holder string
	session, lease, token     int64
	zxid, timeMs, waitedMs    int64
}

func holdOf(id string, ev wire.LockEvent) hold {
	return hold{id: id, node: ev.Node, mode: ev.Mode, owner: ev.Owner, holder: ev.Holder,
		session: ev.Session, lease: ev.Lease, token: ev.Token, zxid: ev.Zxid, timeMs: ev.Time, waitedMs: ev.WaitedMs}
}

// event is h's acquired event, of the lock at path lock.
func (h hold) event(lock string) wire.LockEvent {
	return wire.LockEvent{Zxid: h.zxid, Time: h.timeMs, Lock: lock, Kind: wire.LockAcquired, Node: h.node, Mode: h.mode,
		Owner: h.owner, Holder: h.holder, Session: h.session, Lease: h.lease, Token: h.token, WaitedMs: h.waitedMs}
}

func (s holdSet) find(id string) (int, bool) {
	return slices.BinarySearchFunc(s, id, func(h hold, id string) int { return strings.Compare(h.id, id) })
}

func (s holdSet) get(id string) (hold, bool) {
	if i, ok := s.find(id); ok {
		return s[i], true
	}
	return hold{}, false
}

func (s *holdSet) set(id string, ev wire.LockEvent) {
	i, ok := s.find(id)
	if ok {
		(*s)[i] = holdOf(id, ev)
		return
	}
	*s = slices.Insert(*s, i, holdOf(id, ev))
}

func (s *holdSet) del(id string) {
	if i, ok := s.find(id); ok {
		*s = slices.Delete(*s, i, i+1)
	}
}

// holds is how many recent hold times an Index keeps, for the estimated
// wait.
const holds = 64

// Index is every lock of a tree. It is not safe for concurrent use: the
// server changes it under its state machine's write lock and reads it
// under the read lock, as it does the tree.
type Index struct {
	locks  map[string]*lock
	recent []int64 // the last hold times (ms), a ring of at most holds
	next   int     // where the next hold time goes in recent

	history  history                    // the last acquisitions and ends of holds (history.go)
	restored map[holdKey]wire.LockEvent // when the holds began, from Load, for Rebuild

	// Observe, if set, is told of each acquisition that began to hold
	// (and how long it waited), each hold that ended (and how long it
	// lasted) and each wait that ended without a hold (a timeout, a
	// cancel, its session's or lease's end), as changes apply; not
	// during a Rebuild.
	Observe Observer
}

// Observer is what an Index tells of the changes it applies, for metrics.
type Observer struct {
	Acquired func(waitedMs int64)
	Released func(heldMs int64)
	GaveUp   func()
}

// New returns an empty index.
func New() *Index { return &Index{locks: map[string]*lock{}, history: history{limit: DefaultHistory}} }

// Rebuild makes the index the locks of t, as after a restart or a
// snapshot's restore: every lock node is ephemeral, so the sessions'
// ephemerals are every lock node. A holder holds since its acquisition as
// Load (which goes first) or the history tells it; one that neither knows
// (a snapshot written before Save was) is taken to hold since its node was
// created (when it began to wait, at the earliest).
func (x *Index) Rebuild(t *tree.Tree) {
	x.locks = map[string]*lock{}
	for _, s := range t.Sessions() {
		for _, p := range t.Ephemerals(s.ID) {
			data, st, err := t.Get(p)
			if err == nil {
				x.add(p, data, st)
			}
		}
	}
	for p, l := range x.locks {
		slices.SortFunc(l.nodes, func(a, b Node) int { return lockq.Compare(a.Entry, b.Entry) })
		x.settle(t, p, l, change{zxid: -1})
	}
	x.restored = nil
}

// Cause is how the holds that a txn ends, end: the kind of their history
// event (wire.LockReleased, LockExpired, LockSessionEnded, LockBroken or
// LockDeadlock), with who ended them and why for a break. A txn that ends
// waits with LockDeadlock records them too.
type Cause struct {
	End    string
	By     string
	Reason string
}

// change is one applied txn, as the index records it; zxid -1 is a
// rebuild.
type change struct {
	zxid, time int64
	cause      Cause
}

// Apply brings the index up to date with the events of the txn applied to
// t at zxid, made at time (ms since the Unix epoch), whose ends of holds
// came about as cause says, and returns the paths of the locks whose
// queues changed.
func (x *Index) Apply(t *tree.Tree, zxid, time int64, cause Cause, events []tree.Event) []string {
	c := change{zxid: zxid, time: time, cause: cause}
	var changed []string
	var rejoined map[string]bool // the acquisitions that joined again in this txn (lockq.Base of their ids)
	for _, ev := range events {
		if _, e, ok := lockNode(ev.Path); ok && ev.Type == wire.EventNodeCreated {
			if rejoined == nil {
				rejoined = map[string]bool{}
			}
			rejoined[lockq.Base(e.ID)] = true
		}
	}
	for _, ev := range events {
		switch ev.Type {
		case wire.EventNodeCreated:
			if p, ok := x.add(ev.Path, ev.Data, ev.Stat); ok {
				changed = append(changed, p)
			}
		case wire.EventNodeDeleted:
			if p, ok := x.remove(t, ev.Path, c, rejoined); ok {
				changed = append(changed, p)
			}
		case wire.EventNodeDataChanged:
			x.update(ev.Path, ev.Data)
		}
	}
	for _, p := range changed {
		if l, ok := x.locks[p]; ok {
			l.modified = zxid
			x.settle(t, p, l, c)
		}
	}
	return changed
}

// Modified returns the zxid of the last change of the lock at p: 0 if
// there is no lock there, or if it has not changed since this member
// restarted or restored a snapshot.
func (x *Index) Modified(p string) int64 {
	if l := x.locks[p]; l != nil {
		return l.modified
	}
	return 0
}

// lockNode splits p into its lock's path and its entry, if it is a lock
// node.
func lockNode(p string) (dir string, e lockq.Entry, ok bool) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", lockq.Entry{}, false
	}
	e, ok = lockq.Parse(p[i+1:])
	if !ok || !e.Kind.IsLock() {
		return "", lockq.Entry{}, false
	}
	dir = p[:i]
	if dir == "" {
		dir = "/"
	}
	return dir, e, true
}

// add adds the node at p, if it is a lock node, and returns its lock.
func (x *Index) add(p string, data []byte, st wire.Stat) (string, bool) {
	dir, e, ok := lockNode(p)
	if !ok || st.EphemeralOwner == 0 && e.Kind != lockq.Delay { // a lock-delay is a TTL node of no session
		return "", false
	}
	l := x.locks[dir]
	if l == nil {
		l = &lock{}
		x.locks[dir] = l
	}
	n := Node{Entry: e, Session: st.EphemeralOwner, Token: st.Czxid, Created: st.Ctime, Record: lockq.DecodeRecord(data)}
	i, _ := slices.BinarySearchFunc(l.nodes, e, func(n Node, e lockq.Entry) int { return lockq.Compare(n.Entry, e) })
	l.nodes = slices.Insert(l.nodes, i, n)
	return dir, true
}

// remove removes the node at p, if the index has it, and returns its lock.
// A wait it ends for a deadlock goes into the history. A wait whose
// acquisition joined again in the same txn (rejoined: at a higher
// priority) did not end.
func (x *Index) remove(t *tree.Tree, p string, c change, rejoined map[string]bool) (string, bool) {
	dir, e, ok := lockNode(p)
	if !ok {
		return "", false
	}
	l := x.locks[dir]
	if l == nil {
		return "", false
	}
	i := slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.Name == e.Name })
	if i < 0 {
		return "", false
	}
	gone := l.nodes[i]
	l.nodes = slices.Delete(l.nodes, i, i+1)
	_, holding := l.holds.get(e.ID)
	last := !slices.ContainsFunc(l.nodes, func(n Node) bool { return n.Entry.ID == e.ID })
	if holding || !last || rejoined[lockq.Base(e.ID)] {
		return dir, true
	}
	if x.Observe.GaveUp != nil {
		x.Observe.GaveUp()
	}
	if c.cause.End == wire.LockDeadlock {
		ev := partyEvent(t, dir, gone)
		ev.Kind, ev.Zxid, ev.Time, ev.WaitedMs, ev.By = wire.LockDeadlock, c.zxid, c.time, c.time-gone.Created, c.cause.By
		x.history.add(ev)
	}
	return dir, true
}

// update takes a lock node's new data (its record; a change of mode
// rewrites it).
func (x *Index) update(p string, data []byte) {
	dir, e, ok := lockNode(p)
	if !ok || x.locks[dir] == nil {
		return
	}
	l := x.locks[dir]
	if i := slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.Name == e.Name }); i >= 0 {
		l.nodes[i].Record = lockq.DecodeRecord(data)
	}
}

// settle records who holds the lock at dir of t after change c (or a
// rebuild): new holders hold since then, and go into the history; the
// holds that ended go into the history and the recent hold times. An
// empty lock is forgotten.
func (x *Index) settle(t *tree.Tree, dir string, l *lock, c change) {
	holders := lockq.Holders(entries(l.nodes))
	holding := make(map[string]bool, len(holders))
	for _, a := range holders {
		holding[a.First.ID] = true
	}
	// The ends first, then the holds they let begin.
	for _, h := range slices.Clone(l.holds) { // by id: every member records ends in one order
		if !holding[h.id] {
			x.ended(dir, l, h.id, c)
		}
	}
	for _, a := range holders {
		if _, ok := l.holds.get(a.First.ID); ok {
			continue
		}
		n := l.nodes[slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.ID == a.First.ID })]
		ev := partyEvent(t, dir, n)
		ev.Kind, ev.Mode = wire.LockAcquired, string(a.Kind)
		if c.zxid < 0 {
			if known, ok := x.began(dir, n.Entry.Name); ok {
				ev = known
			} else {
				ev.Zxid, ev.Time = n.Token, n.Created
			}
			l.holds.set(a.First.ID, ev)
			continue
		}
		ev.Zxid, ev.Time, ev.WaitedMs = c.zxid, c.time, c.time-n.Created
		l.holds.set(a.First.ID, ev)
		x.history.add(ev)
		if x.Observe.Acquired != nil {
			x.Observe.Acquired(ev.WaitedMs)
		}
	}
	if len(l.nodes) == 0 {
		delete(x.locks, dir)
	}
}

// ended records the end of the hold of acquisition id of l, the lock at
// dir, by change c.
func (x *Index) ended(dir string, l *lock, id string, c change) {
	h, _ := l.holds.get(id)
	l.holds.del(id)
	ev := h.event(dir)
	if c.zxid < 0 {
		return
	}
	ev.HeldMs = c.time - ev.Time
	ev.Kind, ev.Zxid, ev.Time, ev.WaitedMs = c.cause.End, c.zxid, c.time, 0
	if ev.Kind == "" || ev.Kind == wire.LockDeadlock {
		ev.Kind = wire.LockReleased // a deadlock's end deletes a waiter: a hold that ends with it was let go
	}
	if ev.Kind == wire.LockBroken {
		ev.By, ev.Reason = c.cause.By, c.cause.Reason
	}
	x.history.add(ev)
	x.held(ev.HeldMs)
	if x.Observe.Released != nil {
		x.Observe.Released(ev.HeldMs)
	}
}

// partyEvent is the start of a history event of node n of the lock at dir
// of t: who, and for a node bound to a lease that t still has, the lease
// and its session.
func partyEvent(t *tree.Tree, dir string, n Node) wire.LockEvent {
	ev := wire.LockEvent{Lock: dir, Node: n.Entry.Name, Mode: string(n.Entry.Kind), Owner: n.Record.Owner,
		Holder: n.Record.Holder, Session: n.Session, Token: n.Token}
	if l, ok := t.Lease(n.Session); ok {
		ev.Session, ev.Lease = l.Parent, n.Session
	}
	return ev
}

// held records a hold time.
func (x *Index) held(ms int64) {
	if len(x.recent) < holds {
		x.recent = append(x.recent, ms)
		return
	}
	x.recent[x.next] = ms
	x.next = (x.next + 1) % holds
}

func entries(nodes []Node) []lockq.Entry {
	es := make([]lockq.Entry, len(nodes))
	for i, n := range nodes {
		es[i] = n.Entry
	}
	return es
}

// Paths returns the paths of the locks under prefix (a path: the lock at
// it and those below it), sorted.
func (x *Index) Paths(prefix string) []string {
	var out []string
	for p := range x.locks {
		if under(p, prefix) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// under reports whether p is prefix or below it.
func under(p, prefix string) bool {
	if prefix == "/" || p == prefix {
		return true
	}
	return strings.HasPrefix(p, prefix+"/")
}

// Queue is a lock and the length of its queue (its waiters).
type Queue struct {
	Path    string
	Waiters int
}

// Longest returns the n locks with the most waiters (the longest queues
// first, then by path), and how many locks there are, of the locks keep
// takes (all for nil).
func (x *Index) Longest(n int, keep func(lock string) bool) ([]Queue, int) {
	qs := make([]Queue, 0, len(x.locks))
	for p, l := range x.locks {
		if keep != nil && !keep(p) {
			continue
		}
		es := entries(l.nodes)
		qs = append(qs, Queue{Path: p, Waiters: len(lockq.Acquisitions(es)) - len(l.holds)})
	}
	SortQueues(qs)
	return qs[:min(n, len(qs))], len(qs)
}

// SortQueues sorts qs as Longest does: the longest queues first, then by
// path.
func SortQueues(qs []Queue) {
	slices.SortFunc(qs, func(a, b Queue) int {
		if c := cmp.Compare(b.Waiters, a.Waiters); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
}

// OldestHold returns when the oldest hold of the locks keep takes (all
// for nil) began (ms since the Unix epoch), and false if none is held.
func (x *Index) OldestHold(keep func(lock string) bool) (int64, bool) {
	var oldest int64
	found := false
	for p, l := range x.locks {
		if keep != nil && !keep(p) {
			continue
		}
		for _, h := range l.holds {
			if !found || h.timeMs < oldest {
				oldest, found = h.timeMs, true
			}
		}
	}
	return oldest, found
}

// HolderNodes returns the names of every node of the acquisitions that
// hold the lock at p, each acquisition's first node last (the order to
// delete them in).
func (x *Index) HolderNodes(p string) []string {
	l := x.locks[p]
	if l == nil {
		return nil
	}
	var out []string
	for _, h := range l.holds {
		out = append(out, l.acquisitionNodes(h.id)...)
	}
	return out
}

// Waiting returns, for the acquisition whose first node is named first in
// the lock at p, the names of all its nodes (its first node last, the
// order to delete them in) and the first node of the acquisition it waits
// for, which it watches; ok is false if it is not there or does not wait.
func (x *Index) Waiting(p, first string) (nodes []string, blocker string, ok bool) {
	l := x.locks[p]
	if l == nil {
		return nil, "", false
	}
	i := slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.Name == first })
	if i < 0 {
		return nil, "", false
	}
	es := entries(l.nodes)
	b := lockq.Waits(es, es[i].ID)
	if b < 0 {
		return nil, "", false
	}
	return l.acquisitionNodes(es[i].ID), es[b].Name, true
}

// Holds reports whether the node named name is the first node of an
// acquisition that holds the lock at p: what lockq.Holds says of the
// queue as it stands.
func (x *Index) Holds(p, name string) bool {
	l := x.locks[p]
	if l == nil {
		return false
	}
	e, ok := lockq.Parse(name)
	if !ok {
		return false
	}
	h, ok := l.holds.get(e.ID)
	return ok && h.node == name
}

// acquisitionNodes returns the names of every node of acquisition id, its
// first node last.
func (l *lock) acquisitionNodes(id string) []string {
	var out []string
	var first string
	for _, n := range l.nodes {
		switch {
		case n.Entry.ID != id:
		case first == "":
			first = n.Entry.Name
		default:
			out = append(out, n.Entry.Name)
		}
	}
	return append(out, first)
}
