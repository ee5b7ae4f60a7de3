package tree

import (
	"maps"
	"slices"

	"github.com/arbor-coord/arbor/quotas"
)

// Test hooks: what the tests of package tree_test need to see that the
// package does not export.

// NewWithoutSystemNodes returns a tree holding only the root, as trees
// were before the system nodes: its snapshot is one an older version
// could have written.
func NewWithoutSystemNodes(opts ...Option) *Tree { return newBare(opts...) }

// Quota is a quota's state, as the tree keeps it.
type Quota struct {
	Path                 string        // the path it is on
	Limits               quotas.Limits // as its limits node says them
	UsedCount, UsedBytes int64
}

// Quotas returns the quotas set, by path.
func (t *Tree) Quotas() []Quota {
	out := make([]Quota, 0, len(t.quotas))
	for _, p := range slices.Sorted(maps.Keys(t.quotas)) {
		q := t.quotas[p]
		out = append(out, Quota{Path: p, Limits: q.limits, UsedCount: q.count, UsedBytes: q.bytes})
	}
	return out
}
