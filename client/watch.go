package client

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/arbor-coord/arbor/wire"
)

// EventType says what a watch event reports.
type EventType int32

// Event types. The node event values are ZooKeeper's.
const (
	EventSession             = EventType(wire.EventNone) // the session expired or the client was closed
	EventNodeCreated         = EventType(wire.EventNodeCreated)
	EventNodeDeleted         = EventType(wire.EventNodeDeleted)
	EventNodeDataChanged     = EventType(wire.EventNodeDataChanged)
	EventNodeChildrenChanged = EventType(wire.EventNodeChildrenChanged)
)

func (t EventType) String() string {
	if t == EventSession {
		return "Session"
	}
	return wire.EventType(t).String()
}

// Event is what a watch channel receives, exactly once.
//
// A node event has Type, Path, Zxid (of the change) and State
// StateConnected. When the session expires or the client is closed before
// the watch fires, the channel instead receives an event of Type
// EventSession with State StateExpired or StateClosed and Err matching
// ErrSessionExpired or ErrClosed. A watch survives reconnects to the same
// session: a change made while the client was disconnected fires it on
// reconnect.
type Event struct {
	Type  EventType
	Path  string
	State State
	Zxid  int64
	Err   error
}

func (e Event) String() string {
	if e.Type == EventSession {
		return fmt.Sprintf("%s %s: %v", e.Type, e.State, e.Err)
	}
	return fmt.Sprintf("%s %s @%d", e.Type, e.Path, e.Zxid)
}

// watchReg is a watch asked for by GetW, ExistsW or ChildrenW. It is
// registered by the reader when the reply arrives, so that no event that
// follows the reply can be missed.
type watchReg struct {
	path string
	ch   chan Event // capacity 1; receives one event, then is closed
}

// newWatch returns a watch on path, or nil when watch is false.
func newWatch(path string, watch bool) *watchReg {
	if !watch {
		return nil
	}
	return &watchReg{path: path, ch: make(chan Event, 1)}
}

// channel returns the channel to give the caller (nil for no watch).
func (w *watchReg) channel() <-chan Event {
	if w == nil {
		return nil
	}
	return w.ch
}

// watchTable holds the registered watches by kind and path, ZooKeeper's way:
// a data watch (GetW, or ExistsW on an existing node) and an exist watch
// (ExistsW on a missing node) fire on NodeCreated, NodeDataChanged and
// NodeDeleted of their path; a child watch fires on NodeChildrenChanged and
// NodeDeleted. The kinds also decide how a watch is restored: the server
// fires an exist watch at once if the node exists, so a watch on an existing
// node must go back as a data watch.
//
// Every channel in the table is fresh (capacity 1, never sent to), so
// sending while holding mu never blocks.
type watchTable struct {
	mu    sync.Mutex              // guards everything below
	data  map[string][]chan Event //
	exist map[string][]chan Event //
	child map[string][]chan Event //
	over  *Event                  // set once the session is over: every watch gets *over
}

func (t *watchTable) init() {
	t.data = make(map[string][]chan Event)
	t.exist = make(map[string][]chan Event)
	t.child = make(map[string][]chan Event)
}

// register adds w after a reply of code to a watching op: a successful
// getData, exists or getChildren, or an exists that found no node.
func (t *watchTable) register(w *watchReg, op wire.Op, code wire.Code) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var m map[string][]chan Event
	switch {
	case code == wire.CodeOK && (op == wire.OpGetData || op == wire.OpExists):
		m = t.data
	case code == wire.CodeNoNode && op == wire.OpExists:
		m = t.exist
	case code == wire.CodeOK && op == wire.OpGetChildren:
		m = t.child
	default:
		return
	}
	if t.over != nil {
		deliver(w.ch, *t.over)
		return
	}
	m[w.path] = append(m[w.path], w.ch)
}

// fire delivers a node event to the watches it triggers and removes them.
func (t *watchTable) fire(typ EventType, path string, zxid int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := Event{Type: typ, Path: path, State: StateConnected, Zxid: zxid}
	var kinds []map[string][]chan Event
	switch typ {
	case EventNodeCreated, EventNodeDataChanged:
		kinds = append(kinds, t.data, t.exist)
	case EventNodeDeleted:
		kinds = append(kinds, t.data, t.exist, t.child)
	case EventNodeChildrenChanged:
		kinds = append(kinds, t.child)
	}
	for _, m := range kinds {
		for _, ch := range m[path] {
			deliver(ch, ev)
		}
		delete(m, path)
	}
}

// paths returns the watched paths by kind, sorted, for setWatches.
func (t *watchTable) paths() (data, exist, child []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.data)), slices.Sorted(maps.Keys(t.exist)), slices.Sorted(maps.Keys(t.child))
}

// closeAll ends the table: every watch receives ev (a session event), and so
// does every watch registered later. Only the first call counts.
func (t *watchTable) closeAll(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over != nil {
		return
	}
	t.over = &ev
	for _, m := range []map[string][]chan Event{t.data, t.exist, t.child} {
		for path, chs := range m {
			for _, ch := range chs {
				deliver(ch, ev)
			}
			delete(m, path)
		}
	}
}

func deliver(ch chan Event, ev Event) {
	ch <- ev
	close(ch)
}
