package recipes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// TreeEventType says what a TreeEvent reports.
type TreeEventType int

// Tree event types.
const (
	TreeNodeAdded   TreeEventType = iota + 1 // a node appeared in the cache
	TreeNodeUpdated                          // a node's data or Stat changed
	TreeNodeRemoved                          // a node left the cache
	// TreeInitialized follows the Added events of the first load.
	TreeInitialized
	// TreeRebuilt follows the events of a rebuild: the cache lost track
	// (its session ended, or events were lost) and read the subtree
	// again; the Added, Updated and Removed events before it are the
	// differences. Err says why.
	TreeRebuilt
)

func (t TreeEventType) String() string {
	switch t {
	case TreeNodeAdded:
		return "added"
	case TreeNodeUpdated:
		return "updated"
	case TreeNodeRemoved:
		return "removed"
	case TreeInitialized:
		return "initialized"
	case TreeRebuilt:
		return "rebuilt"
	}
	return fmt.Sprintf("TreeEventType(%d)", int(t))
}

// TreeEvent is a change of a TreeCache. For a removed node, Data and Stat
// are its last known ones. Data is shared: do not modify it.
type TreeEvent struct {
	Type TreeEventType
	Path string
	Data []byte
	Stat client.Stat
	Err  error // TreeRebuilt: why
}

// treeEventBuffer is the capacity of a TreeCache's Events channel.
const treeEventBuffer = 1024

// TreeCache is a local mirror of a subtree, kept current by one recursive
// watch (as Curator's CuratorCache): the data and Stat of every node at or
// below its path. Its reads are local and never wait.
//
// The watch's events carry each node's new data, so the cache follows
// every change in order, across reconnects, without reading. When it loses
// track (a reader of Events far behind, a server that could not replay
// what a reconnect missed, or an expired session with a client dialed
// WithSessionRenewal), it reads the subtree again, reports the differences
// and then TreeRebuilt. Without session renewal, an expired session ends
// the cache: it keeps its last state and closes Events.
type TreeCache struct {
	c    *client.Client
	root string

	mu    sync.RWMutex // guards nodes
	nodes map[string]*cachedNode

	events chan TreeEvent
	want   atomic.Bool // Events was called: deliver events
	stop   context.CancelFunc
	done   chan struct{}
}

type cachedNode struct {
	data     []byte
	stat     client.Stat
	children map[string]struct{} // names
}

// NewTreeCache starts a cache of the subtree at path (which need not
// exist) on the session of c. Close stops it.
func NewTreeCache(c *client.Client, path string) *TreeCache {
	ctx, cancel := context.WithCancel(context.Background())
	tc := &TreeCache{
		c: c, root: path, nodes: map[string]*cachedNode{},
		events: make(chan TreeEvent, treeEventBuffer), stop: cancel, done: make(chan struct{}),
	}
	go tc.run(ctx)
	return tc
}

// Get returns the cached data and Stat of the node at path.
func (tc *TreeCache) Get(path string) ([]byte, client.Stat, bool) {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	n, ok := tc.nodes[path]
	if !ok {
		return nil, client.Stat{}, false
	}
	return n.data, n.stat, true
}

// Children returns the sorted names of the cached children of the node at
// path.
func (tc *TreeCache) Children(path string) ([]string, bool) {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	n, ok := tc.nodes[path]
	if !ok {
		return nil, false
	}
	return slices.Sorted(maps.Keys(n.children)), true
}

// Events returns the channel of the cache's changes, closed when the cache
// stops. The channel buffers 1,024 events from the start; once Events has
// been called the cache waits for its reader when the buffer is full, and
// before that it drops what does not fit (call Events right after
// NewTreeCache to see every change).
func (tc *TreeCache) Events() <-chan TreeEvent {
	tc.want.Store(true)
	return tc.events
}

// Close stops the cache; its last state stays readable.
func (tc *TreeCache) Close() {
	tc.stop()
	<-tc.done
}

