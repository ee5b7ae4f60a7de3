package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// The raft groups of a sharded cluster other than the meta group
// (docs/scale-out.md): every member carries every shard, so a member runs
// one group per shard of the map, each with its own fsm, over the store
// and the peer transport of the meta group's node. A group starts when the
// map names it: at the member's start, for the shards it had; when a split
// applies, once the member has seeded the new group with the state the
// split left (raftnode's SeedGroup), the same on every replica. A member
// that missed the seed (it was down, or the seed failed) starts the group
// empty, as a member that joins, and the group's leader sends it a
// snapshot.

// group is one of them.
type group struct {
	id   uint64
	node *raftnode.Node
	fsm  *fsm
}

// groups are a member's running groups besides the meta group, and the
// seeds of the splits applied and not yet started.
type groups struct {
	// mu guards running, seeds and mapChanged. An fsm's apply takes it
	// under the fsm's mu (onSplit), so nothing takes an fsm's mu under it.
	mu      sync.Mutex
	running map[uint64]*group
	seeds   []seed
	// mapChanged says that the meta group's map changed, or a snapshot
	// replaced a group's state: the map may name groups that do not run
	// here yet, and other preferred leaders.
	mapChanged bool
	wake       chan struct{} // a seed waits
	sweep      chan struct{} // the meta group closed a session (sweepShardSessions)
}

// seed is a new group to seed and start: a split applied at index.
type seed struct {
	split shardmap.SplitSpec
	index uint64
	write func(io.Writer) error
}

// onSplit takes a split the meta group or a shard applied (fsm.onSplit),
// for runGroups. It runs on that group's apply goroutine under the fsm's
// lock, and must not wait on the member's other groups.
func (s *Server) onSplit(sp shardmap.SplitSpec, index uint64, write func(io.Writer) error) {
	s.tellGroups(func(g *groups) { g.seeds = append(g.seeds, seed{sp, index, write}) })
}

// mapChanged has runGroups start the groups of the map that do not run
// here, and give each group its preferred leader: after the meta group's
// map changed, or a snapshot replaced a group's state (this member
// joined, or fell behind past a split, and holds no seed of the new
// groups: they start empty, and their leaders send them their state).
func (s *Server) mapChanged() {
	s.tellGroups(func(g *groups) { g.mapChanged = true })
}

// tellGroups records, with note, work for runGroups, and wakes it.
func (s *Server) tellGroups(note func(*groups)) {
	s.groups.mu.Lock()
	note(&s.groups)
	s.groups.mu.Unlock()
	select {
	case s.groups.wake <- struct{}{}:
	default:
	}
}

// startMapGroups starts the groups of the map the member has that do not
// run here: before it takes clients, so that a request to a shard finds
// its group running, and after the map changes.
func (s *Server) startMapGroups() {
	m, _ := s.ShardMap()
	for _, sh := range m.Shards {
		if sh.Group == shardmap.MetaGroup || s.group(sh.Group) != nil || s.seedQueued(sh.Group) {
			// A split's seed is queued before its map can be read
			// (fsm.onSplit): runGroups seeds the group next.
			continue
		}
		if sh.SplitFrom != 0 {
			// Being split off: its group starts from the seed its split
			// leaves, not empty, unless it was seeded already.
			if held, err := s.node.Store().HoldsGroup(sh.Group); err != nil || !held {
				continue
			}
		}
		s.startGroup(sh.Group)
	}
}

// seedQueued says whether a seed of group g waits for runGroups.
func (s *Server) seedQueued(g uint64) bool {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	return slices.ContainsFunc(s.groups.seeds, func(sd seed) bool { return sd.split.Into == g })
}

// runGroups seeds and starts the groups of the splits applied, until the
// server stops.
func (s *Server) runGroups() {
	defer s.wg.Done()
	for {
		s.groups.mu.Lock()
		seeds, changed := s.groups.seeds, s.groups.mapChanged
		s.groups.seeds, s.groups.mapChanged = nil, false
		s.groups.mu.Unlock()
		for _, sd := range seeds { // first: a split's seed comes before its map's change (fsm.apply)
			s.seedGroup(sd)
		}
		if changed {
			if hook := s.beforeMapGroups.Load(); hook != nil {
				(*hook)()
			}
			s.startMapGroups()
			s.preferLeaders()
		}
		select {
		case <-s.stopc:
			return
		case <-s.groups.wake:
		}
	}
}

