package tree_test

import (
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestSessions(t *testing.T) {
	t.Run("a created session is listed with its timeout and password", func(t *testing.T) {
		f := newFixture(t)
		f.must(tree.Txn{Type: tree.TxnCreateSession, Session: 0x30, TimeoutMs: 4000, Password: []byte("secret")})
		s, ok := f.tr.Session(0x30)
		if !ok || s.ID != 0x30 || s.TimeoutMs != 4000 || string(s.Password) != "secret" {
			t.Errorf("Session(0x30) = %+v, %v", s, ok)
		}
		if _, ok := f.tr.Session(0x31); ok {
			t.Error("Session(0x31) exists")
		}
	})
	t.Run("Sessions lists every live session by id", func(t *testing.T) {
		f := newFixture(t)
		for _, id := range []int64{9, -4, 2, 1 << 62} {
			f.openSession(id)
		}
		f.must(closeTxn(2))
		var ids []int64
		for _, s := range f.tr.Sessions() {
			ids = append(ids, s.ID)
		}
		if want := []int64{-4, 9, 1 << 62}; !reflect.DeepEqual(ids, want) {
			t.Errorf("Sessions ids = %v, want %v", ids, want)
		}
	})
	t.Run("a session id already in use is BadArguments", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.mustFail(sessionTxn(1), wire.ErrBadArguments)
	})
	t.Run("session id 0 is reserved", func(t *testing.T) {
		newFixture(t).mustFail(sessionTxn(0), wire.ErrBadArguments)
	})
	t.Run("closing an unknown session is SessionExpired", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.mustFail(closeTxn(2), wire.ErrSessionExpired)
	})
	t.Run("closing a session twice is SessionExpired the second time", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(closeTxn(1))
		f.mustFail(closeTxn(1), wire.ErrSessionExpired)
	})
	t.Run("a closed session's id can be used again", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(closeTxn(1))
		f.openSession(1)
	})
	t.Run("a closed session cannot create ephemerals", func(t *testing.T) {
		f := newFixture(t)
		f.openSession(1)
		f.must(closeTxn(1))
		f.mustFail(ephemeralTxn("/e", 1), wire.ErrSessionExpired)
	})
}

func TestCloseSessionDeletesEphemerals(t *testing.T) {
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		f.openSession(1)
		f.openSession(2)
		f.create("/app", "")
		f.create("/locks", "")
		f.must(ephemeralTxn("/app/worker", 1))
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/lock-", Mode: wire.ModeEphemeralSequential, Session: 1})
		f.must(tree.Txn{Type: wire.OpCreate, Path: "/locks/lock-", Mode: wire.ModeEphemeralSequential, Session: 2})
		f.must(ephemeralTxn("/e", 1))
		return f
	}
	t.Run("Ephemerals lists a session's ephemerals by path", func(t *testing.T) {
		f := setup(t)
		if got, want := f.tr.Ephemerals(1), []string{"/app/worker", "/e", "/locks/lock-0000000000"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Ephemerals(1) = %v, want %v", got, want)
		}
		if got, want := f.tr.Ephemerals(2), []string{"/locks/lock-0000000001"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Ephemerals(2) = %v, want %v", got, want)
		}
		if got := f.tr.Ephemerals(3); got != nil {
			t.Errorf("Ephemerals of an unknown session = %v", got)
		}
	})
	t.Run("closing a session deletes all its ephemerals in one txn", func(t *testing.T) {
		f := setup(t)
		count := f.tr.Count()
		lockParent := f.stat("/locks")
		res, events := f.apply(closeTxn(1))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		for _, p := range []string{"/app/worker", "/e", "/locks/lock-0000000000"} {
			if f.exists(p) {
				t.Errorf("%s survived its session", p)
			}
		}
		if !f.exists("/locks/lock-0000000001") {
			t.Error("another session's ephemeral was deleted")
		}
		if f.tr.Count() != count-3 {
			t.Errorf("Count %d -> %d, want 3 fewer", count, f.tr.Count())
		}
		checkEvents(t, events,
			deleted("/app/worker"), children("/app"),
			deleted("/e"), children("/"),
			deleted("/locks/lock-0000000000"), children("/locks"),
		)
		if st := f.stat("/locks"); st.Cversion != lockParent.Cversion+1 || st.Pzxid != f.zxid {
			t.Errorf("/locks Stat %+v: cversion and pzxid should move", st)
		}
		if _, ok := f.tr.Session(1); ok {
			t.Error("session 1 still exists")
		}
		if got := f.tr.Ephemerals(1); got != nil {
			t.Errorf("Ephemerals of a closed session = %v", got)
		}
	})
	t.Run("a deleted ephemeral leaves its session's index", func(t *testing.T) {
		f := setup(t)
		f.must(deleteTxn("/e", -1))
		if got, want := f.tr.Ephemerals(1), []string{"/app/worker", "/locks/lock-0000000000"}; !reflect.DeepEqual(got, want) {
			t.Errorf("Ephemerals(1) = %v, want %v", got, want)
		}
		f.create("/e", "") // a persistent node at the same path is not the session's
		_, events := f.apply(closeTxn(1))
		if !f.exists("/e") {
			t.Error("closing the session deleted a persistent node that reused an ephemeral's path")
		}
		checkEvents(t, events,
			deleted("/app/worker"), children("/app"),
			deleted("/locks/lock-0000000000"), children("/locks"),
		)
	})
	t.Run("a session without ephemerals closes without events", func(t *testing.T) {
		f := setup(t)
		f.openSession(3)
		res, events := f.apply(closeTxn(3))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		checkEvents(t, events)
	})
	t.Run("the next sequential number counts the deletes of a closed session", func(t *testing.T) {
		f := setup(t)
		f.must(closeTxn(2))
		if got := f.must(createTxn("/locks/lock-", "", wire.ModePersistentSequential)).Path; got != "/locks/lock-0000000003" {
			t.Errorf("created %q", got)
		}
	})
	t.Run("an ephemeral's Stat names its owner", func(t *testing.T) {
		f := setup(t)
		if o := f.stat("/locks/lock-0000000001").EphemeralOwner; o != 2 {
			t.Errorf("EphemeralOwner = %d", o)
		}
	})
	t.Run("a session's creation and close change the digest", func(t *testing.T) {
		f := newFixture(t)
		d0 := f.tr.Digest()
		f.openSession(1)
		d1 := f.tr.Digest()
		f.must(closeTxn(1))
		if d0 == d1 || f.tr.Digest() != d0 {
			t.Errorf("digests %#x, %#x, %#x: want a change and a return", d0, d1, f.tr.Digest())
		}
	})
}
