package server

import (
	"slices"
	"sync"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
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

// waitKey is a connection's data watch on a path, which lock waiters of
// the connection left (wire.Request.Waiter).
type waitKey struct {
	c    *conn
	path string
}

// maxWaiters is how many waiters a data watch remembers: a connection's
// own waiters for one node (the readers of one session, say). Those past
// it are not told of their turn with the deletion, and read the queue.
const maxWaiters = 64

// watchRegistry holds the watches of this server's connections. A
// connection holds at most one watch of a kind per path (the client fans
// an event out to all its callers), and gets at most one notification per
// event, however many of its watches the event fires.
//
// Registration happens under the fsm's read lock and trigger under its
// write lock, so a change is either seen by a read or fires the read's
// watch, never neither.
type watchRegistry struct {
	notify func(c *conn, group uint64, zxid int64, ev tree.Event, turns []string)
	// holds reports whether the lock node name under dir is the first
	// node of an acquisition that holds its lock (locks.Index.Holds), in
	// the lock index of the group whose change trigger is taking: set by
	// each trigger, under mu, and called with that fsm's write lock held.
	holds func(dir, name string) bool
	// send sends a notification notify cannot express: a replayed event
	// for one addWatch, or a PersistentWatchRemoved that names the oldest
	// zxid kept.
	send func(c *conn, rep *wire.Reply)
	// history is the member's record of past events, which a restore or
	// an addWatch from a past zxid replays.
	history *watchHistory
	// maxPerConn is how many watches a connection may hold (the
	// MaxWatches limit); zero or less is no limit.
	maxPerConn int

	mu     sync.Mutex // guards everything below
	tables [watchKinds]map[string]map[*conn]struct{}
	byConn map[*conn]map[watchKey]struct{} // the watches of each connection
	count  int
	fired  map[*conn]uint8 // trigger's scratch set: firedOneShot|firedLasting
	// waiters are the lock waiters named by the data watches that have
	// any, and turns trigger's scratch map of those whose turn came.
	waiters map[waitKey][]string
	turns   map[*conn][]string
	// gates hold back from a lasting watch over several shards, as it is
	// set or restored, the events of the groups it is not open to yet
	// (addGated, open): by connection and watch, the groups still shut.
	gates map[gateKey]map[uint64]bool
}

// gateKey is a connection's lasting watch.
type gateKey struct {
	c *conn
	k watchKey
}

func newWatchRegistry(notify func(c *conn, group uint64, zxid int64, ev tree.Event, turns []string)) *watchRegistry {
	w := &watchRegistry{notify: notify, byConn: map[*conn]map[watchKey]struct{}{}, fired: map[*conn]uint8{},
		waiters: map[waitKey][]string{}, turns: map[*conn][]string{}}
	for k := range w.tables {
		w.tables[k] = map[string]map[*conn]struct{}{}
	}
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

// addWaiter leaves c's data watch on path, as add does, for the lock
// waiter named waiter as well: when the node at path is deleted, the
// notification tells whether waiter's turn came.
func (w *watchRegistry) addWaiter(path string, c *conn, waiter string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.addLocked(watchData, path, c) {
		return false
	}
	k := waitKey{c, path}
	if ws := w.waiters[k]; len(ws) < maxWaiters && !slices.Contains(ws, waiter) {
		w.waiters[k] = append(ws, waiter)
	}
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
	if kind == watchData {
		delete(w.waiters, waitKey{c, path})
	}
	if len(w.gates) > 0 {
		delete(w.gates, gateKey{c, watchKey{path, kind}})
	}
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

// watchedPaths lists, sorted, the paths each session's connection
// watches, of every kind (ZooKeeper's wchc and wchp), by session id.
func (w *watchRegistry) watchedPaths() map[int64][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int64][]string, len(w.byConn))
	for c, keys := range w.byConn {
		if len(keys) == 0 {
			continue
		}
		paths := make([]string, 0, len(keys))
		for k := range keys {
			paths = append(paths, k.path)
		}
		slices.Sort(paths)
		out[c.session] = slices.Compact(paths)
	}
	return out
}

// take removes the one-shot watches of kind on path, adding their
// connections to w.fired. With deleted, the node at path is gone: the
// waiters of its data watches whose turn came go into w.turns.
func (w *watchRegistry) take(kind watchKind, path string, deleted bool) {
	for c := range w.tables[kind][path] {
		w.fired[c] |= firedOneShot
		delete(w.byConn[c], watchKey{path, kind})
		w.count--
		if kind == watchData {
			w.takeWaiters(c, path, deleted)
		}
	}
	delete(w.tables[kind], path)
}

// takeWaiters forgets the waiters of c's data watch on path, and with
// deleted puts those whose turn came into w.turns.
func (w *watchRegistry) takeWaiters(c *conn, path string, deleted bool) {
	k := waitKey{c, path}
	for _, name := range w.waiters[k] {
		if deleted && w.holds != nil && w.holds(parent(path), name) {
			w.turns[c] = append(w.turns[c], name)
		}
	}
	delete(w.waiters, k)
}

// collect adds the connections with a lasting watch of kind on path to
// w.fired, but those whose watch is shut to group's events.
func (w *watchRegistry) collect(group uint64, kind watchKind, path string) {
	for c := range w.tables[kind][path] {
		if len(w.gates) > 0 && w.gates[gateKey{c, watchKey{path, kind}}][group] {
			continue
		}
		w.fired[c] |= firedLasting
	}
}

// addGated leaves a lasting watch of kind on path for c, shut to the events
// of groups until each is opened (open); one c holds already stays open.
// It reports false, having left nothing, when the watch is new and c
// holds as many as it may.
func (w *watchRegistry) addGated(kind watchKind, path string, c *conn, groups []*group) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, had := w.tables[kind][path][c]; had {
		return true
	}
	if !w.addLocked(kind, path, c) {
		return false
	}
	if len(groups) > 0 {
		shut := make(map[uint64]bool, len(groups))
		for _, g := range groups {
			shut[g.id] = true
		}
		if w.gates == nil {
			w.gates = map[gateKey]map[uint64]bool{}
		}
		w.gates[gateKey{c, watchKey{path, kind}}] = shut
	}
	return true
}