// run keeps the cache until ctx ends or the session does for good.
func (tc *TreeCache) run(ctx context.Context) {
	defer close(tc.done)
	defer close(tc.events)
	var why error // why the cache lost track; nil before the first load
	loaded := false
	for delay := time.Duration(0); ; delay = min(max(2*delay, 50*time.Millisecond), time.Second) {
		if sleep(ctx, delay) != nil || final(tc.c) {
			return
		}
		watch, err := tc.c.AddWatch(ctx, tc.root, client.WatchPersistentRecursive)
		if err != nil {
			why = err
			continue
		}
		fresh, err := tc.load(ctx)
		if err != nil {
			why = err
			tc.c.RemoveWatch(context.WithoutCancel(ctx), tc.root, client.WatchPersistentRecursive)
			continue
		}
		if !tc.replace(ctx, fresh) {
			return
		}
		if !loaded {
			tc.emit(ctx, TreeEvent{Type: TreeInitialized, Path: tc.root})
		} else {
			tc.emit(ctx, TreeEvent{Type: TreeRebuilt, Path: tc.root, Err: why})
		}
		loaded, delay = true, 0
		why = tc.follow(ctx, watch)
		if ctx.Err() != nil {
			tc.c.RemoveWatch(context.WithoutCancel(ctx), tc.root, client.WatchPersistentRecursive)
			return
		}
	}
}

// final reports whether c's session is over for good: closed, given up
// after a refused credential, or expired without renewal.
func final(c *client.Client) bool {
	s := c.State()
	return s == client.StateClosed || s == client.StateAuthFailed || (s == client.StateExpired && !c.RenewsSessions())
}

