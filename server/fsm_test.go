package server

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
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

// A stub, the ancestors a shard's nodes need, changes nothing the
// cluster's clients see: it fires no event in the shard (a child watch
// of / would fire for nothing), where the shard's own nodes do.
func TestAShardsStubFiresNoEvent(t *testing.T) {
	t.Parallel()
	m, err := shardmap.New().Partition("/q")
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.Split(shardmap.MetaGroup, shardmap.Key{Space: "/q", Key: shardmap.HashKey(1 << 63)}, 1); err != nil {
		t.Fatal(err)
	}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	newGroup := func(g uint64) *fsm {
		return newFSM(zaptest.NewLogger(t), newWatchRegistry(func(*conn, uint64, int64, tree.Event, []string) {}),
			session.NewTable(time.Second, time.Minute), 1<<20, 100, g)
	}
	apply := func(f *fsm, index uint64, txn tree.Txn) {
		t.Helper()
		txn.Time = time.Now().UnixMilli()
		if res := f.Apply(index, tree.AppendTxn(nil, &txn)).(*tree.Result); res.Err != nil {
			t.Fatalf("%v %s: %v", txn.Type, txn.Path, res.Err)
		}
	}
	meta := newGroup(shardmap.MetaGroup)
	apply(meta, 1, tree.Txn{Type: tree.TxnSetShardMap, Data: data, Version: -1})
	write, err := meta.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := write(&snap); err != nil {
		t.Fatal(err)
	}
	shard := newGroup(1)
	if err := shard.Restore(&snap, 1); err != nil {
		t.Fatal(err)
	}
	var fired []tree.Event
	shard.nodeChanged = func(evs []tree.Event) { fired = append(fired, evs...) }
	apply(shard, 2, tree.Txn{Type: tree.TxnStub, Ops: []tree.Txn{{Path: "/q", ACL: wire.OpenACL}}})
	if len(fired) != 0 {
		t.Errorf("the stub of /q fired %+v", fired)
	}
	high := "/q/" + lockName(true)
	apply(shard, 3, tree.Txn{Type: wire.OpCreate, Path: high})
	var got []string
	for _, ev := range fired {
		got = append(got, ev.Type.String()+" "+ev.Path)
	}
	if want := []string{"NodeCreated " + high, "NodeChildrenChanged /q"}; !slices.Equal(got, want) {
		t.Errorf("a create in the shard fired %q, want %q", got, want)
	}
}
