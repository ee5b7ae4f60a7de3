package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A client that keeps writing over a quota cannot flood the log: a line a
// second per kind of limit, every breach counted.
func TestQuotaBreachesAreCountedAllAndLoggedSparingly(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	reg := prometheus.NewRegistry()
	q := newQuotaAlarms(reg)
	soft := []tree.QuotaBreach{{Path: "/app", Limit: 2, Usage: 3}}
	hard := []tree.QuotaBreach{{Path: "/app", Bytes: true, Hard: true, Limit: 10, Usage: 11}}
	for range 100 {
		q.note(zap.New(core), soft, 0x1)
		q.note(zap.New(core), hard, 0x1)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gathered %d families, %v", len(mfs), err)
	}
	counts := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			key += l.GetName() + "=" + l.GetValue() + " "
		}
		counts[key] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"kind=bytes limit=hard ": 100, "kind=bytes limit=soft ": 0, "kind=bytes limit=exempt ": 0,
		"kind=count limit=hard ": 0, "kind=count limit=soft ": 100, "kind=count limit=exempt ": 0}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("%s = %v, want %v", mfs[0].GetName(), counts, want)
	}
	if n := logs.Len(); n != 2 {
		t.Errorf("%d lines logged, want 2 (one per kind of limit within the second)", n)
	}
	for _, e := range logs.All() {
		if e.ContextMap()["path"] != "/app" || e.ContextMap()["session"] != "0x1" {
			t.Errorf("logged %v", e.ContextMap())
		}
	}
}

