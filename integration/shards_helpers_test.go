package integration

import (
	"flag"
	"testing"

	"github.com/arbor-coord/arbor/internal/shardtest"
	"github.com/arbor-coord/arbor/server"
)

// flagShards runs every test's servers sharded: their top-level names
// split over this many shards at start (docs/scale-out.md), so that the
// suite checks that a sharded cluster serves its clients as one group
// does: go test ./integration -integration.shards=4.
var flagShards = flag.Int("integration.shards", 0, "split every test's servers' top-level names over this many shards at start")

// mapNode is 1 when the tests run sharded: a sharded cluster has one
// system node more, /zookeeper/shards, its partition map, which listings
// and counts show like ZooKeeper's own /zookeeper/config.
func mapNode() int { return shardtest.MapNodes(*flagShards) }

// shardZxid is the zxid of position pos, a ZooKeeper reply's or
// notification's header zxid: on a sharded cluster it names the shard in
// its top bits, and its zxid below (docs/zookeeper-compat.md); elsewhere
// it is the zxid.
func shardZxid(pos int64) int64 { return pos & (1<<48 - 1) }

// shardAtStart splits the servers' top-level names into *flagShards
// shards, if asked and not done before they restarted, and waits until
// every member has its leader for each shard.
func shardAtStart(t testing.TB, servers ...*server.Server) {
	t.Helper()
	shardInto(t, *flagShards, servers...)
}

// shardInto splits the servers' top-level names into n shards
// (shardtest.SplitNames: at "t", "n", "g", ...).
func shardInto(t testing.TB, n int, servers ...*server.Server) {
	t.Helper()
	shardtest.SplitNames(t, n, patience, servers...)
}
