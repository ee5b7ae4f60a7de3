package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// startTrio runs three members over TCP on loopback, in dirs, each changed
// by mod, and waits until they agree on a leader and have heard each
// other's cards.
func startTrio(t *testing.T, dirs map[uint64]string, mod ...func(*Config)) (map[uint64]*Server, map[uint64]string) {
	t.Helper()
	peers := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	members := map[uint64]*Server{}
	for id := uint64(1); id <= 3; id++ {
		members[id] = startServer(t, dirs[id], append([]func(*Config){func(c *Config) {
			c.ID, c.Peers, c.HTTP = id, peers, "-"
			c.TickInterval = 20 * time.Millisecond
		}}, mod...)...)
	}
	waitFor(t, "a leader every member knows, and every member's card", func() bool {
		for _, s := range members {
			if s.node.Leader() == 0 || s.node.Leader() != members[1].node.Leader() || s.everyMemberKnows(featureShardMap) != nil {
				return false
			}
		}
		return true
	})
	return members, peers
}

// TestASplitOfTheMetaGroupStartsTheNewShardsGroupOnEveryMember splits the
// meta group of three members at "m": every member seeds and starts group
// 1 from the state the split left, the group elects its spread leader and
// takes writes of its keys, the meta group refuses them, an operator
// moves the group's leadership and gives it back, a backup holds both
// groups' states, a member restarted runs the group again from its store, and a
// member added, promoted and removed is added, promoted and removed in
// group 1 too.
func TestASplitOfTheMetaGroupStartsTheNewShardsGroupOnEveryMember(t *testing.T) {
	t.Parallel()
	dirs := map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}
	members, peers := startTrio(t, dirs)
	c := authedSession(t, members[2])
	c.must(wire.Request{Op: wire.OpCreate, Path: "/app", Data: []byte("in the meta group")})
	c.must(wire.Request{Op: wire.OpCreate, Path: "/zoo", Data: []byte("moves")})

	waitFor(t, "/zoo on every member", func() bool {
		for _, s := range members {
			if s.Status().Znodes != members[2].Status().Znodes {
				return false
			}
		}
		return true
	})
	nodes := members[2].Status().Znodes

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	into, err := members[1].splitMeta(ctx, shardmap.Key{Key: "m"})
	if err != nil || into != 1 {
		t.Fatalf("split: group %d, %v", into, err)
	}
	for id, s := range members {
		waitFor(t, "group 1 on every member, led by member 2 (its spread leader)", func() bool {
			g := s.group(1)
			return g != nil && g.node.Leader() == 2
		})
		var data []byte
		s.group(1).fsm.read(func(t *tree.Tree) { data, _, _ = t.Get("/zoo") })
		if string(data) != "moves" {
			t.Errorf("member %d's group 1 starts with /zoo = %q", id, data)
		}
		if m, _ := s.ShardMap(); m.Group(1) == nil || !m.Serves(1, "/zoo", false) {
			t.Errorf("member %d's map after the split: %+v", id, m)
		}
		// Each side dropped what the other serves: the split moved /zoo,
		// it did not copy it; only the map's node is new.
		var zoo, app error
		s.fsm.read(func(t *tree.Tree) { _, zoo = t.Exists("/zoo") })
		s.group(1).fsm.read(func(t *tree.Tree) { _, app = t.Exists("/app") })
		if !errors.Is(zoo, wire.ErrNoNode) || !errors.Is(app, wire.ErrNoNode) {
			t.Errorf("member %d after the split: /zoo in the meta group: %v, /app in group 1: %v; want both gone", id, zoo, app)
		}
		if got := s.Status().Znodes; got != nodes+1 {
			t.Errorf("member %d holds %d znodes over its groups after the split, want %d and the map's node", id, got, nodes)
		}
	}
	c.must(wire.Request{Op: wire.OpCreate, Path: "/app/x"})

	// An operator moves group 1's leadership to member 3, where it stays
	// (the map says so), and then gives it back to the spread.
	if r := c.answer(wire.Request{Op: wire.OpShardLead, Shard: 1, Member: wire.Member{ID: 9}}); r.Err != wire.CodeBadArguments {
		t.Errorf("group 1 led by member 9, of no cluster: %s, want BadArguments", r.Err)
	}
	for _, lead := range []uint64{3, 2} {
		want := lead
		if lead == 2 {
			lead = 0 // back to where the cluster spreads it: member 2
		}
		c.must(wire.Request{Op: wire.OpShardLead, Shard: 1, Member: wire.Member{ID: int64(lead)}})
		for _, s := range members {
			waitFor(t, fmt.Sprintf("group 1 led by member %d", want), func() bool {
				g := s.group(1)
				m, _ := s.ShardMap()
				return g != nil && g.node.Leader() == want && g.node.PreferredLeader() == want && m.Group(1).Leader == lead
			})
		}
	}
	if r := c.answer(wire.Request{Op: wire.OpSnapshot}); r.Err != wire.CodeOK || len(r.Snapshot.Shards) != 1 || r.Snapshot.Shards[0].Group != 1 {
		t.Errorf("a backup of a sharded cluster: %s, shards %+v; want group 1's state too", r.Err, r.Snapshot.Shards)
	}

	propose := func(g uint64, path string) error {
		t.Helper()
		txn := tree.Txn{Type: wire.OpCreate, Path: path, Data: []byte("in group 1"), Time: time.Now().UnixMilli()}
		o := members[3].group(g).node.Propose(ctx, tree.AppendTxn(nil, &txn)).Wait(ctx)
		if o.Err != nil {
			t.Fatalf("a create of %s in group %d: %v", path, g, o.Err)
		}
		return o.Result.(*tree.Result).Err
	}
	if err := propose(1, "/zoo/x"); err != nil {
		t.Fatalf("a create of /zoo/x in group 1: %v", err)
	}
	if err := propose(1, "/app/y"); !errors.Is(err, wire.ErrWrongShard) {
		t.Errorf("a create of /app/y in group 1: %v, want WrongShard", err)
	}
	if err := propose(0, "/zoo/y"); !errors.Is(err, wire.ErrWrongShard) {
		t.Errorf("a create of /zoo/y in the meta group: %v, want WrongShard", err)
	}

	members[3].Close()
	members[3] = startServer(t, dirs[3], func(cfg *Config) { *cfg = members[3].cfg; cfg.DataDir = dirs[3] })
	hasZooX := func(s *Server) func() bool {
		return func() bool {
			g := s.group(1)
			if g == nil {
				return false
			}
			var data []byte
			g.fsm.read(func(t *tree.Tree) { data, _, _ = t.Get("/zoo/x") })
			return bytes.Equal(data, []byte("in group 1"))
		}
	}
	waitFor(t, "group 1 back on member 3 with the write", hasZooX(members[3]))

	// A member added to the sharded cluster, as a learner, then promoted,
	// then removed: group 1 follows the meta group's members each time,
	// and the new member gets group 1's state from its leader.
	peers = maps.Clone(peers) // the members' own stays theirs
	peers[4] = freeAddr(t)
	c.must(wire.Request{Op: wire.OpMemberAdd, Member: wire.Member{ID: 4, Addr: peers[4], Learner: true}})
	members[4] = startServer(t, "", func(cfg *Config) {
		cfg.ID, cfg.Peers, cfg.Join, cfg.HTTP, cfg.TickInterval = 4, peers, true, "-", 20*time.Millisecond
	})
	groupMembers := func(want string) func() bool {
		return func() bool {
			g := members[1].group(1)
			return g != nil && fmt.Sprint(g.node.Members()) == want
		}
	}
	waitFor(t, "member 4 a learner of group 1", groupMembers(fmt.Sprint(append(slices.Clone(members[1].node.Members()[:3]), raftnode.Member{ID: 4, Addr: peers[4], Learner: true}))))
	waitFor(t, "group 1's state on member 4", hasZooX(members[4]))
	c.must(wire.Request{Op: wire.OpMemberPromote, Member: wire.Member{ID: 4}})
	waitFor(t, "member 4 a voter of group 1", func() bool {
		g := members[1].group(1)
		return g != nil && len(g.node.Members()) == 4 && !g.node.Members()[3].Learner
	})
	c.must(wire.Request{Op: wire.OpMemberRemove, Member: wire.Member{ID: 4}})
	waitFor(t, "member 4 out of group 1", func() bool { g := members[1].group(1); return g != nil && len(g.node.Members()) == 3 })
}

