package quotas_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
)

// parseCases are read as ZooKeeper 3.9's StatsTrack reads them; err is
// where its constructor throws.
var parseCases = []struct {
	name                     string
	in                       string
	count, bytes, nHard, bHd int64
	err                      bool
}{
	{"nothing is nothing set", "", -1, -1, -1, -1, false},
	{"the usage ZooKeeper writes", "count=3,bytes=42", 3, 42, -1, -1, false},
	{"the limits before 3.7", "count=10,bytes=-1", 10, -1, -1, -1, false},
	{"the limits zkCli 3.7+ writes", "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=10", -1, -1, 10, -1, false},
	{"the trailing = after bytes is ignored", "count=1,bytes=5=", 1, 5, -1, -1, false},
	{"runs of separators are one", "count=1,,;;bytes=2;", 1, 2, -1, -1, false},
	{"an empty value reads as -1", "count==5,bytes=2", -1, 2, -1, -1, false},
	{"a later key wins", "count=1,count=2", 2, -1, -1, -1, false},
	{"unknown keys are kept, not read", "count=1,other=7", 1, -1, -1, -1, false},
	{"a sign is taken", "count=+4,bytes=-3", 4, -3, -1, -1, false},
	{"only separators is nothing", ",;,", -1, -1, -1, -1, false},
	{"a pair without a value", "count", 0, 0, 0, 0, true},
	{"a pair with an empty value at the end", "count=", 0, 0, 0, 0, true},
	{"a value that is not a number", "count=ten", 0, 0, 0, 0, true},
	{"a value over 64 bits", "bytes=9223372036854775808", 0, 0, 0, 0, true},
	{"a leading separator", ",count=1", 0, 0, 0, 0, true},
	{"a lone =", "=", 0, 0, 0, 0, true},
	{"spaces are not trimmed", "count= 1", 0, 0, 0, 0, true},
}

func TestParseReadsWhatZooKeeperReads(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := quotas.Parse(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("Parse(%q) = %v, error %v", tc.in, st, err)
			}
			if err != nil {
				return
			}
			if want := (quotas.Limits{tc.count, tc.bytes, tc.nHard, tc.bHd}); st.Limits() != want || st.Count() != tc.count || st.Bytes() != tc.bytes {
				t.Errorf("Parse(%q) = limits %v count %d bytes %d, want %v", tc.in, st.Limits(), st.Count(), st.Bytes(), want)
			}
		})
	}
}

func TestStringWritesWhatZooKeeperWrites(t *testing.T) {
	var limits quotas.StatsTrack
	limits.SetLimits(quotas.NoLimits)
	limits.SetLimit(quotas.CountHard, 10)
	for _, tc := range []struct {
		name string
		st   quotas.StatsTrack
		want string
	}{
		{"empty: count and bytes always, -1", quotas.StatsTrack{}, "count=-1,bytes=-1"},
		{"zkCli's setquota -N 10", limits, "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=10"},
		{"other keys sorted after the =", mustParse(t, "zeta=1,count=2,alpha=3"), "count=2,bytes=-1=;alpha=3;zeta=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.st.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
	if got := quotas.Usage(3, 42); got != "count=3,bytes=42" {
		t.Errorf("Usage = %q", got)
	}
}

func mustParse(t *testing.T, s string) quotas.StatsTrack {
	t.Helper()
	st, err := quotas.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// FuzzParse: Parse never panics, and what it reads it writes so that it
// reads it again the same.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := quotas.Parse(s)
		if err != nil {
			return
		}
		text := st.String()
		again, err := quotas.Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) wrote %q, which does not parse: %v", s, text, err)
		}
		if again.String() != text || again.Limits() != st.Limits() {
			t.Fatalf("Parse(%q) wrote %q, which reads back as %q", s, text, again.String())
		}
	})
}

func TestPaths(t *testing.T) {
	if got := quotas.LimitPath("/app/x"); got != "/zookeeper/quota/app/x/zookeeper_limits" {
		t.Errorf("LimitPath = %s", got)
	}
	if got := quotas.StatPath("/app"); got != "/zookeeper/quota/app/zookeeper_stats" {
		t.Errorf("StatPath = %s", got)
	}
	for _, tc := range []struct {
		node, path, name string
		ok               bool
	}{
		{"/zookeeper/quota/app/zookeeper_limits", "/app", quotas.LimitNode, true},
		{"/zookeeper/quota/a/b/zookeeper_stats", "/a/b", quotas.StatNode, true},
		{"/zookeeper/quota/app/other", "", "", false},
		{"/zookeeper/quota/zookeeper_limits", "", "", false},                // the root's: none
		{"/zookeeper/quota/zookeeper/zookeeper_limits", "", "", false},      // /zookeeper's: none
		{"/zookeeper/quota/zookeeper/quota/zookeeper_stats", "", "", false}, // nor below it
		{"/zookeeper/quotas/app/zookeeper_limits", "", "", false},           // not under /zookeeper/quota
		{"/app/zookeeper_limits", "", "", false},
		{"/zookeeper/quota/app/zookeeper_limits/zookeeper_limits", "", "", false}, // /app/zookeeper_limits's: none
		{"/zookeeper/quota/app/zookeeper_stats/x/zookeeper_stats", "", "", false},
	} {
		path, name, ok := quotas.Split(tc.node)
		if path != tc.path || name != tc.name || ok != tc.ok {
			t.Errorf("Split(%s) = %q %q %v, want %q %q %v", tc.node, path, name, ok, tc.path, tc.name, tc.ok)
		}
	}
	for p, ok := range map[string]bool{"/app": true, "/a/b": true, "/zookeeperx": true, "/app/zookeeper_limitsx": true,
		"/": false, "/zookeeper": false, "/zookeeper/quota": false, "/zookeeper/x": false, "app": false, "/app/": false,
		"/app/zookeeper_limits": false, "/zookeeper_stats/x": false} {
		err := quotas.Check(p)
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v", p, err)
		}
		if err != nil && !errors.Is(err, quotas.ErrNotAllowed) && !errors.Is(err, wire.ErrBadArguments) {
			t.Errorf("Check(%s) = %v, neither ErrNotAllowed nor ErrBadArguments", p, err)
		}
	}
}

func TestLimitsOver(t *testing.T) {
	ls := quotas.Limits{2, 10, -1, 20}
	for _, tc := range []struct {
		count, bytes int64
		want         []quotas.Limit
	}{
		{2, 10, nil},
		{3, 10, []quotas.Limit{quotas.Count}},
		{1, 11, []quotas.Limit{quotas.Bytes}},
		{100, 21, []quotas.Limit{quotas.Count, quotas.Bytes, quotas.BytesHard}},
	} {
		if got := ls.Over(tc.count, tc.bytes); !slices.Equal(got, tc.want) {
			t.Errorf("Over(%d, %d) = %v, want %v", tc.count, tc.bytes, got, tc.want)
		}
	}
	for _, l := range quotas.AllLimits {
		var st quotas.StatsTrack
		st.SetLimit(l, 7)
		if st.Limit(l) != 7 || st.Limits()[l] != 7 || l.Hard() != (l >= quotas.CountHard) {
			t.Errorf("%v: %v", l, st)
		}
	}
	if got := quotas.BytesHard.String(); got != "byteHardLimit" {
		t.Errorf("BytesHard is %q, want ZooKeeper's key", got)
	}
}
