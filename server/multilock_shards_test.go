package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/shardmap"
)

// TestMultiLocksOverSeveralShardsHoldAllAndNeverDeadlock spreads /locks'
// children over two shards and takes multi-locks over a lock in each: Go
// MultiLocks named in either order, over and over on two members, never
// hold at once nor wait for each other for good; an HTTP multi-lock holds
// both locks, the next one waits for its release, and none is a deadlock.
// A multi cannot span shards: each joins one shard's queues at a time.
// Last, an HTTP waiter for a lock in a shard other than the meta group's
// is woken by its holder's release.
func TestMultiLocksOverSeveralShardsHoldAllAndNeverDeadlock(t *testing.T) {
	t.Parallel()
	members, _ := startTrio(t, map[uint64]string{}, func(c *Config) { c.HTTP = "127.0.0.1:0" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, _, err := members[1].changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition("/locks") }); err != nil {
		t.Fatal(err)
	}
	dial := func(id uint64) *client.Client {
		c, err := client.Dial(ctx, []string{members[id].Addr().String()}, client.WithSessionTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(1), dial(2)
	if _, err := c1.SplitShards(ctx, shardmap.Key{Space: "/locks"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every member routing by two shards, group 1 led", func() bool {
		for _, s := range members {
			if m, g := s.routingMap(), s.group(1); m == nil || len(m.Shards) != 2 || g == nil || g.node.Leader() == 0 {
				return false
			}
		}
		return true
	})
	low, high := lockName(false), lockName(true)
	if m := members[1].routingMap(); m.Shard("/locks/"+low).Server() == m.Shard("/locks/"+high).Server() {
		t.Fatalf("%s and %s in one shard", low, high)
	}

	// A lock at the partitioned parent itself cannot be: its nodes would
	// be children of it, which the shards share by the hash of their
	// names, and a sequential node's name is known only once it is made.
	for _, parts := range [][]recipes.LockPart{{{Path: "/locks"}}, {{Path: "/locks"}, {Path: "/locks/" + low}}} {
		l, err := recipes.NewMultiLock(c1, parts)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Lock(ctx); !errors.Is(err, client.ErrBadArguments) {
			t.Errorf("a lock at /locks, partitioned: %v, want BadArguments", err)
		}
	}

	var inside atomic.Int32
	var wg sync.WaitGroup
	for i, c := range []*client.Client{c1, c2} {
		parts := []recipes.LockPart{{Path: "/locks/" + low}, {Path: "/locks/" + high}}
		if i == 1 {
			parts[0], parts[1] = parts[1], parts[0]
		}
		l, err := recipes.NewMultiLock(c, parts)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				if err := l.Lock(ctx); err != nil {
					t.Errorf("multi-lock %d: %v", i, err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d multi-locks hold at once", n)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("unlock %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()

	s := members[3]
	multi := func(client string, waitMs int) (int, map[string]any) {
		code, v, err := tryAPI(s, "POST", "/api/v1/multilocks/acquire", map[string]any{"client_id": client, "wait_timeout_ms": waitMs,
			"locks": []map[string]any{{"name": high}, {"name": low}}})
		if err != nil {
			return 0, map[string]any{"error": err.Error()}
		}
		return code, v
	}
	code, m1 := multi("m1", 0)
	if code != http.StatusOK || len(m1["locks"].([]any)) != 2 {
		t.Fatalf("an HTTP multi-lock of free locks in two shards: %d %v", code, m1)
	}
	got := make(chan map[string]any, 1)
	go func() { _, v := multi("m2", 30000); got <- v }()
	waitFor(t, "m2 to wait", func() bool {
		_, v := api(t, s, "GET", "/api/v1/locks/"+low, nil)
		ws, _ := v["waiters"].([]any)
		return len(ws) == 1
	})
	if _, v := api(t, s, "GET", "/api/v1/deadlocks", nil); len(v["cycles"].([]any)) != 0 {
		t.Fatalf("multi-locks in a deadlock: %v", v)
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/"+high+"/release", map[string]any{"lease_id": m1["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release of the multi-lock through one of its locks: %d %v", code, v)
	}
	m2 := <-got
	if m2["acquired"] != true {
		t.Fatalf("the next multi-lock: %v", m2)
	}
	for _, name := range []string{low, high} {
		_, v := api(t, s, "GET", "/api/v1/locks/"+name, nil)
		if hs := v["holders"].([]any); len(hs) != 1 || hs[0].(map[string]any)["lease_id"] != m2["lease_id"] {
			t.Errorf("%s is not held by the multi-lock that got both: %v", name, v)
		}
	}

	// A waiter for a lock of a shard other than the meta group's is woken
	// by the release, as the queue changes there.
	name := low
	if members[3].routingMap().Shard("/locks/"+name).Server() == shardmap.MetaGroup {
		name = high
	}
	if code, v := api(t, s, "POST", "/api/v1/locks/"+name+"/release", map[string]any{"lease_id": m2["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release of the second multi-lock: %d %v", code, v)
	}
	code, a := api(t, s, "POST", "/api/v1/locks/"+name+"/acquire", map[string]any{"client_id": "a", "ttl_ms": 30_000})
	if code != http.StatusOK {
		t.Fatalf("acquire by a: %d %v", code, a)
	}
	go func() {
		_, v, _ := tryAPI(s, "POST", "/api/v1/locks/"+name+"/acquire", map[string]any{"client_id": "b", "ttl_ms": 60_000, "wait_timeout_ms": 30_000})
		got <- v
	}()
	waitFor(t, "b to wait", func() bool {
		_, v := api(t, s, "GET", "/api/v1/locks/"+name, nil)
		ws, _ := v["waiters"].([]any)
		return len(ws) == 1
	})
	if code, v := api(t, s, "POST", "/api/v1/locks/"+name+"/release", map[string]any{"lease_id": a["lease_id"]}); code != http.StatusOK {
		t.Fatalf("release by a: %d %v", code, v)
	}
	select {
	case b := <-got:
		if b["acquired"] != true || b["fencing_token"].(float64) <= a["fencing_token"].(float64) {
			t.Errorf("b after a's release: %v (a had %v)", b, a["fencing_token"])
		}
	case <-time.After(10 * time.Second): // its wait looks again as it renews its lease, every 20 s
		t.Fatalf("b still waits 10 s after a released %s", name)
	}
}
