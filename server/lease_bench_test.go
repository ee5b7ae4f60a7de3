package server

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/session"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// BenchmarkMemoryPerHeldLease applies to one group's state machine what a
// lock service's holders leave: for each of 200,000 locks /locks/k<i>, a
// lease of an HTTP client (a session of its own, with a TTL) and the one
// lock node it holds there (ephemeral, sequential, bound to the lease, its
// record as data), in a container of its own. It reports the heap the
// state machine holds per held lease after a GC (the tree, the lock index,
// the session table), and the time to apply it all. Every member holds
// every shard (docs/scale-out.md), so this is the cost per member however
// the locks are spread over shards. It only runs when -bench selects it:
// go test ./server -run XXX -bench MemoryPerHeldLease -count 3.
func BenchmarkMemoryPerHeldLease(b *testing.B) {
	const leases = 200_000
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()

		sessions := session.NewTable(time.Second, time.Minute)
		f := newFSM(zap.NewNop(), newWatchRegistry(func(*conn, uint64, int64, tree.Event, []string) {}), sessions, 1<<20, 100, 0)
		var zxid uint64
		apply := func(txn tree.Txn) {
			zxid++
			txn.Time = start.UnixMilli() + int64(zxid)
			if res := f.Apply(zxid, tree.AppendTxn(nil, &txn)).(*tree.Result); res.Err != nil {
				b.Fatalf("%v %s: %v", txn.Type, txn.Path, res.Err)
			}
		}
		apply(tree.Txn{Type: wire.OpCreate, Path: "/locks"})
		for i := range leases {
			lease := int64(i + 1)
			dir := fmt.Sprintf("/locks/k%07d", i)
			apply(tree.Txn{Type: wire.OpCreate, Path: dir, Mode: wire.ModeContainer})
			apply(tree.Txn{Type: tree.TxnCreateSession, Session: lease, LeaseTTL: 60_000, LeaseOwner: "client"})
			rec := lockq.Record{Owner: "client", Holder: "client"}
			apply(tree.Txn{Type: wire.OpCreate, Path: dir + "/" + lockq.Prefix(lockq.ID(fmt.Sprintf("%016x", i), 0, ""), lockq.Exclusive),
				Mode: wire.ModeEphemeralSequential, Session: lease, Data: rec.Encode()})
		}
		took := time.Since(start)

		runtime.GC()
		runtime.ReadMemStats(&after)
		var held int
		f.read(func(t *tree.Tree) { held = t.EphemeralCount() })
		if held != leases {
			b.Fatalf("%d lock nodes held, want %d", held, leases)
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/leases, "heap-bytes/lease")
		b.ReportMetric(took.Seconds(), "s/200k")
		runtime.KeepAlive(f)
	}
}