// openLocked opens c's lasting watch of k to the events of group. The
// caller holds group's read lock, so that each of its events is either
// before (and not sent) or after (and sent), and w.mu.
func (w *watchRegistry) openLocked(c *conn, k watchKey, group uint64) {
	g := gateKey{c, k}
	if shut := w.gates[g]; shut != nil {
		delete(shut, group)
		if len(shut) == 0 {
			delete(w.gates, g)
		}
	}
}

// trigger fires the watches that events match and sends their
// notifications, one per connection and event. It is called by Apply with
// the fsm's write lock held.
func (w *watchRegistry) trigger(group uint64, events []tree.Event, zxid int64, holds func(dir, name string) bool) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds = holds
	for _, ev := range events {
		switch ev.Type {
		case wire.EventNodeCreated, wire.EventNodeDataChanged:
			w.take(watchData, ev.Path, false)
		case wire.EventNodeChildrenChanged:
			w.take(watchChild, ev.Path, false)
		case wire.EventNodeDeleted:
			w.take(watchData, ev.Path, true)
			w.take(watchChild, ev.Path, false)
		}
		w.collect(group, watchPersistent, ev.Path)
		if ev.Type != wire.EventNodeChildrenChanged && len(w.tables[watchRecursive]) > 0 {
			for p := ev.Path; ; p = parent(p) {
				w.collect(group, watchRecursive, p)
				if p == "/" {
					break
				}
			}
		}
		bare := tree.Event{Type: ev.Type, Path: ev.Path}
		for c, f := range w.fired {
			switch {
			case f&firedLasting != 0 && mayRead(c, ev):
				w.notify(c, group, zxid, ev, w.turns[c])
			case f&firedOneShot != 0:
				// A one-shot watch fires whatever the ACL is now (as in
				// ZooKeeper), without the data.
				w.notify(c, group, zxid, bare, w.turns[c])
			}
		}
		clear(w.fired)
		clear(w.turns)
	}
}

// restoreLasting registers a reconnected connection's persistent and
// recursive watches. First it replays, in order, the events after the
// client's last seen zxid rel that they would have fired, from the
// history; if the history no longer holds them all, it tells the client
// with a PersistentWatchRemoved event per path instead (err
// HistoryCompacted, naming the oldest zxid kept), and registers nothing:
// the client must read the state again. The caller holds the fsm's read
// lock, so no event can come between the replay and the registration.
func (w *watchRegistry) restoreLasting(c *conn, h *watchHistory, rel, zxid int64, persistent, recursive []string) {
	if len(persistent)+len(recursive) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	removeAll := func(oldest int64) { w.lostLocked(c, zxid, oldest, persistent, recursive) }
	if oldest := h.oldestZxid(); rel < oldest {
		removeAll(oldest)
		return
	}
	lasting := map[watchKey]bool{}
	var added []watchKey
	for _, p := range persistent {
		if w.addLocked(watchPersistent, p, c) {
			added = append(added, watchKey{p, watchPersistent})
		}
		lasting[watchKey{p, watchPersistent}] = true
	}
	for _, p := range recursive {
		if w.addLocked(watchRecursive, p, c) {
			added = append(added, watchKey{p, watchRecursive})
		}
		lasting[watchKey{p, watchRecursive}] = true
	}
	err := h.since(rel, func(z int64, ev tree.Event) {
		if sees(lasting, ev) && mayRead(c, ev) {
			w.notify(c, shardmap.MetaGroup, z, ev, nil)
		}
	})
	if err != nil {
		// The history could not be read through: what was replayed may
		// have a gap, so the watches end as if it were compacted.
		c.log.Error("replaying the watch history failed", zap.Error(err))
		for _, k := range added {
			w.removeLocked(k.kind, k.path, c)
		}
		removeAll(h.oldestZxid())
	}
}

