package client_test

import (
	"errors"
	"testing"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// These tests run SetQuota, Quota and DeleteQuota against a real server.

func TestSetQuotaWritesTheNodesZkCliWrites(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	ctx := testContext(t)
	makeTree(t, c, "/app", "/app/a")
	q, err := c.SetQuota(ctx, "/app", client.QuotaCountHard, 2)
	if err != nil {
		t.Fatal(err)
	}
	if q.Path != "/app" || q.Limits.Limit(quotas.CountHard) != 2 || q.Limits.Count() != -1 || q.Usage.Count() != 2 || len(q.Over()) != 0 {
		t.Fatalf("SetQuota = %+v (limits %s, usage %s)", q, q.Limits, q.Usage)
	}
	data, _, err := c.Get(ctx, "/zookeeper/quota/app/zookeeper_limits")
	if want := "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=2"; err != nil || string(data) != want {
		t.Errorf("limits node %q, %v; want %q", data, err, want)
	}
	if _, err := c.Create(ctx, "/app/b", nil, client.Persistent); !errors.Is(err, client.ErrQuotaExceeded) {
		t.Errorf("create over the limit: %v", err)
	}
	t.Run("another limit keeps the first", func(t *testing.T) {
		q, err := c.SetQuota(ctx, "/app", client.QuotaBytes, 0)
		if err != nil || q.Limits.Limit(quotas.CountHard) != 2 || q.Limits.Bytes() != 0 {
			t.Fatalf("SetQuota = %+v, %v", q, err)
		}
		if over := q.Over(); len(over) != 0 {
			t.Errorf("over %v with no bytes", over)
		}
	})
	t.Run("nesting is refused both ways", func(t *testing.T) {
		makeTree(t, c, "/other", "/other/x")
		if _, err := c.SetQuota(ctx, "/app/a", client.QuotaCount, 1); !errors.Is(err, client.ErrQuotaNested) {
			t.Errorf("below a quota: %v", err)
		}
		if _, err := c.SetQuota(ctx, "/other/x", client.QuotaCount, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SetQuota(ctx, "/other", client.QuotaCount, 1); !errors.Is(err, client.ErrQuotaNested) {
			t.Errorf("above a quota: %v", err)
		}
	})
	t.Run("what cannot have a quota", func(t *testing.T) {
		for path, want := range map[string]error{
			"/":                  quotas.ErrNotAllowed,
			"/zookeeper":         quotas.ErrNotAllowed,
			"/zookeeper/quota/x": quotas.ErrNotAllowed,
			// Its quota's directory would be /app's limits node.
			"/app/zookeeper_limits": quotas.ErrNotAllowed,
			"/app/zookeeper_stats":  quotas.ErrNotAllowed,
			"/nope":                 client.ErrNoNode,
			"bad":                   wire.ErrBadArguments,
		} {
			if _, err := c.SetQuota(ctx, path, client.QuotaCount, 1); !errors.Is(err, want) {
				t.Errorf("SetQuota(%s) = %v, want %v", path, err, want)
			}
		}
		for _, l := range []client.QuotaLimit{client.QuotaCount, client.QuotaCountHard} {
			if _, err := c.SetQuota(ctx, "/app", l, 0); !errors.Is(err, client.ErrBadArguments) {
				t.Errorf("%s of 0: %v", l, err)
			}
		}
		if _, err := c.SetQuota(ctx, "/app", client.QuotaBytesHard, -1); !errors.Is(err, client.ErrBadArguments) {
			t.Errorf("bytes of -1: %v", err)
		}
	})
	t.Run("a node named as a quota's own is no path for a quota", func(t *testing.T) {
		// /fresh/zookeeper_limits's quota would live under
		// /zookeeper/quota/fresh/zookeeper_limits: /fresh's limits node.
		makeTree(t, c, "/fresh", "/fresh/zookeeper_limits")
		if _, err := c.SetQuota(ctx, "/fresh/zookeeper_limits", client.QuotaCount, 1); !errors.Is(err, quotas.ErrNotAllowed) {
			t.Errorf("SetQuota = %v, want ErrNotAllowed", err)
		}
		if _, err := c.Quota(ctx, "/fresh"); !errors.Is(err, client.ErrNoQuota) {
			t.Errorf("a quota on /fresh: %v", err)
		}
		if ok, _, _ := c.Exists(ctx, quotas.QuotaPath("/fresh")); ok {
			t.Error("SetQuota wrote under /zookeeper/quota")
		}
	})
	t.Run("DeleteQuota of one limit keeps the others", func(t *testing.T) {
		if err := c.DeleteQuota(ctx, "/app", client.QuotaCountHard); err != nil {
			t.Fatal(err)
		}
		q, err := c.Quota(ctx, "/app")
		if err != nil || q.Limits.Limit(quotas.CountHard) != -1 || q.Limits.Bytes() != 0 {
			t.Fatalf("Quota = %+v, %v", q, err)
		}
		if _, err := c.Create(ctx, "/app/b", nil, client.Persistent); err != nil {
			t.Errorf("create without the hard limit: %v", err)
		}
	})
	t.Run("DeleteQuota deletes the quota and the nodes no other needs", func(t *testing.T) {
		if err := c.DeleteQuota(ctx, "/app"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Quota(ctx, "/app"); !errors.Is(err, client.ErrNoQuota) || !errors.Is(err, client.ErrNoNode) {
			t.Errorf("Quota after DeleteQuota: %v", err)
		}
		if err := c.DeleteQuota(ctx, "/app"); !errors.Is(err, client.ErrNoQuota) {
			t.Errorf("DeleteQuota again: %v", err)
		}
		if err := c.DeleteQuota(ctx, "/other/x"); err != nil {
			t.Fatal(err)
		}
		names, _, err := c.Children(ctx, "/zookeeper/quota")
		if err != nil || len(names) != 0 {
			t.Errorf("/zookeeper/quota holds %v, %v", names, err)
		}
	})
}
