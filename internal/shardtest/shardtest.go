// Package shardtest spreads a parent's children over shards for the test
// suites that run against a sharded cluster (docs/scale-out.md): the
// recipes' and the console's, behind their -*.shards flags.
package shardtest

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
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
