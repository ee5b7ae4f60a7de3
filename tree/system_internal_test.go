package tree

import (
	"bytes"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// A snapshot from before the system nodes may hold a /zookeeper a client
// made, of any kind: an ephemeral one becomes persistent (out of its
// session's ephemerals) so that it can hold /zookeeper/quota, and keeps
// its data and Stat.
func TestRestoreMakesAClientMadeEphemeralZooKeeperNodePersistent(t *testing.T) {
	tr := newBare()
	for i, txn := range []Txn{
		{Type: TxnCreateSession, Session: 1, TimeoutMs: 1000},
		{Type: wire.OpCreate, Path: "/zookeeper", Data: []byte("mine"), Mode: wire.ModeEphemeral, Session: 1, Time: 7},
	} {
		if res, _ := tr.Apply(int64(i+1), &txn); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	var buf bytes.Buffer
	if err := tr.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	data, st, err := got.Get("/zookeeper")
	if err != nil || string(data) != "mine" || st.EphemeralOwner != 0 || st.Czxid != 2 || st.NumChildren != 2 {
		t.Errorf("/zookeeper: %q %+v %v", data, st, err)
	}
	if e := got.Ephemerals(1); len(e) != 0 {
		t.Errorf("session 1 still owns %v", e)
	}
	// The digest, count and data size are the ones its contents have,
	// counted from scratch.
	if digest, count, size := got.counted(); got.Digest() != digest || got.Count() != count || got.DataSize() != size {
		t.Errorf("digest %#x, %d znodes, data size %d; its contents have %#x, %d, %d", got.Digest(), got.Count(), got.DataSize(), digest, count, size)
	}
	res, _ := got.Apply(3, &Txn{Type: TxnCloseSession, Session: 1})
	if res.Err != nil || got.lookup("/zookeeper") == nil {
		t.Errorf("closing its session: %v; /zookeeper %v", res.Err, got.lookup("/zookeeper"))
	}
}

// A snapshot may hold a stats node that does not tell the truth (one from
// before the tree kept quotas, when /zookeeper/quota was any client's):
// restoring it counts the usage again, as ZooKeeper does when it loads a
// snapshot, and reaches the tree that the same txns make now.
func TestRestoreCountsAQuotasUsageAgain(t *testing.T) {
	var txns []Txn
	for _, p := range []string{"/app", "/app/a", "/zookeeper/quota/app", "/zookeeper/quota/app/zookeeper_limits", "/zookeeper/quota/app/zookeeper_stats"} {
		data := []byte("d")
		if strings.HasSuffix(p, "limits") {
			data = []byte("count=-1,bytes=-1")
		}
		txns = append(txns, Txn{Type: wire.OpCreate, Path: p, Data: data, Time: int64(len(txns))})
	}
	build := func() *Tree {
		tr := New()
		for i := range txns {
			if res, _ := tr.Apply(int64(i+1), &txns[i]); res.Err != nil {
				t.Fatal(txns[i].Path, res.Err)
			}
		}
		return tr
	}
	want, tr := build(), build()
	path := "/zookeeper/quota/app/zookeeper_stats"
	n := tr.lookup(path)
	if string(n.data) != "count=2,bytes=2" {
		t.Fatalf("stats %q", n.data)
	}
	// What an older version would have left: the data a client wrote.
	tr.digest -= tr.nodeDigest(path, n)
	n.data, n.dataHash = []byte("count=0,bytes=0"), hashData([]byte("count=0,bytes=0"))
	tr.digest += tr.nodeDigest(path, n)
	var buf bytes.Buffer
	if err := tr.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if data, _, _ := got.Get(path); string(data) != "count=2,bytes=2" {
		t.Errorf("restored stats %q, want the usage counted again", data)
	}
	if got.Digest() != want.Digest() || got.DataSize() != want.DataSize() || got.Count() != want.Count() {
		t.Errorf("restored: digest %#x, data size %d, %d znodes; the same txns make %#x, %d, %d",
			got.Digest(), got.DataSize(), got.Count(), want.Digest(), want.DataSize(), want.Count())
	}
}

// counted is t's digest, count of znodes and data size, counted from its
// nodes and sessions rather than kept as it changes.
func (t *Tree) counted() (digest uint64, count int, size int64) {
	var walk func(path string, n *node)
	walk = func(path string, n *node) {
		digest += t.nodeDigest(path, n)
		count++
		size += nodeSize(path, n)
		for c := range n.children.all {
			walk(strings.TrimSuffix(path, "/")+"/"+c.name, c)
		}
	}
	walk("/", t.root)
	for id, s := range t.sessions {
		digest += s.digest(id)
	}
	return digest, count, size
}
