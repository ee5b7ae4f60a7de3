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
	// The digest is the one a tree built alike from scratch has.
	var again bytes.Buffer
	if err := got.WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if r, err := Restore(&again); err != nil || r.Digest() != got.Digest() {
		t.Errorf("restored again: %v, digest %#x, want %#x", err, r.Digest(), got.Digest())
	}
	res, _ := got.Apply(3, &Txn{Type: TxnCloseSession, Session: 1})
	if res.Err != nil || got.lookup("/zookeeper") == nil {
		t.Errorf("closing its session: %v; /zookeeper %v", res.Err, got.lookup("/zookeeper"))
	}
}

// A snapshot may hold a stats node that does not tell the truth (one from
// before the tree kept quotas, when /zookeeper/quota was any client's):
// restoring it counts the usage again, as ZooKeeper does when it loads a
// snapshot, the same on every replica.
func TestRestoreCountsAQuotasUsageAgain(t *testing.T) {
	tr := New()
	for i, p := range []string{"/app", "/app/a", "/zookeeper/quota/app", "/zookeeper/quota/app/zookeeper_limits", "/zookeeper/quota/app/zookeeper_stats"} {
		data := []byte("d")
		if strings.HasSuffix(p, "limits") {
			data = []byte("count=-1,bytes=-1")
		}
		if res, _ := tr.Apply(int64(i+1), &Txn{Type: wire.OpCreate, Path: p, Data: data}); res.Err != nil {
			t.Fatal(p, res.Err)
		}
	}
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
	snap := buf.Bytes()
	a, err := Restore(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Restore(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	if data, _, _ := a.Get(path); string(data) != "count=2,bytes=2" {
		t.Errorf("restored stats %q, want the usage counted again", data)
	}
	if a.Digest() != b.Digest() || a.Digest() == tr.Digest() {
		t.Errorf("digests %#x and %#x (the snapshot's %#x)", a.Digest(), b.Digest(), tr.Digest())
	}
}
