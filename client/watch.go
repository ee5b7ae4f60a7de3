package client

import (
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// EventWatchRemoved is the last event of a persistent or recursive
	// watch that was dropped because events were lost (its Err matches
	// ErrEventsLost): read the state again and add the watch again.
	EventWatchRemoved = EventType(wire.EventPersistentWatchRemoved)
)

// AddWatchMode is the kind of watch AddWatch leaves.
type AddWatchMode = wire.AddWatchMode

// Watch modes for AddWatch.
const (
	// WatchPersistent sees every NodeCreated, NodeDeleted,
	// NodeDataChanged and NodeChildrenChanged of its path.
	WatchPersistent = wire.AddWatchPersistent
	// WatchPersistentRecursive sees every NodeCreated, NodeDeleted and
	// NodeDataChanged of its path and of every node below it; no
	// NodeChildrenChanged (a child's NodeCreated or NodeDeleted says it).
	WatchPersistentRecursive = wire.AddWatchPersistentRecursive
)

// DefaultWatchQueue is how many events a persistent or recursive watch
// holds for a reader that falls behind before it is dropped.
const DefaultWatchQueue = 4096

func (t EventType) String() string {
	if t == EventSession {
		return "Session"
	}
	return wire.EventType(t).String()
}

// Event is what a watch channel receives: a one-shot watch's channel
// exactly once, a persistent or recursive watch's channel each time.
//
// A node event has Type, Path, Zxid (of the change) and State
// StateConnected. When the session expires or the client is closed, the
// channel instead receives an event of Type EventSession with State
// StateExpired or StateClosed and Err matching ErrSessionExpired or
// ErrClosed, and is closed (or, when the client gives its session up after
// a refused credential, State StateAuthFailed and Err matching both
// ErrAuthFailed and ErrSessionExpired; see AddAuth). A watch survives reconnects to the same
// session: a change made while the client was disconnected fires a
// one-shot watch on reconnect, and a persistent or recursive watch gets
// every event it missed, in order (or, if the server no longer has them,
// a last event of Type EventWatchRemoved).
type Event struct {
	Type  EventType
	Path  string
	State State
	Zxid  int64
	Err   error
	// Data and Stat are the node's right after the change, in the
	// NodeCreated and NodeDataChanged events of persistent and recursive
	// watches (Stat.Czxid is then set): such a watcher sees every value the
	// node takes, with no read. One-shot watch events do not carry them.
	Data []byte
	Stat Stat
	// Turns are, in the NodeDeleted event of a watch left with Waiter,
	// the waiters named so whose acquisitions hold their lock once the
	// node is gone. A waiter not in it reads the queue to know; so does
	// every waiter against a server too old to name turns.
	Turns []string
}

func (e Event) String() string {
	if e.Type == EventSession {
		return fmt.Sprintf("%s %s: %v", e.Type, e.State, e.Err)
	}
	return fmt.Sprintf("%s %s @%d", e.Type, e.Path, e.Zxid)
}

// watchReg is a watch asked for by GetW, ExistsW, ChildrenW or AddWatch.
// It is registered by the reader when the reply arrives, so that no event
// that follows the reply can be missed.
type watchReg struct {
	path string
	ch   chan Event // one-shot: capacity 1; receives one event, then is closed
	// lasting is the queue length of a persistent or recursive watch (whose
	// ch has room for one more event, the last), 0 for a one-shot watch.
	lasting int
	mode    AddWatchMode
	// replayed holds the events replayed for an AddWatch with FromZxid
	// until its reply registers the watch; early, the events that came
	// before that reply from the shards a watch over several was set in
	// first (conn.offerEarly). Only the reader touches them.
	replayed, early []shardEvent
	// A lasting watch's place in the events (the table's mu guards it).
	// Each shard numbers its zxids on its own, so a watch has a place in
	// each shard it was set in or has had events of (shards, by group):
	// its reply says where it was set (wire.Reply.Positions), and a split
	// that moves what it watches, or a partition below it, brings events
	// of new shards. A server that does not tell positions has one shard,
	// and the watch one place (place, shards nil).
	place
	shards map[uint64]*place
}

