package tree_test

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func splitTxn(t *testing.T, group uint64, at shardmap.Key, into uint64) tree.Txn {
	t.Helper()
	b, err := shardmap.SplitSpec{Group: group, At: at, Into: into}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return tree.Txn{Type: tree.TxnSplit, Data: b}
}

// seed is a replica of group's tree restored from f's snapshot, as a
// split's new group is seeded (or a replica restarts), at f's zxid.
func (f *fixture) seed(group uint64) *fixture {
	f.t.Helper()
	tr, err := tree.Restore(bytes.NewReader(snapshotBytes(f.t, f.tr)), tree.WithGroup(group))
	if err != nil {
		f.t.Fatal(err)
	}
	return &fixture{t: f.t, tr: tr, zxid: f.zxid}
}

// TestAShardTakesTheWritesOfWhatItServesAndRefusesTheOthers splits the
// meta group's tree at "m" (group 1 takes the names from "m" on), seeds
// group 1's tree from it as a split's replicas are, and splits group 1 in
// turn: each tree then takes only the writes of its own keys, in a multi
// too, on every replica alike, and after a restore.
func TestAShardTakesTheWritesOfWhatItServesAndRefusesTheOthers(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "")
	f.create("/zoo", "")
	if !f.tr.Serves("/zoo", false) {
		t.Fatal("a tree never sharded refuses /zoo")
	}
	m, err := shardmap.New().Partition("/locks")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Encode()
	f.must(tree.Txn{Type: tree.TxnSetShardMap, Data: b, Version: -1})
	f.create("/locks", "")
	f.create("/locks/a", "")
	f.mustFail(tree.Txn{Type: wire.OpCreate, Path: "/locks/q-", Mode: wire.ModePersistentSequential}, wire.ErrBadArguments)
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/a/q-", Mode: wire.ModePersistentSequential})

	f.mustFail(splitTxn(t, 1, shardmap.Key{Key: "m"}, 1), wire.ErrBadArguments) // a split of another group
	f.mustFail(splitTxn(t, 0, shardmap.Key{Key: "m"}, 0), wire.ErrBadArguments) // into a group that exists
	res, events := f.apply(splitTxn(t, 0, shardmap.Key{Key: "m"}, 1))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkEvents(t, events, changed(wire.ShardsPath))
	f.mustFail(splitTxn(t, 0, shardmap.Key{Key: "x"}, 2), wire.ErrWrongShard) // keys it no longer holds

	// The meta group's tree takes /app, /, the system nodes and /locks,
	// and refuses /zoo, in a multi too.
	f.create("/app/x", "")
	f.must(setTxn("/", "root", -1))
	f.mustFail(createTxn("/zoo/x", "", wire.ModePersistent), wire.ErrWrongShard)
	f.mustFail(setTxn("/zoo", "x", -1), wire.ErrWrongShard)
	f.mustFail(deleteTxn("/zoo", -1), wire.ErrWrongShard)
	f.mustFail(checkTxn("/zoo", -1), wire.ErrWrongShard)
	res = f.mustFail(multiTxn(createTxn("/app/y", "", wire.ModePersistent), setTxn("/zoo", "x", -1)), wire.ErrWrongShard)
	if res.Multi[1].Err != wire.CodeWrongShard {
		t.Errorf("the multi's refused op: %v", res.Multi[1].Err)
	}

	for _, tc := range []struct {
		ev   tree.Event
		want bool
	}{
		{deleted("/app/x"), true},
		{deleted("/zoo/x"), false}, // a node group 1 serves now
		{children("/zoo"), false},
		{children("/"), true}, // the shards share the root's children
		{children("/locks"), true},
		{changed(wire.ConfigPath), true},
	} {
		if got := f.tr.ServesEvent(tc.ev); got != tc.want {
			t.Errorf("the meta group's ServesEvent(%v %s) = %v, want %v", tc.ev.Type, tc.ev.Path, got, tc.want)
		}
	}

	// Group 1's replicas start from the tree as the split left it.
	g1 := f.seed(1)
	g1.create("/zoo/x", "")
	g1.create("/m", "")
	for _, txn := range []tree.Txn{createTxn("/app/z", "", wire.ModePersistent), setTxn("/", "x", -1),
		setTxn(wire.ConfigPath, "x", -1), createTxn("/locks/b", "", wire.ModePersistent)} {
		g1.mustFail(txn, wire.ErrWrongShard)
	}
	g1.must(splitTxn(t, 1, shardmap.Key{Key: "t"}, 2))
	g1.mustFail(createTxn("/zoo/y", "", wire.ModePersistent), wire.ErrWrongShard)
	g1.create("/p", "")

	// A restore keeps what the tree serves.
	again := g1.seed(1).tr
	for path, want := range map[string]bool{"/p": true, "/zoo": false, "/app": false, "/": false} {
		if got := again.Serves(path, false); got != want {
			t.Errorf("group 1 after a restore: Serves(%s) = %v, want %v", path, got, want)
		}
	}
	if m, ok := again.ShardMap(); !ok || m.Group(2) == nil || m.Group(1).Epoch.Range != 3 {
		t.Errorf("group 1's map after its split and a restore: %+v", m)
	}
	if _, ok := f.tr.ShardMap(); !ok {
		t.Error("the meta group's tree holds no map after its split")
	}
	if data, _, err := f.tr.Get(wire.ShardsPath); err != nil {
		t.Error(err)
	} else if m, err := shardmap.Decode(data); err != nil || m.Group(1) == nil || m.Group(2) != nil {
		t.Errorf("the meta group's map node: %+v, %v; want shards 0 and 1", m, err)
	}
}