// TestASplitAppliedWhileTheGroupsOfAnotherStartIsSeededNotStartedEmpty
// splits the meta group of one member twice, the second time just before
// the member starts the groups of the first split's map: the second
// split's group, which that map already names, must start from its seed
// (a group started empty had no voters on any member, and ran nowhere).
func TestASplitAppliedWhileTheGroupsOfAnotherStartIsSeededNotStartedEmpty(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := authedSession(t, s)
	for _, p := range []string{"/app", "/dog", "/zoo"} {
		c.must(wire.Request{Op: wire.OpCreate, Path: p, Data: []byte(p)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, _ := s.ShardMap()
	first := m.Shards[len(m.Shards)-1].Group + 1 // (-server.shards made some)
	second := first + 1
	var once sync.Once
	splitAgain := make(chan error, 1)
	hook := func() {
		if s.group(first) == nil {
			return
		}
		once.Do(func() {
			_, err := s.splitMeta(ctx, shardmap.Key{Key: "c"})
			splitAgain <- err
		})
	}
	s.beforeMapGroups.Store(&hook)
	if _, err := s.splitMeta(ctx, shardmap.Key{Key: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := <-splitAgain; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both new groups running, led", func() bool {
		g1, g2 := s.group(first), s.group(second)
		return g1 != nil && g2 != nil && g1.node.Leader() != 0 && g2.node.Leader() != 0
	})
	for g, p := range map[uint64]string{first: "/zoo", second: "/dog"} {
		var data []byte
		s.group(g).fsm.read(func(t *tree.Tree) { data, _, _ = t.Get(p) })
		if string(data) != p {
			t.Errorf("group %d holds %s = %q, want it from the split", g, p, data)
		}
	}
	c.must(wire.Request{Op: wire.OpSetData, Path: "/dog", Data: []byte("written in group 2"), Version: -1})
}

// TestASplitOfAShardOtherThanTheMetaGroup splits the meta group of three
// members at "m" (shard 1) and then shard 1 at "t" (shard 2): the map
// records the split first, shard 1 goes on serving its keys until its own
// log splits, every member seeds shard 2 from shard 1's state, the map
// says the split is done, each side holds only its own keys, both take
// writes, and a restarted member runs shard 2 again from its store.
func TestASplitOfAShardOtherThanTheMetaGroup(t *testing.T) {
	t.Parallel()
	dirs := map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}
	members, _ := startTrio(t, dirs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := members[1].SplitShards(ctx, "/", []byte("m")); err != nil {
		t.Fatal(err)
	}
	for _, s := range members {
		waitFor(t, "shard 1 on every member", func() bool { g := s.group(1); return g != nil && g.node.Leader() != 0 })
	}
	c := authedSession(t, members[2])
	for _, p := range []string{"/n", "/n/a", "/x", "/x/b"} {
		c.must(wire.Request{Op: wire.OpCreate, Path: p, Data: []byte(p)})
	}

	m, err := members[3].SplitShards(ctx, "/", []byte("t"))
	if err != nil {
		t.Fatal(err)
	}
	if sh := m.Group(2); sh == nil || sh.SplitFrom != 0 || !m.Serves(2, "/x", false) || !m.Serves(1, "/n", false) {
		t.Fatalf("the map after shard 1's split: %+v", m)
	}
	for id, s := range members {
		// (Led by its preferred member: a write meets no hand-over then.)
		waitFor(t, fmt.Sprintf("shard 2 on member %d", id), func() bool {
			g := s.group(2)
			return g != nil && g.node.Leader() != 0 && g.node.Leader() == s.preferredLeader(2)
		})
		var x, n error
		var data []byte
		s.group(2).fsm.read(func(t *tree.Tree) { data, _, x = t.Get("/x/b"); _, n = t.Exists("/n") })
		if x != nil || string(data) != "/x/b" || !errors.Is(n, wire.ErrNoNode) {
			t.Errorf("member %d's shard 2: /x/b = %q, %v; /n: %v (want /x/b only)", id, data, x, n)
		}
		s.group(1).fsm.read(func(t *tree.Tree) { _, x = t.Exists("/x"); _, n = t.Exists("/n/a") })
		if !errors.Is(x, wire.ErrNoNode) || n != nil {
			t.Errorf("member %d's shard 1 after its split: /x: %v, /n/a: %v (want /n/a only)", id, x, n)
		}
	}
	c.must(wire.Request{Op: wire.OpCreate, Path: "/x/c"})
	c.must(wire.Request{Op: wire.OpCreate, Path: "/n/c"})
	if r := c.answer(wire.Request{Op: wire.OpGetChildren, Path: "/"}); r.Err != wire.CodeOK || fmt.Sprint(r.Children) != "[n x zookeeper]" {
		t.Errorf("ls / after the split: %v %v", r.Err, r.Children)
	}

	members[1].Close()
	members[1] = startServer(t, dirs[1], func(cfg *Config) { *cfg = members[1].cfg; cfg.DataDir = dirs[1] })
	waitFor(t, "shard 2 back on member 1, with /x/c", func() bool {
		g := members[1].group(2)
		if g == nil {
			return false
		}
		var err error
		g.fsm.read(func(t *tree.Tree) { _, err = t.Exists("/x/c") })
		return err == nil
	})
}

// TestAReattachedSessionNeverGoesBackInAShard reattaches a session, whose
// last zxid is of group 1, to a member that is behind in group 1 alone.
// The meta group there is far ahead of that zxid, so a member that judged
// the zxid by its largest over the groups would take the session and
// serve a read from before the client's own write. It must catch group
// 1 up first, or send the client elsewhere.
func TestAReattachedSessionNeverGoesBackInAShard(t *testing.T) {
	t.Parallel()
	members, _ := startTrio(t, map[uint64]string{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := members[1].splitMeta(ctx, shardmap.Key{Key: "m"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "group 1 led on every member", func() bool {
		for _, s := range members {
			if g := s.group(1); g == nil || g.node.Leader() == 0 {
				return false
			}
		}
		return true
	})
	// The lagging member follows in group 1; the writer is another.
	lag := uint64(1)
	if members[lag].group(1).node.IsLeader() {
		lag = 2
	}
	writer := members[lag%3+1]
	members[lag].transport.(*raftnode.TCPTransport).SetGroupFilter(func(g, _, _ uint64) bool { return g != 1 })
	defer members[lag].transport.(*raftnode.TCPTransport).SetGroupFilter(nil)

	w := dialRaw(t, writer)
	made := w.connect(wire.ConnectRequest{})
	if made.Err != wire.CodeOK {
		t.Fatalf("session: %v", made.Err)
	}
	seen := w.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/zoo"})
	if seen.Err != wire.CodeOK {
		t.Fatalf("create /zoo: %v", seen.Err)
	}
	for i := range 40 { // the meta group's zxids pass group 1's
		if r := w.call(wire.Request{Xid: int32(2 + i), Op: wire.OpCreate, Path: fmt.Sprint("/a", i)}); r.Err != wire.CodeOK {
			t.Fatalf("create /a%d: %v", i, r.Err)
		}
	}
	waitFor(t, "the lagging member past the zxid in the meta group", func() bool { return members[lag].maxZxid() >= seen.Zxid })

	reattach := func() (*rawConn, wire.ConnectResponse) {
		r := dialRaw(t, members[lag])
		return r, r.connect(wire.ConnectRequest{SessionID: made.SessionID, Password: made.Password, LastZxidSeen: seen.Zxid})
	}
	if r, got := reattach(); got.Err != wire.CodeNotCaughtUp {
		read := r.call(wire.Request{Xid: 100, Op: wire.OpExists, Path: "/zoo"})
		t.Fatalf("reattached to a member behind in group 1: %v, and /zoo there: %v; want NotCaughtUp", got.Err, read.Err)
	}
	members[lag].transport.(*raftnode.TCPTransport).SetGroupFilter(nil)
	var r *rawConn
	waitFor(t, "the member, caught up, taking the session", func() bool {
		var got wire.ConnectResponse
		r, got = reattach()
		return got.Err == wire.CodeOK
	})
	if read := r.call(wire.Request{Xid: 100, Op: wire.OpExists, Path: "/zoo"}); read.Err != wire.CodeOK {
		t.Errorf("/zoo after the reattach: %v", read.Err)
	}
}
