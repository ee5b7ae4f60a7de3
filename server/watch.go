package server

import (
	"sync"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// watchKind is one of the four kinds of watch a connection can hold on a
// path.
type watchKind uint8

const (
	// watchData is a one-shot data watch (getData; exists, whether or not
	// the node exists): NodeCreated, NodeDataChanged and NodeDeleted of
	// its path.
	watchData watchKind = iota
	// watchChild is a one-shot child watch (getChildren):
	// NodeChildrenChanged and NodeDeleted of its path.
	watchChild
	// watchPersistent stays, and sees every event of its path.
	watchPersistent
	// watchRecursive stays, and sees NodeCreated, NodeDeleted and
	// NodeDataChanged of its path and every path below (never
	// NodeChildrenChanged, as in ZooKeeper).
	watchRecursive
	watchKinds
)

const (
	firedOneShot uint8 = 1 << iota
	firedLasting
)

type watchKey struct {
	path string
	kind watchKind
}

// recentEvents is how many of the latest events the registry keeps, so
// that a client that reconnects misses nothing its persistent and
// recursive watches should have seen while it was away; recentBytes bounds
// the data they hold on to.
const (
	recentEvents = 1 << 16
	recentBytes  = 64 << 20
)

// watchRegistry holds the watches of this server's connections. A
// connection holds at most one watch of a kind per path (the client fans
// an event out to all its callers), and gets at most one notification per
// event, however many of its watches the event fires.
//
// Registration happens under the fsm's read lock and trigger under its
// write lock, so a change is either seen by a read or fires the read's
// watch, never neither.
type watchRegistry struct {
	notify func(c *conn, zxid int64, ev tree.Event)
	// maxPerConn is how many watches a connection may hold (the
	// MaxWatches limit); zero or less is no limit.
	maxPerConn int

	mu     sync.Mutex // guards everything below
	tables [watchKinds]map[string]map[*conn]struct{}
	byConn map[*conn]map[watchKey]struct{} // the watches of each connection
	count  int
	recent eventRing
	fired  map[*conn]uint8 // trigger's scratch set: firedOneShot|firedLasting
}

func newWatchRegistry(notify func(c *conn, zxid int64, ev tree.Event)) *watchRegistry {
	w := &watchRegistry{notify: notify, byConn: map[*conn]map[watchKey]struct{}{}, fired: map[*conn]uint8{}}
	for k := range w.tables {
		w.tables[k] = map[string]map[*conn]struct{}{}
	}
	w.recent.reset(1)
	return w
}

// add leaves a watch of kind for c on path. It reports false, and leaves
// none, when the watch is new and c holds as many as it may.
func (w *watchRegistry) add(kind watchKind, path string, c *conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.addLocked(kind, path, c)
}

func (w *watchRegistry) addLocked(kind watchKind, path string, c *conn) bool {
	set := w.tables[kind][path]
	if _, ok := set[c]; ok {
		return true
	}
	if w.maxPerConn > 0 && len(w.byConn[c]) >= w.maxPerConn {
		return false
	}
	if set == nil {
		set = map[*conn]struct{}{}
		w.tables[kind][path] = set
	}
	set[c] = struct{}{}
	w.count++
	keys := w.byConn[c]
	if keys == nil {
		keys = map[watchKey]struct{}{}
		w.byConn[c] = keys
	}
	keys[watchKey{path, kind}] = struct{}{}
	return true
}

// held is the number of watches c holds.
func (w *watchRegistry) held(c *conn) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byConn[c])
}

// removeLocked drops c's watch of kind on path and reports whether there
// was one.
func (w *watchRegistry) removeLocked(kind watchKind, path string, c *conn) bool {
	set := w.tables[kind][path]
	if _, ok := set[c]; !ok {
		return false
	}
	delete(set, c)
	if len(set) == 0 {
		delete(w.tables[kind], path)
	}
	delete(w.byConn[c], watchKey{path, kind})
	w.count--
	return true
}

// kindsOf returns the kinds of watch a removeWatches watcher type names.
func kindsOf(typ wire.WatcherType) []watchKind {
	switch typ {
	case wire.WatcherChildren:
		return []watchKind{watchChild}
	case wire.WatcherData:
		return []watchKind{watchData}
	case wire.WatcherAny:
		return []watchKind{watchData, watchChild, watchPersistent, watchRecursive}
	case wire.WatcherPersistent:
		return []watchKind{watchPersistent}
	case wire.WatcherPersistentRecursive:
		return []watchKind{watchRecursive}
	}
	return nil
}

