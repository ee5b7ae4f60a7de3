package tree

import (
	"testing"
	"unsafe"

	"github.com/arbor-coord/arbor/wire"
)

func TestNodeStaysAt128Bytes(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n != 128 {
		t.Errorf("node is %d bytes, want 128: a million znodes pay for each byte", n)
	}
}

func TestACLsAreSharedAndDroppedWithTheirLastNode(t *testing.T) {
	tr := New()
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
