package tree_test

import (
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestSetDataStat(t *testing.T) {
	f := newFixture(t)
	f.create("/p", "")
	f.create("/p/n", "old")
	f.create("/p/n/kid", "")
	before := f.stat("/p/n")
	parentBefore := f.stat("/p")

	res := f.must(tree.Txn{Type: wire.OpSetData, Path: "/p/n", Data: []byte("brand new"), Version: -1, Time: 999})
	zxid := f.zxid
	st := f.stat("/p/n")
	checks := []struct {
		name      string
		got, want int64
	}{
		{"setData bumps version", int64(st.Version), int64(before.Version) + 1},
		{"setData sets mzxid to the txn's zxid", st.Mzxid, zxid},
		{"setData sets mtime to the txn's time", st.Mtime, 999},
		{"setData leaves czxid alone", st.Czxid, before.Czxid},
		{"setData leaves ctime alone", st.Ctime, before.Ctime},
		{"setData leaves cversion alone", int64(st.Cversion), int64(before.Cversion)},
		{"setData leaves pzxid alone", st.Pzxid, before.Pzxid},
		{"setData leaves NumChildren alone", int64(st.NumChildren), 1},
		{"DataLength follows the new data", int64(st.DataLength), int64(len("brand new"))},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %d, want %d", c.got, c.want)
			}
		})
	}
	t.Run("setData returns the node's new Stat", func(t *testing.T) {
		if res.Stat != st {
			t.Errorf("returned %+v, node has %+v", res.Stat, st)
		}
	})
	t.Run("setData on a child leaves the parent's Stat alone", func(t *testing.T) {
		if got := f.stat("/p"); got != parentBefore {
			t.Errorf("parent Stat %+v -> %+v", parentBefore, got)
		}
	})
	t.Run("setData replaces the data", func(t *testing.T) {
		if data, _, _ := f.tr.Get("/p/n"); string(data) != "brand new" {
			t.Errorf("data = %q", data)
		}
	})
	t.Run("setData with the same data still bumps the version", func(t *testing.T) {
		f.must(setTxn("/p/n", "brand new", -1))
		if v := f.stat("/p/n").Version; v != 2 {
			t.Errorf("version = %d, want 2", v)
		}
	})
	t.Run("setData to empty data makes DataLength 0", func(t *testing.T) {
		f.must(setTxn("/p/n", "", -1))
		if n := f.stat("/p/n").DataLength; n != 0 {
			t.Errorf("DataLength = %d", n)
		}
	})
	t.Run("the root's data can be set", func(t *testing.T) {
		f.must(setTxn("/", "root data", 0))
		if data, st, _ := f.tr.Get("/"); string(data) != "root data" || st.Version != 1 {
			t.Errorf("root = %q, version %d", data, st.Version)
		}
	})
}

func TestDeleteStat(t *testing.T) {
	f := newFixture(t)
	f.create("/p", "parent")
	f.create("/p/a", "")
	f.create("/p/b", "")
	before := f.stat("/p")
	f.must(deleteTxn("/p/a", -1))
	zxid := f.zxid
	st := f.stat("/p")
	checks := []struct {
		name      string
		got, want int64
	}{
		{"a child's delete bumps the parent's cversion", int64(st.Cversion), int64(before.Cversion) + 1},
		{"a child's delete sets the parent's pzxid", st.Pzxid, zxid},
		{"a child's delete leaves the parent's version alone", int64(st.Version), int64(before.Version)},
		{"a child's delete leaves the parent's mzxid alone", st.Mzxid, before.Mzxid},
		{"a child's delete leaves the parent's mtime alone", st.Mtime, before.Mtime},
		{"a child's delete is out of the parent's NumChildren", int64(st.NumChildren), 1},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %d, want %d", c.got, c.want)
			}
		})
	}
	t.Run("a deleted node is gone", func(t *testing.T) {
		if f.exists("/p/a") {
			t.Error("/p/a still exists")
		}
	})
	t.Run("a node created again at a deleted path starts afresh", func(t *testing.T) {
		f.create("/p/a", "again")
		st := f.stat("/p/a")
		if st.Czxid != f.zxid || st.Version != 0 || st.Cversion != 0 {
			t.Errorf("Stat %+v", st)
		}
	})
}