// TestAStubMakesTheParentsAShardLacksAndNothingElse: a shard's tree gets
// a partitioned parent made after its split as a stub, with the ACL
// given, and takes no stub of what it serves; the parent's ACL and
// existence then stay.
func TestAStubMakesTheParentsAShardLacksAndNothingElse(t *testing.T) {
	m, err := shardmap.New().Partition("/q")
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.Split(0, shardmap.Key{Space: "/q", Key: shardmap.HashKey(1 << 63)}, 1); err != nil {
		t.Fatal(err)
	}
	b, _ := m.Encode()
	f := newFixture(t)
	f.must(tree.Txn{Type: tree.TxnSetShardMap, Data: b, Version: -1})
	g1 := f.seed(1)
	acl := []wire.ACL{{Perms: wire.PermRead | wire.PermCreate, Scheme: "world", ID: "anyone"}}
	high := "/q/" + func() string {
		for i := 0; ; i++ {
			if name := fmt.Sprint("n", i); shardmap.Hash(name) >= 1<<63 {
				return name
			}
		}
	}()
	g1.mustFail(createTxn(high, "", wire.ModePersistent), wire.ErrNoNode)
	g1.mustFail(tree.Txn{Type: tree.TxnStub, Ops: []tree.Txn{{Path: "/q", ACL: acl}, {Path: high}}}, wire.ErrBadArguments)
	stub := tree.Txn{Type: tree.TxnStub, Ops: []tree.Txn{{Path: "/q", ACL: acl}}}
	got, err := tree.DecodeTxn(tree.AppendTxn(nil, &stub))
	if err != nil || got.Type != tree.TxnStub || len(got.Ops) != 1 || got.Ops[0].Path != "/q" {
		t.Fatalf("a stub through the codec: %+v, %v", got, err)
	}
	g1.must(got)
	g1.must(got) // again: what exists stays
	if a, _, err := g1.tr.ACL("/q"); err != nil || !reflect.DeepEqual(a, acl) {
		t.Errorf("the stub's ACL: %v, %v", a, err)
	}
	g1.create(high, "")
	f.create("/q", "")
	f.mustFail(tree.Txn{Type: wire.OpSetACL, Path: "/q", ACL: acl, Version: -1}, wire.ErrBadArguments)
	f.mustFail(deleteTxn("/q", -1), wire.ErrBadArguments)
}