// remove drops c's watches on path of the kinds typ names (ZooKeeper's
// removeWatches) and reports whether there was any.
func (w *watchRegistry) remove(typ wire.WatcherType, path string, c *conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	removed := false
	for _, k := range kindsOf(typ) {
		if w.removeLocked(k, path, c) {
			removed = true
		}
	}
	return removed
}

// has reports whether c holds a watch on path of the kinds typ names
// (ZooKeeper's checkWatches).
func (w *watchRegistry) has(typ wire.WatcherType, path string, c *conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range kindsOf(typ) {
		if _, ok := w.tables[k][path][c]; ok {
			return true
		}
	}
	return false
}

// removeWatches removes c's watches of req.WatcherType on req.Path
// (removeWatches), or with remove false only checks that it holds one
// (ZooKeeper's checkWatches): NoWatcher if it holds none.
func (s *Server) removeWatches(c *conn, req *wire.Request, remove bool) error {
	typ := req.WatcherType
	switch {
	case typ < wire.WatcherChildren || typ > wire.WatcherPersistentRecursive:
		return wire.Errorf(wire.CodeBadArguments, "unknown watcher type %d", typ)
	case remove && !s.watches.remove(typ, req.Path, c), !remove && !s.watches.has(typ, req.Path, c):
		return wire.ErrNoWatcher
	}
	return nil
}

// summary counts the connections holding watches, the paths watched and
// the watches (ZooKeeper's wchs).
func (w *watchRegistry) summary() (conns, paths, watches int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]struct{}{}
	for _, table := range w.tables {
		for p := range table {
			seen[p] = struct{}{}
		}
	}
	for _, keys := range w.byConn {
		if len(keys) > 0 {
			conns++
		}
	}
	return conns, len(seen), w.count
}

// take removes the one-shot watches of kind on path, adding their
// connections to w.fired.
func (w *watchRegistry) take(kind watchKind, path string) {
	for c := range w.tables[kind][path] {
		w.fired[c] |= firedOneShot
		delete(w.byConn[c], watchKey{path, kind})
		w.count--
	}
	delete(w.tables[kind], path)
}

// collect adds the connections with a lasting watch of kind on path to
// w.fired.
func (w *watchRegistry) collect(kind watchKind, path string) {
	for c := range w.tables[kind][path] {
		w.fired[c] |= firedLasting
	}
}

// trigger fires the watches that events match and sends their
// notifications, one per connection and event. It is called by Apply with
// the fsm's write lock held.
func (w *watchRegistry) trigger(events []tree.Event, zxid int64) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range events {
		w.recent.add(recentEvent{zxid, ev})
		switch ev.Type {
		case wire.EventNodeCreated, wire.EventNodeDataChanged:
			w.take(watchData, ev.Path)
		case wire.EventNodeChildrenChanged:
			w.take(watchChild, ev.Path)
		case wire.EventNodeDeleted:
			w.take(watchData, ev.Path)
			w.take(watchChild, ev.Path)
		}
		w.collect(watchPersistent, ev.Path)
		if ev.Type != wire.EventNodeChildrenChanged && len(w.tables[watchRecursive]) > 0 {
			for p := ev.Path; ; p = parent(p) {
				w.collect(watchRecursive, p)
				if p == "/" {
					break
				}
			}
		}
		bare := tree.Event{Type: ev.Type, Path: ev.Path}
		for c, f := range w.fired {
			switch {
			case f&firedLasting != 0 && mayRead(c, ev):
				w.notify(c, zxid, ev)
			case f&firedOneShot != 0:
				// A one-shot watch fires whatever the ACL is now (as in
				// ZooKeeper), without the data.
				w.notify(c, zxid, bare)
			}
		}
		clear(w.fired)
	}
}

