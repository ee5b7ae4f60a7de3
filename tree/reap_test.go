package tree_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestContainers(t *testing.T) {
	const far = baseTime + 1<<42
	t.Run("a container that never had a child is not reapable", func(t *testing.T) {
		f := newFixture(t)
		f.must(createTxn("/box", "", wire.ModeContainer))
		if got := f.tr.Reapable(far); len(got) != 0 {
			t.Errorf("Reapable = %v", got)
		}
	})
	t.Run("a container with a child is not reapable", func(t *testing.T) {
		f := newFixture(t)
		f.must(createTxn("/box", "", wire.ModeContainer))
		f.create("/box/item", "")
		if got := f.tr.Reapable(far); len(got) != 0 {
			t.Errorf("Reapable = %v", got)
		}
	})
	t.Run("a container whose last child was deleted is reaped", func(t *testing.T) {
		f := newFixture(t)
		f.create("/app", "")
		f.must(createTxn("/app/box", "", wire.ModeContainer))
		f.create("/app/box/a", "")
		f.create("/app/box/b", "")
		f.must(deleteTxn("/app/box/a", -1))
		if got := f.tr.Reapable(far); len(got) != 0 {
			t.Fatalf("Reapable with a child left = %v", got)
		}
		f.must(deleteTxn("/app/box/b", -1))
		if got := f.tr.Reapable(timeOf(f.zxid)); !reflect.DeepEqual(got, []string{"/app/box"}) {
			t.Fatalf("Reapable = %v, want [/app/box] at once", got)
		}
		res, events := f.apply(reapTxn(timeOf(f.zxid + 1)))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if f.exists("/app/box") {
			t.Error("/app/box survived the reap")
		}
		checkEvents(t, events, deleted("/app/box"), children("/app"))
		if st := f.stat("/app"); st.Pzxid != f.zxid {
			t.Errorf("/app pzxid = %d, want the reap's zxid %d", st.Pzxid, f.zxid)
		}
		if got := f.tr.Reapable(far); len(got) != 0 {
			t.Errorf("Reapable after the reap = %v", got)
		}
	})
	t.Run("a container whose ephemeral child's session closed is reaped", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(createTxn("/election", "", wire.ModeContainer))
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/election/n-", Mode: wire.ModeEphemeralSequential, Session: 1})
		f.must(closeTxn(1))
		if got := f.tr.Reapable(0); !reflect.DeepEqual(got, []string{"/election"}) {
			t.Errorf("Reapable = %v", got)
		}
	})
	t.Run("reaping an inner container makes its container reapable next time", func(t *testing.T) {
		f := newFixture(t)
		f.must(createTxn("/outer", "", wire.ModeContainer))
		f.must(createTxn("/outer/inner", "", wire.ModeContainer))
		f.create("/outer/inner/x", "")
		f.must(deleteTxn("/outer/inner/x", -1))
		_, events := f.apply(reapTxn(far))
		checkEvents(t, events, deleted("/outer/inner"), children("/outer"))
		if got := f.tr.Reapable(far); !reflect.DeepEqual(got, []string{"/outer"}) {
			t.Fatalf("Reapable = %v, want [/outer]", got)
		}
		f.must(reapTxn(far))
		if f.tr.Count() != 1+systemNodes {
			t.Errorf("Count = %d, want just the root and the system nodes", f.tr.Count())
		}
	})
	t.Run("a container can be deleted by hand like any node", func(t *testing.T) {
		f := newFixture(t)
		f.must(createTxn("/box", "", wire.ModeContainer))
		f.create("/box/x", "")
		f.must(deleteTxn("/box/x", -1))
		f.must(deleteTxn("/box", -1))
		if got := f.tr.Reapable(far); len(got) != 0 {
			t.Errorf("Reapable = %v", got)
		}
	})
}