// TestConditionalWrites: setData, delete and check take an expected version;
// -1 matches any.
func TestConditionalWrites(t *testing.T) {
	// The node is at version 2 when the op runs.
	tests := []struct {
		name    string
		op      func(version int32) tree.Txn
		version int32
		want    error
	}{
		{"setData with version -1 always applies", func(v int32) tree.Txn { return setTxn("/n", "x", v) }, -1, nil},
		{"setData with the current version applies", func(v int32) tree.Txn { return setTxn("/n", "x", v) }, 2, nil},
		{"setData with a stale version is BadVersion", func(v int32) tree.Txn { return setTxn("/n", "x", v) }, 1, wire.ErrBadVersion},
		{"setData with a future version is BadVersion", func(v int32) tree.Txn { return setTxn("/n", "x", v) }, 3, wire.ErrBadVersion},
		{"setData with version -2 is BadVersion", func(v int32) tree.Txn { return setTxn("/n", "x", v) }, -2, wire.ErrBadVersion},
		{"delete with version -1 always applies", func(v int32) tree.Txn { return deleteTxn("/n", v) }, -1, nil},
		{"delete with the current version applies", func(v int32) tree.Txn { return deleteTxn("/n", v) }, 2, nil},
		{"delete with a stale version is BadVersion", func(v int32) tree.Txn { return deleteTxn("/n", v) }, 0, wire.ErrBadVersion},
		{"check with version -1 always passes", func(v int32) tree.Txn { return checkTxn("/n", v) }, -1, nil},
		{"check with the current version passes", func(v int32) tree.Txn { return checkTxn("/n", v) }, 2, nil},
		{"check with another version is BadVersion", func(v int32) tree.Txn { return checkTxn("/n", v) }, 5, wire.ErrBadVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.create("/n", "v0")
			f.must(setTxn("/n", "v1", 0))
			f.must(setTxn("/n", "v2", 1))
			if tt.want != nil {
				f.mustFail(tt.op(tt.version), tt.want)
				return
			}
			f.must(tt.op(tt.version))
		})
	}
}

func TestWriteErrors(t *testing.T) {
	const maxData = 16
	setup := func(t *testing.T) *fixture {
		f := newFixture(t, tree.WithMaxDataSize(maxData))
		f.create("/a", "")
		f.create("/a/b", "")
		return f
	}
	tests := []struct {
		name string
		txn  tree.Txn
		want error
	}{
		{"deleting a missing node is NoNode", deleteTxn("/a/missing", -1), wire.ErrNoNode},
		{"deleting under a missing parent is NoNode", deleteTxn("/missing/b", -1), wire.ErrNoNode},
		{"deleting a node with children is NotEmpty", deleteTxn("/a", -1), wire.ErrNotEmpty},
		{"a version mismatch is reported before NotEmpty", deleteTxn("/a", 3), wire.ErrBadVersion},
		{"deleting the root is BadArguments", deleteTxn("/", -1), wire.ErrBadArguments},
		{"deleting the root at its version is BadArguments", deleteTxn("/", 0), wire.ErrBadArguments},
		{"setData of a missing node is NoNode", setTxn("/a/missing", "x", -1), wire.ErrNoNode},
		{"setData over the data limit is refused", setTxn("/a", strings.Repeat("x", maxData+1), -1), wire.ErrDataTooLarge},
		{"check of a missing node is NoNode", checkTxn("/missing", -1), wire.ErrNoNode},
		{"an unknown txn type is Unimplemented", tree.Txn{Type: wire.OpGetData, Path: "/a"}, wire.ErrUnimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setup(t).mustFail(tt.txn, tt.want)
		})
	}
	t.Run("data exactly at the limit can be set", func(t *testing.T) {
		setup(t).must(setTxn("/a", strings.Repeat("x", maxData), -1))
	})
}

