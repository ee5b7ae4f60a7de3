package tree

import (
	"bytes"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// A snapshot written before quotas could not nest may hold nested ones:
// restored, each counts its whole subtree, and a write under both is
// counted in both and refused by either's hard limit.
func TestNestedQuotasOfAnOlderSnapshotEachCountTheirSubtree(t *testing.T) {
	tr := New()
	zxid := int64(0)
	apply := func(path, data string) {
		t.Helper()
		zxid++
		if res, _ := tr.Apply(zxid, &Txn{Type: wire.OpCreate, Path: path, Data: []byte(data)}); res.Err != nil {
			t.Fatal(path, res.Err)
		}
	}
	for _, p := range []string{"/a", "/a/b", "/a/b/c", "/zookeeper/quota/a", "/zookeeper/quota/a/b"} {
		apply(p, "")
	}
	apply(quotas.LimitPath("/a"), "countHardLimit=4")
	apply(quotas.StatPath("/a"), "")
	// What a version that let quotas nest wrote: /a/b's limits node,
	// made while the tree did not see /a's quota.
	outer := tr.quotas["/a"]
	delete(tr.quotas, "/a")
	apply(quotas.LimitPath("/a/b"), "countHardLimit=10")
	apply(quotas.StatPath("/a/b"), "")
	tr.quotas["/a"] = outer

	var buf bytes.Buffer
	if err := tr.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.quotas) != 2 || r.quotas["/a"].count != 3 || r.quotas["/a/b"].count != 2 {
		t.Fatalf("quotas %+v %+v", r.quotas["/a"], r.quotas["/a/b"])
	}
	if res, _ := r.Apply(zxid+1, &Txn{Type: wire.OpCreate, Path: "/a/b/d"}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for p, want := range map[string]string{"/a": "count=4,bytes=0", "/a/b": "count=3,bytes=0"} {
		if data, _, _ := r.Get(quotas.StatPath(p)); string(data) != want {
			t.Errorf("usage of %s %q, want %q", p, data, want)
		}
	}
	if res, _ := r.Apply(zxid+2, &Txn{Type: wire.OpCreate, Path: "/a/b/e"}); wire.CodeOf(res.Err) != wire.CodeQuotaExceeded {
		t.Errorf("a create past the outer limit: %v", res.Err)
	}
}
