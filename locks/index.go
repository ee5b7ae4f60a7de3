// Package locks is the server's view of every lock: the queues of lock
// nodes (package lockq) under any path, whoever made them (a Go recipe, an
// HTTP client, a ZooKeeper client using the same names). It is derived
// from the tree and from the changes applied to it, the same on every
// member, and answers who holds, who waits and since when, the recent hold
// times, and which holders wait for each other (deadlocks). Index is
// pure: the time of a change comes with its txn, and nothing here reads
// the clock or starts a goroutine.
package locks

import (
	"cmp"
	"maps"
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
	nodes    []Node           // in sequence order
	since    map[string]int64 // acquisition id -> when it began to hold (ms)
	modified int64            // the zxid of its last change (0 after a rebuild: unknown)
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
func New() *Index { return &Index{locks: map[string]*lock{}} }

// Rebuild makes the index the locks of t, as after a restart or a
// snapshot's restore: every lock node is ephemeral, so the sessions'
// ephemerals are every lock node. Holders are taken to hold since their
// node was created (when they began to wait, at the earliest), as nothing
// older is known.
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
		slices.SortFunc(l.nodes, func(a, b Node) int { return cmp.Compare(a.Entry.Seq, b.Entry.Seq) })
		x.settle(p, l, -1)
	}
}

// Apply brings the index up to date with the events of the txn applied at
// zxid, made at time (ms since the Unix epoch), and returns the paths of
// the locks whose queues changed.
func (x *Index) Apply(zxid, time int64, events []tree.Event) []string {
	var changed []string
	for _, ev := range events {
		switch ev.Type {
		case wire.EventNodeCreated:
			if p, ok := x.add(ev.Path, ev.Data, ev.Stat); ok {
				changed = append(changed, p)
			}
		case wire.EventNodeDeleted:
			if p, ok := x.remove(ev.Path); ok {
				changed = append(changed, p)
			}
		case wire.EventNodeDataChanged:
			x.update(ev.Path, ev.Data)
		}
	}
	for _, p := range changed {
		if l, ok := x.locks[p]; ok {
			l.modified = zxid
			x.settle(p, l, time)
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
	if !ok || st.EphemeralOwner == 0 {
		return "", false
	}
	l := x.locks[dir]
	if l == nil {
		l = &lock{since: map[string]int64{}}
		x.locks[dir] = l
	}
	n := Node{Entry: e, Session: st.EphemeralOwner, Token: st.Czxid, Created: st.Ctime, Record: lockq.DecodeRecord(data)}
	i, _ := slices.BinarySearchFunc(l.nodes, e.Seq, func(n Node, seq int64) int { return cmp.Compare(n.Entry.Seq, seq) })
	l.nodes = slices.Insert(l.nodes, i, n)
	return dir, true
}

// remove removes the node at p, if the index has it, and returns its lock.
func (x *Index) remove(p string) (string, bool) {
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
	l.nodes = slices.Delete(l.nodes, i, i+1)
	_, holding := l.since[e.ID]
	last := !slices.ContainsFunc(l.nodes, func(n Node) bool { return n.Entry.ID == e.ID })
	if !holding && last && x.Observe.GaveUp != nil {
		x.Observe.GaveUp()
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

// settle records who holds the lock at dir after a change at time (-1: a
// rebuild, when holders are taken to hold since their node's creation):
// new holders hold since then, and the hold times of those that left go
// into the recent hold times. An empty lock is forgotten.
func (x *Index) settle(dir string, l *lock, time int64) {
	es := entries(l.nodes)
	holding := map[string]bool{}
	for _, a := range lockq.Acquisitions(es) {
		if !lockq.Holds(es, a.First.ID) {
			continue
		}
		holding[a.First.ID] = true
		if _, ok := l.since[a.First.ID]; !ok {
			created := l.nodes[slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.ID == a.First.ID })].Created
			if time < 0 {
				l.since[a.First.ID] = created
				continue
			}
			l.since[a.First.ID] = time
			if x.Observe.Acquired != nil {
				x.Observe.Acquired(time - created)
			}
		}
	}
	for id, since := range l.since {
		if !holding[id] {
			delete(l.since, id)
			if time >= 0 {
				x.held(time - since)
				if x.Observe.Released != nil {
					x.Observe.Released(time - since)
				}
			}
		}
	}
	if len(l.nodes) == 0 {
		delete(x.locks, dir)
	}
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
// first, then by path), and how many locks there are.
func (x *Index) Longest(n int) ([]Queue, int) {
	qs := make([]Queue, 0, len(x.locks))
	for p, l := range x.locks {
		es := entries(l.nodes)
		qs = append(qs, Queue{Path: p, Waiters: len(lockq.Acquisitions(es)) - len(l.since)})
	}
	slices.SortFunc(qs, func(a, b Queue) int {
		if c := cmp.Compare(b.Waiters, a.Waiters); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return qs[:min(n, len(qs))], len(qs)
}

// OldestHold returns when the oldest hold of every lock began (ms since
// the Unix epoch), and false if nothing is held.
func (x *Index) OldestHold() (int64, bool) {
	var oldest int64
	found := false
	for _, l := range x.locks {
		for _, since := range l.since {
			if !found || since < oldest {
				oldest, found = since, true
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
	for _, id := range slices.Sorted(maps.Keys(l.since)) {
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
		out = append(out, first)
	}
	return out
}
