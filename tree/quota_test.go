package tree_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// limitsText writes limits as zkCli's setquota does: every field -1 but
// the ones given ("n", "b", "N", "B" as its flags).
func limitsText(set map[string]int64) string {
	var st quotas.StatsTrack
	st.SetLimits(quotas.NoLimits)
	flags := map[string]quotas.Limit{"n": quotas.Count, "b": quotas.Bytes, "N": quotas.CountHard, "B": quotas.BytesHard}
	for k, v := range set {
		st.SetLimit(flags[k], v)
	}
	return st.String()
}

// setQuota sets a quota on path with the txns zkCli's setquota sends:
// the parents under /zookeeper/quota, the limits node, then the stats
// node with count=0,bytes=0.
func (f *fixture) setQuota(path, limits string) {
	f.t.Helper()
	p := wire.QuotaPath
	for _, seg := range strings.Split(path, "/")[1:] {
		p += "/" + seg
		if !f.exists(p) {
			f.create(p, "")
		}
	}
	f.create(quotas.LimitPath(path), limits)
	f.create(quotas.StatPath(path), "count=0,bytes=0")
}

// usage is what path's stats node says.
func (f *fixture) usage(path string) string {
	f.t.Helper()
	data, _, err := f.tr.Get(quotas.StatPath(path))
	if err != nil {
		f.t.Fatalf("stats of %s: %v", path, err)
	}
	return string(data)
}

// checkUsage checks that every quota's usage, as the tree's index and its
// stats node (if any) say it, is its subtree's, counted through the read
// API.
func checkUsage(t testing.TB, tr *tree.Tree) {
	t.Helper()
	for _, q := range tr.Quotas() {
		var count, size int64
		var walk func(p string)
		walk = func(p string) {
			data, _, err := tr.Get(p)
			if err != nil {
				return
			}
			count++
			size += int64(len(data))
			names, _, _ := tr.Children(p)
			for _, n := range names {
				walk(join(p, n))
			}
		}
		walk(q.Path)
		if q.UsedCount != count || q.UsedBytes != size {
			t.Errorf("quota of %s: usage %d nodes %d bytes, the subtree has %d and %d", q.Path, q.UsedCount, q.UsedBytes, count, size)
		}
		if data, _, err := tr.Get(quotas.StatPath(q.Path)); err == nil && string(data) != quotas.Usage(count, size) {
			t.Errorf("stats of %s say %q, the subtree has %d nodes and %d bytes", q.Path, data, count, size)
		}
	}
}

