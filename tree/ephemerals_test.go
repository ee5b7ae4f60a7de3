package tree_test

import (
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestEphemeralCountCountsEverySessionsEphemerals(t *testing.T) {
	f := newFixture(t)
	f.openSession(7)
	f.openSession(8)
	f.create("/p", "")
	for _, e := range []struct {
		path    string
		session int64
	}{{"/a", 7}, {"/b", 7}, {"/c", 8}} {
		f.must(tree.Txn{Type: wire.OpCreate, Path: e.path, Mode: wire.ModeEphemeral, Session: e.session})
	}
	if n := f.tr.EphemeralCount(); n != 3 {
		t.Fatalf("EphemeralCount = %d, want 3", n)
	}
	f.must(tree.Txn{Type: tree.TxnCloseSession, Session: 7})
	if n := f.tr.EphemeralCount(); n != 1 {
		t.Fatalf("EphemeralCount after a session closed = %d, want 1", n)
	}
}

func TestSessionEphemeralCountCountsOneSessionsEphemerals(t *testing.T) {
	f := newFixture(t)
	f.openSession(7)
	f.openSession(8)
	for _, e := range []struct {
		path    string
		session int64
	}{{"/a", 7}, {"/b", 7}, {"/c", 8}} {
		f.must(tree.Txn{Type: wire.OpCreate, Path: e.path, Mode: wire.ModeEphemeral, Session: e.session})
	}
	f.create("/persistent", "")
	for _, want := range []struct {
		session int64
		n       int
	}{{7, 2}, {8, 1}, {9, 0}} {
		if n := f.tr.SessionEphemeralCount(want.session); n != want.n {
			t.Errorf("SessionEphemeralCount(%d) = %d, want %d", want.session, n, want.n)
		}
	}
	f.must(tree.Txn{Type: wire.OpDelete, Path: "/a", Version: -1})
	if n := f.tr.SessionEphemeralCount(7); n != 1 {
		t.Fatalf("SessionEphemeralCount after a delete = %d, want 1", n)
	}
}
