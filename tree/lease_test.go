package tree_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/vmihailenco/msgpack/v5"
)

func leaseTxn(id, parent, ttl int64) tree.Txn {
	return tree.Txn{Type: tree.TxnCreateSession, Session: id, Password: []byte("lease"), LeaseTTL: ttl, LeaseParent: parent, LeaseOwner: "w1"}
}

func renewTxn(id, ttl int64) tree.Txn {
	return tree.Txn{Type: tree.TxnRenewLease, Session: id, LeaseTTL: ttl}
}

func TestLeases(t *testing.T) {
	t.Run("a lease expires a TTL after its creation and is version 1", func(t *testing.T) {
		f := newFixture(t)
		res := f.must(tree.Txn{Type: tree.TxnCreateSession, Session: 7, LeaseTTL: 5000, LeaseOwner: "w1", Time: 1000})
		want := tree.Lease{TTLMs: 5000, Expires: 6000, Version: 1, Owner: "w1"}
		if res.Lease != want {
			t.Errorf("created %+v, want %+v", res.Lease, want)
		}
		if s, ok := f.tr.Session(7); !ok || s.Lease == nil || *s.Lease != want {
			t.Errorf("Session(7) = %+v, %v", s, ok)
		}
		if l, ok := f.tr.Lease(7); !ok || l != want {
			t.Errorf("Lease(7) = %+v, %v", l, ok)
		}
		f.openSession(1)
		for _, id := range []int64{1, 2} { // a client's session, and none
			if l, ok := f.tr.Lease(id); ok {
				t.Errorf("Lease(%d) = %+v, a lease", id, l)
			}
		}
	})
	t.Run("a renewal moves the expiry from its own time and counts a version", func(t *testing.T) {
		f := newFixture(t)
		f.must(leaseTxn(7, 0, 5000))
		renew := renewTxn(7, 0)
		renew.Time = 100_000
		if res := f.must(renew); res.Lease.Expires != 105_000 || res.Lease.Version != 2 || res.Lease.TTLMs != 5000 {
			t.Errorf("renewed %+v", res.Lease)
		}
		renew = renewTxn(7, 9000)
		renew.Time = 200_000
		if res := f.must(renew); res.Lease.Expires != 209_000 || res.Lease.Version != 3 || res.Lease.TTLMs != 9000 {
			t.Errorf("renewed with a new TTL: %+v", res.Lease)
		}
	})
	t.Run("no renewal keeps a lease past its maximum hold", func(t *testing.T) {
		f := newFixture(t)
		res := f.must(tree.Txn{Type: tree.TxnCreateSession, Session: 7, LeaseTTL: 5000, LeaseMaxHold: 8000, Time: 1000})
		if res.Lease.MaxUntil != 9000 || res.Lease.Expires != 6000 {
			t.Fatalf("created %+v", res.Lease)
		}
		renew := renewTxn(7, 0)
		renew.Time = 5000
		if res := f.must(renew); res.Lease.Expires != 9000 {
			t.Errorf("a renewal near the maximum expires at %d, want the maximum 9000", res.Lease.Expires)
		}
	})
	t.Run("a batch renews each lease at its time, and one that ended fails alone", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(leaseTxn(7, 0, 5000))
		f.must(leaseTxn(8, 0, 5000))
		res := f.must(tree.Txn{Type: tree.TxnRenewLeases, Time: 50_000, Ops: []tree.Txn{
			renewTxn(7, 0), renewTxn(9, 0), renewTxn(8, 2000), renewTxn(1, 0), {Type: wire.OpDelete, Path: "/"},
		}})
		if len(res.Renewals) != 5 {
			t.Fatalf("%d results for 5 renewals", len(res.Renewals))
		}
		if l := res.Renewals[0].Lease; res.Renewals[0].Err != nil || l.Expires != 55_000 || l.Version != 2 {
			t.Errorf("lease 7: %+v, %v", l, res.Renewals[0].Err)
		}
		if l := res.Renewals[2].Lease; res.Renewals[2].Err != nil || l.Expires != 52_000 || l.TTLMs != 2000 || l.Version != 2 {
			t.Errorf("lease 8, with a TTL of its own: %+v, %v", l, res.Renewals[2].Err)
		}
		for i, want := range map[int]error{1: wire.ErrSessionExpired, 3: wire.ErrBadArguments, 4: wire.ErrBadArguments} {
			if err := res.Renewals[i].Err; !errors.Is(err, want) {
				t.Errorf("renewal %d: %v, want %v", i, err, want)
			}
		}
		if s, _ := f.tr.Session(7); s.Lease.Expires != 55_000 {
			t.Errorf("lease 7 expires at %d after the batch", s.Lease.Expires)
		}
	})
	t.Run("renewing what is not a live lease fails", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.mustFail(renewTxn(1, 0), wire.ErrBadArguments)
		f.mustFail(renewTxn(2, 0), wire.ErrSessionExpired)
	})
	t.Run("a close at the version seen closes; after a renewal it changes nothing", func(t *testing.T) {
		f := newFixture(t)
		f.must(leaseTxn(7, 0, 5000))
		f.must(ephemeralTxn("/lock", 7))
		f.must(renewTxn(7, 0)) // version 2
		f.mustFail(tree.Txn{Type: tree.TxnCloseSession, Session: 7, LeaseVersion: 1}, wire.ErrBadVersion)
		if !f.exists("/lock") {
			t.Fatal("a stale close deleted the lease's ephemeral")
		}
		f.must(tree.Txn{Type: tree.TxnCloseSession, Session: 7, LeaseVersion: 2})
		if f.exists("/lock") {
			t.Error("the lease's ephemeral outlived it")
		}
	})
	t.Run("a lease ends with its session, and its ephemerals with it", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(leaseTxn(7, 1, 5000))
		f.must(leaseTxn(8, 1, 5000))
		f.must(ephemeralTxn("/a", 7))
		f.must(ephemeralTxn("/b", 8))
		if res := f.must(closeTxn(1)); len(res.Closed) != 2 || res.Closed[0] != 7 || res.Closed[1] != 8 {
			t.Errorf("the close reports leases %v closed with it, want [7 8]", res.Closed)
		}
		for _, id := range []int64{7, 8} {
			if _, ok := f.tr.Session(id); ok {
				t.Errorf("lease %d outlived its session", id)
			}
		}
		if f.exists("/a") || f.exists("/b") {
			t.Error("the leases' ephemerals outlived them")
		}
	})
	t.Run("a lease needs a live client session as its parent", func(t *testing.T) {
		f := newFixture(t)
		f.mustFail(leaseTxn(7, 1, 5000), wire.ErrSessionExpired)
		f.must(leaseTxn(8, 0, 5000))
		f.mustFail(leaseTxn(9, 8, 5000), wire.ErrSessionExpired) // a lease of a lease
	})
	t.Run("closing a lease leaves its session", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(leaseTxn(7, 1, 5000))
		f.must(closeTxn(7))
		f.must(closeTxn(1))
		f.must(leaseTxn(7, 0, 5000)) // the id is free again, and not indexed under 1
	})
}

