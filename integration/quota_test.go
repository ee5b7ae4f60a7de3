package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// setQuotaAsZkCli sets a quota on path the way zkCli.sh's setquota does:
// the nodes under /zookeeper/quota, the limits, then the stats.
func setQuotaAsZkCli(t *testing.T, c *zkClient, path, limits string) {
	t.Helper()
	p := "/zookeeper/quota"
	for _, seg := range strings.Split(path, "/")[1:] {
		p += "/" + seg
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	if _, err := c.Create(p+"/zookeeper_limits", []byte(limits), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create the limits: %v", err)
	}
	if _, err := c.Create(p+"/zookeeper_stats", []byte("count=0,bytes=0"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create the stats: %v", err)
	}
}

// isQuotaExceeded reports whether err is ZooKeeper's QuotaExceeded
// (-125), which go-zookeeper v1.0.4 has no sentinel for.
func isQuotaExceeded(err error) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprint(-125))
}

// metric returns the line of /metrics that starts with name, or "".
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	return ""
}

func TestZooKeeperQuotasThroughTheZooKeeperPort(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK, withHTTP)
	c := dialZK(t, []string{s.ZKAddr().String()}, 5*time.Second)
	open := zk.WorldACL(zk.PermAll)

	want := "config,quota"
	if mapNode() > 0 {
		want += ",shards"
	}
	if kids, _, err := c.Children("/zookeeper"); err != nil || strings.Join(kids, ",") != want {
		t.Fatalf("children of /zookeeper: %v, %v", kids, err)
	}
	if err := c.Delete("/zookeeper/quota", -1); err != zk.ErrBadArguments {
		t.Errorf("delete /zookeeper/quota: %v, want ErrBadArguments", err)
	}

	if _, err := c.Create("/app", []byte("a"), 0, open); err != nil {
		t.Fatal(err)
	}
	setQuotaAsZkCli(t, c, "/app", "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3")
	for _, p := range []string{"/app/x", "/app/y"} {
		if _, err := c.Create(p, nil, 0, open); err != nil {
			t.Fatalf("create %s under the limit: %v", p, err)
		}
	}
	if _, err := c.Create("/app/z", nil, 0, open); !isQuotaExceeded(err) {
		t.Fatalf("create over the hard limit: %v, want QuotaExceeded (-125)", err)
	}
	// Under one root: a multi across shards of a sharded cluster is refused.
	if _, err := c.Multi(&zk.SetDataRequest{Path: "/app/x", Data: []byte("x"), Version: -1}, &zk.CreateRequest{Path: "/app/z", Acl: open}); !isQuotaExceeded(err) {
		t.Fatalf("a multi over the hard limit: %v, want QuotaExceeded (-125)", err)
	}
	if data, _, _ := c.Get("/app/x"); len(data) != 0 {
		t.Errorf("the failed multi set /app/x to %q", data)
	}
	if data, _, err := c.Get("/zookeeper/quota/app/zookeeper_stats"); err != nil || string(data) != "count=3,bytes=1" {
		t.Errorf("stats = %q, %v", data, err)
	}

	t.Run("a soft limit lets the write through and counts it on /metrics", func(t *testing.T) {
		addr := s.HTTPAddr().String()
		const softCount = `arbor_quota_exceeded_total{kind="count",limit="soft"}`
		if got := metric(t, addr, softCount); got != softCount+" 0" {
			t.Errorf("before: %q", got)
		}
		if _, err := c.Create("/soft", nil, 0, open); err != nil {
			t.Fatal(err)
		}
		setQuotaAsZkCli(t, c, "/soft", "count=1,bytes=-1")
		if _, err := c.Create("/soft/a", nil, 0, open); err != nil {
			t.Fatalf("create over a soft limit: %v", err)
		}
		if got := metric(t, addr, softCount); got != softCount+" 1" {
			t.Errorf("after: %q", got)
		}
		const hardCount = `arbor_quota_exceeded_total{kind="count",limit="hard"}`
		if got := metric(t, addr, hardCount); got != hardCount+" 2" {
			t.Errorf("the two refusals: %q", got)
		}
	})
	t.Run("zkCli's delquota deletes the limits and the quota is gone", func(t *testing.T) {
		for _, p := range []string{"/zookeeper/quota/app/zookeeper_limits", "/zookeeper/quota/app/zookeeper_stats", "/zookeeper/quota/app"} {
			if err := c.Delete(p, -1); err != nil {
				t.Fatalf("delete %s: %v", p, err)
			}
		}
		if _, err := c.Create("/app/z", nil, 0, open); err != nil {
			t.Errorf("create without the quota: %v", err)
		}
	})
}

// TestZkCliSetsAQuota runs ZooKeeper's own zkCli.sh's quota commands
// against the ZooKeeper port, when it is installed (see zkCli).
func TestZkCliSetsAQuota(t *testing.T) {
	t.Parallel()
	cli := needZkCli(t)
	s := startServer(t, "", "", withZK)
	script := strings.Join([]string{
		"create /q",
		"setquota -N 2 /q",
		"listquota /q",
		"create /q/a",
		"create /q/b",
		"delquota /q",
		"create /q/b",
		"quit",
	}, "\n") + "\n"
	out := runZkCli(t, cli, s.ZKAddr().String(), script)
	for _, want := range []string{
		"Output quota for /q count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=2\n",
		"Output stat for /q count=1,bytes=0\n",
		"Created /q/a\n", "Quota has exceeded", "Created /q/b\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("zkCli.sh output lacks %q", want)
		}
	}
}