// lost tells c that its lasting watches of persistent and recursive are
// not restored, the history holding the events only from oldest on: a
// PersistentWatchRemoved event per path, err HistoryCompacted.
func (w *watchRegistry) lost(c *conn, zxid, oldest int64, persistent, recursive []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lostLocked(c, zxid, oldest, persistent, recursive)
}

func (w *watchRegistry) lostLocked(c *conn, zxid, oldest int64, persistent, recursive []string) {
	for _, paths := range [][]string{persistent, recursive} {
		for _, p := range paths {
			w.send(c, &wire.Reply{Xid: wire.XidNotification, Zxid: zxid, Err: wire.CodeHistoryCompacted,
				EventType: wire.EventPersistentWatchRemoved, State: wire.StateConnected, Path: p, OldestZxid: oldest})
		}
	}
}

// addFrom leaves a persistent or recursive watch of kind on path for c,
// after replaying (send) every event after zxid from it sees, in order,
// from the history: ErrHistoryCompacted if the history no longer holds
// them all. The caller holds the fsm's read lock, so no event comes
// between the replay and the registration. It reports false, having sent
// and left nothing, when c holds as many watches as it may.
func (w *watchRegistry) addFrom(kind watchKind, path string, c *conn, h *watchHistory, from int64, send func(zxid int64, ev tree.Event)) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if oldest := h.oldestZxid(); from < oldest {
		return true, &historyCompactedError{oldest: oldest, from: from}
	}
	_, had := w.tables[kind][path][c]
	if !w.addLocked(kind, path, c) {
		return false, nil
	}
	lasting := map[watchKey]bool{{path, kind}: true}
	err := h.since(from, func(z int64, ev tree.Event) {
		if sees(lasting, ev) && mayRead(c, ev) {
			send(z, ev)
		}
	})
	if err != nil && !had {
		w.removeLocked(kind, path, c)
	}
	return true, err
}

// replaySender sends c an event of group replayed for its addWatch req.
func replaySender(c *conn, req *wire.Request, group uint64) func(zxid int64, ev tree.Event) {
	return func(zxid int64, ev tree.Event) {
		c.srv.watches.send(c, &wire.Reply{Xid: wire.XidReplay, Zxid: c.eventZxid(group, zxid), EventType: ev.Type,
			State: wire.StateConnected, Path: ev.Path, ReplayOf: req.Xid, Data: ev.Data, Stat: ev.Stat})
	}
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

// addLastingWatch leaves the persistent or recursive watch of an addWatch
// for c. With a FromZxid, it first replays every event after it the watch
// sees, in order, as XidReplay notifications naming the request: they are
// that watch's alone (the connection's other watches saw them live, or
// not at all), and come before the reply, which tells a client that
// takes positions where the watch is set: in its path's shard, or, for
// a watch that spans shards (addSpanningWatch), in each. The caller holds
// the read lock of the group of req's path, or the meta group's for a
// watch that spans shards.
func (s *Server) addLastingWatch(kind watchKind, req *wire.Request, c *conn, reply *wire.Reply) error {
	switch {
	case req.FromZxid == 0 && s.spans(req.Path, kind == watchRecursive):
		positions, err := s.addSpanningWatch(kind, req.Path, c)
		if c.positions {
			reply.Positions = positions
		}
		return err
	case req.FromZxid == 0:
		if err := s.addWatch(kind, req.Path, c); err != nil {
			return err
		}
		if g, err := s.groupOfPath(req.Path); err == nil && c.positions {
			reply.Positions = []int64{wire.Position(g.id, g.fsm.zxid)} // the caller holds g's read lock
		}
		return nil
	case req.FromZxid < 0:
		return wire.Errorf(wire.CodeBadArguments, "fromZxid %d is negative", req.FromZxid)
	}
	g, h := s.historyOf(req.Path, kind == watchRecursive)
	switch {
	case h == nil:
		// Each shard keeps the history of its own events, whose zxids are
		// its own (docs/scale-out.md).
		return wire.Errorf(wire.CodeHistoryCompacted, "the watch sees the nodes of several shards, and no one history has its events: read the state, and add the watch without fromZxid")
	case req.FromZxid > g.fsm.zxid: // the caller holds g's read lock
		return wire.Errorf(wire.CodeNotCaughtUp, "fromZxid %d is ahead of this member's last applied zxid %d", req.FromZxid, g.fsm.zxid)
	}
	if c.replayed.err != nil {
		return c.replayed.err // preReplay could not read the history through
	}
	// What preReplay sent already, the replay here does not send again.
	ok, err := s.watches.addFrom(kind, req.Path, c, h, max(req.FromZxid, c.replayed.to), replaySender(c, req, g.id))
	if !ok {
		return s.limits.refuse(c.log, limitWatches, wire.CodeQuotaExceeded,
			"the connection holds %d watches, as many as it may", s.cfg.MaxWatches)
	}
	if err == nil && c.positions {
		reply.Positions = []int64{wire.Position(g.id, g.fsm.zxid)}
	}
	return err
}