// TestAQuotaBelowAPartitionedParentCountsInItsChildsShard spreads /q's
// children over two shards: a quota on a child of /q is set, read,
// enforced, listed and deleted through a client as on any cluster, and
// lives in the child's shard; a quota on /q itself, which would count in
// one shard only, is refused, and while one counts /q a split of its
// hashes is refused.
func TestAQuotaBelowAPartitionedParentCountsInItsChildsShard(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition("/q") }); err != nil {
		t.Fatal(err)
	}
	c := dialClient(t, s)
	if _, err := c.Create(ctx, "/q", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetQuota(ctx, "/q", client.QuotaCount, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SplitShards(ctx, "/q", nil); !errors.Is(err, wire.ErrBadArguments) {
		t.Fatalf("a split of /q's hashes while a quota counts /q: %v, want BadArguments", err)
	}
	if err := c.DeleteQuota(ctx, "/q"); err != nil {
		t.Fatal(err)
	}
	m, err := s.SplitShards(ctx, "/q", nil)
	if err != nil {
		t.Fatal(err)
	}
	into := m.Shards[len(m.Shards)-1].Group
	low, high := "/q/"+lockName(false), "/q/"+lockName(true)
	for _, p := range []string{low, high} {
		if _, err := c.Create(ctx, p, nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetQuota(ctx, p, client.QuotaCountHard, 2); err != nil {
			t.Fatalf("a quota on %s: %v", p, err)
		}
		if _, err := c.Create(ctx, p+"/a", nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(ctx, p+"/b", nil, client.Persistent); !errors.Is(err, client.ErrQuotaExceeded) {
			t.Errorf("a create past the quota on %s: %v, want QuotaExceeded", p, err)
		}
		if q, err := c.Quota(ctx, p); err != nil || q.Usage.Count() != 2 {
			t.Errorf("the quota on %s: %+v, %v; want a count of 2", p, q, err)
		}
	}
	var inShard error
	s.group(into).fsm.read(func(t *tree.Tree) { _, inShard = t.Exists(quotas.LimitPath(high)) })
	if inShard != nil {
		t.Errorf("the quota on %s in its shard, group %d: %v", high, into, inShard)
	}
	want := []string{lockName(false), lockName(true)}
	slices.Sort(want)
	if kids, _, err := c.Children(ctx, "/zookeeper/quota/q"); err != nil || !slices.Equal(kids, want) {
		t.Errorf("ls /zookeeper/quota/q: %v, %v; want %v", kids, err, want)
	}
	if _, err := c.Create(ctx, quotas.LimitPath("/q"), []byte("count=10,bytes=-1"), client.Persistent); !errors.Is(err, client.ErrBadArguments) {
		t.Errorf("a quota on /q, spread over shards: %v, want BadArguments", err)
	}
	if err := c.DeleteQuota(ctx, high); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteQuota(ctx, low); err != nil {
		t.Fatal(err)
	}
	if kids, _, err := c.Children(ctx, "/zookeeper/quota/q"); err != nil || len(kids) != 0 {
		t.Errorf("ls /zookeeper/quota/q after both quotas went: %v, %v; want it empty, and there", kids, err)
	}
	if _, err := c.Create(ctx, high+"/b", nil, client.Persistent); err != nil {
		t.Errorf("a create once the quota went: %v", err)
	}
}

// A hard quota over a lock that is full cannot keep a lost holder's lock
// held: the lock-delay that its loss puts (a node more) goes through the
// limit, as a member's own write, so the expired lease is closed (not
// tried again at every tick) and a break answers; the delay holds the
// lock for its time, then goes.
func TestAFullQuotaOverALockRootDoesNotKeepALostHoldersLock(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialClient(t, s)
	ctx := context.Background()
	const delay = 500 * time.Millisecond
	for _, tc := range []struct {
		name, end string
		lose      func(t *testing.T, name string)
	}{
		{"expiry", "expired", func(t *testing.T, name string) {}}, // a does not renew
		{"break", "broken", func(t *testing.T, name string) {
			if code, v := api(t, s, "POST", "/api/v1/locks/"+name+"/break", map[string]any{"reason": "a test"}); code != http.StatusOK {
				t.Fatalf("break: %d %v", code, v)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "q-" + tc.name
			code, a := api(t, s, "POST", "/api/v1/locks/"+name+"/acquire",
				map[string]any{"client_id": "a", "ttl_ms": 1000, "lock_delay_ms": delay.Milliseconds()})
			if code != http.StatusOK {
				t.Fatalf("acquire: %d %v", code, a)
			}
			// /locks/NAME, its holder's node and the quota's own node:
			// full.
			if _, err := c.SetQuota(ctx, "/locks/"+name, client.QuotaCountHard, 2); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Create(ctx, "/locks/"+name+"/more", nil, client.Persistent); !errors.Is(err, client.ErrQuotaExceeded) {
				t.Fatalf("a create in the full quota: %v", err)
			}
			// A client's own node is held to the limit: a 403 that says why.
			for _, path := range []string{"/api/v1/locks/" + name + "/acquire", "/api/v1/tree/locks/" + name + "/more"} {
				body := map[string]any{"client_id": "c", "wait_timeout_ms": 0}
				if strings.Contains(path, "/tree/") {
					body = map[string]any{}
				}
				if code, v := api(t, s, "POST", path, body); code != http.StatusForbidden || !strings.Contains(fmt.Sprint(v["error"]), "quota") {
					t.Errorf("POST %s in the full quota: %d %v, want 403 and why", path, code, v)
				}
			}
			tc.lose(t, name)
			// The delay takes a's place, then goes; b, which needs a node
			// in the quota, acquires once it has.
			waitFor(t, "the lock to be free", func() bool {
				h, _ := holdersAndWaiters(t, s, name)
				return h == 0
			})
			code, b := api(t, s, "POST", "/api/v1/locks/"+name+"/acquire", map[string]any{"client_id": "b"})
			if code != http.StatusOK || b["acquired"] != true {
				t.Fatalf("b's acquire: %d %v", code, b)
			}
			var lost, delayed bool
			for _, ev := range lockEvents(t, s, name) {
				lost = lost || ev["client_id"] == "a" && ev["event"] == tc.end
				delayed = delayed || ev["client_id"] == lockDelayOwner && ev["event"] == "acquired"
			}
			if !lost || !delayed {
				t.Errorf("the history has a %s: %v, a lock-delay: %v", tc.end, lost, delayed)
			}
		})
	}
	if n := quotaExceeded(t, s, "count", "exempt"); n != 2 {
		t.Errorf("%v lock-delays counted past the hard limit, want 2", n)
	}
}

// quotaExceeded is arbor_quota_exceeded_total{kind, limit} of s.
func quotaExceeded(t *testing.T, s *Server, kind, limit string) float64 {
	t.Helper()
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "arbor_quota_exceeded_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind && labels["limit"] == limit {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no arbor_quota_exceeded_total{kind=%q,limit=%q}", kind, limit)
	return 0
}