func TestAHardCountLimitRefusesTheCreateThatWouldPassIt(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "")
	f.setQuota("/app", limitsText(map[string]int64{"N": 3}))
	f.create("/app/a", "")
	f.create("/app/b", "")
	if got := f.usage("/app"); got != "count=3,bytes=0" {
		t.Errorf("usage %q", got)
	}
	res := f.mustFail(createTxn("/app/c", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	if want := []tree.QuotaBreach{{Path: "/app", Hard: true, Limit: 3, Usage: 4}}; !reflect.DeepEqual(res.Quota, want) {
		t.Errorf("breaches %+v, want %+v", res.Quota, want)
	}
	if code := wire.CodeOf(res.Err); code != -125 {
		t.Errorf("code %d, want ZooKeeper's -125", code)
	}
	t.Run("deeper in the subtree too", func(t *testing.T) {
		f.mustFail(createTxn("/app/a/x", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	})
	t.Run("sequential and ephemeral creates too", func(t *testing.T) {
		f.openSession(1)
		f.mustFail(createTxn("/app/s-", "", wire.ModePersistentSequential), wire.ErrQuotaExceeded)
		f.mustFail(ephemeralTxn("/app/e", 1), wire.ErrQuotaExceeded)
	})
	t.Run("a delete makes room again", func(t *testing.T) {
		f.must(deleteTxn("/app/b", -1))
		f.create("/app/c", "")
	})
	t.Run("outside the subtree nothing is limited", func(t *testing.T) {
		f.create("/apple", "")
		f.create("/other", "")
	})
	checkUsage(t, f.tr)
}

func TestAHardByteLimitRefusesTheWriteThatWouldPassIt(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "12345")
	f.setQuota("/app", limitsText(map[string]int64{"B": 10}))
	f.create("/app/a", "123")
	if got := f.usage("/app"); got != "count=2,bytes=8" {
		t.Errorf("usage %q", got)
	}
	res := f.mustFail(createTxn("/app/b", "123", wire.ModePersistent), wire.ErrQuotaExceeded)
	if want := []tree.QuotaBreach{{Path: "/app", Bytes: true, Hard: true, Limit: 10, Usage: 11}}; !reflect.DeepEqual(res.Quota, want) {
		t.Errorf("breaches %+v, want %+v", res.Quota, want)
	}
	f.mustFail(setTxn("/app/a", "123456", -1), wire.ErrQuotaExceeded)
	f.must(setTxn("/app/a", "12345", -1)) // exactly at the limit
	t.Run("an empty node still counts as one and zero bytes", func(t *testing.T) {
		f.create("/app/empty", "")
	})
	t.Run("a setData that shrinks the data goes through, even over the limit", func(t *testing.T) {
		f.must(setTxn(quotas.LimitPath("/app"), limitsText(map[string]int64{"B": 4}), -1))
		f.must(setTxn("/app/a", "1", -1))
		f.must(setTxn("/app/a", "2", -1)) // as large as before
		f.mustFail(setTxn("/app/a", "22", -1), wire.ErrQuotaExceeded)
	})
	checkUsage(t, f.tr)
}

func TestASoftLimitLetsTheWriteThroughAndReportsIt(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "")
	f.setQuota("/app", limitsText(map[string]int64{"n": 2, "b": 3}))
	res := f.must(createTxn("/app/a", "1234", wire.ModePersistent))
	want := []tree.QuotaBreach{{Path: "/app", Bytes: true, Limit: 3, Usage: 4}}
	if !reflect.DeepEqual(res.Quota, want) {
		t.Errorf("breaches %+v, want %+v", res.Quota, want)
	}
	res = f.must(createTxn("/app/b", "", wire.ModePersistent))
	if want := []tree.QuotaBreach{{Path: "/app", Limit: 2, Usage: 3}}; !reflect.DeepEqual(res.Quota, want) {
		t.Errorf("breaches %+v, want %+v", res.Quota, want)
	}
	if got := f.usage("/app"); got != "count=3,bytes=4" {
		t.Errorf("usage %q", got)
	}
	t.Run("a write under the soft limits reports nothing", func(t *testing.T) {
		if res := f.must(setTxn("/app/a", "", -1)); res.Quota != nil {
			t.Errorf("breaches %+v", res.Quota)
		}
		if res := f.must(deleteTxn("/app/b", -1)); res.Quota != nil {
			t.Errorf("breaches %+v", res.Quota)
		}
	})
	t.Run("with a hard limit above it, a soft limit still warns", func(t *testing.T) {
		f.must(setTxn(quotas.LimitPath("/app"), limitsText(map[string]int64{"n": 2, "N": 4}), -1))
		res := f.must(createTxn("/app/c", "", wire.ModePersistent))
		if want := []tree.QuotaBreach{{Path: "/app", Limit: 2, Usage: 3}}; !reflect.DeepEqual(res.Quota, want) {
			t.Errorf("breaches %+v, want %+v", res.Quota, want)
		}
		f.create("/app/d", "")
		f.mustFail(createTxn("/app/e", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	})
	t.Run("the format before hard limits sets soft limits", func(t *testing.T) {
		f := newFixture(t)
		f.create("/old", "")
		f.setQuota("/old", "count=1,bytes=-1")
		if res := f.must(createTxn("/old/a", "", wire.ModePersistent)); len(res.Quota) != 1 || res.Quota[0].Hard {
			t.Errorf("breaches %+v", res.Quota)
		}
	})
	checkUsage(t, f.tr)
}

func TestTheUsageFollowsEveryChangeInTheSubtree(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "ab")
	f.create("/app/x", "cde")
	f.openSession(1)
	f.setQuota("/app", "count=-1,bytes=-1")
	step := func(name, want string) {
		t.Helper()
		if got := f.usage("/app"); got != want {
			t.Errorf("%s: usage %q, want %q", name, got, want)
		}
		checkUsage(t, f.tr)
	}
	step("set on an existing subtree, it counts what is there", "count=2,bytes=5")
	f.create("/app/y", "f")
	step("a create", "count=3,bytes=6")
	f.must(setTxn("/app/y", "fghij", -1))
	step("a setData", "count=3,bytes=10")
	f.must(deleteTxn("/app/y", -1))
	step("a delete", "count=2,bytes=5")
	f.must(ephemeralTxn("/app/e", 1))
	step("an ephemeral", "count=3,bytes=5")
	f.must(closeTxn(1))
	step("its session's end", "count=2,bytes=5")
	f.must(createTxn("/app/box", "", wire.ModeContainer))
	f.create("/app/box/item", "zz")
	f.must(deleteTxn("/app/box/item", -1))
	f.must(reapTxn(timeOf(f.zxid + 1)))
	step("a reaped container", "count=2,bytes=5")
	res, _ := f.apply(multiTxn(createTxn("/app/m", "123", wire.ModePersistent), setTxn("/app/x", "", -1), checkTxn("/nope", -1)))
	if res.Err == nil {
		t.Fatal("the multi succeeded")
	}
	step("a failed multi", "count=2,bytes=5")
	f.must(multiTxn(createTxn("/app/m", "123", wire.ModePersistent), setTxn("/app/x", "", -1)))
	step("a multi", "count=3,bytes=5")
	f.must(deleteTxn("/app/m", -1))
	f.must(deleteTxn("/app/x", -1))
	f.must(deleteTxn("/app", -1))
	step("the quota's own node gone", "count=0,bytes=0")
	f.create("/app", "again")
	step("and made again", "count=1,bytes=5")

	t.Run("the stats node changes no version and fires nothing", func(t *testing.T) {
		st := f.stat(quotas.StatPath("/app"))
		_, events := f.apply(createTxn("/app/z", "", wire.ModePersistent))
		checkEvents(t, events, created("/app/z"), children("/app"))
		if after := f.stat(quotas.StatPath("/app")); after.Version != st.Version || after.Mzxid != st.Mzxid {
			t.Errorf("stats Stat %+v, before %+v", after, st)
		}
	})
	t.Run("a client's write to the stats node stores the usage", func(t *testing.T) {
		f.must(setTxn(quotas.StatPath("/app"), "count=99,bytes=99", -1))
		step("after a setData", "count=2,bytes=5")
		f.must(deleteTxn(quotas.StatPath("/app"), -1))
		f.create("/app/w", "")
		f.create(quotas.StatPath("/app"), "count=0,bytes=0")
		step("made again", "count=3,bytes=5")
	})
}

func TestAQuotaGoesWithItsLimitsNode(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "")
	f.setQuota("/app", limitsText(map[string]int64{"N": 1}))
	f.mustFail(createTxn("/app/a", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	f.must(deleteTxn(quotas.LimitPath("/app"), -1))
	f.create("/app/a", "")
	if got := f.usage("/app"); got != "count=1,bytes=0" {
		t.Errorf("the stats node left behind says %q, want what it said last", got)
	}
	if q := f.tr.Quotas(); len(q) != 0 {
		t.Errorf("quotas %+v", q)
	}
	t.Run("a failed multi that deleted it keeps it", func(t *testing.T) {
		f.create(quotas.LimitPath("/app"), limitsText(map[string]int64{"N": 2}))
		f.apply(multiTxn(deleteTxn(quotas.LimitPath("/app"), -1), checkTxn("/nope", -1)))
		f.mustFail(createTxn("/app/b", "", wire.ModePersistent), wire.ErrQuotaExceeded)
	})
	t.Run("the limits made before the stats node count already", func(t *testing.T) {
		f := newFixture(t)
		f.create("/q", "")
		f.create("/zookeeper/quota/q", "")
		f.create(quotas.LimitPath("/q"), limitsText(map[string]int64{"N": 1}))
		f.mustFail(createTxn("/q/a", "", wire.ModePersistent), wire.ErrQuotaExceeded)
		f.create(quotas.StatPath("/q"), "")
		if got := f.usage("/q"); got != "count=1,bytes=0" {
			t.Errorf("usage %q", got)
		}
	})
}

func TestLimitsThatDoNotParseAreRefused(t *testing.T) {
	f := newFixture(t)
	f.create("/zookeeper/quota/app", "")
	for _, bad := range []string{"count", "count=x", ",count=1", "count=99999999999999999999"} {
		f.mustFail(createTxn(quotas.LimitPath("/app"), bad, wire.ModePersistent), wire.ErrBadArguments)
	}
	f.create(quotas.LimitPath("/app"), "")
	f.mustFail(setTxn(quotas.LimitPath("/app"), "bytes=", -1), wire.ErrBadArguments)
	t.Run("a node of that name where no quota can be is an ordinary node", func(t *testing.T) {
		f.create("/zookeeper/quota/zookeeper", "")
		f.create("/zookeeper/quota/zookeeper/zookeeper_limits", "not limits")
		f.create("/zookeeper/quota/zookeeper_limits", "not limits either")
		// /app/zookeeper_limits can have no quota: its directory is /app's limits node.
		f.create("/zookeeper/quota/app/zookeeper_limits/zookeeper_limits", "not limits")
		if q := f.tr.Quotas(); len(q) != 1 || q[0].Path != "/app" {
			t.Errorf("quotas %+v", q)
		}
	})
}

func TestQuotasDoNotNest(t *testing.T) {
	setup := func(t *testing.T) *fixture {
		f := newFixture(t)
		for _, p := range []string{"/a", "/a/b", "/a/b/c", "/ab", "/x", "/x/y"} {
			f.create(p, "")
		}
		f.setQuota("/a/b", limitsText(map[string]int64{"N": 10}))
		return f
	}
	for _, tc := range []struct {
		name  string
		path  string // the path a quota is set on, with /a/b's there
		nests bool
	}{
		{"below a quota", "/a/b/c", true},
		{"above a quota", "/a", true},
		{"on a sibling", "/x", false},
		{"on a path that only starts with the same letters", "/ab", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			if !f.exists(quotas.QuotaPath(tc.path)) {
				f.create(quotas.QuotaPath(tc.path), "")
			}
			limits := createTxn(quotas.LimitPath(tc.path), limitsText(map[string]int64{"N": 1}), wire.ModePersistent)
			if !tc.nests {
				f.must(limits)
				checkUsage(t, f.tr)
				return
			}
			res := f.mustFail(limits, wire.ErrBadArguments)
			if !strings.Contains(res.Err.Error(), "do not nest") {
				t.Errorf("error %q does not say why", res.Err)
			}
			t.Run("and can be once the other goes", func(t *testing.T) {
				f.must(deleteTxn(quotas.LimitPath("/a/b"), -1))
				f.must(limits)
				checkUsage(t, f.tr)
			})
		})
	}
	t.Run("the error names the first quota below, the same on every replica", func(t *testing.T) {
		f := newFixture(t)
		f.create("/p", "")
		for _, name := range []string{"m", "c", "z", "d"} {
			f.create("/p/"+name, "")
			f.setQuota("/p/"+name, "")
		}
		res := f.mustFail(createTxn(quotas.LimitPath("/p"), "", wire.ModePersistent), wire.ErrBadArguments)
		if !strings.Contains(res.Err.Error(), "/p/c below it") {
			t.Errorf("error %q, want it to name /p/c", res.Err)
		}
	})
	t.Run("a directory below with no limits node is not a quota", func(t *testing.T) {
		f := setup(t)
		f.must(deleteTxn(quotas.StatPath("/a/b"), -1))
		f.must(deleteTxn(quotas.LimitPath("/a/b"), -1))
		f.create(quotas.LimitPath("/a"), "") // /zookeeper/quota/a/b stays, empty
		checkUsage(t, f.tr)
	})
}

func TestATxnMakesOneQuotaAtMost(t *testing.T) {
	f := newFixture(t)
	f.create("/a", "")
	f.create("/b", "")
	f.create("/zookeeper/quota/a", "")
	f.create("/zookeeper/quota/b", "")
	res := f.mustFail(multiTxn(createTxn(quotas.LimitPath("/a"), "", wire.ModePersistent),
		createTxn(quotas.LimitPath("/b"), "", wire.ModePersistent)), wire.ErrBadArguments)
	if codes := []wire.Code{res.Multi[0].Err, res.Multi[1].Err}; codes[0] != wire.CodeOK || codes[1] != wire.CodeBadArguments {
		t.Errorf("results %v", codes)
	}
	t.Run("made, deleted and made again counts twice: refused too", func(t *testing.T) {
		f.mustFail(multiTxn(createTxn(quotas.LimitPath("/a"), "", wire.ModePersistent),
			deleteTxn(quotas.LimitPath("/a"), -1),
			createTxn(quotas.LimitPath("/a"), "", wire.ModePersistent)), wire.ErrBadArguments)
	})
	t.Run("one with its stats node, as zkCli and client.SetQuota make it", func(t *testing.T) {
		f.must(multiTxn(createTxn(quotas.LimitPath("/a"), "", wire.ModePersistent),
			createTxn(quotas.StatPath("/a"), "", wire.ModePersistent)))
	})
	t.Run("the next txn makes another", func(t *testing.T) {
		f.create(quotas.LimitPath("/b"), "")
	})
	checkUsage(t, f.tr)
}

func TestTheStatsNodeCanGoAndComeBackInAMulti(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "ab")
	f.setQuota("/app", "count=-1,bytes=-1")
	stats := quotas.StatPath("/app")
	t.Run("rolled back", func(t *testing.T) {
		f.mustFail(multiTxn(deleteTxn(stats, -1), createTxn("/app/x", "cd", wire.ModePersistent),
			createTxn(stats, "", wire.ModePersistent), setTxn("/app/x", "cdef", -1), checkTxn("/nope", -1)), wire.ErrNoNode)
		if got := f.usage("/app"); got != "count=1,bytes=2" {
			t.Errorf("usage %q", got)
		}
	})
	t.Run("applied", func(t *testing.T) {
		f.must(multiTxn(deleteTxn(stats, -1), createTxn("/app/x", "cd", wire.ModePersistent),
			createTxn(stats, "", wire.ModePersistent), setTxn("/app/x", "cdef", -1)))
		if got := f.usage("/app"); got != "count=2,bytes=6" {
			t.Errorf("usage %q", got)
		}
	})
	checkUsage(t, f.tr)
}

func TestAMultiOverAHardLimitFailsWhole(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "")
	f.setQuota("/app", limitsText(map[string]int64{"N": 2, "n": 1}))
	res := f.mustFail(multiTxn(
		createTxn("/app/a", "", wire.ModePersistent), // soft breach: rolled back, not reported
		createTxn("/app/b", "", wire.ModePersistent),
		createTxn("/other", "", wire.ModePersistent),
	), wire.ErrQuotaExceeded)
	codes := []wire.Code{res.Multi[0].Err, res.Multi[1].Err, res.Multi[2].Err}
	if want := []wire.Code{wire.CodeOK, wire.CodeQuotaExceeded, wire.CodeRuntimeInconsistency}; !reflect.DeepEqual(codes, want) {
		t.Errorf("results %v, want %v", codes, want)
	}
	if len(res.Quota) != 1 || !res.Quota[0].Hard {
		t.Errorf("breaches %+v, want the hard one alone", res.Quota)
	}
	if got := f.usage("/app"); got != "count=1,bytes=0" {
		t.Errorf("usage %q", got)
	}
	t.Run("a multi that deletes first makes room for its create", func(t *testing.T) {
		f.create("/app/a", "")
		f.must(multiTxn(deleteTxn("/app/a", -1), createTxn("/app/b", "", wire.ModePersistent)))
	})
}

