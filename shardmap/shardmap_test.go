package shardmap

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestKeyOfRoutesByTheFirstNameOrTheHashOfAPartitionedParentsChild(t *testing.T) {
	m := &Map{Partitioned: []string{"/app/locks", "/locks"}}
	hash := func(name string) string { return HashKey(Hash(name)) }
	for _, tc := range []struct {
		path string
		want Key
		meta bool
	}{
		{path: "/", meta: true},
		{path: "/zookeeper", meta: true},
		{path: "/zookeeper/shards", meta: true},
		{path: "/zookeepers", want: Key{"", "zookeepers"}},
		{path: "/locks", meta: true},
		{path: "/app/locks", meta: true},
		{path: "/locks/orders-42", want: Key{"/locks", hash("orders-42")}},
		{path: "/locks/orders-42/queue/n-0000000007", want: Key{"/locks", hash("orders-42")}},
		{path: "/lockstep/x", want: Key{"", "lockstep"}}, // a name that starts like a partitioned parent
		{path: "/app", want: Key{"", "app"}},
		{path: "/app/config/x", want: Key{"", "app"}},
		{path: "/app/locks/q", want: Key{"/app/locks", hash("q")}},
		{path: "/app/locksmith", want: Key{"", "app"}},
		// A quota's nodes go with what it counts; a partitioned parent's
		// quota directory and quota with the parent.
		{path: "/zookeeper/quota", meta: true},
		{path: "/zookeeper/quota/app", want: Key{"", "app"}},
		{path: "/zookeeper/quota/app/zookeeper_limits", want: Key{"", "app"}},
		{path: "/zookeeper/quota/app/config/zookeeper_stats", want: Key{"", "app"}},
		{path: "/zookeeper/quota/locks", meta: true},
		{path: "/zookeeper/quota/locks/zookeeper_limits", meta: true},
		{path: "/zookeeper/quota/locks/orders-42", want: Key{"/locks", hash("orders-42")}},
		{path: "/zookeeper/quota/locks/orders-42/zookeeper_stats", want: Key{"/locks", hash("orders-42")}},
		{path: "/zookeeper/quota/locks/orders-42/queue/zookeeper_limits", want: Key{"/locks", hash("orders-42")}},
		{path: "/zookeeper/quota/app/locks/zookeeper_limits", meta: true},
		{path: "/zookeeper/quota/app/locks/q/zookeeper_limits", want: Key{"/app/locks", hash("q")}},
		{path: "/zookeeper/quota/zookeeper/zookeeper_limits", meta: true},
	} {
		k, meta := m.KeyOf(tc.path)
		if k != tc.want || meta != tc.meta {
			t.Errorf("KeyOf(%s) = %v, %v; want %v, %v", tc.path, k, meta, tc.want, tc.meta)
		}
	}
}