// seedGroup seeds the group of a split with the state the split left, if
// the member holds nothing of it yet, and starts it.
func (s *Server) seedGroup(sd seed) {
	g := sd.split.Into
	if s.group(g) != nil {
		// A split applied again as the log replays after a restart: the
		// group was seeded then, and runs from its store.
		_ = sd.write(failingWriter{})
		return
	}
	wrote := false // the writer is called once, whatever happens
	err := s.node.Store().SeedGroup(g, sd.index, sd.split.Voters, func(w io.Writer) error {
		wrote = true
		return sd.write(w)
	})
	if !wrote {
		_ = sd.write(failingWriter{})
	}
	switch {
	case err == nil:
		s.log.Info("seeded a new shard's group from the split", zap.Uint64("group", g), zap.Uint64("from", sd.split.Group), zap.Uint64("index", sd.index))
	case errors.Is(err, raftnode.ErrGroupHoldsLog):
		// A split applied again after a restart: seeded then.
	default:
		s.log.Error("cannot seed a new shard's group; it catches up from the others", zap.Uint64("group", g), zap.Error(err))
	}
	s.startGroup(g)
	if gr := s.group(g); err == nil && gr != nil && gr.fsm.history != nil {
		// (Its history starts at the seed: the group restored it.)
		if err := gr.fsm.history.seededAt(int64(sd.index)); err != nil {
			s.log.Error("cannot record where a new shard's history starts", zap.Uint64("group", g), zap.Error(err))
		}
	}
}

// failingWriter is given to a snapshot writer that is not needed after
// all, so that it lets go of what it holds.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("not needed") }

// startGroup starts group g on this member, over the meta group's store
// and transport, if it does not run yet. It joins its group: a group the
// member has not been seeded with waits for its leader's snapshot. Only
// New (startMapGroups) and then runGroups call it, so no two start one
// group; the requests that look the group up meanwhile do not wait for
// its restore.
func (s *Server) startGroup(g uint64) {
	if s.group(g) != nil {
		return
	}
	cfg := &s.cfg
	f := newFSM(s.log.Named(fmt.Sprint("g", g)), s.watches, session.NewTable(cfg.MinSessionTimeout, cfg.MaxSessionTimeout), cfg.MaxDataSize, cfg.LockHistory, g)
	f.onSplit = s.onSplit
	// What waits on a lock's queue or on nodes (the HTTP lock API's waits,
	// long polls and streams, the tree API's) wakes as this shard's change
	// too, and its locks count in the lock metrics.
	f.lockChanged, f.nodeChanged = s.lockWatch.changed, s.nodeWatch.changedBy
	f.locks.Observe = s.lockMetrics.observer()
	f.onRestore = func() {
		s.mapChanged() // it may have passed a split of its own
		s.lockWatch.changed(nil)
		s.nodeWatch.changed(nil)
	}
	// Its watch history, of its own events and zxids, in the meta group's
	// history's store.
	var err error
	if f.history, err = s.fsm.history.shard(g, s.log.Named(fmt.Sprint("history.g", g))); err != nil {
		s.log.Error("cannot open a shard's watch history; its lasting watches cannot resume", zap.Uint64("group", g), zap.Error(err))
		f.history = nil
	}
	rc := raftnode.Config{
		// A single member seeds its groups itself, and leads them at once.
		ID: cfg.ID, Store: s.node.Store(), Group: g, Join: s.transport != nil,
		TickInterval: cfg.TickInterval, ElectionTicks: cfg.ElectionTicks, HeartbeatTicks: cfg.HeartbeatTicks,
		SnapshotEvery: cfg.SnapshotEvery, CatchUpEntries: cfg.CatchUpEntries, SnapshotBytes: cfg.SnapshotBytes,
		ResendWindow: cfg.RequestTimeout + 2*time.Second,
		Logger:       s.log.Named(fmt.Sprint("raft.g", g)),
		Quiesce:      true,
	}
	s.memory.raftConfig(&rc)
	if s.transport != nil {
		rc.Peers, rc.Transport = cfg.Peers, s.transport.Group(g)
		rc.PreferredLeader = s.preferredLeader(g)
	}
	n, err := raftnode.Start(rc, f)
	if err != nil {
		s.log.Error("cannot start a shard's group", zap.Uint64("group", g), zap.Error(err))
		f.history.close()
		return
	}
	if s.transport != nil {
		s.transport.AttachGroup(g, n)
	}
	s.groups.mu.Lock()
	s.groups.running[g] = &group{id: g, node: n, fsm: f}
	s.groups.mu.Unlock()
	s.log.Info("started a shard's group", zap.Uint64("group", g), zap.Uint64("applied", n.Applied()))
}

// spreadLeader is the member group g's leadership goes to: the voters
// take the groups in turn, so that each member leads about as many.
func spreadLeader(g uint64, members []raftnode.Member) uint64 {
	vs := voters(members)
	if len(vs) == 0 {
		return 0
	}
	return vs[g%uint64(len(vs))]
}