// sees reports whether lasting watch w sees ev.
func (w *watchReg) sees(ev Event) bool {
	switch {
	case ev.Path == w.path:
		return w.mode == WatchPersistent || ev.Type != EventNodeChildrenChanged
	case w.mode != WatchPersistentRecursive || ev.Type == EventNodeChildrenChanged:
		return false
	}
	return w.path == "/" || strings.HasPrefix(ev.Path, w.path+"/")
}

// shardEvent is an event with the group of the shard it came from.
type shardEvent struct {
	ev    Event
	group uint64
}

// place is where a lasting watch is in the events of one shard: setZ is
// the zxid it was set at, seenZ that of the last event it got, atZ how many
// of that txn's events it got, skip how many of those a restore's replay
// brings again (fresh).
type place struct {
	setZ, seenZ int64
	atZ, skip   int
}

// resumeZxid is where a restore of lasting watch w resumes, on its own:
// after the txn before the last it had an event of (fresh drops what it
// had of that txn), or after the zxid it was set at.
func (p *place) resumeZxid() int64 {
	if p.seenZ > p.setZ {
		return p.seenZ - 1
	}
	return p.setZ
}

// fresh reports whether an event of the txn at zxid z is one lasting
// watch w has not had, and counts it. A restore replays from the txn
// before the last one the client saw an event of (Client.resumeZxid): w
// drops what it had, every event of an older txn and the first atZ of
// the txn it saw last, which the server sends in the order it sent them
// live.
func (p *place) fresh(z int64) bool {
	switch {
	case z < p.seenZ:
		return false
	case z == p.seenZ && p.skip > 0:
		p.skip--
		return false
	case z == p.seenZ:
		p.atZ++
	default:
		p.seenZ, p.atZ, p.skip = z, 1, 0
	}
	return true
}

// in is w's place in the shard of group (its one place, if its server
// told no positions). A shard it has no place in yet (one split off after
// it was set) starts at its first event.
func (w *watchReg) in(group uint64) *place {
	if w.shards == nil {
		return &w.place
	}
	p := w.shards[group]
	if p == nil {
		p = &place{}
		w.shards[group] = p
	}
	return p
}

// setAt places a lasting watch at the positions its reply says it was
// set at (wire.Reply.Positions): in its path's shard, or in each shard
// for a watch over several.
func (w *watchReg) setAt(positions []int64) {
	if len(positions) == 0 {
		return
	}
	w.shards = make(map[uint64]*place, len(positions))
	for _, pos := range positions {
		g, z := wire.PositionOf(pos)
		w.shards[g] = &place{setZ: z}
	}
}

// resumeZxid is where a restore of w resumes on its own: in the shard
// whose place is furthest behind, for a watch with places in several
// (where a server that cannot place it by shard resumes it).
func (w *watchReg) resumeZxid() int64 {
	if w.shards == nil {
		return w.place.resumeZxid()
	}
	z := int64(-1)
	for _, p := range w.shards {
		if r := p.resumeZxid(); z < 0 || r < z {
			z = r
		}
	}
	return max(z, 0)
}

// resumePositions are where a restore of w resumes in each shard it has a
// place in, by group; nil if its server told no positions.
func (w *watchReg) resumePositions() map[uint64]int64 {
	if w.shards == nil {
		return nil
	}
	out := make(map[uint64]int64, len(w.shards))
	for g, p := range w.shards {
		out[g] = p.resumeZxid()
	}
	return out
}

// takeReplayed puts the replayed events, and the early ones that come
// after where the watch was set in their shard, at the head of w's
// channel, which it makes large enough for them and the usual queue
// besides, before the watch is registered and its channel given to the
// caller. The reply's positions are set first (setAt).
func (w *watchReg) takeReplayed() {
	for _, e := range w.early {
		if e.ev.Zxid > w.in(e.group).setZ {
			w.replayed = append(w.replayed, e)
		}
	}
	w.early = nil
	if len(w.replayed) == 0 {
		return
	}
	w.lasting += len(w.replayed)
	w.ch = make(chan Event, w.lasting+1)
	for _, e := range w.replayed {
		w.in(e.group).fresh(e.ev.Zxid)
		w.ch <- e.ev
	}
	w.replayed = nil
}

// newWatch returns a watch on path, or nil when watch is false.
func newWatch(path string, watch bool) *watchReg {
	if !watch {
		return nil
	}
	return &watchReg{path: path, ch: make(chan Event, 1)}
}

