package tree_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestANewTreeHasZooKeepersSystemNodes(t *testing.T) {
	tr := tree.New()
	for _, tc := range []struct {
		path     string
		children []string
		acl      []wire.ACL
	}{
		{"/", []string{"zookeeper"}, wire.OpenACL},
		{wire.ZooKeeperPath, []string{"config", "quota"}, wire.OpenACL},
		{wire.QuotaPath, []string{}, wire.OpenACL},
		{wire.ConfigPath, []string{}, wire.ReadACL},
	} {
		t.Run(tc.path+" is there from the start, made by no txn", func(t *testing.T) {
			data, st, err := tr.Get(tc.path)
			want := wire.Stat{NumChildren: int32(len(tc.children))}
			if err != nil || len(data) != 0 || st != want {
				t.Errorf("Get = %q, %+v, %v; want no data and %+v", data, st, err, want)
			}
			if names, _, _ := tr.Children(tc.path); !reflect.DeepEqual(names, tc.children) {
				t.Errorf("Children = %v, want %v", names, tc.children)
			}
			if acl, _, _ := tr.ACL(tc.path); !reflect.DeepEqual(acl, tc.acl) {
				t.Errorf("ACL = %v, want %v", acl, tc.acl)
			}
		})
	}
	if n := tr.Count(); n != 4 {
		t.Errorf("Count = %d, want 4 (the root and three system nodes)", n)
	}
	if a, b := tree.New().Digest(), tr.Digest(); a != b {
		t.Errorf("two new trees have digests %#x and %#x", a, b)
	}
}

func TestTheRootsFirstSequentialChildIsStillNumberedZero(t *testing.T) {
	f := newFixture(t)
	if p := f.must(createTxn("/s-", "", wire.ModePersistentSequential)).Path; p != "/s-0000000000" {
		t.Errorf("first sequential child of / is %s, want /s-0000000000 (the system nodes move no cversion)", p)
	}
}

// What ZooKeeper 3.9 refuses on its system nodes, and how: a delete of
// one (PrepRequestProcessor's isSpecialPath) is BadArguments whoever asks;
// the rest is their ACLs': /zookeeper and /zookeeper/quota are open,
// /zookeeper/config is world:anyone:r, which the superuser passes.
func TestTheSystemNodesRefuseWhatZooKeeperRefuses(t *testing.T) {
	for _, p := range []string{wire.ZooKeeperPath, wire.QuotaPath, wire.ConfigPath} {
		for _, who := range []struct {
			name string
			ids  []wire.Identity
		}{{"anyone", nobody}, {"the superuser", superID}} {
			t.Run("deleting "+p+" is BadArguments for "+who.name, func(t *testing.T) {
				f := newFixture(t)
				f.mustFail(tree.Txn{Type: wire.OpDelete, Path: p, Version: -1, Identities: who.ids}, wire.ErrBadArguments)
			})
			t.Run("deleting "+p+" in a multi fails the multi for "+who.name, func(t *testing.T) {
				f := newFixture(t)
				res := f.mustFail(multiTxn(createTxn("/x", "", wire.ModePersistent),
					tree.Txn{Type: wire.OpDelete, Path: p, Version: -1, Identities: who.ids}), wire.ErrBadArguments)
				if res.Multi[1].Err != wire.CodeBadArguments {
					t.Errorf("multi results %+v", res.Multi)
				}
			})
		}
	}
	t.Run("anyone may create under /zookeeper and /zookeeper/quota, and delete it again", func(t *testing.T) {
		f := newFixture(t)
		f.create("/zookeeper/mine", "x")
		f.create("/zookeeper/quota/app", "")
		f.must(deleteTxn("/zookeeper/mine", -1))
		f.must(deleteTxn("/zookeeper/quota/app", -1))
	})
	t.Run("creating under /zookeeper/config is NoAuth but for the superuser", func(t *testing.T) {
		f := newFixture(t)
		f.mustFail(tree.Txn{Type: wire.OpCreate, Path: "/zookeeper/config/x", Identities: alice}, wire.ErrNoAuth)
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/zookeeper/config/x", Identities: superID})
	})
	t.Run("setData on /zookeeper/config is NoAuth but for the superuser", func(t *testing.T) {
		f := newFixture(t)
		f.mustFail(tree.Txn{Type: wire.OpSetData, Path: wire.ConfigPath, Data: []byte("x"), Version: -1, Identities: alice}, wire.ErrNoAuth)
		f.must(tree.Txn{Type: wire.OpSetData, Path: wire.ConfigPath, Data: []byte("x"), Version: -1, Identities: superID})
	})
	t.Run("setData on /zookeeper is open, as in ZooKeeper", func(t *testing.T) {
		f := newFixture(t)
		f.must(setTxn(wire.ZooKeeperPath, "x", -1))
	})
}