// restoreLasting registers a reconnected connection's persistent and
// recursive watches. First it replays, in order, the events after the
// client's last seen zxid rel that they would have fired; if some of those
// events are no longer kept, it tells the client with a
// PersistentWatchRemoved event per path instead, and registers nothing:
// the client must read the state again. The caller holds the fsm's read
// lock, so no event can come between the replay and the registration.
func (w *watchRegistry) restoreLasting(c *conn, rel, zxid int64, persistent, recursive []string) {
	if len(persistent)+len(recursive) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.recent.covers(rel) {
		for _, paths := range [][]string{persistent, recursive} {
			for _, p := range paths {
				w.notify(c, zxid, tree.Event{Type: wire.EventPersistentWatchRemoved, Path: p})
			}
		}
		return
	}
	lasting := map[watchKey]bool{}
	for _, p := range persistent {
		w.addLocked(watchPersistent, p, c)
		lasting[watchKey{p, watchPersistent}] = true
	}
	for _, p := range recursive {
		w.addLocked(watchRecursive, p, c)
		lasting[watchKey{p, watchRecursive}] = true
	}
	w.recent.since(rel, func(ev recentEvent) {
		if sees(lasting, ev.Event) && mayRead(c, ev.Event) {
			w.notify(c, ev.zxid, ev.Event)
		}
	})
}

// mayRead reports whether c may see ev, a lasting watch's event: READ on
// the node it names (ZooKeeper 3.9's rule for persistent and recursive
// watches).
func mayRead(c *conn, ev tree.Event) bool {
	return tree.Permitted(ev.ACL, c.identities(), wire.PermRead)
}

// sees reports whether one of the persistent and recursive watches in
// lasting sees ev.
func sees(lasting map[watchKey]bool, ev tree.Event) bool {
	if lasting[watchKey{ev.Path, watchPersistent}] {
		return true
	}
	if ev.Type == wire.EventNodeChildrenChanged {
		return false
	}
	for p := ev.Path; ; p = parent(p) {
		if lasting[watchKey{p, watchRecursive}] {
			return true
		}
		if p == "/" {
			return false
		}
	}
}

// restored is told that the tree was replaced by a snapshot at zxid: the
// events before it are not known.
func (w *watchRegistry) restored(zxid int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recent.reset(zxid + 1)
}

// removeConn drops every watch of c, in time proportional to their number.
func (w *watchRegistry) removeConn(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.byConn[c] {
		w.removeLocked(k.kind, k.path, c)
	}
	delete(w.byConn, c)
}

// size is the number of watches registered.
func (w *watchRegistry) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// parent returns the parent of a path other than "/".
func parent(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}

type recentEvent struct {
	zxid int64
	tree.Event
}

// eventRing keeps the latest events, oldest first: at most recentEvents
// of them, holding at most recentBytes of data.
type eventRing struct {
	buf   []recentEvent // circular: the n events from start
	start int
	n     int
	bytes int   // the data the kept events hold
	from  int64 // every event of a txn with zxid >= from is kept
}

func (r *eventRing) reset(from int64) {
	clear(r.buf)
	r.start, r.n, r.bytes, r.from = 0, 0, 0, from
}

func (r *eventRing) add(ev recentEvent) {
	for r.n > 0 && (r.n == recentEvents || r.bytes+len(ev.Data) > recentBytes) {
		r.dropOldest()
	}
	if r.n == len(r.buf) { // full, but smaller than recentEvents: grow, oldest first
		grown := make([]recentEvent, min(max(2*r.n, 64), recentEvents))
		for i := range r.n {
			grown[i] = r.buf[(r.start+i)%len(r.buf)]
		}
		r.buf, r.start = grown, 0
	}
	r.buf[(r.start+r.n)%len(r.buf)] = ev
	r.n++
	r.bytes += len(ev.Data)
}

// dropOldest forgets the oldest event, and with it the completeness of
// its txn.
func (r *eventRing) dropOldest() {
	old := &r.buf[r.start]
	r.from = max(r.from, old.zxid+1)
	r.bytes -= len(old.Data)
	*old = recentEvent{}
	r.start = (r.start + 1) % len(r.buf)
	r.n--
}

// covers reports whether every event after rel is kept.
func (r *eventRing) covers(rel int64) bool { return rel+1 >= r.from }

// since calls fn with each kept event after rel, in order.
func (r *eventRing) since(rel int64, fn func(recentEvent)) {
	for i := range r.n {
		if ev := r.buf[(r.start+i)%len(r.buf)]; ev.zxid > rel {
			fn(ev)
		}
	}
}