// newLastingWatch returns a persistent or recursive watch on path.
func newLastingWatch(path string, mode AddWatchMode, queue int) *watchReg {
	return &watchReg{path: path, ch: make(chan Event, queue+1), lasting: queue, mode: mode}
}

// lastingKey names a persistent or recursive watch on the server.
type lastingKey struct {
	path string
	mode AddWatchMode
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
// Persistent and recursive watches stay in lasting until removed. Each
// event of a path goes to every one of them that sees it.
//
// Sending while holding mu never blocks: a one-shot channel is fresh
// (capacity 1, never sent to), and a lasting watch whose queue is full is
// dropped, its last slot taking the final event.
type watchTable struct {
	mu      sync.Mutex              // guards everything below
	data    map[string][]chan Event //
	exist   map[string][]chan Event //
	child   map[string][]chan Event //
	lasting map[lastingKey][]*watchReg
	// setAt is, for each one-shot watch's channel, the zxid of the reply
	// that set it: what its restore compares the node's Stat with on a
	// sharded cluster (wire.Request.WatchZxids).
	setAt map[chan Event]int64
	over  *Event // set once the session is over: every watch gets *over
}

func (t *watchTable) init() {
	t.data = make(map[string][]chan Event)
	t.exist = make(map[string][]chan Event)
	t.child = make(map[string][]chan Event)
	t.lasting = make(map[lastingKey][]*watchReg)
	t.setAt = make(map[chan Event]int64)
}

// register adds w after a reply of code at zxid to a watching op: a
// successful getData, exists or getChildren, or an exists that found no
// node.
func (t *watchTable) register(w *watchReg, op wire.Op, code wire.Code, zxid int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op == wire.OpAddWatch {
		switch {
		case code != wire.CodeOK:
		case t.over != nil:
			deliver(w.ch, *t.over)
		default:
			k := lastingKey{w.path, w.mode}
			if w.shards == nil {
				w.setZ = zxid
			}
			t.lasting[k] = append(t.lasting[k], w)
		}
		return
	}
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
	t.setAt[w.ch] = zxid
}

// fire delivers a node event to the watches it triggers, removing the
// one-shot ones. The lasting ones get the node's data and Stat, if the
// server sent them.
func (t *watchTable) fire(typ EventType, path string, group uint64, zxid int64, data []byte, st Stat, turns []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ev := Event{Type: typ, Path: path, State: StateConnected, Zxid: zxid, Turns: turns}
	if typ == EventWatchRemoved {
		t.lostLocked(path, zxid, fmt.Errorf("the server no longer has the events of %s since the client last saw it", path))
		return
	}
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
			delete(t.setAt, ch)
		}
		delete(m, path)
	}
	if len(t.lasting) == 0 {
		return
	}
	ev.Data, ev.Stat = data, st
	t.stream(lastingKey{path, WatchPersistent}, ev, group)
	if typ != EventNodeChildrenChanged {
		for p := path; ; p = parent(p) {
			t.stream(lastingKey{p, WatchPersistentRecursive}, ev, group)
			if p == "/" {
				break
			}
		}
	}
}

// lost ends the lasting watches of path whose missed events the server
// could not replay after a reconnect, for cause.
func (t *watchTable) lost(path string, zxid int64, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lostLocked(path, zxid, cause)
}

// endLasting ends every lasting watch, for cause.
func (t *watchTable) endLasting(zxid int64, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.lasting {
		t.lostLocked(k.path, zxid, cause)
	}
}

func (t *watchTable) lostLocked(path string, zxid int64, cause error) {
	ev := Event{Type: EventWatchRemoved, Path: path, State: StateConnected, Zxid: zxid,
		Err: fmt.Errorf("%w: %w", ErrEventsLost, cause)}
	for _, mode := range []AddWatchMode{WatchPersistent, WatchPersistentRecursive} {
		k := lastingKey{path, mode}
		for _, w := range t.lasting[k] {
			deliver(w.ch, ev)
		}
		delete(t.lasting, k)
	}
}