func TestTxnSetConfigWritesTheConfigNode(t *testing.T) {
	f := newFixture(t)
	f.create("/a", "") // zxid 1
	res, events := f.apply(tree.Txn{Type: tree.TxnSetConfig, Data: []byte("server.1=a:1:2:participant\nversion=2"), Version: -1})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkEvents(t, events, changed(wire.ConfigPath))
	data, st, _ := f.tr.Get(wire.ConfigPath)
	if string(data) != "server.1=a:1:2:participant\nversion=2" || st.Version != 1 || st.Mzxid != 2 || st.Mtime != timeOf(2) || st.Czxid != 0 {
		t.Errorf("/zookeeper/config = %q %+v", data, st)
	}
	if res.Stat != st {
		t.Errorf("result Stat %+v, node's %+v", res.Stat, st)
	}
	if acl, _, _ := f.tr.ACL(wire.ConfigPath); !reflect.DeepEqual(acl, wire.ReadACL) {
		t.Errorf("ACL after a TxnSetConfig: %v", acl)
	}
	t.Run("at a version it does not have, it is BadVersion", func(t *testing.T) {
		f.mustFail(tree.Txn{Type: tree.TxnSetConfig, Data: []byte("y"), Version: 0}, wire.ErrBadVersion)
		f.must(tree.Txn{Type: tree.TxnSetConfig, Data: []byte("y"), Version: 1})
	})
	t.Run("data over the limit is DataTooLarge", func(t *testing.T) {
		f := newFixture(t, tree.WithMaxDataSize(4))
		f.mustFail(tree.Txn{Type: tree.TxnSetConfig, Data: []byte("12345"), Version: -1}, wire.ErrDataTooLarge)
	})
	t.Run("it goes through the txn codec", func(t *testing.T) {
		txn := tree.Txn{Type: tree.TxnSetConfig, Time: 5, Data: []byte("v"), Version: 3}
		got, err := tree.DecodeTxn(tree.AppendTxn(nil, &txn))
		if err != nil || got.Type != tree.TxnSetConfig || string(got.Data) != "v" || got.Version != 3 || got.Time != 5 {
			t.Errorf("DecodeTxn = %+v, %v", got, err)
		}
	})
	t.Run("it is not allowed in a multi", func(t *testing.T) {
		f.mustFail(multiTxn(tree.Txn{Type: tree.TxnSetConfig, Data: []byte("z"), Version: -1}), wire.ErrBadArguments)
	})
}

// A snapshot written before the system nodes existed restores with them,
// made as a new tree makes them: every replica that restores it reaches
// the same tree and digest.
// A snapshot an older version wrote (made here by a tree without the
// system nodes) restores to the tree a new one reaches with the same
// txns: same nodes, Stats, digest, count, data size and snapshot bytes.
func TestAnOlderSnapshotRestoresToTheTreeTheSameTxnsMakeNow(t *testing.T) {
	build := func(tr *tree.Tree, txns []tree.Txn) *tree.Tree {
		for i := range txns {
			tr.Apply(int64(i+1), &txns[i])
		}
		return tr
	}
	cases := map[string][]tree.Txn{}
	f := newFixture(t)
	fillKitchenSink(f, false)
	cases["every kind of node and session"] = f.log
	for seed := range uint64(3) {
		_, txns := randomTree(rand.New(rand.NewPCG(seed, 11)), 400)
		// Txns that write /zookeeper would find it, or not, and part the trees.
		txns = slices.DeleteFunc(txns, func(txn tree.Txn) bool {
			return txn.Type == tree.TxnSetConfig || slices.ContainsFunc(append([]tree.Txn{txn}, txn.Ops...), func(op tree.Txn) bool {
				return strings.HasPrefix(op.Path, wire.ZooKeeperPath)
			})
		})
		cases[fmt.Sprintf("random txns, seed %d", seed)] = txns
	}
	for name, txns := range cases {
		t.Run(name, func(t *testing.T) {
			old := build(tree.NewWithoutSystemNodes(tree.WithMaxDataSize(randMaxData)), txns)
			now := build(tree.New(tree.WithMaxDataSize(randMaxData)), txns)
			restored, snap, err := tree.RestoreWith(bytes.NewReader(snapshotBytes(t, old)), tree.WithMaxDataSize(randMaxData))
			if err != nil {
				t.Fatal(err)
			}
			if snap.Znodes != old.Count() || restored.Count() != old.Count()+systemNodes {
				t.Errorf("the snapshot held %d znodes, restored %d; the old tree has %d", snap.Znodes, restored.Count(), old.Count())
			}
			if diff := dumpTree(now).diff(dumpTree(restored)); diff != "" {
				t.Fatalf("restored, the old tree differs from the new one (new -> restored):\n%s", diff)
			}
			if restored.DataSize() != now.DataSize() {
				t.Errorf("data size %d, want %d", restored.DataSize(), now.DataSize())
			}
			if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, now)) {
				t.Error("the restored tree's snapshot differs from the new tree's")
			}
		})
	}
}