func TestTTLNodes(t *testing.T) {
	const ttl = 10_000
	setup := func(t *testing.T) (*fixture, int64) {
		f := newFixture(t)
		f.must(ttlTxn("/lease", wire.ModePersistentWithTTL, ttl))
		return f, timeOf(f.zxid)
	}
	t.Run("a TTL node is not reapable while now - mtime <= ttl", func(t *testing.T) {
		f, mtime := setup(t)
		for _, now := range []int64{0, mtime, mtime + ttl} {
			if got := f.tr.Reapable(now); len(got) != 0 {
				t.Errorf("Reapable(mtime%+d) = %v", now-mtime, got)
			}
		}
	})
	t.Run("a childless TTL node is reapable once now - mtime > ttl", func(t *testing.T) {
		f, mtime := setup(t)
		if got := f.tr.Reapable(mtime + ttl + 1); !reflect.DeepEqual(got, []string{"/lease"}) {
			t.Errorf("Reapable = %v", got)
		}
		_, events := f.apply(reapTxn(mtime + ttl + 1))
		checkEvents(t, events, deleted("/lease"), children("/"))
		if f.exists("/lease") {
			t.Error("/lease survived")
		}
	})
	t.Run("a reap before the ttl is up deletes nothing", func(t *testing.T) {
		f, mtime := setup(t)
		before := dumpTree(f.tr)
		_, events := f.apply(reapTxn(mtime + ttl))
		checkEvents(t, events)
		if diff := before.diff(dumpTree(f.tr)); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("a TTL node with a child is not reapable", func(t *testing.T) {
		f, mtime := setup(t)
		f.create("/lease/child", "")
		if got := f.tr.Reapable(mtime + 100*ttl); len(got) != 0 {
			t.Errorf("Reapable = %v", got)
		}
		f.must(deleteTxn("/lease/child", -1))
		if got := f.tr.Reapable(mtime + 100*ttl); !reflect.DeepEqual(got, []string{"/lease"}) {
			t.Errorf("Reapable once childless = %v", got)
		}
	})
	t.Run("setData resets the TTL clock", func(t *testing.T) {
		f, mtime := setup(t)
		f.must(tree.Txn{Type: wire.OpSetData, Path: "/lease", Version: -1, Time: mtime + ttl})
		if got := f.tr.Reapable(mtime + ttl + 1); len(got) != 0 {
			t.Errorf("Reapable right after the setData = %v", got)
		}
		if got := f.tr.Reapable(mtime + 2*ttl + 1); !reflect.DeepEqual(got, []string{"/lease"}) {
			t.Errorf("Reapable a ttl after the setData = %v", got)
		}
	})
	t.Run("a child's create does not reset the TTL clock", func(t *testing.T) {
		f, mtime := setup(t)
		f.create("/lease/c", "")
		f.must(deleteTxn("/lease/c", -1))
		if got := f.tr.Reapable(mtime + ttl + 1); !reflect.DeepEqual(got, []string{"/lease"}) {
			t.Errorf("Reapable = %v", got)
		}
	})
	t.Run("a sequential TTL node expires like a TTL node", func(t *testing.T) {
		f := newFixture(t)
		res := f.must(ttlTxn("/job-", wire.ModePersistentSequentialWithTTL, 50))
		if got := f.tr.Reapable(timeOf(f.zxid) + 51); !reflect.DeepEqual(got, []string{res.Path}) {
			t.Errorf("Reapable = %v, want [%s]", got, res.Path)
		}
	})
	t.Run("persistent and ephemeral nodes are never reapable", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.create("/p", "")
		f.must(ephemeralTxn("/e", 1))
		f.create("/parent", "")
		f.create("/parent/c", "")
		f.must(deleteTxn("/parent/c", -1))
		if got := f.tr.Reapable(1 << 62); len(got) != 0 {
			t.Errorf("Reapable = %v", got)
		}
	})
}

func TestReapableIsSorted(t *testing.T) {
	f := newFixture(t)
	f.create("/m", "")
	f.create("/z", "")
	var want []string
	for _, n := range []struct {
		path      string
		container bool
	}{{"/z/c", false}, {"/a", true}, {"/m/b", false}, {"/m/a", true}, {"/zz", false}, {"/b", true}, {"/m/c", true}} {
		if n.container {
			f.must(createTxn(n.path, "", wire.ModeContainer))
			f.create(n.path+"/x", "")
			f.must(deleteTxn(n.path+"/x", -1))
		} else {
			f.must(ttlTxn(n.path, wire.ModePersistentWithTTL, 1))
		}
		want = append(want, n.path)
	}
	slices.Sort(want)
	now := timeOf(f.zxid) + 10
	if got := f.tr.Reapable(now); !reflect.DeepEqual(got, want) {
		t.Fatalf("Reapable = %v, want %v", got, want)
	}
	_, events := f.apply(reapTxn(now))
	var got []string
	for _, e := range events {
		if e.Type == wire.EventNodeDeleted {
			got = append(got, e.Path)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reap deleted %v, want %v in order", got, want)
	}
}
