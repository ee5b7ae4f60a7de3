package tree

import (
	"fmt"
	"slices"
	"testing"
)

// A set keeps its paths the same whether they are few (a slice) or many
// (a map), across the change from one to the other.
func TestAPathSetKeepsItsPathsAcrossItsGrowth(t *testing.T) {
	for _, n := range []int{0, 1, fewPaths - 1, fewPaths, fewPaths + 1, 3 * fewPaths} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var s pathSet
			want := map[string]bool{}
			for i := range n {
				p := fmt.Sprintf("/e%03d", n-i) // added in reverse order
				s.add(p)
				s.add(p) // a second add is no second path
				want[p] = true
			}
			check := func(when string) {
				t.Helper()
				got := s.sorted()
				var w []string
				for p := range want {
					w = append(w, p)
				}
				slices.Sort(w)
				if !slices.Equal(got, w) || s.len() != len(w) {
					t.Fatalf("%s: %v (len %d), want %v", when, got, s.len(), w)
				}
			}
			check("after the adds")
			for i := 1; i <= n; i += 2 {
				p := fmt.Sprintf("/e%03d", i)
				s.remove(p)
				delete(want, p)
			}
			s.remove("/none")
			check("after removing every other one")
			s.add("/new")
			want["/new"] = true
			check("after one more add")
		})
	}
}
