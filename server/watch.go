package server

import (
	"sync"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// watchRegistry holds the one-shot watches of this server's connections.
// Data watches (left by getData, and by exists whether or not the node
// exists) fire on NodeCreated, NodeDataChanged and NodeDeleted of their
// path; child watches fire on NodeChildrenChanged and NodeDeleted of their
// path. A connection holds at most one watch of each kind per path (the
// client fans an event out to all its callers) and a fired watch is gone.
//
// Registration happens under the fsm's read lock and trigger under its
// write lock, so a change is either seen by a read or fires the read's
// watch, never neither.
type watchRegistry struct {
	notify func(c *conn, zxid int64, typ wire.EventType, path string)

	mu     sync.Mutex
	data   map[string]map[*conn]struct{} // mu guards data, child, byConn and count
	child  map[string]map[*conn]struct{}
	byConn map[*conn]map[string]struct{} // the paths each connection watches, of either kind
	count  int
}

func newWatchRegistry(notify func(c *conn, zxid int64, typ wire.EventType, path string)) *watchRegistry {
	return &watchRegistry{
		notify: notify,
		data:   map[string]map[*conn]struct{}{},
		child:  map[string]map[*conn]struct{}{},
		byConn: map[*conn]map[string]struct{}{},
	}
}

func (w *watchRegistry) add(table map[string]map[*conn]struct{}, path string, c *conn) {
	set := table[path]
	if set == nil {
		set = map[*conn]struct{}{}
		table[path] = set
	}
	if _, ok := set[c]; !ok {
		set[c] = struct{}{}
		w.count++
		paths := w.byConn[c]
		if paths == nil {
			paths = map[string]struct{}{}
			w.byConn[c] = paths
		}
		paths[path] = struct{}{}
	}
}

// addData leaves a data watch for c on path.
func (w *watchRegistry) addData(path string, c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add(w.data, path, c)
}

// addChild leaves a child watch for c on path.
func (w *watchRegistry) addChild(path string, c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.add(w.child, path, c)
}

// take removes and returns the watchers of path in table.
func (w *watchRegistry) take(table map[string]map[*conn]struct{}, path string) map[*conn]struct{} {
	set := table[path]
	if set == nil {
		return nil
	}
	delete(table, path)
	w.count -= len(set)
	for c := range set {
		if _, still := w.data[path][c]; !still {
			if _, still := w.child[path][c]; !still {
				delete(w.byConn[c], path)
			}
		}
	}
	return set
}

// trigger fires the watches that events match and sends their
// notifications. It is called by Apply with the fsm's write lock held.
func (w *watchRegistry) trigger(events []tree.Event, zxid int64) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range events {
		var fired map[*conn]struct{}
		switch ev.Type {
		case wire.EventNodeCreated, wire.EventNodeDataChanged:
			fired = w.take(w.data, ev.Path)
		case wire.EventNodeChildrenChanged:
			fired = w.take(w.child, ev.Path)
		case wire.EventNodeDeleted:
			fired = w.take(w.data, ev.Path)
			for c := range w.take(w.child, ev.Path) {
				if fired == nil {
					fired = map[*conn]struct{}{}
				}
				fired[c] = struct{}{}
			}
		}
		for c := range fired {
			w.notify(c, zxid, ev.Type, ev.Path)
		}
	}
}

// removeConn drops every watch of c, in time proportional to their number.
func (w *watchRegistry) removeConn(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for path := range w.byConn[c] {
		for _, table := range []map[string]map[*conn]struct{}{w.data, w.child} {
			if set, ok := table[path]; ok {
				if _, ok := set[c]; ok {
					delete(set, c)
					w.count--
					if len(set) == 0 {
						delete(table, path)
					}
				}
			}
		}
	}
	delete(w.byConn, c)
}

// size is the number of watches registered.
func (w *watchRegistry) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}
