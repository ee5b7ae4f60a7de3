package server

import (
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/tree"
)

// A lease's creation and each renewal, once applied, count as hearing from
// the session that owns it: a holder may count its session's deadline
// from a renewal that succeeded, which a quorum has, and not only from
// pings, which a member cut off from the leader may answer.
func TestALeasesRenewalKeepsItsSessionAlive(t *testing.T) {
	t.Parallel()
	sessions := session.NewTable(time.Second, time.Minute)
	f := newFSM(zaptest.NewLogger(t), newWatchRegistry(func(*conn, uint64, int64, tree.Event, []string) {}), sessions, 1<<20, 100, 0)
	var zxid uint64
	apply := func(txn tree.Txn) *tree.Result {
		t.Helper()
		txn.Time = time.Now().UnixMilli()
		zxid++
		res := f.Apply(zxid, tree.AppendTxn(nil, &txn)).(*tree.Result)
		if res.Err != nil {
			t.Fatalf("%v: %v", txn.Type, res.Err)
		}
		return res
	}
	const owner, lease = 1, 2
	timeout := 2 * time.Second
	apply(tree.Txn{Type: tree.TxnCreateSession, Session: owner, TimeoutMs: int32(timeout / time.Millisecond), Password: []byte("pw")})

	long := time.Now().Add(-time.Hour) // the session was last heard from long ago
	sessions.ResetAll(long)
	before := time.Now()
	apply(tree.Txn{Type: tree.TxnCreateSession, Session: lease, LeaseTTL: 30_000, LeaseParent: owner})
	if d, _ := sessions.Deadline(owner); d.Before(before.Add(timeout)) {
		t.Fatalf("after the lease's creation the session's deadline is %v, want at least %v", d, before.Add(timeout))
	}

	for _, renewal := range []tree.Txn{
		{Type: tree.TxnRenewLease, Session: lease},
		{Type: tree.TxnRenewLeases, Ops: []tree.Txn{{Type: tree.TxnRenewLease, Session: 99}, {Type: tree.TxnRenewLease, Session: lease}}},
	} {
		sessions.ResetAll(long)
		before = time.Now()
		apply(renewal)
		if d, _ := sessions.Deadline(owner); d.Before(before.Add(timeout)) {
			t.Fatalf("after a renewal (%v) the session's deadline is %v, want at least %v", renewal.Type, d, before.Add(timeout))
		}
	}
}