func TestAPartitionedParentsQuotaDirectoryAndTheSubtreesThatSpread(t *testing.T) {
	m := New()
	for _, p := range []string{"/app/locks", "/locks"} {
		var err error
		if m, err = m.Partition(p); err != nil {
			t.Fatal(err)
		}
	}
	if m.Spreads("/locks") || m.Spreads("/app") {
		t.Errorf("a map of one shard spreads a subtree")
	}
	m, err := m.Split(MetaGroup, Key{Space: "/locks", Key: HashKey(1 << 63)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path          string
		quota, spread bool
	}{
		{"/", false, true},
		{"/locks", false, true},
		{"/app", false, true},
		{"/app/locks", false, false}, // all its hashes in the meta group
		{"/app/lock", false, false},
		{"/locks/a", false, false},
		{"/lockstep", false, false},
		{"/zookeeper/quota/locks", true, false},
		{"/zookeeper/quota/app/locks", true, false},
		{"/zookeeper/quota/app", false, false},
		{"/zookeeper/quota/locks/a", false, false},
		{"/zookeeper/quotalocks", false, false},
	} {
		if got := m.IsPartitionedQuota(tc.path); got != tc.quota {
			t.Errorf("IsPartitionedQuota(%s) = %v, want %v", tc.path, got, tc.quota)
		}
		if got := m.Spreads(tc.path); got != tc.spread {
			t.Errorf("Spreads(%s) = %v, want %v", tc.path, got, tc.spread)
		}
	}
}

// sharded is a map of three shards over members 1-3: group 0 (the meta
// group) with top-level names below "m" and the lower half of /locks'
// hashes, group 1 with the names from "m", and group 2 with the upper
// half of /locks.
func sharded(t *testing.T) *Map {
	t.Helper()
	m := New()
	m.Shards[0].Replicas = []uint64{1, 2, 3}
	m, err := m.Partition("/locks")
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.Split(0, Key{Key: "m"}, 1); err != nil {
		t.Fatal(err)
	}
	mid, err := Middle(Range{Space: "/locks"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.Split(0, mid, 2); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRouteSendsEachPathToTheOneShardThatServesIt(t *testing.T) {
	m := sharded(t)
	low, high := lockNames(t)
	for _, tc := range []struct {
		paths []string
		group uint64
		err   error
	}{
		{paths: []string{"/"}, group: 0},
		{paths: []string{"/locks"}, group: 0},
		{paths: []string{"/app/config"}, group: 0},
		{paths: []string{"/lz"}, group: 0},
		{paths: []string{"/m"}, group: 1},
		{paths: []string{"/zoo/keeper"}, group: 1},
		{paths: []string{"/locks/" + low + "/q-1"}, group: 0},
		{paths: []string{"/locks/" + high, "/locks/" + high + "/q-1"}, group: 2},
		{paths: []string{"/app", "/b/c", "/"}, group: 0},
		{paths: []string{"/app", "/zoo"}, err: ErrCrossShard},
		{paths: []string{"/locks/" + low, "/locks/" + high}, err: ErrCrossShard},
	} {
		g, err := m.Route(tc.paths...)
		if g != tc.group || !errors.Is(err, tc.err) {
			t.Errorf("Route(%v) = %d, %v; want %d, %v", tc.paths, g, err, tc.group, tc.err)
		}
	}
	for _, tc := range []struct {
		group uint64
		epoch uint64
	}{{0, 3}, {1, 2}, {2, 3}} {
		if got := m.Group(tc.group).Epoch.Range; got != tc.epoch {
			t.Errorf("shard %d's range epoch is %d, want %d", tc.group, got, tc.epoch)
		}
	}
	if s := m.Group(2); !reflect.DeepEqual(s.Replicas, []uint64{1, 2, 3}) {
		t.Errorf("a split's new shard has replicas %v, want its parent's", s.Replicas)
	}
}

// lockNames finds a lock name in each half of /locks' hashes.
func lockNames(t *testing.T) (low, high string) {
	t.Helper()
	for i := 0; low == "" || high == ""; i++ {
		name := fmt.Sprint("lock-", i)
		if Hash(name) < 1<<63 {
			low = name
		} else {
			high = name
		}
	}
	return low, high
}

func TestServesSaysWhetherAShardServesAPath(t *testing.T) {
	m := sharded(t)
	low, high := lockNames(t)
	for _, tc := range []struct {
		group      uint64
		path       string
		sequential bool
		want       bool
	}{
		{0, "/", false, true},
		{1, "/", false, false},
		{0, "/zookeeper/config", false, true},
		{2, "/zookeeper/quota/x", false, false},
		{0, "/locks", false, true},
		{0, "/app/x", false, true},
		{1, "/app/x", false, false},
		{1, "/queue/item-", true, true},
		{0, "/locks/" + low + "/q-", true, true},
		{2, "/locks/" + high + "/q-", true, true},
		{0, "/locks/" + low, false, true},
		{2, "/locks/" + low, false, false},
		{0, "/locks/" + low, true, false}, // a sequential child of a partitioned parent
		{2, "/locks/" + high, true, false},
		{2, "/zookeeper/quota/locks/" + high, false, true}, // a quota's directory, with what it counts
		{0, "/zookeeper/quota/locks/" + low, false, true},
		{2, "/zookeeper/quota/locks/" + high, true, false}, // a sequential child of its quota directory
		{0, "/zookeeper/quota/locks/" + low, true, false},
		{2, "/zookeeper/quota/locks/" + high + "/x-", true, true},
		{7, "/app", false, false}, // no such shard
	} {
		if got := m.Serves(tc.group, tc.path, tc.sequential); got != tc.want {
			t.Errorf("Serves(%d, %s, sequential %v) = %v, want %v", tc.group, tc.path, tc.sequential, got, tc.want)
		}
	}
}

func TestChangesThatWouldLeaveAKeyWithNoShardOrTwoAreRefused(t *testing.T) {
	m := sharded(t)
	for _, tc := range []struct {
		name string
		do   func() (*Map, error)
		want string
	}{
		{"partition /", func() (*Map, error) { return m.Partition("/") }, "system node"},
		{"partition a system node", func() (*Map, error) { return m.Partition("/zookeeper/quota") }, "system node"},
		{"partition a relative path", func() (*Map, error) { return m.Partition("locks") }, "not absolute"},
		{"partition again", func() (*Map, error) { return m.Partition("/locks") }, "partitioned already"},
		{"partition below a partitioned parent", func() (*Map, error) { return m.Partition("/locks/a") }, "below /locks"},
		{"partition above a partitioned parent", func() (*Map, error) {
			n, err := m.Partition("/app/locks")
			if err != nil {
				return nil, err
			}
			return n.Partition("/app")
		}, "above /app/locks"},
		{"partition a parent another shard serves", func() (*Map, error) { return m.Partition("/zoo") }, "served by shard 1"},
		{"split into a group that exists", func() (*Map, error) { return m.Split(0, Key{Key: "b"}, 1) }, "exists"},
		{"split into the meta group", func() (*Map, error) { return m.Split(1, Key{Key: "x"}, 0) }, "exists"},
		{"split a group with no shard", func() (*Map, error) { return m.Split(9, Key{Key: "x"}, 10) }, "no shard"},
		{"split into a group past the last", func() (*Map, error) { return m.Split(0, Key{Key: "b"}, MaxGroup+1) }, "past the last"},
		{"split at a key another shard holds", func() (*Map, error) { return m.Split(0, Key{Key: "x"}, 3) }, "does not hold"},
		{"split at a range's start", func() (*Map, error) { return m.Split(1, Key{Key: "m"}, 3) }, "starts a range"},
		{"split at hash 0", func() (*Map, error) { return m.Split(0, Key{"/locks", HashKey(0)}, 3) }, "starts a range"},
		{"split at a key that is no hash", func() (*Map, error) { return m.Split(0, Key{"/locks", "abc"}, 3) }, "not bounded by hashes"},
	} {
		if _, err := tc.do(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := m.Validate(); err != nil {
		t.Errorf("a refused change changed the map: %v", err)
	}
}

func TestValidateRefusesMapsThatLeaveAKeyWithNoShardOrTwo(t *testing.T) {
	r := func(space, start, end string) Range { return Range{space, start, end} }
	shard := func(g uint64, rs ...Range) Shard { return Shard{Group: g, Ranges: rs, Replicas: []uint64{1}} }
	h := HashKey
	for _, tc := range []struct {
		name string
		m    Map
		want string // "" for a valid map
	}{
		{"one shard", Map{Shards: []Shard{shard(0, r("", "", ""))}}, ""},
		{"a meta group with no ranges", Map{Shards: []Shard{shard(0), shard(4, r("", "", ""))}}, ""},
		{"hashed halves", Map{Partitioned: []string{"/l"}, Shards: []Shard{shard(0, r("", "", ""), r("/l", "", h(5))), shard(1, r("/l", h(5), ""))}}, ""},
		{"no meta group", Map{Shards: []Shard{shard(1, r("", "", ""))}}, "no meta group"},
		{"a gap", Map{Shards: []Shard{shard(0, r("", "", "b")), shard(1, r("", "c", ""))}}, "gap or overlap"},
		{"an overlap", Map{Shards: []Shard{shard(0, r("", "", "c")), shard(1, r("", "b", ""))}}, "gap or overlap"},
		{"two ends", Map{Shards: []Shard{shard(0, r("", "", "")), shard(1, r("", "b", ""))}}, "gap or overlap"},
		{"no end", Map{Shards: []Shard{shard(0, r("", "", "b"))}}, "do not reach its end"},
		{"a partitioned parent with no ranges", Map{Partitioned: []string{"/l"}, Shards: []Shard{shard(0, r("", "", ""))}}, "do not reach its end"},
		{"an empty range", Map{Shards: []Shard{shard(0, r("", "", "b"), r("", "b", "b"), r("", "b", ""))}}, "empty range"},
		{"a range of a parent not partitioned", Map{Shards: []Shard{shard(0, r("", "", ""), r("/l", "", ""))}}, "not partitioned"},
		{"a hashed bound that is no hash", Map{Partitioned: []string{"/l"}, Shards: []Shard{shard(0, r("", "", ""), r("/l", "", "x")), shard(1, r("/l", "x", ""))}}, "not bounded by hashes"},
		{"shards out of order", Map{Shards: []Shard{shard(1, r("", "b", "")), shard(0, r("", "", "b"))}}, "out of order"},
		{"a group twice", Map{Shards: []Shard{shard(0, r("", "", "b")), shard(0, r("", "b", ""))}}, "out of order or repeated"},
		{"every member", Map{Shards: []Shard{{Group: 0, Ranges: []Range{{}}}}}, ""},
		{"replicas out of order", Map{Shards: []Shard{{Group: 0, Ranges: []Range{{}}, Replicas: []uint64{2, 1}}}}, "replicas"},
		{"replica 0", Map{Shards: []Shard{{Group: 0, Ranges: []Range{{}}, Replicas: []uint64{0, 1}}}}, "replicas"},
		{"a replica twice", Map{Shards: []Shard{{Group: 0, Ranges: []Range{{}}, Replicas: []uint64{2, 2}}}}, "replicas"},
		{"partitioned /", Map{Partitioned: []string{"/"}, Shards: []Shard{shard(0, r("", "", ""))}}, "not a path below /"},
		{"nested partitioned parents", Map{Partitioned: []string{"/l", "/l/m"}, Shards: []Shard{shard(0, r("", "", ""), r("/l", "", ""), r("/l/m", "", ""))}}, "nested"},
	} {
		err := tc.m.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestMiddleHalvesAHashRange(t *testing.T) {
	for _, tc := range []struct {
		r    Range
		want uint64
		err  bool
	}{
		{r: Range{Space: "/l"}, want: 1 << 63},
		{r: Range{Space: "/l", Start: HashKey(0x10), End: HashKey(0x20)}, want: 0x18},
		{r: Range{Space: "/l", Start: HashKey(7), End: HashKey(9)}, want: 8},
		{r: Range{Space: "/l", Start: HashKey(7), End: HashKey(8)}, err: true},
		{r: Range{Start: "a", End: "z"}, err: true},
	} {
		k, err := Middle(tc.r)
		if tc.err {
			if err == nil {
				t.Errorf("Middle(%v) = %v, want an error", tc.r, k)
			}
			continue
		}
		if err != nil || k != (Key{tc.r.Space, HashKey(tc.want)}) {
			t.Errorf("Middle(%v) = %v, %v; want hash %#x", tc.r, k, err, tc.want)
		}
	}
}

func TestSplitKeyIsTheNameOrHashAskedForOrTheMiddle(t *testing.T) {
	m := sharded(t)
	for _, tc := range []struct {
		group     uint64
		space, at string
		want      Key
		err       string
	}{
		{0, "", "c", Key{Key: "c"}, ""},
		{0, "", "", Key{}, "needs the name"},
		{0, "/locks", "", Key{"/locks", HashKey(1 << 62)}, ""}, // the middle of group 0's lower half
		{2, "/locks", "", Key{"/locks", HashKey(3 << 62)}, ""},
		{0, "/locks", HashKey(5), Key{"/locks", HashKey(5)}, ""},
		{0, "/locks", "abc", Key{}, "8 bytes"},
		{0, "/app", "", Key{}, "not partitioned"},
		{1, "/locks", "", Key{}, "holds none"},
		{9, "", "x", Key{}, "no shard"},
	} {
		k, err := m.SplitKey(tc.group, tc.space, tc.at)
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) || tc.err == "" && (err != nil || k != tc.want) {
			t.Errorf("SplitKey(%d, %q, %q) = %v, %v; want %v, %q", tc.group, tc.space, tc.at, k, err, tc.want, tc.err)
		}
	}
}

func TestAMapDecodesToWhatWasEncoded(t *testing.T) {
	m := sharded(t)
	m.Version = 1234
	m.Shards[1].Leader = 2
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("decoded %+v, want %+v", got, m)
	}
	for _, bad := range [][]byte{nil, {0xc1}, []byte("not a map"), b[:len(b)-1]} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) took it", bad)
		}
	}
	invalid := m.Clone()
	invalid.Shards = invalid.Shards[1:]
	if b, err := invalid.Encode(); err != nil {
		t.Fatal(err)
	} else if _, err := Decode(b); err == nil {
		t.Error("Decode took a map with no meta group")
	}
}

// FuzzDecode: any bytes decode to a valid map or to an error, and a valid
// map routes every path to exactly one shard, and encodes to itself.
func FuzzDecode(f *testing.F) {
	m := New()
	b, _ := m.Encode()
	f.Add(b)
	m, _ = m.Partition("/locks")
	m, _ = m.Split(0, Key{Key: "m"}, 1)
	b, _ = m.Encode()
	f.Add(b)
	paths := []string{"/", "/a", "/locks", "/locks/x/y", "/m/n", "/zz"}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		for _, p := range append(paths, m.Partitioned...) {
			if m.Shard(p) == nil {
				t.Fatalf("no shard serves %s in a valid map %+v", p, m)
			}
			for _, q := range m.Partitioned {
				if m.Shard(q+"/child") == nil {
					t.Fatalf("no shard serves %s/child in a valid map %+v", q, m)
				}
			}
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if m2, err := Decode(again); err != nil || !reflect.DeepEqual(m2, m) {
			t.Fatalf("re-encoded map decodes to %+v, %v; want %+v", m2, err, m)
		}
	})
}

func TestLeadNamesAShardsPreferredLeader(t *testing.T) {
	m := sharded(t)
	led, err := m.Lead(1, 3)
	if err != nil || led.Group(1).Leader != 3 || m.Group(1).Leader != 0 || led.Group(0).Leader != m.Group(0).Leader {
		t.Fatalf("Lead(1, 3) = %+v, %v; the original %+v", led, err, m)
	}
	if back, err := led.Lead(1, 0); err != nil || back.Group(1).Leader != 0 {
		t.Errorf("Lead(1, 0) = %+v, %v; want no preferred leader", back, err)
	}
	if _, err := m.Lead(9, 1); err == nil {
		t.Error("Lead of a shard the map lacks succeeded")
	}
}

func TestSplitOffKeepsTheKeysWithTheirShardUntilItIsDone(t *testing.T) {
	m, err := New().Split(MetaGroup, Key{Key: "m"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SplitOff(MetaGroup, Key{Key: "g"}, 2); err == nil {
		t.Error("SplitOff of the meta group succeeded")
	}
	off, err := m.SplitOff(1, Key{Key: "t"}, 2)
	if err != nil || off.Group(2).SplitFrom != 1 {
		t.Fatalf("SplitOff(1, t, 2) = %+v, %v", off, err)
	}
	for _, tc := range []struct {
		m      *Map
		path   string
		group  uint64
		served bool
	}{
		{off, "/zoo", 1, true},
		{off, "/zoo", 2, false},
		{off, "/n", 1, true},
		{off, "/a", 1, false},
		{off, "/a", 0, true},
		{off, "/zoo", 0, false}, // no shard is split off the meta group
	} {
		if got := tc.m.Serves(tc.group, tc.path, false); got != tc.served {
			t.Errorf("while split off: Serves(%d, %s) = %v, want %v", tc.group, tc.path, got, tc.served)
		}
	}
	if g, err := off.Route("/zoo"); err != nil || g != 1 {
		t.Errorf("while split off, /zoo routes to %d, %v; want 1 still", g, err)
	}
	if _, err := off.SplitOff(2, Key{Key: "w"}, 3); err == nil {
		t.Error("a split of a shard being split off succeeded")
	}
	done, err := off.SplitDone(2)
	if err != nil || done.Serves(1, "/zoo", false) || !done.Serves(2, "/zoo", false) || !done.Serves(1, "/n", false) {
		t.Fatalf("SplitDone(2) = %+v, %v: /zoo should be 2's and /n 1's", done, err)
	}
	if g, _ := done.Route("/zoo"); g != 2 {
		t.Errorf("once done, /zoo routes to %d, want 2", g)
	}
	if _, err := done.SplitDone(2); err == nil {
		t.Error("SplitDone of a shard not being split off succeeded")
	}
}

// ByShard groups paths by the shard that serves each, in the order of the
// shards' groups; a nil map (a cluster of one shard) keeps them together.
func TestByShardGroupsPathsInTheOrderOfTheGroups(t *testing.T) {
	m, err := New().Split(MetaGroup, Key{Key: "m"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/zoo/a", "/app", "/x", "/b/c", "/zookeeper/quota"}
	for _, tc := range []struct {
		m    *Map
		want [][]int
	}{
		{nil, [][]int{{0, 1, 2, 3, 4}}},
		{New(), [][]int{{0, 1, 2, 3, 4}}},
		{m, [][]int{{1, 3, 4}, {0, 2}}},
	} {
		if got := tc.m.ByShard(paths); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.m, got, tc.want)
		}
	}
}

// A shard's tree keeps the map For its group: its own shard as it is and
// every other key in the meta group's, a valid map that routes the
// group's keys, and no other's, as the whole map does.
func TestAShardsMapKeepsItsOwnKeysAndGivesTheRestToTheMetaGroup(t *testing.T) {
	m, err := New().Partition("/locks")
	if err != nil {
		t.Fatal(err)
	}
	next := uint64(1)
	split := func(group uint64, at Key) {
		t.Helper()
		if m, err = m.Split(group, at, next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	split(MetaGroup, Key{Key: "m"})                               // 1: top-level names from m
	split(MetaGroup, Key{Space: "/locks", Key: HashKey(1 << 62)}) // 2: /locks' hashes from 2^62
	split(2, Key{Space: "/locks", Key: HashKey(3 << 62)})         // 3: from 3 * 2^62
	split(1, Key{Key: "t"})                                       // 4: names from t
	paths := []string{"/a", "/m", "/n/x", "/t", "/zz", "/locks", "/zookeeper/quota"}
	for i := range 64 {
		paths = append(paths, fmt.Sprintf("/locks/l%d/n", i))
	}
	if f := m.For(MetaGroup); f != m {
		t.Error("the meta group's map is not the whole map")
	}
	for g := uint64(1); g < next; g++ {
		f := m.For(g)
		if err := f.Validate(); err != nil || len(f.Shards) != 2 || f.Shards[0].Group != MetaGroup || f.Shards[1].Group != g {
			t.Fatalf("group %d: %+v, %v", g, f, err)
		}
		for _, p := range paths {
			if mine, got := m.Serves(g, p, false), f.Serves(g, p, false); mine != got {
				t.Errorf("group %d, %s: served %v by its own map, %v by the whole", g, p, got, mine)
			}
		}
	}
}
