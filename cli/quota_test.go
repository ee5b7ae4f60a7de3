package cli

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestQuotaCommandsAsZkCli(t *testing.T) {
	t.Parallel()
	addr, metrics := startServer(t)
	must(t, addr, "create", "/app", "ab")
	must(t, addr, "create", "/app/sub")
	runSteps(t, addr, []step{
		{"setquota -N sets a hard limit on nodes, printing nothing", []string{"setquota", "-N", "3", "/app"}, 0, "", ""},
		{"listquota prints the limits and the usage as zkCli does", []string{"listquota", "/app"}, 0,
			"Output quota for /app count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=3\nOutput stat for /app count=2,bytes=2\n", ""},
		{"a create under the limit goes through", []string{"create", "/app/a"}, 0, "/app/a\n", ""},
		{"a create over the hard limit is refused", []string{"create", "/app/b"}, 1, "", "quota"},
		{"setquota -b adds a soft limit to the same quota", []string{"setquota", "-b", "100", "/app"}, 0, "", ""},
		{"listquota shows both", []string{"listquota", "/app"}, 0,
			"Output quota for /app count=-1,bytes=100=;byteHardLimit=-1;countHardLimit=3\nOutput stat for /app count=3,bytes=2\n", ""},
		{"setquota -n sets the soft limit on nodes", []string{"setquota", "-n", "3", "/app"}, 0, "", ""},
		{"delquota -N drops that limit alone", []string{"delquota", "-N", "/app"}, 0, "", ""},
		{"so the create goes through now", []string{"create", "/app/b"}, 0, "/app/b\n", ""},
		{"listquota -o json gives limits and usage", []string{"listquota", "-o", "json", "/app"}, 0,
			`{"path":"/app","limits":{"count":3,"bytes":100,"countHardLimit":-1,"byteHardLimit":-1},"usage":{"count":4,"bytes":2}}` + "\n", ""},
		{"a quota below one above is refused", []string{"setquota", "-n", "5", "/app/sub"}, 1, "", "/app/sub has a parent /app which has a quota"},
		{"delquota deletes the quota", []string{"delquota", "/app"}, 0, "", ""},
		{"and its nodes under /zookeeper/quota", []string{"ls", "/zookeeper/quota"}, 0, "", ""},
		{"listquota of no quota says so", []string{"listquota", "/app"}, 1, "", "quota for /app does not exist"},
		{"delquota of no quota says so", []string{"delquota", "/app"}, 1, "", "quota for /app does not exist"},
		{"a quota on a node below", []string{"setquota", "-n", "5", "/app/sub"}, 0, "", ""},
		{"refuses one above it", []string{"setquota", "-n", "5", "/app"}, 1, "", "/app has a child /app/sub which has a quota"},
		{"setquota of a missing node fails", []string{"setquota", "-n", "5", "/nope"}, 1, "", "/nope does not exist"},
		{"setquota under /zookeeper/quota fails as in zkCli", []string{"setquota", "-n", "5", "/zookeeper/quota/x"}, 1, "", "cannot set a quota under the path: /zookeeper/quota"},
		{"setquota of the root fails", []string{"setquota", "-n", "5", "/"}, 1, "", "cannot set a quota on /"},
		{"setquota of a path through a node named as a quota's fails", []string{"setquota", "-n", "5", "/app/zookeeper_limits"}, 1, "", "a node on its path is named zookeeper_limits"},
		{"setquota needs one limit", []string{"setquota", "/app"}, 2, "", "give one of -n, -b, -N and -B"},
		{"setquota takes one limit", []string{"setquota", "-n", "1", "-b", "2", "/app"}, 2, "", "give one of"},
		{"a count limit must be positive", []string{"setquota", "-N", "0", "/app"}, 2, "", "the num quota must be greater than zero"},
		{"a byte limit must not be negative", []string{"setquota", "-B", "-1", "/app"}, 2, "", "the bytes quota must be greater than or equal to zero"},
		{"delquota takes at most one limit", []string{"delquota", "-n", "-b", "/app"}, 2, "", "at most one"},
	})
	t.Run("a limit below the usage is set, with a warning", func(t *testing.T) {
		must(t, addr, "create", "/app/sub/x")
		r := arbor(t, addr, "setquota", "-N", "1", "/app/sub")
		if r.code != 0 || r.stderr != "arbor: warning: the count quota you set is less than the existing count: 2\n" {
			t.Fatalf("setquota below the usage = %v", r)
		}
		runSteps(t, addr, []step{{"and refuses what would grow the subtree", []string{"create", "/app/sub/y"}, 1, "", "quota"}})
	})
	t.Run("the soft limit passed shows on /metrics", func(t *testing.T) {
		body := httpGet(t, metrics)
		if !strings.Contains(body, `arbor_quota_exceeded_total{kind="count",limit="soft"} 1`) ||
			!strings.Contains(body, `arbor_quota_exceeded_total{kind="count",limit="hard"} 2`) {
			t.Errorf("/metrics lacks the quota counts:\n%s", grepLines(body, "arbor_quota"))
		}
	})
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
