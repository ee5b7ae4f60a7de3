package tree_test

import (
	"errors"
	"reflect"
	"testing"

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
	t.Run("the root exists from the start, empty", func(t *testing.T) {
		tr := newFixture(t).tr
		data, st, err := tr.Get("/")
		if err != nil || len(data) != 0 || st != (wire.Stat{}) {
			t.Errorf("Get(/) = %q, %+v, %v", data, st, err)
		}
		if tr.Count() != 1 {
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
		if names, _, _ := f.tr.Children("/"); !reflect.DeepEqual(names, []string{"app"}) {
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
	t.Run("Count counts every znode and the root", func(t *testing.T) {
		if n := f.tr.Count(); n != 8 {
			t.Errorf("Count = %d, want 8", n)
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