func TestQuotasSurviveASnapshot(t *testing.T) {
	f := newFixture(t)
	f.create("/app", "xy")
	f.create("/other", "")
	f.setQuota("/app", limitsText(map[string]int64{"N": 3, "b": 1}))
	f.setQuota("/other", "count=5,bytes=100")
	f.create("/app/a", "")
	r, err := tree.Restore(bytes.NewReader(snapshotBytes(t, f.tr)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Quotas(), f.tr.Quotas()) || r.Digest() != f.tr.Digest() {
		t.Fatalf("restored quotas %+v digest %#x, want %+v %#x", r.Quotas(), r.Digest(), f.tr.Quotas(), f.tr.Digest())
	}
	// Both replicas go on alike, the restored one refusing as the other.
	for _, tr := range []*tree.Tree{f.tr, r} {
		res, _ := tr.Apply(f.zxid+1, &tree.Txn{Type: wire.OpCreate, Path: "/app/b", Data: []byte("z"), Time: 1})
		if res.Err != nil || len(res.Quota) != 1 {
			t.Errorf("create /app/b: %v %+v", res.Err, res.Quota)
		}
		if res, _ := tr.Apply(f.zxid+2, &tree.Txn{Type: wire.OpCreate, Path: "/app/c", Time: 2}); !errors.Is(res.Err, wire.ErrQuotaExceeded) {
			t.Errorf("create /app/c: %v", res.Err)
		}
	}
	if r.Digest() != f.tr.Digest() {
		t.Errorf("digests %#x and %#x", r.Digest(), f.tr.Digest())
	}
	checkUsage(t, r)
}

func TestAMembersLockDelaysGoThroughHardLimits(t *testing.T) {
	f := newFixture(t)
	f.create("/locks", "")
	f.create("/locks/q", "")
	f.setQuota("/locks", limitsText(map[string]int64{"N": 2, "n": 1}))
	delay := createTxn("/locks/q/delay-", "d", wire.ModePersistentSequential)
	f.mustFail(multiTxn(delay), wire.ErrQuotaExceeded)
	for _, cause := range []tree.Cause{tree.CauseLockDelay, tree.CauseBreak} {
		t.Run(fmt.Sprint("cause ", cause), func(t *testing.T) {
			txn := multiTxn(delay)
			txn.Cause = cause
			res := f.must(txn)
			want := []tree.QuotaBreach{{Path: "/locks", Hard: true, Exempt: true, Limit: 2, Usage: f.tr.Quotas()[0].UsedCount}}
			if !reflect.DeepEqual(res.Quota, want) {
				t.Errorf("breaches %+v, want %+v", res.Quota, want)
			}
			checkUsage(t, f.tr)
		})
	}
	t.Run("an exempt multi that fails reports nothing", func(t *testing.T) {
		txn := multiTxn(delay, checkTxn("/nope", -1))
		txn.Cause = tree.CauseLockDelay
		if res := f.mustFail(txn, wire.ErrNoNode); len(res.Quota) != 0 {
			t.Errorf("breaches %+v", res.Quota)
		}
	})
	t.Run("other causes are held to the limits", func(t *testing.T) {
		txn := multiTxn(delay)
		txn.Cause = tree.CauseDeadlock
		f.mustFail(txn, wire.ErrQuotaExceeded)
	})
}
