package integration

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/shardmap"
)

// flagShards runs every test's servers sharded: their top-level names
// split over this many shards at start (docs/scale-out.md), so that the
// suite checks that a sharded cluster serves its clients as one group
// does: go test ./integration -integration.shards=4.
var flagShards = flag.Int("integration.shards", 0, "split every test's servers' top-level names over this many shards at start")

// shardNames are the names the top-level names split at, for up to 8
// shards: each split takes the meta group's keys from its name on.
var shardNames = []string{"t", "n", "g", "d", "q", "k", "w"}

// shardAtStart splits the servers at addrs into *flagShards shards, if
// asked, and waits until each shard answers.
func shardAtStart(t testing.TB, addrs []string) {
	t.Helper()
	n := *flagShards
	if n < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := shardNames[:min(n-1, len(shardNames))]
	for _, name := range names {
		for {
			_, err := c.SplitShards(ctx, shardmap.Key{Key: name})
			if err == nil {
				break
			}
			if !errors.Is(err, client.ErrBadArguments) || ctx.Err() != nil || strings.Contains(err.Error(), "starts a range") {
				t.Fatalf("split at %q: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond) // the members' cards: maps change once every member knows them
		}
	}
	for _, name := range names {
		for err := c.Sync(ctx, "/"+name); err != nil; err = c.Sync(ctx, "/"+name) {
			if ctx.Err() != nil {
				t.Fatalf("shard of %q: %v", name, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
