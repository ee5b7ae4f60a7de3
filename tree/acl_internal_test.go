package tree

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/arbor-coord/arbor/wire"
)

func TestNodeStaysAt112Bytes(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n != 112 {
		t.Errorf("node is %d bytes, want 112: a million znodes pay for each byte", n)
	}
}

func TestACLsAreSharedAndDroppedWithTheirLastNode(t *testing.T) {
	tr := newBare() // without /zookeeper/config, whose ACL is the one used here
	acl := []wire.ACL{{Perms: wire.PermRead, Scheme: "world", ID: "anyone"}}
	zxid := int64(0)
	apply := func(txn Txn) Result {
		t.Helper()
		zxid++
		res, _ := tr.Apply(zxid, &txn)
		return res
	}
	for _, p := range []string{"/a", "/b"} {
		if res := apply(Txn{Type: wire.OpCreate, Path: p, ACL: acl}); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	a, b := tr.lookup("/a"), tr.lookup("/b")
	if a.acl != b.acl || a.acl.index() == 0 || len(tr.acls.byKey) != 1 || tr.acls.entries[a.acl.index()].refs != 2 {
		t.Fatalf("two nodes with one ACL: refs %v %v, table %v", a.acl, b.acl, tr.acls.entries)
	}
	if &tr.acls.list(a.acl)[0] == &acl[0] {
		t.Error("the table keeps the caller's slice")
	}
	// A multi that deletes both and then fails puts the list back.
	res := apply(Txn{Type: wire.OpMulti, Ops: []Txn{
		{Type: wire.OpDelete, Path: "/a", Version: -1},
		{Type: wire.OpDelete, Path: "/b", Version: -1},
		{Type: wire.OpCheck, Path: "/none", Version: -1},
	}})
	if res.Err == nil {
		t.Fatal("the multi succeeded")
	}
	a, b = tr.lookup("/a"), tr.lookup("/b")
	if a == nil || b == nil || a.acl != b.acl || tr.acls.entries[a.acl.index()].refs != 2 || len(tr.acls.byKey) != 1 {
		t.Fatalf("after a failed multi: %v %v, table %v", a, b, tr.acls.entries)
	}
	apply(Txn{Type: wire.OpDelete, Path: "/a", Version: -1})
	if res := apply(Txn{Type: wire.OpSetACL, Path: "/b", Version: -1, ACL: wire.OpenACL, Identities: []wire.Identity{{Scheme: SuperScheme}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(tr.acls.byKey) != 0 || len(tr.acls.free) != 1 {
		t.Errorf("no node uses the list, yet the table holds %v (free %v)", tr.acls.byKey, tr.acls.free)
	}
	if tr.lookup("/b").acl.index() != 0 {
		t.Error("setting the open ACL kept a reference")
	}
}

// checkACLTable checks that every list's count is the number of nodes
// using it, and that the table holds no list no node uses.
func checkACLTable(t *testing.T, tr *Tree) {
	t.Helper()
	uses := map[uint32]int{}
	var walk func(n *node)
	walk = func(n *node) {
		if i := n.acl.index(); i != 0 {
			uses[i]++
		}
		for c := range n.children.all {
			walk(c)
		}
	}
	walk(tr.root)
	for i, e := range tr.acls.entries {
		if i == 0 {
			continue
		}
		if e.refs != uses[uint32(i)] {
			t.Fatalf("list %d counts %d uses, the tree has %d", i, e.refs, uses[uint32(i)])
		}
		if (e.refs > 0) != (tr.acls.byKey[e.key] == uint32(i) && e.key != "") {
			t.Fatalf("list %d (%d uses) and the key index disagree", i, e.refs)
		}
	}
	if len(tr.acls.byKey)+len(tr.acls.free)+1 != len(tr.acls.entries) {
		t.Fatalf("%d keys and %d free of %d entries", len(tr.acls.byKey), len(tr.acls.free), len(tr.acls.entries))
	}
}

func TestACLTableStaysExactThroughRandomWrites(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	acls := [][]wire.ACL{
		nil,
		{{Perms: wire.PermAll, Scheme: "digest", ID: "a:h"}},
		{{Perms: wire.PermRead | wire.PermCreate | wire.PermDelete, Scheme: "world", ID: "anyone"}},
		{{Perms: wire.PermAll, Scheme: "ip", ID: "10.0.0.0/8"}, {Perms: wire.PermRead, Scheme: "world", ID: "anyone"}},
	}
	idSets := [][]wire.Identity{nil, {{Scheme: "digest", ID: "a:h"}}, {{Scheme: "ip", ID: "10.0.0.1"}}}
	paths := []string{"/a", "/b", "/a/x", "/a/y", "/b/x"}
	tr := New()
	op := func() Txn {
		p := paths[r.IntN(len(paths))]
		switch r.IntN(4) {
		case 0:
			return Txn{Type: wire.OpCreate, Path: p, ACL: acls[r.IntN(len(acls))]}
		case 1:
			return Txn{Type: wire.OpDelete, Path: p, Version: -1}
		case 2:
			return Txn{Type: wire.OpSetACL, Path: p, Version: -1, ACL: acls[r.IntN(len(acls))]}
		}
		return Txn{Type: wire.OpSetData, Path: p, Version: -1}
	}
	for zxid := int64(1); zxid <= 3000; zxid++ {
		txn := op()
		if txn.Type != wire.OpSetACL && r.IntN(2) == 0 {
			txn = Txn{Type: wire.OpMulti}
			for range 1 + r.IntN(4) {
				if o := op(); o.Type != wire.OpSetACL {
					txn.Ops = append(txn.Ops, o)
				}
			}
		}
		txn.Identities = idSets[r.IntN(len(idSets))]
		tr.Apply(zxid, &txn)
		checkACLTable(t, tr)
		if zxid%500 == 0 {
			var b bytes.Buffer
			if err := tr.WriteSnapshot(&b); err != nil {
				t.Fatal(err)
			}
			back, err := Restore(&b)
			if err != nil {
				t.Fatalf("zxid %d: %v", zxid, err) // the digest kept by Apply must match the contents
			}
			checkACLTable(t, back)
		}
	}
	if len(tr.acls.byKey) == 0 {
		t.Fatal("the run ended with no ACL in use: it tested little")
	}
}

// TestDistinctACLsNeverShareAnInternedList: an id that spells out other
// entries (an x509 subject may hold any byte) does not make its list's key
// equal another list's.
func TestDistinctACLsNeverShareAnInternedList(t *testing.T) {
	l1 := []wire.ACL{{Perms: wire.PermAll, Scheme: "x509", ID: "A\x00\x1f\x00\x00\x00x509\x00B"}}
	l2 := []wire.ACL{{Perms: wire.PermAll, Scheme: "x509", ID: "A"}, {Perms: wire.PermAll, Scheme: "x509", ID: "B"}}
	// ValidateACL refuses such an id now; the table must not rely on it.
	tr := New()
	tr.Apply(1, &Txn{Type: wire.OpCreate, Path: "/attacker", ACL: l1, Time: 1})
	res, _ := tr.Apply(2, &Txn{Type: wire.OpCreate, Path: "/victim", ACL: l2, Time: 1})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	acl, _, _ := tr.ACL("/victim")
	if len(acl) != 2 {
		t.Fatalf("/victim was created with %q but holds %q", l2, acl)
	}
}
