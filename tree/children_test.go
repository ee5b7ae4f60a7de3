package tree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// TestChildSetMatchesAMap adds and removes names at random, growing the
// set to thousands of children and shrinking it back to none, and checks
// after every step that it holds exactly what a map holds: every present
// name is found, no absent one is, and iteration yields each child once.
func TestChildSetMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s *childSet
	want := map[string]*node{}
	check := func(step int) {
		t.Helper()
		if s.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, s.len(), len(want))
		}
		seen := map[string]bool{}
		for c := range s.all {
			if seen[c.name] || want[c.name] != c {
				t.Fatalf("step %d: iteration yields %q twice or not in the set", step, c.name)
			}
			seen[c.name] = true
		}
		if len(seen) != len(want) {
			t.Fatalf("step %d: iteration yields %d children, want %d", step, len(seen), len(want))
		}
	}
	// Grow to 4000, shrink to 0, twice: a name space of 6000 makes both
	// hits and misses common, and the shrinking rehashes the table.
	for round, target := range []int{4000, 0, 4000, 0} {
		for step := 0; s.len() != target && step < 100_000; step++ {
			name := fmt.Sprintf("n%d", rng.IntN(6000))
			c, ok := want[name]
			if got := s.get(name); got != c {
				t.Fatalf("round %d: get(%q) = %p, want %p", round, name, got, c)
			}
			grow := s.len() < target
			switch {
			case grow && !ok:
				c = &node{name: name}
				if s == nil {
					s = &childSet{}
				}
				s.add(c)
				want[name] = c
			case !grow && ok:
				s.remove(name)
				delete(want, name)
				if s.get(name) != nil {
					t.Fatalf("round %d: %q found after its removal", round, name)
				}
			}
			if step%97 == 0 {
				check(step)
			}
		}
		check(-1)
		for name, c := range want {
			if s.get(name) != c {
				t.Fatalf("round %d: %q not found", round, name)
			}
		}
	}
	if len(s.slots) != minChildSlots {
		t.Errorf("an empty set has %d slots, want %d", len(s.slots), minChildSlots)
	}
}

// TestParentDropsItsSetWithItsLastChild checks that a node with no
// children left holds no table.
func TestParentDropsItsSetWithItsLastChild(t *testing.T) {
	tr := New()
	for i, txn := range []Txn{
		{Type: wire.OpCreate, Path: "/p"},
		{Type: wire.OpCreate, Path: "/p/a"},
		{Type: wire.OpCreate, Path: "/p/b"},
		{Type: wire.OpDelete, Path: "/p/a", Version: -1},
		{Type: wire.OpDelete, Path: "/p/b", Version: -1},
	} {
		if res, _ := tr.Apply(int64(i+1), &txn); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if n := tr.lookup("/p"); n.children != nil {
		t.Errorf("/p holds a set of %d slots", len(n.children.slots))
	}
}