func TestEvents(t *testing.T) {
	const sess = 5
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.openSession(sess)
		f.create("/a", "")
		f.create("/a/b", "")
		return f
	}
	tests := []struct {
		name string
		txn  tree.Txn
		want []tree.Event
	}{
		{"create fires NodeCreated for the node and NodeChildrenChanged for its parent",
			createTxn("/a/c", "", wire.ModePersistent), []tree.Event{created("/a/c"), children("/a")}},
		{"a create under the root fires NodeChildrenChanged for the root",
			createTxn("/z", "", wire.ModePersistent), []tree.Event{created("/z"), children("/")}},
		{"a sequential create's events name the generated path",
			createTxn("/a/s-", "", wire.ModePersistentSequential), []tree.Event{created("/a/s-0000000001"), children("/a")}},
		{"an ephemeral create fires the same events",
			ephemeralTxn("/a/e", sess), []tree.Event{created("/a/e"), children("/a")}},
		{"delete fires NodeDeleted for the node and NodeChildrenChanged for its parent",
			deleteTxn("/a/b", -1), []tree.Event{deleted("/a/b"), children("/a")}},
		{"setData fires NodeDataChanged",
			setTxn("/a/b", "x", -1), []tree.Event{changed("/a/b")}},
		{"setData does not fire NodeChildrenChanged for the parent",
			setTxn("/a", "x", -1), []tree.Event{changed("/a")}},
		{"check fires nothing",
			checkTxn("/a/b", 0), nil},
		{"creating a session fires nothing",
			sessionTxn(6), nil},
		{"a reap with nothing to reap fires nothing",
			reapTxn(timeOf(100)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			res, got := f.apply(tt.txn)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			checkEvents(t, got, tt.want...)
		})
	}
	t.Run("the events of a create and a setData carry the node right after", func(t *testing.T) {
		f := setup(t)
		_, got := f.apply(multiTxn(createTxn("/a/n", "v1", wire.ModePersistent), setTxn("/a/n", "v2", -1), createTxn("/a/n/c", "x", wire.ModePersistent)))
		checkEvents(t, got, created("/a/n"), children("/a"), changed("/a/n"), created("/a/n/c"), children("/a/n"))
		if string(got[0].Data) != "v1" || got[0].Stat.Version != 0 || got[0].Stat.DataLength != 2 {
			t.Errorf("NodeCreated carries %q %+v, want v1 at version 0", got[0].Data, got[0].Stat)
		}
		if string(got[2].Data) != "v2" || got[2].Stat.Version != 1 || got[2].Stat.NumChildren != 0 {
			t.Errorf("NodeDataChanged carries %q %+v, want v2 at version 1, before the child", got[2].Data, got[2].Stat)
		}
		checkEventNodes(t, f.tr, got)
	})
	t.Run("the events returned are only this txn's", func(t *testing.T) {
		f := setup(t)
		f.must(setTxn("/a", "1", -1))
		_, got := f.apply(setTxn("/a/b", "2", -1))
		checkEvents(t, got, changed("/a/b"))
	})
}

func TestCheckChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.create("/a", "data")
	before := dumpTree(f.tr)
	f.must(checkTxn("/a", 0))
	f.must(checkTxn("/", -1))
	if diff := before.diff(dumpTree(f.tr)); diff != "" {
		t.Errorf("check changed the tree:\n%s", diff)
	}
}

// TestACheckOfTheCversionPassesOnlyWhileTheChildrenAreAsListed checks
// wire.CheckCversion: a check that compares the parent's cversion, so that
// a create in the same multi is made only against an exact list of its
// siblings, with the sequence number that cversion gives it.
func TestACheckOfTheCversionPassesOnlyWhileTheChildrenAreAsListed(t *testing.T) {
	cversionCheck := func(path string, cversion int32) tree.Txn {
		txn := checkTxn(path, cversion)
		txn.Mode = wire.CheckCversion
		return txn
	}
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.create("/l", "data")
		f.must(setTxn("/l", "x", -1))                                 // version 1, cversion 0
		f.must(createTxn("/l/a-", "", wire.ModePersistentSequential)) // cversion 1
		f.must(createTxn("/l/b-", "", wire.ModePersistentSequential)) // cversion 2
		f.must(deleteTxn("/l/a-0000000000", -1))                      // cversion 3
		return f
	}
	tests := []struct {
		name string
		txn  tree.Txn
		want error
	}{
		{"it passes at the cversion", cversionCheck("/l", 3), nil},
		{"it passes at -1", cversionCheck("/l", -1), nil},
		{"it fails at the data version", cversionCheck("/l", 1), wire.ErrBadVersion},
		{"it fails once a child came or went", cversionCheck("/l", 2), wire.ErrBadVersion},
		{"a check without a mode compares the data version", checkTxn("/l", 1), nil},
		{"a check without a mode is not the cversion", checkTxn("/l", 3), wire.ErrBadVersion},
		{"an unknown mode is refused", tree.Txn{Type: wire.OpCheck, Path: "/l", Version: -1, Mode: wire.ModeContainer}, wire.ErrBadArguments},
		{"a missing node is NoNode", cversionCheck("/none", -1), wire.ErrNoNode},
		{"in a multi it fails the create", multiTxn(cversionCheck("/l", 2), createTxn("/l/c-", "", wire.ModePersistentSequential)), wire.ErrBadVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			if tt.want != nil {
				f.mustFail(tt.txn, tt.want)
				return
			}
			f.must(tt.txn)
		})
	}
	t.Run("in a multi the create it guards gets the cversion as its sequence number", func(t *testing.T) {
		f := setup(t)
		res := f.must(multiTxn(cversionCheck("/l", 3), createTxn("/l/c-", "", wire.ModePersistentSequential)))
		if got := res.Multi[1].Path; got != "/l/c-0000000003" {
			t.Errorf("created %q, want /l/c-0000000003", got)
		}
	})
}