func TestRestoringASnapshotFromBeforeTheSystemNodesAddsThem(t *testing.T) {
	for _, file := range []string{"testdata/snapshot-v1.bin", "testdata/snapshot-v2.bin"} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			a, err := tree.Restore(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			c, err := tree.Restore(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if a.Digest() != c.Digest() {
				t.Errorf("two restores: digests %#x and %#x", a.Digest(), c.Digest())
			}
			for _, p := range []string{wire.ZooKeeperPath, wire.QuotaPath, wire.ConfigPath} {
				if _, st, err := a.Get(p); err != nil || st.Czxid != 0 || st.Version != 0 {
					t.Errorf("%s: %+v, %v", p, st, err)
				}
			}
			if acl, _, _ := a.ACL(wire.ConfigPath); !reflect.DeepEqual(acl, wire.ReadACL) {
				t.Errorf("/zookeeper/config's ACL: %v", acl)
			}
			descendants, _ := a.Descendants("/")
			if a.Count() != descendants+1 {
				t.Errorf("Count %d, Descendants(/) %d", a.Count(), descendants)
			}
			again, err := tree.Restore(bytes.NewReader(snapshotBytes(t, a)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := dumpTree(a).diff(dumpTree(again)); diff != "" {
				t.Errorf("written again and restored, the tree differs:\n%s", diff)
			}
		})
	}
}

func TestTxnSetShardMapWritesTheMapNodeWhichOnlyItWrites(t *testing.T) {
	f := newFixture(t)
	one, _ := shardmap.New().Encode()
	partitioned, err := shardmap.New().Partition("/locks")
	if err != nil {
		t.Fatal(err)
	}
	two, _ := partitioned.Encode()
	f.mustFail(tree.Txn{Type: tree.TxnSetShardMap, Data: one, Version: 0}, wire.ErrNoNode)
	f.mustFail(tree.Txn{Type: tree.TxnSetShardMap, Data: []byte("not a map"), Version: -1}, wire.ErrBadArguments)
	res, events := f.apply(tree.Txn{Type: tree.TxnSetShardMap, Data: one, Version: -1})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkEvents(t, events, created(wire.ShardsPath), children(wire.ZooKeeperPath))
	data, st, _ := f.tr.Get(wire.ShardsPath)
	if !bytes.Equal(data, one) || st.Version != 0 || st.Czxid != f.zxid || res.Stat != st {
		t.Errorf("/zookeeper/shards = %q %+v, result Stat %+v", data, st, res.Stat)
	}
	if acl, _, _ := f.tr.ACL(wire.ShardsPath); !reflect.DeepEqual(acl, wire.ReadACL) {
		t.Errorf("the map's ACL: %v", acl)
	}
	f.mustFail(tree.Txn{Type: tree.TxnSetShardMap, Data: two, Version: -1}, wire.ErrBadVersion)
	f.mustFail(tree.Txn{Type: tree.TxnSetShardMap, Data: two, Version: 1}, wire.ErrBadVersion)
	res, events = f.apply(tree.Txn{Type: tree.TxnSetShardMap, Data: two, Version: 0})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkEvents(t, events, changed(wire.ShardsPath))
	if data, st, _ := f.tr.Get(wire.ShardsPath); !bytes.Equal(data, two) || st.Version != 1 || st.Mzxid != f.zxid {
		t.Errorf("/zookeeper/shards after a change = %q %+v", data, st)
	}

	super := []wire.Identity{{Scheme: tree.SuperScheme, ID: "root"}}
	for _, txn := range []tree.Txn{
		{Type: wire.OpSetData, Path: wire.ShardsPath, Data: one, Version: -1, Identities: super},
		{Type: wire.OpDelete, Path: wire.ShardsPath, Version: -1, Identities: super},
		{Type: wire.OpSetACL, Path: wire.ShardsPath, Version: -1, Identities: super},
		{Type: wire.OpCreate, Path: wire.ShardsPath + "/x", Identities: super},
		multiTxn(createTxn("/ok", "", wire.ModePersistent), tree.Txn{Type: wire.OpSetData, Path: wire.ShardsPath, Data: one, Version: -1}),
	} {
		txn.Identities = super
		f.mustFail(txn, wire.ErrBadArguments)
	}
	if _, err := f.tr.Exists(wire.ShardsPath); err != nil {
		t.Errorf("the map's node after refused writes: %v", err)
	}
	f.must(checkTxn(wire.ShardsPath, 1)) // a check is a read
	t.Run("it is not allowed in a multi", func(t *testing.T) {
		f.mustFail(multiTxn(tree.Txn{Type: tree.TxnSetShardMap, Data: two, Version: 1}), wire.ErrBadArguments)
	})
}