func TestLeaseTxnsRoundTrip(t *testing.T) {
	withMax := leaseTxn(8, 1, 5000)
	withMax.LeaseMaxHold = 60_000
	for _, txn := range []tree.Txn{
		leaseTxn(7, 1, 5000),
		withMax,
		renewTxn(7, 9000),
		{Type: tree.TxnCloseSession, Session: 7, LeaseVersion: 3},
	} {
		got, err := tree.DecodeTxn(tree.AppendTxn(nil, &txn))
		if err != nil || got.LeaseTTL != txn.LeaseTTL || got.LeaseParent != txn.LeaseParent ||
			got.LeaseOwner != txn.LeaseOwner || got.LeaseVersion != txn.LeaseVersion || got.LeaseMaxHold != txn.LeaseMaxHold || got.Type != txn.Type {
			t.Errorf("%+v read back as %+v, %v", txn, got, err)
		}
	}
}

func TestLeasesSurviveASnapshot(t *testing.T) {
	f := newFixture(t)
	f.openSession(1)
	f.must(leaseTxn(7, 1, 5000))
	f.must(renewTxn(7, 0))
	f.must(ephemeralTxn("/lock", 7))
	restored, err := tree.Restore(bytes.NewReader(snapshotBytes(t, f.tr)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.tr.Session(7)
	b, ok := restored.Session(7)
	if !ok || b.Lease == nil || *b.Lease != *a.Lease || restored.Digest() != f.tr.Digest() {
		t.Fatalf("lease after a restore: %+v, want %+v (digests %#x, %#x)", b.Lease, a.Lease, restored.Digest(), f.tr.Digest())
	}
	// The restored lease still ends with its session.
	restored.Apply(f.tr.Zxid()+1, &tree.Txn{Type: tree.TxnCloseSession, Session: 1})
	if _, ok := restored.Session(7); ok {
		t.Error("a restored lease outlived its session")
	}
}

func TestRestoreReadsTheSnapshotFormatBeforeLeases(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tree.Restore(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Session(-300); !ok {
		t.Error("the version 2 snapshot's session -300 is missing")
	}
	for _, s := range tr.Sessions() {
		if s.Lease != nil {
			t.Errorf("session %#x of a version 2 snapshot is a lease", s.ID)
		}
	}
}

// A lease of four fields (before maximum holds) and one of more (from a
// later version) both decode.
func TestALeaseFieldOfAnotherVersionDecodes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lease []any
	}{
		{"four fields", []any{5000, 1, "w1", 3}},
		{"a field appended", []any{5000, 1, "w1", 3, 60_000, "later"}},
	} {
		b, err := msgpack.Marshal([]any{int(tree.TxnCloseSession), 10, 7, "", nil, 0, 0, 0, 0, nil, []any{}, []any{}, []any{}, tt.lease})
		if err != nil {
			t.Fatal(err)
		}
		txn, err := tree.DecodeTxn(b)
		if err != nil || txn.LeaseTTL != 5000 || txn.LeaseParent != 1 || txn.LeaseOwner != "w1" || txn.LeaseVersion != 3 {
			t.Errorf("%s: %+v, %v", tt.name, txn, err)
		}
	}
}