// voters are the ids of members' voters, sorted.
func voters(members []raftnode.Member) []uint64 {
	var ids []uint64
	for _, m := range members {
		if !m.Learner {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// stopGroups stops the member's groups besides the meta group, before the
// meta group's node, whose store they use.
func (s *Server) stopGroups() error {
	s.groups.mu.Lock()
	running := s.groups.running
	s.groups.running = map[uint64]*group{}
	s.groups.mu.Unlock()
	var errs []error
	for g, gr := range running { // without the lock: an apply goroutine may want it (onSplit)
		if s.transport != nil {
			s.transport.AttachGroup(g, nil)
		}
		errs = append(errs, gr.node.Stop(), gr.fsm.history.close())
	}
	return errors.Join(errs...)
}

// group is the running group g: the meta group's for 0, nil if the member
// does not run it.
func (s *Server) group(g uint64) *group {
	if g == shardmap.MetaGroup {
		return s.metaGroup
	}
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	return s.groups.running[g]
}

// SplitShards is `arbor shards split` for a program that runs the server:
// the keys of space ("/" for the top-level names, else a partitioned
// parent) of the shard that holds at, from at on (at empty: the middle of
// the meta group's hashes of the parent), move to a new shard. It returns
// the map as the split left it, once the new shard runs on this member.
func (s *Server) SplitShards(ctx context.Context, space string, at []byte) (*shardmap.Map, error) {
	if _, _, err := s.splitShards(ctx, space, at); err != nil {
		return nil, err
	}
	m, _ := s.ShardMap()
	return m, nil
}

// splitShards makes the keys of space ("/" for the top-level names, else
// a partitioned parent) of the shard that holds at, from at on, a new
// shard (at empty: the middle of the meta group's hashes of the parent),
// and returns the map's node as the split left it, once the new shard
// runs here.
func (s *Server) splitShards(ctx context.Context, space string, at []byte) ([]byte, wire.Stat, error) {
	if space == "/" {
		space = ""
	}
	m, _ := s.ShardMap()
	group := m.SplitGroup(shardmap.Key{Space: space, Key: string(at)})
	key, err := m.SplitKey(group, space, string(at))
	if err != nil {
		return nil, wire.Stat{}, wire.Errorf(wire.CodeBadArguments, "%v", err)
	}
	var into uint64
	if group != shardmap.MetaGroup {
		into, err = s.splitOff(ctx, group, key)
	} else if into, err = s.splitMeta(ctx, key); errors.Is(err, wire.ErrWrongShard) {
		err = wire.Errorf(wire.CodeBadArguments, "the meta group does not hold %s", key)
	}
	if err != nil {
		return nil, wire.Stat{}, err
	}
	// Done once the map says so and the new shard runs here, led: the
	// next request for its keys finds it.
	for {
		m, _ := s.ShardMap()
		g := s.group(into)
		if sh := m.Group(into); sh != nil && sh.SplitFrom == 0 && g != nil && g.node.Leader() != 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, wire.Stat{}, wire.Errorf(wire.CodeOperationTimeout, "shard %d is split off shard %d, and does not run here yet: arbor shards list says when", into, group)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var data []byte
	var stat wire.Stat
	s.fsm.read(func(t *tree.Tree) { data, stat, err = t.Get(wire.ShardsPath) })
	return data, stat, err
}

// splitOff splits the keys of shard group, not the meta group, from at
// on into a new shard, whose group it returns: the meta group's map
// records the split first (shardmap.SplitOff: group goes on serving the
// keys), and group's leader then splits its own log (splitIn), seeding the
// new group on every member, and marks the split done.
func (s *Server) splitOff(ctx context.Context, group uint64, at shardmap.Key) (uint64, error) {
	var into uint64
	_, _, err := s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) {
		into = m.Shards[len(m.Shards)-1].Group + 1
		return m.SplitOff(group, at, into)
	})
	select {
	case s.groups.sweep <- struct{}{}: // if this member leads group, it splits it now
	default:
	}
	return into, err
}

// splitMeta splits the meta group's keys from at on into a new shard,
// whose group is the lowest id the map has not used: one txn of the meta
// group, whose tree's map is the cluster's, so that the map and the split
// change together. Every member seeds and starts the new group as it
// applies the split.
func (s *Server) splitMeta(ctx context.Context, at shardmap.Key) (uint64, error) {
	if err := s.everyMemberKnows(featureShardMap); err != nil {
		return 0, err
	}
	if err := s.node.ReadIndex(ctx); err != nil { // the map as of now: the new group's id is the next
		return 0, s.writeError(err)
	}
	m, _ := s.ShardMap()
	into := m.Shards[len(m.Shards)-1].Group + 1
	data, err := shardmap.SplitSpec{Group: shardmap.MetaGroup, At: at, Into: into, Voters: voters(s.node.Members())}.Encode()
	if err != nil {
		return 0, err
	}
	if _, err := s.write(ctx, &tree.Txn{Type: tree.TxnSplit, Data: data, Time: time.Now().UnixMilli()}); err != nil {
		return 0, err
	}
	return into, nil
}