// stream queues ev, of the shard of group, on the lasting watches of k. A
// watch whose reader has let its queue fill up is dropped, with a last
// event saying so.
func (t *watchTable) stream(k lastingKey, ev Event, group uint64) {
	ws := t.lasting[k]
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if !w.in(group).fresh(ev.Zxid) {
			continue // replayed, and had already
		}
		if len(w.ch) < w.lasting {
			w.ch <- ev
			continue
		}
		deliver(w.ch, Event{Type: EventWatchRemoved, Path: k.path, State: StateConnected, Zxid: ev.Zxid,
			Err: fmt.Errorf("%w: the reader of the %s watch on %s fell %d events behind", ErrEventsLost, k.mode, k.path, w.lasting)})
		ws = slices.Delete(ws, i, i+1)
		i--
	}
	if len(ws) == 0 {
		delete(t.lasting, k)
	} else {
		t.lasting[k] = ws
	}
}

// rewind readies the lasting watches for a restore's replay, which
// brings again the events of the txn each saw last (fresh).
func (t *watchTable) rewind() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ws := range t.lasting {
		for _, w := range ws {
			w.skip = w.atZ
			for _, p := range w.shards {
				p.skip = p.atZ
			}
		}
	}
}

// removeLasting ends the lasting watches of k, closing their channels, and
// reports whether there were any.
func (t *watchTable) removeLasting(k lastingKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	ws := t.lasting[k]
	for _, w := range ws {
		close(w.ch)
	}
	delete(t.lasting, k)
	return len(ws) > 0
}

// parent returns the parent of a path other than "/".
func parent(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// paths returns the watched paths by kind, sorted, for setWatches2, with
// since, the zxid each path's watches have seen it since (the oldest of
// its watches'): for a one-shot watch the zxid of the reply that set it,
// for a lasting one where its restore resumes (watchReg.resumeZxid); and
// for a lasting watch over several shards, at, where its restore resumes
// in each (the oldest of its watches', in the shards they all have a
// place in).
func (t *watchTable) paths() (data, exist, child, persistent, recursive []string, since map[watchAt]int64, at map[watchAt]map[uint64]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	since, at = map[watchAt]int64{}, map[watchAt]map[uint64]int64{}
	oldest := func(k watchAt, z int64) {
		if cur, ok := since[k]; !ok || z < cur {
			since[k] = z
		}
	}
	for list, m := range []map[string][]chan Event{t.data, t.exist, t.child} {
		for p, chans := range m {
			for _, ch := range chans {
				oldest(watchAt{list, p}, t.setAt[ch])
			}
		}
	}
	for k, ws := range t.lasting {
		list := listPersistent
		if k.mode == WatchPersistentRecursive {
			list = listRecursive
		}
		for i, w := range ws {
			k := watchAt{list, k.path}
			oldest(k, w.resumeZxid())
			if i == 0 {
				at[k] = w.resumePositions()
				continue
			}
			mine := w.resumePositions()
			for g, z := range at[k] {
				if m, ok := mine[g]; !ok {
					delete(at[k], g)
				} else {
					at[k][g] = min(z, m)
				}
			}
		}
	}
	for k := range t.lasting {
		if k.mode == WatchPersistent {
			persistent = append(persistent, k.path)
		} else {
			recursive = append(recursive, k.path)
		}
	}
	slices.Sort(persistent)
	slices.Sort(recursive)
	return slices.Sorted(maps.Keys(t.data)), slices.Sorted(maps.Keys(t.exist)), slices.Sorted(maps.Keys(t.child)),
		persistent, recursive, since, at
}

// watchAt names a watched path by the list of setWatches2 it goes in.
type watchAt struct {
	list int // listData, listExist, listChild, listPersistent or listRecursive
	path string
}

// The lists of a setWatches2, in the order WatchZxids follows.
const (
	listData = iota
	listExist
	listChild
	listPersistent
	listRecursive
)

// closeAll ends the table: every watch receives ev (a session event), and so
// does every watch registered later. Only the first call counts.
func (t *watchTable) closeAll(ev Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.over != nil {
		return
	}
	t.over = &ev
	clear(t.setAt)
	for _, m := range []map[string][]chan Event{t.data, t.exist, t.child} {
		for path, chs := range m {
			for _, ch := range chs {
				deliver(ch, ev)
			}
			delete(m, path)
		}
	}
	for k, ws := range t.lasting {
		for _, w := range ws {
			deliver(w.ch, ev)
		}
		delete(t.lasting, k)
	}
}

// reopen takes watches again, for a new session after closeAll.
func (t *watchTable) reopen() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.over = nil
}

func deliver(ch chan Event, ev Event) {
	ch <- ev
	close(ch)
}
