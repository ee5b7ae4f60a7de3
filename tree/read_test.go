package tree_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestReads(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "config")
	for _, name := range []string{"b", "a", "c10", "c2", "B"} {
		f.create("/app/"+name, name)
	}
	f.create("/app/a/deep", "")

	t.Run("Get returns the data and the Stat", func(t *testing.T) {
		data, st, err := f.tr.Get("/app/c2")
		if err != nil || string(data) != "c2" || st.DataLength != 2 {
			t.Errorf("Get = %q, %+v, %v", data, st, err)
		}
	})
	t.Run("the root exists from the start, empty but for /zookeeper", func(t *testing.T) {
		tr := newFixture(t).tr
		data, st, err := tr.Get("/")
		if err != nil || len(data) != 0 || st != (wire.Stat{NumChildren: 1}) {
			t.Errorf("Get(/) = %q, %+v, %v", data, st, err)
		}
		if tr.Count() != 1+systemNodes {
			t.Errorf("Count = %d", tr.Count())
		}
	})
	t.Run("Exists returns the same Stat as Get", func(t *testing.T) {
		_, want, _ := f.tr.Get("/app")
		if st, err := f.tr.Exists("/app"); err != nil || st != want {
			t.Errorf("Exists = %+v, %v; Get's Stat %+v", st, err, want)
		}
	})
	t.Run("Children are sorted by name, bytewise", func(t *testing.T) {
		names, st, err := f.tr.Children("/app")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"B", "a", "b", "c10", "c2"}; !reflect.DeepEqual(names, want) {
			t.Errorf("Children = %v, want %v", names, want)
		}
		if want := f.stat("/app"); st != want || st.NumChildren != 5 {
			t.Errorf("Children's Stat %+v, want the parent's %+v", st, want)
		}
	})
	t.Run("Children of a leaf is empty", func(t *testing.T) {
		names, st, err := f.tr.Children("/app/b")
		if err != nil || len(names) != 0 || st.NumChildren != 0 {
			t.Errorf("Children = %v, %+v, %v", names, st, err)
		}
	})
	t.Run("Children of the root lists the top level", func(t *testing.T) {
		if names, _, _ := f.tr.Children("/"); !reflect.DeepEqual(names, []string{"app", "zookeeper"}) {
			t.Errorf("Children(/) = %v", names)
		}
	})
	for _, p := range []string{"/missing", "/app/missing", "/app/b/missing", "/missing/deeper"} {
		t.Run("reading "+p+" is NoNode", func(t *testing.T) {
			if _, _, err := f.tr.Get(p); !errors.Is(err, wire.ErrNoNode) {
				t.Errorf("Get: %v", err)
			}
			if _, err := f.tr.Exists(p); !errors.Is(err, wire.ErrNoNode) {
				t.Errorf("Exists: %v", err)
			}
			if _, _, err := f.tr.Children(p); !errors.Is(err, wire.ErrNoNode) {
				t.Errorf("Children: %v", err)
			}
		})
	}
	t.Run("Count counts every znode, the root and the system nodes", func(t *testing.T) {
		if n := f.tr.Count(); n != 8+systemNodes {
			t.Errorf("Count = %d, want %d", n, 8+systemNodes)
		}
	})
	t.Run("the data Get returned stays as it was after a setData", func(t *testing.T) {
		data, _, _ := f.tr.Get("/app/a")
		f.must(setTxn("/app/a", "changed", -1))
		if string(data) != "a" {
			t.Errorf("old data now reads %q", data)
		}
	})
}

func TestEphemeralsWithPrefix(t *testing.T) {
	f := newFixture(t)
	f.openSession(1)
	f.openSession(2)
	for _, p := range []string{"/app", "/app2", "/locks"} {
		f.create(p, "")
	}
	f.must(ephemeralTxn("/app/worker", 1))
	f.must(ephemeralTxn("/app2/x", 1))
	f.must(ephemeralTxn("/e", 1))
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/lock-", Mode: wire.ModeEphemeralSequential, Session: 1})
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/lock-", Mode: wire.ModeEphemeralSequential, Session: 2})
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/lock-", Mode: wire.ModeEphemeralSequential, Session: 1})

	for _, tc := range []struct {
		name    string
		session int64
		prefix  string
		want    []string
	}{
		{"the root prefix lists all of a session's ephemerals, sorted", 1, "/",
			[]string{"/app/worker", "/app2/x", "/e", "/locks/lock-0000000000", "/locks/lock-0000000002"}},
		{"a prefix is a string prefix, so /app also matches /app2", 1, "/app", []string{"/app/worker", "/app2/x"}},
		{"a prefix may end inside a name", 1, "/locks/lock-", []string{"/locks/lock-0000000000", "/locks/lock-0000000002"}},
		{"a full path matches its own node", 1, "/e", []string{"/e"}},
		{"another session's ephemerals are not listed", 2, "/", []string{"/locks/lock-0000000001"}},
		{"a prefix no ephemeral starts with lists nothing", 1, "/nothing", nil},
		{"an unknown session lists nothing", 3, "/", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.tr.EphemeralsWithPrefix(tc.session, tc.prefix); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("EphemeralsWithPrefix(%d, %q) = %v, want %v", tc.session, tc.prefix, got, tc.want)
			}
		})
	}
	t.Run("a closed session's ephemerals are gone", func(t *testing.T) {
		f.must(closeTxn(1))
		if got := f.tr.EphemeralsWithPrefix(1, "/"); got != nil {
			t.Errorf("EphemeralsWithPrefix(1, /) = %v after the close", got)
		}
	})
}

func TestDescendants(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/a", "/a/b", "/a/b/c", "/a/b/c/d", "/a/e", "/a/e/f", "/ab", "/g"} {
		f.create(p, "")
	}
	for _, tc := range []struct {
		name string
		path string
		want int
	}{
		{"the root counts every node but itself", "/", 8 + systemNodes},
		{"a node counts all its descendants at any depth, not itself", "/a", 5},
		{"a sibling whose name extends the path is not a descendant", "/ab", 0},
		{"a middle node counts what is below it", "/a/b", 2},
		{"a leaf has none", "/a/b/c/d", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := f.tr.Descendants(tc.path); err != nil || got != tc.want {
				t.Errorf("Descendants(%s) = %d, %v; want %d", tc.path, got, err, tc.want)
			}
		})
	}
	t.Run("a missing node is NoNode", func(t *testing.T) {
		if _, err := f.tr.Descendants("/a/missing"); !errors.Is(err, wire.ErrNoNode) {
			t.Errorf("err = %v, want ErrNoNode", err)
		}
	})
	t.Run("an invalid path is refused", func(t *testing.T) {
		if _, err := f.tr.Descendants("a/"); !errors.Is(err, wire.ErrBadArguments) {
			t.Errorf("err = %v, want ErrBadArguments", err)
		}
	})
	t.Run("a delete lowers the counts of every ancestor", func(t *testing.T) {
		f.must(deleteTxn("/a/e/f", -1))
		for path, want := range map[string]int{"/": 7 + systemNodes, "/a": 4, "/a/e": 0} {
			if got, _ := f.tr.Descendants(path); got != want {
				t.Errorf("Descendants(%s) = %d, want %d", path, got, want)
			}
		}
	})
}