// TestAQuotaBelowAPartitionedParentCountsInItsChildsShard spreads /q's
// hashes over the meta group and group 1: a quota on a child of /q lives
// and counts in the child's shard (its directory /zookeeper/quota/q a stub
// there), a quota on /q itself is refused, the directory
// stays, and a split that would spread a quota's subtree is refused.
func TestAQuotaBelowAPartitionedParentCountsInItsChildsShard(t *testing.T) {
	name := func(high bool) string {
		for i := 0; ; i++ {
			if n := fmt.Sprint("n", i); shardmap.Hash(n) >= 1<<63 == high {
				return n
			}
		}
	}
	low, high := "/q/"+name(false), "/q/"+name(true)
	m, err := shardmap.New().Partition("/q")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	f.create("/q", "")
	f.create("/app", "")
	f.setQuota("/app", limitsText(map[string]int64{"N": 5})) // one of no partitioned parent

	// Before /q's hashes are spread, a quota on /q counts all of it; a
	// split of its hashes would leave it counting half.
	one := newFixture(t)
	one.create("/q", "")
	b, _ := m.Encode()
	one.must(tree.Txn{Type: tree.TxnSetShardMap, Data: b, Version: -1})
	one.setQuota("/q", limitsText(map[string]int64{"n": 10}))
	one.mustFail(splitTxn(t, 0, shardmap.Key{Space: "/q", Key: shardmap.HashKey(1 << 63)}, 1), wire.ErrBadArguments)
	// Nor may a split of the top-level names leave a quota over a
	// partitioned parent's ancestor, which its children do not follow.
	one.create("/app", "")
	one.setQuota("/app", limitsText(map[string]int64{"n": 10}))
	withApp, err := m.Partition("/app/locks")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = withApp.Encode()
	one.must(tree.Txn{Type: tree.TxnSetShardMap, Data: b, Version: 0})
	one.mustFail(splitTxn(t, 0, shardmap.Key{Key: "m"}, 1), wire.ErrBadArguments)

	if m, err = m.Split(0, shardmap.Key{Space: "/q", Key: shardmap.HashKey(1 << 63)}, 1); err != nil {
		t.Fatal(err)
	}
	b, _ = m.Encode()
	f.must(tree.Txn{Type: tree.TxnSetShardMap, Data: b, Version: -1})
	g1 := f.seed(1)

	f.create(low, "")
	f.setQuota(low, limitsText(map[string]int64{"N": 2})) // /zookeeper/quota/q made here
	f.create(low+"/a", "")
	f.mustFail(createTxn(low+"/b", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	f.mustFail(createTxn(quotas.LimitPath("/q"), limitsText(map[string]int64{"n": 10}), wire.ModePersistent), wire.ErrBadArguments)
	f.mustFail(tree.Txn{Type: wire.OpCreate, Path: "/zookeeper/quota/q/s-", Mode: wire.ModePersistentSequential}, wire.ErrBadArguments)
	f.mustFail(deleteTxn("/zookeeper/quota/q", -1), wire.ErrNotEmpty)
	f.mustFail(tree.Txn{Type: wire.OpSetACL, Path: "/zookeeper/quota/q", ACL: wire.OpenACL, Version: -1}, wire.ErrBadArguments)

	g1.create(high, "")
	g1.mustFail(createTxn("/zookeeper/quota/q/"+name(true), "", wire.ModePersistent), wire.ErrNoNode)
	g1.must(tree.Txn{Type: tree.TxnStub, Ops: []tree.Txn{{Path: "/zookeeper/quota/q", ACL: wire.OpenACL}}})
	g1.setQuota(high, limitsText(map[string]int64{"N": 2}))
	g1.create(high+"/a", "")
	g1.mustFail(createTxn(high+"/b", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	g1.mustFail(createTxn(quotas.StatPath(low), "", wire.ModePersistent), wire.ErrWrongShard)
	if got := g1.usage(high); got != "count=2,bytes=0" {
		t.Errorf("the usage of %s in group 1: %q", high, got)
	}
	checkUsage(t, f.tr)
	checkUsage(t, g1.tr)
}

// TestPruneDropsWhatAnotherShardServes splits the meta group's tree at
// "m", with /locks and /svc/locks partitioned, and prunes both sides: each
// keeps only what it serves, /zookeeper, and the way to each partitioned
// parent; a session's ephemerals and the counts follow, nothing fires, a
// snapshot taken before the prune still holds everything, and each pruned
// tree restores from its own snapshot (its digest kept up).
func TestPruneDropsWhatAnotherShardServes(t *testing.T) {
	f := newFixture(t)
	f.openSession(7)
	for _, p := range []string{"/app", "/app/x", "/locks", "/locks/a", "/svc", "/svc/other", "/svc/locks", "/zoo"} {
		f.create(p, "data")
	}
	f.must(ephemeralTxn("/zoo/e", 7))
	f.must(ephemeralTxn("/app/e", 7))
	f.create("/zookeeper/quota/zoo", "")
	f.create("/zookeeper/quota/zoo/zookeeper_limits", "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
	m, err := shardmap.New().Partition("/locks")
	if err == nil {
		m, err = m.Partition("/svc/locks")
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Encode()
	f.must(tree.Txn{Type: tree.TxnSetShardMap, Data: b, Version: -1})
	f.create("/svc/locks/k", "")
	if f.tr.Prune() != 0 {
		t.Fatal("a tree of one shard pruned something")
	}
	f.must(splitTxn(t, 0, shardmap.Key{Key: "m"}, 1))
	seed := f.tr.Freeze() // what a split's new group is seeded with
	defer seed.Release()

	all := []string{"/app", "/app/x", "/app/e", "/locks", "/locks/a", "/svc", "/svc/other", "/svc/locks", "/svc/locks/k", "/zoo", "/zoo/e",
		wire.ConfigPath, wire.ShardsPath, "/zookeeper/quota/zoo/zookeeper_limits"}
	before, sizeBefore := f.tr.Count(), f.tr.DataSize()
	if n := f.tr.Prune(); n != 5 || f.tr.Count() != before-5 {
		t.Fatalf("the meta group's prune dropped %d nodes (count %d of %d), want /svc/other, /zoo, /zoo/e and /zoo's quota's two", n, f.tr.Count(), before)
	}
	keep := map[string]bool{"/app": true, "/app/x": true, "/app/e": true, "/locks": true, "/locks/a": true, "/svc": true, "/svc/locks": true, "/svc/locks/k": true, wire.ConfigPath: true, wire.ShardsPath: true}
	for _, p := range all {
		if got := f.exists(p); got != keep[p] {
			t.Errorf("meta group after the prune: %s exists = %v, want %v", p, got, keep[p])
		}
	}
	if eph := f.tr.Ephemerals(7); len(eph) != 1 || eph[0] != "/app/e" {
		t.Errorf("the session's ephemerals in the meta group: %v, want /app/e", eph)
	}

	var snap bytes.Buffer
	if err := seed.WriteSnapshot(&snap, nil); err != nil {
		t.Fatal(err)
	}
	one, err := tree.Restore(bytes.NewReader(snap.Bytes()), tree.WithGroup(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Ephemerals(7)) != 2 {
		t.Fatalf("the seed lacks what the meta group dropped: ephemerals %v", one.Ephemerals(7))
	}
	if n := one.Prune(); n != 5 {
		t.Errorf("group 1's prune dropped %d nodes, want /app, /app/x, /app/e, /locks/a and /svc/locks/k", n)
	}
	keep = map[string]bool{"/locks": true, "/svc": true, "/svc/other": true, "/svc/locks": true, "/zoo": true, "/zoo/e": true,
		wire.ConfigPath: true, wire.ShardsPath: true, "/zookeeper/quota/zoo/zookeeper_limits": true}
	g1 := &fixture{t: t, tr: one, zxid: f.zxid}
	for _, p := range all {
		if got := g1.exists(p); got != keep[p] {
			t.Errorf("group 1 after the prune: %s exists = %v, want %v", p, got, keep[p])
		}
	}
	if eph := one.Ephemerals(7); len(eph) != 1 || eph[0] != "/zoo/e" {
		t.Errorf("the session's ephemerals in group 1: %v, want /zoo/e", eph)
	}
	metaNodes, metaSize := f.tr.Served()
	oneNodes, oneSize := one.Served()
	if metaNodes+oneNodes != before || metaSize+oneSize != sizeBefore {
		t.Errorf("the shards serve %d + %d nodes of %d + %d bytes, want the %d nodes of %d bytes of the tree before the split",
			metaNodes, oneNodes, metaSize, oneSize, before, sizeBefore)
	}
	for group, tr := range []*tree.Tree{f.tr, one} {
		name := fmt.Sprintf("group %d", group)
		again, err := tree.Restore(bytes.NewReader(snapshotBytes(t, tr)), tree.WithGroup(uint64(group)))
		if err != nil {
			t.Fatalf("%s's snapshot after its prune: %v", name, err)
		}
		if again.Count() != tr.Count() || again.Digest() != tr.Digest() || again.Prune() != 0 {
			t.Errorf("%s restored: %d nodes, digest %x; want %d, %x, and nothing more to prune", name, again.Count(), again.Digest(), tr.Count(), tr.Digest())
		}
	}
	// /zoo's quota came along, and counts there.
	g1.must(createTxn("/zoo/f", "", wire.ModePersistent))
	g1.mustFail(createTxn("/zoo/g", "", wire.ModePersistent), wire.ErrQuotaExceeded)
}

// A shard's tree keeps only its part of the map once pruned (shardmap's
// For): after the meta group split three times, the last new shard's
// tree holds a map of two shards, its own and the meta group's with every
// other key, in its node too, takes the writes of its keys and refuses
// the others, and a snapshot of it restores to the same digest with
// nothing more to prune. Its own split, in turn, seeds a tree that keeps
// its own part likewise.
func TestAShardsTreeKeepsOnlyItsPartOfTheMap(t *testing.T) {
	f := newFixture(t)
	for _, at := range []struct {
		key  string
		into uint64
	}{{"m", 1}, {"f", 2}, {"c", 3}} {
		f.must(splitTxn(t, 0, shardmap.Key{Key: at.key}, at.into))
	}
	seed := snapshotBytes(t, f.tr)
	three, err := tree.Restore(bytes.NewReader(seed), tree.WithGroup(3))
	if err != nil {
		t.Fatal(err)
	}
	three.Prune()
	m, _ := three.ShardMap()
	if len(m.Shards) != 2 || m.Group(3) == nil || m.Validate() != nil {
		t.Fatalf("group 3's map after its prune: %+v (%v)", m, m.Validate())
	}
	g3 := &fixture{t: t, tr: three, zxid: f.zxid}
	if data, _, err := three.Get(wire.ShardsPath); err != nil || !bytes.Equal(data, mustEncode(t, m)) {
		t.Errorf("group 3's map node holds %d bytes, not its own part of the map", len(data))
	}
	g3.must(createTxn("/d", "", wire.ModePersistent))
	g3.mustFail(createTxn("/g", "", wire.ModePersistent), wire.ErrWrongShard)
	g3.mustFail(createTxn("/b", "", wire.ModePersistent), wire.ErrWrongShard)
	again, err := tree.Restore(bytes.NewReader(snapshotBytes(t, three)), tree.WithGroup(3))
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest() != three.Digest() || again.Prune() != 0 || again.Digest() != three.Digest() {
		t.Errorf("group 3 restored: digest %x, want %x and nothing to prune", again.Digest(), three.Digest())
	}

	g3.must(splitTxn(t, 3, shardmap.Key{Key: "e"}, 4))
	four, err := tree.Restore(bytes.NewReader(snapshotBytes(t, g3.tr)), tree.WithGroup(4))
	if err != nil {
		t.Fatal(err)
	}
	four.Prune()
	three.Prune()
	for g, tr := range map[uint64]*tree.Tree{3: three, 4: four} {
		if m, _ := tr.ShardMap(); len(m.Shards) != 2 || m.Group(g) == nil {
			t.Errorf("group %d's map after group 3's split: %+v", g, m)
		}
	}
	if m, _ := three.ShardMap(); m.Group(3).Holds(shardmap.Key{Key: "e"}) || !m.Group(3).Holds(shardmap.Key{Key: "d"}) {
		t.Errorf("group 3 after its split holds %+v, want [c, e)", m.Group(3).Ranges)
	}
}

func mustEncode(t *testing.T, m *shardmap.Map) []byte {
	t.Helper()
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
