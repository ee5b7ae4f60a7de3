package integration

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
)

// flagShards runs every test's servers sharded: their top-level names
// split over this many shards at start (docs/scale-out.md), so that the
// suite checks that a sharded cluster serves its clients as one group
// does: go test ./integration -integration.shards=4.
var flagShards = flag.Int("integration.shards", 0, "split every test's servers' top-level names over this many shards at start")

// mapNode is 1 when the tests run sharded: a sharded cluster has one
// system node more, /zookeeper/shards, its partition map, which listings
// and counts show like ZooKeeper's own /zookeeper/config.
func mapNode() int {
	if *flagShards >= 2 {
		return 1
	}
	return 0
}

// shardZxid is the zxid of position pos, a ZooKeeper reply's or
// notification's header zxid: on a sharded cluster it names the shard in
// its top bits, and its zxid below (docs/zookeeper-compat.md); elsewhere
// it is the zxid.
func shardZxid(pos int64) int64 { return pos & (1<<48 - 1) }

// shardNames are the names the top-level names split at, for up to 8
// shards: each split takes the meta group's keys from its name on.
var shardNames = []string{"t", "n", "g", "d", "q", "k", "w"}

// shardAtStart splits the servers into *flagShards shards, if asked and
// not done before they restarted, and waits until every member has its
// leader for each shard. It asks the servers themselves, not a client, so
// that servers whose clients need TLS or the superuser are split too.
func shardAtStart(t testing.TB, servers ...*server.Server) {
	t.Helper()
	shardInto(t, *flagShards, servers...)
}

// shardInto splits the servers' top-level names into n shards at
// shardNames, as shardAtStart does, if they are not split so already.
func shardInto(t testing.TB, n int, servers ...*server.Server) {
	t.Helper()
	n = min(n, len(shardNames)+1)
	if n < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	s := servers[0]
	for _, name := range shardNames[:n-1] {
		if m, _ := s.ShardMap(); len(m.Shards) >= n {
			break // split before a restart
		}
		for {
			_, err := s.SplitShards(ctx, "/", []byte(name))
			if err == nil || strings.Contains(err.Error(), "starts a range") {
				break
			}
			if !errors.Is(err, wire.ErrBadArguments) || ctx.Err() != nil {
				t.Fatalf("split at %q: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond) // the members' cards: maps change once every member knows them
		}
	}
	for _, s := range servers {
		for !shardsLed(s, n) {
			if ctx.Err() != nil {
				t.Fatalf("member %d: shards not led within %v: %+v", s.Status().ID, patience, s.Status().Shards)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// shardsLed says whether s runs n-1 groups besides the meta group, each
// led by its preferred leader (leaderships are spread over the members):
// as a cluster's tests start once it has its leader.
func shardsLed(s *server.Server, n int) bool {
	st := s.Status().Shards
	if len(st) < n-1 {
		return false
	}
	for _, g := range st {
		if g.Leader == 0 || g.Preferred != 0 && g.Leader != g.Preferred {
			return false
		}
	}
	return true
}
