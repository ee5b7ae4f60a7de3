package tree

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/arbor-coord/arbor/wire"
)

// A View is the tree as it was when Freeze took it: what a snapshot of
// that moment needs, readable on another goroutine while Apply goes on.
//
// Freeze copies no node. It notes that every node is now shared with the
// view, and from then on Apply changes a shared node only through a copy
// of it (own): the copy takes the node's place in its parent, whose own
// copy takes its place in turn, up to the root (path copying). So the
// view's nodes, reached from its root, never change, and a write during
// a snapshot costs a copy of each shared node on its path once, the first
// time it changes: the nodes themselves, and the children table of each
// (a parent of a hundred thousand children copies about a megabyte).
// Nodes made or copied since the freeze are fresh: Apply changes them in
// place. Once every view is released, every node is Apply's alone again.
//
// What is not a node the view copies at the freeze: the sessions, the
// ACL list, and the owners of the ephemerals and the ttls of the TTL
// nodes (maps the size of those sets).
type View struct {
	root      *node
	zxid      int64
	digest    uint64
	count     int
	sessions  []Session
	acls      [][]wire.ACL
	positions map[uint32]int   // aclTable index -> position in acls, counted from 1
	owners    map[*node]int64  // of the ephemerals
	ttls      map[string]int64 // of the TTL nodes, by path
	released  atomic.Bool
}

// Freeze returns a view of the tree as it is now, which stays as it is
// while the tree changes, until Release. It reads every session, and
// copies the index of the ephemerals' owners and that of the TTL nodes.
func (t *Tree) Freeze() *View {
	v := t.view()
	v.owners, v.ttls = maps.Clone(t.owners), maps.Clone(t.ttls)
	t.views = append(t.views, v)
	t.fresh = map[*node]struct{}{} // what was fresh for an older view is the new one's too
	return v
}

// view is the tree as it is now, sharing its indexes: good for as long as
// the tree does not change.
func (t *Tree) view() *View {
	acls, positions := t.acls.sorted()
	return &View{
		root: t.root, zxid: t.zxid, digest: t.digest, count: t.count,
		sessions: t.Sessions(), acls: acls, positions: positions,
		owners: t.owners, ttls: t.ttls,
	}
}

// Release gives the view's nodes back to the tree: Apply changes them in
// place again. It may be called from any goroutine, once the view is no
// longer read.
func (v *View) Release() { v.released.Store(true) }

// Zxid is the zxid of the last txn applied before the view was taken.
func (v *View) Zxid() int64 { return v.zxid }

// Count is the view's number of znodes, the root included.
func (v *View) Count() int { return v.count }

// SessionCount is the view's number of sessions, leases included.
func (v *View) SessionCount() int { return len(v.sessions) }

// owner is n's ephemeral owner session, 0 if n is not ephemeral.
func (v *View) owner(n *node) int64 {
	if n.kind != kindEphemeral {
		return 0
	}
	return v.owners[n]
}

// sharing reports whether a view not yet released shares nodes with the
// tree, and forgets the views released since the last call.
func (t *Tree) sharing() bool {
	if len(t.views) == 0 {
		return false
	}
	t.views = slices.DeleteFunc(t.views, func(v *View) bool { return v.released.Load() })
	if len(t.views) == 0 {
		t.fresh = nil // a map that grew keeps its room when cleared
		return false
	}
	return true
}

// shared reports whether n belongs to a view, so that Apply must not
// change it in place.
func (t *Tree) shared(n *node) bool {
	if !t.sharing() {
		return false
	}
	_, ok := t.fresh[n]
	return !ok
}

// own returns n, the node at path, ready to be changed: n itself, unless
// a view shares it; then a copy of n that has taken its place in the
// tree, as have copies of its shared ancestors.
func (t *Tree) own(path string, n *node) *node {
	if !t.shared(n) {
		return n
	}
	t.root = t.private(t.root)
	n = t.root
	for i := 1; i < len(path); {
		j := strings.IndexByte(path[i:], '/')
		if j < 0 {
			j = len(path) - i
		}
		c := n.children.get(path[i : i+j])
		if p := t.private(c); p != c {
			n.children.replace(p)
			c = p
		}
		n = c
		i += j + 1
	}
	return n
}

// private returns n if it is fresh, else a copy of it; only while sharing.
func (t *Tree) private(n *node) *node {
	if _, ok := t.fresh[n]; ok {
		return n
	}
	return t.copyNode(n)
}

// copyNode returns a fresh copy of n, with a copy of its children's
// table (not of the children), and moves n's owner to it.
func (t *Tree) copyNode(n *node) *node {
	c := *n
	c.children = n.children.clone()
	if o, ok := t.owners[n]; ok {
		delete(t.owners, n)
		t.owners[&c] = o
	}
	t.fresh[&c] = struct{}{}
	return &c
}

// made records n, just linked into the tree, as fresh: no view has it.
func (t *Tree) made(n *node) {
	if t.sharing() {
		t.fresh[n] = struct{}{}
	}
}
