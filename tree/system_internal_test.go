package tree

import (
	"bytes"
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
