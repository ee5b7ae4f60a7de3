// Package shardtest spreads a cluster over shards for the test suites
// that run against a sharded cluster (docs/scale-out.md), behind their
// -*.shards flags: a parent's children by hash (Spread: the recipes' and
// the console's), or the top-level names (SplitNames: the integration
// suite's and the CLI's).
package shardtest

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
)

// Spread partitions parent through c (a client with the rights of a
// membership change) and splits its hashes into n equal ranges through
// members[0], then waits until every member runs the n-1 new shards, each
// led. It gives up, failing t, after wait.
func Spread(t testing.TB, c *client.Client, members []*server.Server, parent string, n int, wait time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, err := c.PartitionShards(ctx, parent); err != nil; _, err = c.PartitionShards(ctx, parent) {
		if !errors.Is(err, client.ErrBadArguments) || ctx.Err() != nil {
			t.Fatalf("partition %s: %v", parent, err)
		}
		time.Sleep(50 * time.Millisecond) // the members' cards: a map changes once every member knows maps
	}
	for k := uint64(n - 1); k >= 1; k-- {
		at := binary.BigEndian.AppendUint64(nil, k*(math.MaxUint64/uint64(n)))
		if _, err := members[0].SplitShards(ctx, parent, at); err != nil {
			t.Fatalf("split of %s's hashes: %v", parent, err)
		}
	}
	leaderless := func(g server.GroupStatus) bool { return g.Leader == 0 }
	for _, s := range members {
		for st := s.Status().Shards; len(st) < n-1 || slices.ContainsFunc(st, leaderless); st = s.Status().Shards {
			if ctx.Err() != nil {
				t.Fatalf("member %d: shards not led: %+v", s.Status().ID, st)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Names are the names SplitNames splits the top-level names at, for up to
// 8 shards: each split takes the meta group's keys from its name on.
var Names = []string{"t", "n", "g", "d", "q", "k", "w"}

// SplitNames splits the servers' top-level names into n shards at Names
// (at most len(Names)+1), if they are not split so already (as after a
// restart), through servers[0] itself, so that servers whose clients need
// TLS or the superuser are split too; then it waits until every member
// runs each shard led by its preferred leader. It gives up, failing t,
// after wait.
func SplitNames(t testing.TB, n int, wait time.Duration, servers ...*server.Server) {
	t.Helper()
	n = min(n, len(Names)+1)
	if n < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s := servers[0]
	for _, name := range Names[:n-1] {
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
		for !Led(s, n) {
			if ctx.Err() != nil {
				t.Fatalf("member %d: shards not led within %v: %+v", s.Status().ID, wait, s.Status().Shards)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Led says whether s runs n-1 groups besides the meta group, each led by
// its preferred leader (leaderships are spread over the members): as a
// cluster's tests start once it has its leader.
func Led(s *server.Server, n int) bool {
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

// MapNodes is the system nodes a cluster split into n shards has besides
// one never split: 1, its partition map's /zookeeper/shards, which
// listings and counts show like ZooKeeper's own /zookeeper/config; 0 for
// n below 2.
func MapNodes(n int) int {
	if n >= 2 {
		return 1
	}
	return 0
}

// MapPaths are the paths of MapNodes(n), as a walk of / visits them after
// /zookeeper/quota.
func MapPaths(n int) []string {
	if MapNodes(n) == 1 {
		return []string{"/zookeeper/shards"}
	}
	return nil
}

// NewServer starts a single server with cfg, stopped when the test ends,
// and splits its top-level names into n shards (SplitNames; none below
// 2): the servers of the suites that run against one sharded member.
func NewServer(t testing.TB, cfg server.Config, n int) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	SplitNames(t, n, 30*time.Second, s)
	return s
}
