package tree_test

import (
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestModeOfTellsHowANodeLives(t *testing.T) {
	f := newFixture(t)
	f.openSession(7)
	f.create("/p", "")
	f.must(tree.Txn{Type: wire.OpCreate, Path: "/e", Mode: wire.ModeEphemeral, Session: 7})
	f.must(createTxn("/c", "", wire.ModeContainer))
	ttlPath := f.must(tree.Txn{Type: wire.OpCreate, Path: "/t-", Mode: wire.ModePersistentSequentialWithTTL, TTL: 5000}).Path
	f.must(createTxn("/s-", "", wire.ModePersistentSequential))

	for _, tt := range []struct {
		path string
		mode wire.CreateMode
		ttl  int64
	}{
		{"/p", wire.ModePersistent, 0},
		{"/e", wire.ModeEphemeral, 0},
		{"/c", wire.ModeContainer, 0},
		{ttlPath, wire.ModePersistentWithTTL, 5000},
		{"/s-0000000004", wire.ModePersistent, 0},
		{"/", wire.ModePersistent, 0},
	} {
		mode, ttl, czxid, ok := f.tr.ModeOf(tt.path)
		if !ok || mode != tt.mode || ttl != tt.ttl || czxid != f.stat(tt.path).Czxid {
			t.Errorf("ModeOf(%s) = %s, %d, %d, %v; want %s, %d, czxid %d", tt.path, mode, ttl, czxid, ok, tt.mode, tt.ttl, f.stat(tt.path).Czxid)
		}
	}
	if _, _, _, ok := f.tr.ModeOf("/missing"); ok {
		t.Error("ModeOf a missing node reports one")
	}
	if _, _, _, ok := f.tr.ModeOf("bad"); ok {
		t.Error("ModeOf an invalid path reports a node")
	}
	if n := f.tr.EphemeralCount(); n != 1 {
		t.Errorf("EphemeralCount = %d, want 1", n)
	}
}
