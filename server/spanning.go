package server

import (
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// A lasting watch spans shards when its events come from several: a
// recursive watch of "/", and a persistent or recursive watch of a
// partitioned parent or, recursive, of a path above one. Each shard
// numbers its zxids on its own, so such a watch has a place in each
// shard: its client learns the shard of each event from the event's
// position (wire.Position, protocol version ShardedWatches), and where the
// watch was set in each from its addWatch's reply (Reply.Positions), and
// gives them back when it restores the watch after a reconnect
// (Request.WatchPositions). The member then replays what the watch missed
// of each shard from that shard's history.
//
// A spanning watch is set, and restored, a group at a time, with the meta
// group's read lock held (answerRead takes it for such an addWatch,
// whichever shard holds the watched node) and each shard's taken in
// turn: left shut to every shard's events (addGated), then opened to a
// shard's (openLocked) under that shard's read lock, so that each of its
// events is either before the place the watch starts at there or sent.

// spans reports whether a lasting watch of path (recursive: and below)
// sees the events of several shards: path's children are spread over
// them (the root's, /zookeeper/quota's, a partitioned parent's or its
// quota directory's), or, recursive, those of a path below it.
func (s *Server) spans(path string, recursive bool) bool {
	m := s.routingMap()
	if m == nil {
		return false
	}
	if path == "/" || path == wire.QuotaPath || m.IsPartitioned(path) || m.IsPartitionedQuota(path) {
		return true
	}
	below := func(p string) bool { return recursive && strings.HasPrefix(p, path+"/") }
	return below(wire.QuotaPath) || slices.ContainsFunc(m.Partitioned, func(p string) bool { return below(p) || below(wire.QuotaPath+p) })
}

// addSpanningWatch leaves a lasting watch of kind on path for c that spans
// shards, and returns the positions it is set at in each group: the meta
// group's, whose read lock the caller holds, then each shard's.
func (s *Server) addSpanningWatch(kind watchKind, path string, c *conn) ([]int64, error) {
	shards := s.runningGroups()
	if !s.watches.addGated(kind, path, c, shards) {
		return nil, s.refuseWatch(c)
	}
	positions := []int64{wire.Position(s.metaGroup.id, s.fsm.zxid)}
	for _, g := range shards {
		g.fsm.read(func(*tree.Tree) {
			s.watches.open(c, watchKey{path, kind}, g.id)
			positions = append(positions, wire.Position(g.id, g.fsm.zxid))
		})
	}
	return positions, nil
}

// lastingRestore is a lasting watch a restore brings back on a sharded
// cluster, with where its replay resumes in each group.
type lastingRestore struct {
	key   watchKey
	sees  map[watchKey]bool // key alone, for sees
	spans bool              // its events come from several groups
	from  map[uint64]int64  // by group: the zxid its replay resumes after
	lost  bool              // ended: a group's history no longer holds what it missed
}

// lastingPlan is what a sharded restore does with its lasting watches:
// those of one group, by group; those over several; and those it ends
// (persistent, recursive) as they cannot be placed.
type lastingPlan struct {
	byGroup  map[uint64][]*lastingRestore
	spanning []*lastingRestore
	lost     [2][]string
}

// planLasting places the lasting watches of req, a sharded restore: where
// each resumes in each group (WatchPositions; for a watch of one shard,
// its WatchZxids entry else). A watch over several shards with a place in
// a shard not running here is ended: that shard's events can be neither
// replayed nor kept until it runs. One with no place in a shard that was
// split off after it was set, and had no event for it since, is placed at
// the split (seedIndex), if this member seeded the shard: its place in
// the shard split off, or the one split before, is before the split, and
// that shard's replay brings the split-off keys' events up to it. shards
// are the groups of the shards running here.
func (c *conn) planLasting(req *wire.Request, since [5][]int64, perWatch bool, shards []*group) lastingPlan {
	s := c.srv
	plan := lastingPlan{byGroup: map[uint64][]*lastingRestore{}}
	for kind, paths := range [][]string{req.PersistentWatches, req.RecursiveWatches} {
		for i, p := range paths {
			k := watchKey{p, watchPersistent}
			if kind == 1 {
				k.kind = watchRecursive
			}
			l := &lastingRestore{key: k, sees: map[watchKey]bool{k: true}, from: map[uint64]int64{}}
			if j := i + kind*len(req.PersistentWatches); j < len(req.WatchPositions) {
				for _, pos := range req.WatchPositions[j] {
					g, z := wire.PositionOf(pos)
					l.from[g] = z
				}
			}
			if l.spans = s.spans(p, kind == 1); l.spans {
				unknown := false
				for g := range l.from {
					unknown = unknown || g != s.metaGroup.id && !slices.ContainsFunc(shards, func(sh *group) bool { return sh.id == g })
				}
				for _, sh := range shards {
					if _, ok := l.from[sh.id]; !ok && len(l.from) > 0 && sh.fsm.history != nil && sh.fsm.history.seedIndex() > 0 {
						l.from[sh.id] = sh.fsm.history.seedIndex()
					}
				}
				if unknown {
					plan.lost[kind] = append(plan.lost[kind], p)
				} else {
					plan.spanning = append(plan.spanning, l)
				}
				continue
			}
			g, err := s.groupOfPath(p)
			if err != nil {
				plan.lost[kind] = append(plan.lost[kind], p)
				continue
			}
			if _, ok := l.from[g.id]; !ok && perWatch {
				l.from[g.id] = since[3+kind][i]
			}
			plan.byGroup[g.id] = append(plan.byGroup[g.id], l)
		}
	}
	return plan
}

// in are the lasting watches of the plan that see group's events, but
// those ended.
func (p *lastingPlan) in(group uint64) []*lastingRestore {
	ls := slices.Clip(p.byGroup[group])
	for _, l := range p.spanning {
		if !l.lost {
			ls = append(ls, l)
		}
	}
	return ls
}

// preReplaySharded sends, without any group's lock, the bulk of what a
// sharded restore replays (see preReplay): each group's events up to the
// zxid it has applied now, and notes in c.replayed how far it got in
// each. Nothing of the connection is registered yet, so nothing else is
// sent to it meanwhile: a restore comes before any other request.
func (c *conn) preReplaySharded(req *wire.Request) {
	s := c.srv
	shards := s.runningGroups()
	since, perWatch := watchZxids(req)
	plan := c.planLasting(req, since, perWatch, shards)
	to := map[watchIn]int64{}
	for _, g := range append([]*group{s.metaGroup}, shards...) {
		h := g.fsm.history
		if h == nil {
			continue
		}
		upto, oldest := g.fsm.lastZxid(), h.oldestZxid()
		var ls []*lastingRestore // those the history can replay (restoreIn ends the others)
		for _, l := range plan.in(g.id) {
			if z, ok := l.from[g.id]; ok && z >= oldest {
				ls = append(ls, l)
			}
		}
		switch err := replayIn(c, g, ls, nil, upto); {
		case errors.Is(err, wire.ErrHistoryCompacted):
			continue // trimmed meanwhile: restoreIn sees to what
		case err != nil:
			c.replayed = replayedPart{err: err}
			return
		}
		for _, l := range ls {
			to[watchIn{l.key, g.id}] = upto
		}
	}
	c.replayed = replayedPart{toIn: to}
	if hook := s.afterPreReplay; hook != nil {
		hook()
	}
}

// watchIn is a lasting watch of a connection in the events of a group.
type watchIn struct {
	k     watchKey
	group uint64
}

// replayIn sends c the events of g's history that the lasting watches ls
// missed, each from where it resumes there (after what done says was
// sent already), up to zxid upto. It reports ErrHistoryCompacted, sending
// nothing, if the history no longer holds them all; the watches that say
// nothing of g are left out.
func replayIn(c *conn, g *group, ls []*lastingRestore, done map[watchIn]int64, upto int64) error {
	h := g.fsm.history
	from := int64(math.MaxInt64)
	for _, l := range ls {
		if z, ok := l.resumesIn(g.id, done); ok {
			from = min(from, z)
		}
	}
	if h == nil || from >= upto {
		return nil
	}
	if from < h.oldestZxid() {
		return wire.ErrHistoryCompacted
	}
	return h.between(from, upto, func(ez int64, ev tree.Event) {
		if !mayRead(c, ev) {
			return
		}
		for _, l := range ls {
			if z, ok := l.resumesIn(g.id, done); ok && z < ez && sees(l.sees, ev) {
				c.srv.notify(c, g.id, ez, ev, nil)
				return
			}
		}
	})
}

// resumesIn is where l resumes in group's events: after its client's
// place there, or after what a replay sent it already (done), if later.
func (l *lastingRestore) resumesIn(group uint64, done map[watchIn]int64) (int64, bool) {
	z, ok := l.from[group]
	if d, sent := done[watchIn{l.key, group}]; ok && sent {
		z = max(z, d)
	}
	return z, ok
}

// restoreSharded restores the watches of req on a sharded cluster, a group
// at a time: the meta group's, whose read lock the caller holds, then each
// shard's, in the order of their groups, under its read lock. In a group's
// turn, the lasting watches that see its events replay what they missed
// of them since preReplaySharded sent the bulk, from where their client
// says it was in the group (planLasting); then the watches of that group
// alone are left, those over several opened to its events (they were left
// shut to every shard's first), and the group's one-shot watches looked
// at and left. No event of a group comes between its replay and its
// watches, and no watch of the connection gets a live event of a group
// before a replay sends its older ones. A lasting watch whose client does
// not say where it was in a group, or whose missed events that group's
// history no longer holds, ends with HistoryCompacted, so that its client
// reads again. The connection has room for the watches (setWatches
// checked).
func (c *conn) restoreSharded(t *tree.Tree, req *wire.Request, since [5][]int64, perWatch bool, zxid int64) {
	s := c.srv
	shards := s.runningGroups()
	plan := c.planLasting(req, since, perWatch, shards)
	if err := c.replayed.err; err != nil {
		// What was sent may have a gap: every lasting watch ends.
		c.log.Error("replaying the watch history failed", zap.Error(err))
		plan = lastingPlan{lost: [2][]string{req.PersistentWatches, req.RecursiveWatches}}
	}
	var opened []*lastingRestore
	for _, l := range plan.spanning {
		if s.watches.addGated(l.key.kind, l.key.path, c, shards) {
			opened = append(opened, l)
		} else { // (setWatches made room for every watch)
			i := l.key.kind - watchPersistent // persistent, recursive
			plan.lost[i] = append(plan.lost[i], l.key.path)
		}
	}
	plan.spanning = opened
	s.watches.lost(c, zxid, s.fsm.history.oldestZxid(), plan.lost[0], plan.lost[1])

	// A one-shot watch is restored from the zxid its client says it saw
	// in its shard (WatchZxids), or as if it saw nothing there.
	oneShot := c.oneShotRestores(req, func(list, i int) int64 {
		if perWatch {
			return since[list][i]
		}
		return -1
	})
	turn := func(g *group, t *tree.Tree) {
		s.watches.restoreIn(c, g, zxid, plan.in(g.id), c.replayed.toIn)
		for _, restore := range oneShot[g.id] {
			restore(t, g)
		}
	}
	turn(s.metaGroup, t)
	for _, g := range shards {
		g.fsm.read(func(t *tree.Tree) { turn(g, t) })
	}
}

// restoreIn is a group's turn in restoreSharded for the lasting watches
// ls that see its events: each replays them from where it resumes (after
// what preReplaySharded sent, done), then is left (of g alone) or opened
// to them (spanning). One that says nothing of g, or whose missed events
// g's history no longer holds, ends with HistoryCompacted (and is marked
// lost). The caller holds g's read lock, so no event of g comes between
// the replay and the registration; the registry's lock is taken after
// the replay, so that the member's other groups fire watches meanwhile.
func (w *watchRegistry) restoreIn(c *conn, g *group, zxid int64, ls []*lastingRestore, done map[watchIn]int64) {
	if len(ls) == 0 {
		return
	}
	h := g.fsm.history
	var live, ended []*lastingRestore
	for _, l := range ls {
		if z, ok := l.resumesIn(g.id, done); !ok || h == nil || z < h.oldestZxid() {
			ended = append(ended, l)
		} else {
			live = append(live, l)
		}
	}
	if err := replayIn(c, g, live, done, g.fsm.zxid); err != nil {
		if !errors.Is(err, wire.ErrHistoryCompacted) {
			c.log.Error("replaying the watch history failed", zap.Uint64("group", g.id), zap.Error(err))
		}
		ended, live = append(ended, live...), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range live {
		if l.spans {
			w.openLocked(c, l.key, g.id)
		} else {
			w.addLocked(l.key.kind, l.key.path, c)
		}
	}
	var persistent, recursive []string
	for _, l := range ended {
		l.lost = true
		if l.spans {
			w.removeLocked(l.key.kind, l.key.path, c)
		}
		if l.key.kind == watchPersistent {
			persistent = append(persistent, l.key.path)
		} else {
			recursive = append(recursive, l.key.path)
		}
	}
	oldest := int64(0)
	if h != nil {
		oldest = h.oldestZxid()
	}
	w.lostLocked(c, zxid, oldest, persistent, recursive)
}

// open opens c's lasting watch k to group's events (openLocked).
func (w *watchRegistry) open(c *conn, k watchKey, group uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.openLocked(c, k, group)
}

// oneShotRestores are the restores of req's one-shot watches, by the group
// of their paths, each to run in its group's turn (restoreSharded; a
// cluster of one shard has one group) under its read lock: it looks at
// the node, and fires the watch if the node changed after the zxid its
// client says it saw (relOf, by list (0 data, 2 child) and index) with an
// event at the group's zxid, or leaves it. A watch whose path's group
// does not run here fires in the meta group's turn, and its client reads
// again.
func (c *conn) oneShotRestores(req *wire.Request, relOf func(list, i int) int64) map[uint64][]func(t *tree.Tree, g *group) {
	out := map[uint64][]func(t *tree.Tree, g *group){}
	s := c.srv
	fire := func(g *group, typ wire.EventType, p string) {
		s.notify(c, g.id, g.fsm.zxid, tree.Event{Type: typ, Path: p}, nil)
	}
	add := func(p string, miss wire.EventType, restore func(t *tree.Tree, g *group)) {
		g, err := s.groupOfPath(p)
		if err != nil { // fired in the meta group's turn, after its replay
			g, restore = s.metaGroup, func(_ *tree.Tree, g *group) { fire(g, miss, p) }
		}
		out[g.id] = append(out[g.id], restore)
	}
	for i, p := range req.DataWatches {
		add(p, wire.EventNodeDataChanged, func(t *tree.Tree, g *group) {
			switch st, err := t.Exists(p); {
			case errors.Is(err, wire.ErrNoNode):
				fire(g, wire.EventNodeDeleted, p)
			case err != nil:
			case st.Mzxid > relOf(0, i):
				fire(g, wire.EventNodeDataChanged, p)
			default:
				s.watches.add(watchData, p, c)
			}
		})
	}
	for _, p := range req.ExistWatches {
		add(p, wire.EventNodeCreated, func(t *tree.Tree, g *group) {
			switch _, err := t.Exists(p); {
			case err == nil:
				fire(g, wire.EventNodeCreated, p)
			case errors.Is(err, wire.ErrNoNode):
				s.watches.add(watchData, p, c)
			}
		})
	}
	for i, p := range req.ChildWatches {
		add(p, wire.EventNodeChildrenChanged, func(t *tree.Tree, g *group) {
			switch st, err := t.Exists(p); {
			case errors.Is(err, wire.ErrNoNode):
				fire(g, wire.EventNodeDeleted, p)
			case err != nil:
			case st.Pzxid > relOf(2, i) || s.isMergedListing(p):
				// (The children of a path spread over the shards change in
				// every shard, and its Stat is the meta group's.)
				fire(g, wire.EventNodeChildrenChanged, p)
			default:
				s.watches.add(watchChild, p, c)
			}
		})
	}
	return out
}