func sleep(ctx context.Context, d time.Duration) error {
	if d == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// load reads the subtree, parents before children. A node deleted
// meanwhile, or a root not there yet, is left out: its event follows.
func (tc *TreeCache) load(ctx context.Context) (map[string]*cachedNode, error) {
	nodes := map[string]*cachedNode{}
	err := tc.c.Walk(ctx, tc.root, func(p string, _ client.Stat, _ []string) error {
		data, st, err := tc.c.Get(ctx, p)
		if errors.Is(err, client.ErrNoNode) {
			return client.SkipChildren
		}
		if err != nil {
			return err
		}
		nodes[p] = &cachedNode{data: data, stat: st, children: map[string]struct{}{}}
		if parent, ok := nodes[parentOf(p)]; ok && p != tc.root {
			parent.children[baseOf(p)] = struct{}{}
		}
		return nil
	})
	if errors.Is(err, client.ErrNoNode) {
		err = nil // the root's; Walk skips the others
	}
	if err != nil {
		return nil, err
	}
	return nodes, nil
}

// replace makes fresh the cache's state and reports the differences. It
// returns false if ctx ended while reporting.
func (tc *TreeCache) replace(ctx context.Context, fresh map[string]*cachedNode) bool {
	tc.mu.Lock()
	old := tc.nodes
	tc.nodes = fresh
	tc.mu.Unlock()
	var evs []TreeEvent
	for _, p := range slices.Sorted(maps.Keys(old)) {
		if _, ok := fresh[p]; !ok {
			evs = append(evs, TreeEvent{Type: TreeNodeRemoved, Path: p, Data: old[p].data, Stat: old[p].stat})
		}
	}
	slices.Reverse(evs) // children before their parents
	for _, p := range slices.Sorted(maps.Keys(fresh)) {
		n := fresh[p]
		switch o, ok := old[p]; {
		case !ok:
			evs = append(evs, TreeEvent{Type: TreeNodeAdded, Path: p, Data: n.data, Stat: n.stat})
		case o.stat != n.stat:
			evs = append(evs, TreeEvent{Type: TreeNodeUpdated, Path: p, Data: n.data, Stat: n.stat})
		}
	}
	for _, ev := range evs {
		if !tc.emit(ctx, ev) {
			return false
		}
	}
	return true
}

// follow applies the watch's events until it ends, and returns why it
// ended.
func (tc *TreeCache) follow(ctx context.Context, watch <-chan client.Event) error {
	for {
		var ev client.Event
		var open bool
		select {
		case ev, open = <-watch:
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case !open:
			return errors.New("the watch was removed")
		case ev.Type == client.EventSession, ev.Type == client.EventWatchRemoved:
			return ev.Err
		case ev.Type == client.EventNodeCreated, ev.Type == client.EventNodeDataChanged:
			if te, ok := tc.upsert(ev); ok && !tc.emit(ctx, te) {
				return ctx.Err()
			}
		case ev.Type == client.EventNodeDeleted:
			for _, te := range tc.remove(ev) {
				if !tc.emit(ctx, te) {
					return ctx.Err()
				}
			}
		}
	}
}

// upsert applies a create or data change, unless the cache already has
// the node as of that change or later (the load may have read it after
// the event).
func (tc *TreeCache) upsert(ev client.Event) (TreeEvent, bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	n, ok := tc.nodes[ev.Path]
	if ok && n.stat.Czxid == ev.Stat.Czxid && n.stat.Mzxid >= ev.Stat.Mzxid {
		return TreeEvent{}, false
	}
	typ := TreeNodeUpdated
	if !ok || n.stat.Czxid != ev.Stat.Czxid {
		typ = TreeNodeAdded
		n = &cachedNode{children: map[string]struct{}{}}
		tc.nodes[ev.Path] = n
		tc.childChanged(ev.Path, ev.Zxid, true)
	}
	n.data, n.stat = ev.Data, ev.Stat
	return TreeEvent{Type: typ, Path: ev.Path, Data: n.data, Stat: n.stat}, true
}

// childChanged updates the cached parent of path as the server did when
// path was created (added) or deleted at zxid: its child list, Cversion,
// Pzxid and NumChildren. A recursive watch sends no NodeChildrenChanged,
// so the cache keeps these itself.
func (tc *TreeCache) childChanged(path string, zxid int64, added bool) {
	parent, ok := tc.nodes[parentOf(path)]
	if !ok || path == tc.root || parent.stat.Pzxid >= zxid {
		return // not cached, or the parent was read after the change
	}
	if added {
		parent.children[baseOf(path)] = struct{}{}
	} else {
		delete(parent.children, baseOf(path))
	}
	parent.stat.Cversion++
	parent.stat.Pzxid = zxid
	parent.stat.NumChildren = int32(len(parent.children))
}

// remove applies a delete: the node and, if the cache has any, what is
// below it. A delete older than the cached node (re-created since) is
// ignored.
func (tc *TreeCache) remove(ev client.Event) []TreeEvent {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	n, ok := tc.nodes[ev.Path]
	if !ok || n.stat.Czxid > ev.Zxid {
		return nil
	}
	var evs []TreeEvent
	for _, p := range slices.Sorted(maps.Keys(tc.nodes)) {
		if p == ev.Path || strings.HasPrefix(p, ev.Path+"/") {
			evs = append(evs, TreeEvent{Type: TreeNodeRemoved, Path: p, Data: tc.nodes[p].data, Stat: tc.nodes[p].stat})
			delete(tc.nodes, p)
		}
	}
	tc.childChanged(ev.Path, ev.Zxid, false)
	slices.Reverse(evs)
	return evs
}

// emit delivers ev. Once Events was called it waits for the reader, and
// returns false if ctx ends first; before, it buffers what fits.
func (tc *TreeCache) emit(ctx context.Context, ev TreeEvent) bool {
	if !tc.want.Load() {
		select {
		case tc.events <- ev:
		default: // nobody reads: the cache does not wait
		}
		return true
	}
	select {
	case tc.events <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }
