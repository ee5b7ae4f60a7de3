package server

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// Routing (docs/scale-out.md, "How a request reaches its shard's
// leader"): every member carries every shard, so a member serves a
// request from its own replica of the shard the request's paths are in,
// by the map its meta group has applied: a read from that shard's tree, a
// write proposed to that shard's group, a linearizable read or a sync
// through that group's read index. What has no path (sessions, leases,
// the admin ops) stays with the meta group; the lock listings read every
// shard's lock index (eachShard). A request routed by a map the shard
// has moved on from is refused by the shard (WrongShard) and answered so;
// the client sends it again.

// routingMap is the partition map as the meta group has applied it, nil
// while the cluster is one shard.
func (s *Server) routingMap() *shardmap.Map { return s.routing.Load() }

// refreshRouting reads the map from the meta group's tree, after it
// changed or was restored.
func (s *Server) refreshRouting() {
	var m *shardmap.Map
	s.fsm.read(func(t *tree.Tree) { m, _ = t.ShardMap() })
	if m != nil && len(m.Shards) < 2 {
		m = nil // partitioned parents alone route nothing elsewhere
	}
	s.routing.Store(m)
}

// routeOf is the group that serves req: the one all its paths are in
// (CrossShard when they are in several, as in a multi across shards), or
// the meta group.
func (s *Server) routeOf(req *wire.Request) (uint64, error) {
	m := s.routingMap()
	if m == nil || !routed(req.Op) {
		return shardmap.MetaGroup, nil
	}
	var group uint64
	first := true
	var err error
	for p, sequential := range req.Paths {
		if sequential {
			if err := m.CheckSequential(p); err != nil {
				return 0, err // never served: said before a shard is picked by the prefix's hash
			}
		}
		g := shardmap.MetaGroup
		if sh := m.Shard(p); sh != nil {
			g = sh.Server()
		}
		if !first && g != group {
			err = wire.Errorf(wire.CodeCrossShard, "%s is in shard %d, and the request's other paths in shard %d", p, g, group)
			break
		}
		group, first = g, false
	}
	return group, err
}

// routed reports whether requests of op go to the shard of their paths;
// the others are the meta group's.
func routed(op wire.Op) bool {
	switch op {
	case wire.OpCreate, wire.OpDelete, wire.OpSetData, wire.OpSetACL, wire.OpCheck, wire.OpMulti,
		wire.OpExists, wire.OpGetData, wire.OpGetChildren, wire.OpGetACL, wire.OpGetAllChildrenNumber, wire.OpSync,
		wire.OpLockBreak, wire.OpAddWatch:
		return true
	}
	return false
}

// groupOfTxn is the running group that serves txn, a write the member
// makes itself: the group of its paths for a client-style write (create,
// delete, setData, setACL, check, multi), else the meta group.
func (s *Server) groupOfTxn(txn *tree.Txn) (*group, error) {
	req := wire.Request{Op: txn.Type, Path: txn.Path, Mode: txn.Mode}
	for i := range txn.Ops {
		req.Ops = append(req.Ops, wire.Request{Op: txn.Ops[i].Type, Path: txn.Ops[i].Path, Mode: txn.Ops[i].Mode})
	}
	return s.groupFor(&req)
}

// groupOfPath is the running group whose tree holds path.
func (s *Server) groupOfPath(path string) (*group, error) {
	return s.groupFor(&wire.Request{Op: wire.OpGetData, Path: path})
}

// groupFor is the running group that serves req on this member.
func (s *Server) groupFor(req *wire.Request) (*group, error) {
	g, err := s.routeOf(req)
	if err != nil {
		return nil, err
	}
	gr := s.group(g)
	if gr == nil {
		return nil, wire.Errorf(wire.CodeNoQuorum, "shard %d does not run on this member yet", g)
	}
	return gr, nil
}

// maxZxid is the largest zxid this member applied in any of its groups:
// what a client that reads from several shards has seen at most.
func (s *Server) maxZxid() int64 {
	z := s.fsm.lastZxid()
	for _, g := range s.runningGroups() {
		z = max(z, g.fsm.lastZxid())
	}
	return z
}

// mergedChildren lists the children of path, "/" or a partitioned parent,
// which the meta group holds and whose children are spread over the
// shards: each shard's children it serves, sorted as one list, with the
// meta group's Stat of path and the number of them. The caller holds the
// meta group's read lock (t is its tree).
func (s *Server) mergedChildren(t *tree.Tree, path string) ([]string, wire.Stat, error) {
	st, err := t.Exists(path)
	if err != nil {
		return nil, st, err
	}
	var children []string
	s.eachShard(t, func(t *tree.Tree, _ *locks.Index, serves func(string) bool) {
		names, _, _ := t.Children(path)
		for _, name := range names {
			if serves == nil || serves(childPath(path, name)) {
				children = append(children, name)
			}
		}
	})
	slices.Sort(children)
	st.NumChildren = int32(len(children))
	return children, st, nil
}

// mergedDescendants counts the nodes below path, "/" or a partitioned
// parent, as mergedChildren lists them: each child in the shard that
// serves it, with its own descendants there (or over the shards again, for
// a partitioned child). The caller holds the meta group's read lock.
func (s *Server) mergedDescendants(t *tree.Tree, path string) (int, error) {
	if _, err := t.Exists(path); err != nil {
		return 0, err
	}
	count := 0
	if path == "/" { // every node but the root
		s.eachShard(t, func(t *tree.Tree, _ *locks.Index, _ func(string) bool) {
			n, _ := t.Served()
			count += n
		})
		return count - 1, nil
	}
	var spread []string
	s.eachShard(t, func(t *tree.Tree, _ *locks.Index, serves func(string) bool) {
		names, _, _ := t.Children(path)
		for _, name := range names {
			p := childPath(path, name)
			switch {
			case serves != nil && !serves(p):
			case s.isMergedListing(p):
				spread = append(spread, p)
			default:
				n, _ := t.Descendants(p)
				count += 1 + n
			}
		}
	})
	for _, p := range spread { // outside the shards' locks: the walk takes them again
		n, err := s.mergedDescendants(t, p)
		if err == nil {
			count += 1 + n
		}
	}
	return count, nil
}

// childPath is the path of parent's child name.
func childPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// isMergedListing reports whether a getChildren of path spans shards:
// the root's, a partitioned parent's, and /zookeeper/quota's and a
// partitioned parent's quota directory's (each shard holds the quotas of
// what it serves), with /zookeeper on the way there.
func (s *Server) isMergedListing(path string) bool {
	m := s.routingMap()
	return m != nil && (path == "/" || path == wire.ZooKeeperPath || path == wire.QuotaPath || m.IsPartitioned(path) || m.IsPartitionedQuota(path))
}

// register makes sure group g's tree knows the sessions (or leases) that
// own the ephemerals txn creates, proposing their registration first: a
// shard's tree takes an ephemeral only of a session it knows. The meta
// group keeps the sessions; a shard's copy only owns its ephemerals, and
// goes when the meta group's does (sweepShardSessions). A lease is one
// there too, after its session if it has one, so that its holds there
// are a lease's (in the lock views and history); its deadline there is
// its first, and the meta group's is the one that counts (withLeases).
func (s *Server) register(ctx context.Context, g *group, txn *tree.Txn) error {
	owners := ephemeralOwners(txn)
	s.fsm.read(func(t *tree.Tree) {
		for _, id := range slices.Clone(owners) {
			if l, ok := t.Lease(id); ok && l.Parent != 0 {
				owners = append([]int64{l.Parent}, owners...)
			}
		}
	})
	for _, id := range g.fsm.missingSessions(owners) {
		var ses tree.Session
		var ok bool
		s.fsm.read(func(t *tree.Tree) { ses, ok = t.Session(id) })
		if !ok {
			return wire.ErrSessionExpired
		}
		reg := tree.Txn{Type: tree.TxnCreateSession, Session: id, TimeoutMs: ses.TimeoutMs, Password: ses.Password, Time: time.Now().UnixMilli()}
		if l := ses.Lease; l != nil {
			reg.LeaseTTL, reg.LeaseParent, reg.LeaseOwner = l.TTLMs, l.Parent, l.Owner
		}
		o := g.node.Propose(ctx, tree.AppendTxn(nil, &reg)).Wait(ctx)
		if o.Err != nil {
			return s.writeErrorIn(g, o.Err)
		}
		// BadArguments: registered meanwhile (a session id in use).
		if err := o.Result.(*tree.Result).Err; err != nil && !errors.Is(err, wire.ErrBadArguments) {
			return err
		}
	}
	return nil
}

// missingSessions are those of ids that f's tree does not have.
func (f *fsm) missingSessions(ids []int64) []int64 {
	var missing []int64
	f.read(func(t *tree.Tree) {
		for _, id := range ids {
			if _, ok := t.Session(id); !ok {
				missing = append(missing, id)
			}
		}
	})
	return missing
}

// stubParents makes, in g, the partitioned parents (and their quota
// directories) that txn's creates need and g's tree lacks (one made after
// the split that spread its hashes), with their missing ancestors, each
// with the ACL the meta group gives it now (tree.TxnStub). A parent the
// meta group lacks too is left to the create, which fails on it.
func (s *Server) stubParents(ctx context.Context, g *group, txn *tree.Txn) error {
	m := s.routingMap()
	if m == nil {
		return nil
	}
	var parents []string
	eachOp(txn, func(t *tree.Txn) {
		if p := parent(t.Path); t.Type == wire.OpCreate && (m.IsPartitioned(p) || m.IsPartitionedQuota(p)) && !slices.Contains(parents, p) {
			parents = append(parents, p)
		}
	})
	if len(parents) == 0 {
		return nil
	}
	var need []string // shallowest first
	g.fsm.read(func(t *tree.Tree) {
		for _, p := range parents {
			for i := 1; i <= len(p); i++ {
				if i < len(p) && p[i] != '/' {
					continue
				}
				if a := p[:i]; !slices.Contains(need, a) {
					if _, err := t.Exists(a); err != nil {
						need = append(need, a)
					}
				}
			}
		}
	})
	if len(need) == 0 {
		return nil
	}
	stub := tree.Txn{Type: tree.TxnStub, Time: time.Now().UnixMilli()}
	var missing bool
	s.fsm.read(func(t *tree.Tree) {
		for _, a := range need {
			acl, _, err := t.ACL(a)
			if err != nil {
				missing = true
				return
			}
			stub.Ops = append(stub.Ops, tree.Txn{Path: a, ACL: acl})
		}
	})
	if missing {
		return nil
	}
	o := g.node.Propose(ctx, tree.AppendTxn(nil, &stub)).Wait(ctx)
	if o.Err != nil {
		return s.writeErrorIn(g, o.Err)
	}
	return o.Result.(*tree.Result).Err
}

// prepare readies group g for txn: the sessions that own its ephemerals
// registered, the partitioned parents of its creates stubbed.
func (s *Server) prepare(ctx context.Context, g *group, txn *tree.Txn) error {
	if g.id == shardmap.MetaGroup {
		return nil
	}
	if err := s.register(ctx, g, txn); err != nil {
		return err
	}
	return s.stubParents(ctx, g, txn)
}

// ephemeralOwners are the sessions that own the ephemerals txn creates.
func ephemeralOwners(txn *tree.Txn) []int64 {
	var ids []int64
	eachOp(txn, func(t *tree.Txn) {
		if t.Type == wire.OpCreate && t.Mode.IsEphemeral() && !slices.Contains(ids, t.Session) {
			ids = append(ids, t.Session)
		}
	})
	return ids
}

// eachOp runs fn on txn and on each of a multi's ops.
func eachOp(txn *tree.Txn, fn func(*tree.Txn)) {
	fn(txn)
	for i := range txn.Ops {
		fn(&txn.Ops[i])
	}
}

// sweepShardSessions ends, in every shard this member leads, the sessions
// the meta group no longer has: their ephemerals there go, and their
// watches fire, as they went in the meta group. It runs every second and
// whenever the meta group closes a session (sessionClosed).
func (s *Server) sweepShardSessions() {
	defer s.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.stopc:
			return
		case <-tick.C:
		case <-s.groups.sweep:
		}
		leading := slices.DeleteFunc(s.runningGroups(), func(g *group) bool { return !g.node.IsLeader() })
		if len(leading) == 0 {
			continue
		}
		// Each shard's sessions first, then the meta group as of after
		// that, not as this member applied it: a session is registered in
		// a shard only once the meta group has it, so the meta group read
		// so has every session the shard's list has, but those it ended.
		// (The other way round, a session made and registered between the
		// two reads would be taken for ended.)
		registered := make([][]int64, len(leading))
		for i, g := range leading {
			g.fsm.read(func(t *tree.Tree) {
				for _, ses := range t.Sessions() {
					registered[i] = append(registered[i], ses.ID)
				}
			})
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		if err := s.node.ReadIndex(ctx); err == nil {
			for i, g := range leading {
				s.endSessionsIn(ctx, g, s.fsm.missingSessions(registered[i]))
			}
		}
		for _, g := range leading {
			s.reapIn(ctx, g)
			s.followMembers(ctx, g)
			s.splitIn(ctx, g)
		}
		cancel()
	}
}

// followMembers makes the members of g, a group this member leads, the
// meta group's, one change a round: every member carries every shard, so
// each shard's group follows the cluster's membership changes (a member
// added as a learner, promoted, removed), as the meta group applied them
// here.
func (s *Server) followMembers(ctx context.Context, g *group) {
	want, have := s.node.Members(), g.node.Members()
	find := func(ms []raftnode.Member, id uint64) (raftnode.Member, bool) {
		i := slices.IndexFunc(ms, func(m raftnode.Member) bool { return m.ID == id })
		if i < 0 {
			return raftnode.Member{}, false
		}
		return ms[i], true
	}
	var change []raftnode.MemberChange
	for _, m := range want {
		if h, ok := find(have, m.ID); !ok || h.Learner != m.Learner {
			change = []raftnode.MemberChange{{ID: m.ID, Addr: m.Addr, Learner: m.Learner}}
			break
		}
	}
	for _, h := range have {
		if _, ok := find(want, h.ID); !ok && change == nil {
			change = []raftnode.MemberChange{{ID: h.ID, Remove: true}}
		}
	}
	if change == nil {
		return
	}
	if o := g.node.ChangeMembers(ctx, change, nil); o.Err != nil {
		s.log.Info("a shard's group could not follow the cluster's members yet; the next round tries again",
			zap.Uint64("group", g.id), zap.Uint64("member", change[0].ID), zap.Error(o.Err))
		return
	}
	s.log.Info("a shard's group follows the cluster's members", zap.Uint64("group", g.id), zap.Uint64("member", change[0].ID),
		zap.Bool("learner", change[0].Learner), zap.Bool("removed", change[0].Remove))
}

// changeInShards makes in every shard's group the member changes the
// meta group applied, before the member op answers: the groups would
// follow the cluster's members a change a round (followMembers), and one
// that still counted a removed member, stopped since, among its voters
// could lose its quorum to the next member to go, while a member just
// added would serve no shard until its groups took it. It waits for as
// long as ctx lets it; what is left then is followMembers' to finish.
func (s *Server) changeInShards(ctx context.Context, changes []raftnode.MemberChange) {
	members := s.node.Members()
	for _, ch := range changes {
		if i := slices.IndexFunc(members, func(m raftnode.Member) bool { return m.ID == ch.ID }); i >= 0 {
			ch.Addr = members[i].Addr
		}
		done := func(g *group) bool {
			i := slices.IndexFunc(g.node.Members(), func(m raftnode.Member) bool { return m.ID == ch.ID })
			return ch.Remove && i < 0 || !ch.Remove && i >= 0 && g.node.Members()[i].Learner == ch.Learner
		}
		for _, g := range s.runningGroups() {
			for !done(g) {
				o := g.node.ChangeMembers(ctx, []raftnode.MemberChange{ch}, nil)
				if ctx.Err() != nil {
					s.log.Info("a shard's group has not followed a change of the cluster's members yet; it follows later",
						zap.Uint64("group", g.id), zap.Uint64("member", ch.ID), zap.Error(o.Err))
					return
				}
				if o.Err != nil {
					time.Sleep(20 * time.Millisecond) // another change under way, or a leader change
				}
			}
		}
	}
}

// splitIn carries out, in g, a group this member leads, the splits of g
// the meta group's map records (shardmap.SplitOff): it proposes in g the
// split of each shard being split off it that g's own map does not know
// yet (every replica of g then seeds the new group at the same index, as
// a split of the meta group does), and once the new group runs here with
// a leader, it tells the meta group's map the split is done. A proposer
// that stopped half-way leaves nothing undone: the next round does it.
func (s *Server) splitIn(ctx context.Context, g *group) {
	m := s.routingMap()
	if m == nil {
		return
	}
	for _, sh := range m.Shards {
		if sh.SplitFrom != g.id || len(sh.Ranges) == 0 {
			continue
		}
		// Done in g's own log once g's map no longer holds the split's
		// key (a shard's tree keeps only its own part of the map).
		at := shardmap.Key{Space: sh.Ranges[0].Space, Key: sh.Ranges[0].Start}
		var known bool
		g.fsm.read(func(t *tree.Tree) {
			own, _ := t.ShardMap()
			known = own != nil && (own.Group(g.id) == nil || !own.Group(g.id).Holds(at))
		})
		if !known {
			data, err := shardmap.SplitSpec{Group: g.id, At: at, Into: sh.Group, Voters: voters(s.node.Members())}.Encode()
			if err == nil {
				err = g.proposeAsLeader(ctx, &tree.Txn{Type: tree.TxnSplit, Data: data, Time: time.Now().UnixMilli()})
			}
			if err != nil {
				s.log.Info("could not split a shard as the map says yet; the next round tries again",
					zap.Uint64("group", g.id), zap.Uint64("into", sh.Group), zap.Error(err))
			}
			continue
		}
		if ng := s.group(sh.Group); ng != nil && ng.node.Leader() != 0 {
			group := sh.Group
			if _, _, err := s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.SplitDone(group) }); err != nil {
				s.log.Info("could not record a split as done yet; the next round tries again", zap.Uint64("group", group), zap.Error(err))
			}
		}
	}
}

// reapIn deletes, in g, the containers and TTL nodes due (TxnReap), as the
// meta group's leader does in its own (expiryLoop).
func (s *Server) reapIn(ctx context.Context, g *group) {
	now := time.Now().UnixMilli()
	var due bool
	g.fsm.read(func(t *tree.Tree) { due = len(t.Reapable(now)) > 0 })
	if due {
		_ = g.proposeAsLeader(ctx, &tree.Txn{Type: tree.TxnReap, Time: now}) // the next round tries again
	}
}

// proposeAsLeader proposes txn, a housekeeping txn of g's leader, only
// while this member leads g in the term it read, and returns how it went.
func (g *group) proposeAsLeader(ctx context.Context, txn *tree.Txn) error {
	o := g.node.ProposeAsLeader(ctx, tree.AppendTxn(nil, txn), g.node.Term()).Wait(ctx)
	if o.Err != nil {
		return o.Err
	}
	return o.Result.(*tree.Result).Err
}

// endSessionsIn closes, in g, the sessions ended, which the meta group
// no longer has. (One tree at a time, shard then meta group: a reader that
// holds a shard's lock must not wait for the meta group's, which a listing
// holds while it waits for the shard's, and a writer waiting between would
// stall both.)
func (s *Server) endSessionsIn(ctx context.Context, g *group, ended []int64) {
	for _, id := range ended {
		now := time.Now().UnixMilli()
		how, ok := s.closed.get(id)
		if !ok {
			how = closeHow{end: wire.LockSessionEnded, expired: true} // closed before this member started: as lost
		}
		// The lock-delays its holds there asked for, and its leases'
		// (which its close ends there too), go first, as in the meta
		// group (delayBeforeClose), if it expired.
		var delays []tree.Txn
		if how.expired {
			g.fsm.readLocks(func(t *tree.Tree, x *locks.Index) {
				nodes := t.Ephemerals(id)
				for _, lease := range t.Leases(id) {
					nodes = append(nodes, t.Ephemerals(lease)...)
				}
				delays = s.lockDelays(t, x, nodes, now)
			})
		}
		if len(delays) > 0 {
			txn := tree.Txn{Type: wire.OpMulti, Time: now, Session: id, Ops: delays, Cause: tree.CauseLockDelay, Reason: how.end}
			if err := s.proposeDelays(ctx, g, &txn, g.node.Term()); err != nil {
				s.log.Info("could not end a session in a shard; the next sweep tries again", zap.Uint64("group", g.id), zap.Int64("session", id), zap.Error(err))
				return
			}
		}
		// A close that fails (ended there already, or a lost leadership)
		// is the next sweep's, if there is anything left of it.
		_ = g.proposeAsLeader(ctx, &tree.Txn{Type: tree.TxnCloseSession, Session: id, Time: now, Cause: tree.CauseShardEnd, Reason: how.end})
	}
}

// readShardOf runs fn on the tree and lock index of the group that serves
// path, under its read lock: the meta group's if that group does not run
// here (which then finds nothing of path), and returns the zxid they are
// at. The caller holds no group's lock.
func (s *Server) readShardOf(path string, fn func(t *tree.Tree, x *locks.Index)) int64 {
	f := s.fsm
	if g, err := s.groupOfPath(path); err == nil {
		f = g.fsm
	}
	return f.readLocks(fn)
}

// inShardOf runs fn on the tree of the group that serves path: t, the
// meta group's, whose read lock the caller holds, or another group's,
// under its read lock. It fails if that group does not run here.
func (s *Server) inShardOf(t *tree.Tree, path string, fn func(t *tree.Tree)) error {
	g, err := s.groupOfPath(path)
	if err != nil {
		return err
	}
	if g.id == shardmap.MetaGroup {
		fn(t)
	} else {
		g.fsm.read(fn)
	}
	return nil
}

// ephemerals are the ephemerals of session whose paths start with prefix,
// in every shard, sorted. The caller holds the meta group's read lock (t).
func (s *Server) ephemerals(t *tree.Tree, session int64, prefix string) []string {
	var out []string
	s.eachShard(t, func(t *tree.Tree, _ *locks.Index, serves func(string) bool) {
		for _, p := range t.EphemeralsWithPrefix(session, prefix) {
			if serves == nil || serves(p) {
				out = append(out, p)
			}
		}
	})
	slices.Sort(out)
	return out
}

// runningGroups are the member's groups besides the meta group, by id.
func (s *Server) runningGroups() []*group {
	s.groups.mu.Lock()
	defer s.groups.mu.Unlock()
	out := make([]*group, 0, len(s.groups.running))
	for _, g := range s.groups.running {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *group) int { return cmp.Compare(a.id, b.id) })
	return out
}

// treeCounts are what a member's groups hold together, each group's own
// (tree.Served), read a group at a time.
type treeCounts struct {
	znodes, ephemerals int
	size               int64 // the nodes' DataSize
}

func (s *Server) counts() treeCounts {
	var c treeCounts
	add := func(t *tree.Tree) {
		n, size := t.Served()
		c.znodes, c.size, c.ephemerals = c.znodes+n, c.size+size, c.ephemerals+t.EphemeralCount()
	}
	s.fsm.read(add)
	for _, g := range s.runningGroups() {
		g.fsm.read(add)
	}
	return c
}

// eachShard runs fn on the meta group's tree and lock index (t, whose
// read lock the caller holds) and, on a sharded cluster, on each other
// group's, under its read lock, with serves, which says which paths the
// group serves (nil: all). A group's tree holds, besides its own, the
// nodes on the way to them (the root, the system nodes, partitioned
// parents' stubs), and a shard being split off is its parent's to serve
// until it runs (shardmap's SplitFrom). Locks nest in this
// order only, the meta group's and then a shard's, never the other way
// round: a writer waiting between would stall both.
func (s *Server) eachShard(t *tree.Tree, fn func(t *tree.Tree, x *locks.Index, serves func(path string) bool)) {
	m := s.routingMap()
	if m == nil {
		fn(t, s.fsm.locks, nil)
		return
	}
	serving := func(g uint64) func(string) bool {
		return func(p string) bool { return m.Serves(g, p, false) }
	}
	fn(t, s.fsm.locks, serving(shardmap.MetaGroup))
	for _, g := range s.runningGroups() {
		g.fsm.readLocks(func(gt *tree.Tree, x *locks.Index) { fn(gt, x, serving(g.id)) })
	}
}

// readIndexAll catches every group this member runs up with its leader, a
// read index of each, catchUpWorkers at a time (concurrent callers share
// each group's rounds), and returns the first failure. A shard this
// member knows no leader of fails it: this member may be the one cut off
// from that shard's leader, and its replica behind. (A shard without a
// leader anywhere has lost a majority of its members, which every shard
// shares with the meta group: no member takes a session then anyway.)
func (s *Server) readIndexAll(ctx context.Context) error {
	nodes := []*raftnode.Node{s.node}
	for _, g := range s.runningGroups() {
		nodes = append(nodes, g.node)
	}
	work := make(chan *raftnode.Node)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range min(catchUpWorkers, len(nodes)) {
		wg.Go(func() {
			for n := range work {
				if err := n.ReadIndex(ctx); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	return first
}

// catchUpWorkers bounds the read indexes one reconnect waits for at once.
const catchUpWorkers = 16

// readIndexOf is the linearizable read of req's group, through its node,
// with a failure answered as a write to that group's is (writeErrorIn).
func (s *Server) readIndexOf(ctx context.Context, req *wire.Request) error {
	g, err := s.groupFor(req)
	if err != nil {
		return err
	}
	return s.writeErrorIn(g, g.node.ReadIndex(ctx))
}
