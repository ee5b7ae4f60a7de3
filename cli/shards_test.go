package cli

import (
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/shardmap"
)

func TestShardsListAndPartition(t *testing.T) {
	t.Parallel()
	skipIfSharded(t)
	addr, _ := startServer(t)
	before := lines(must(t, addr, "shards", "list"))
	if len(before) != 3 || before[0] != "version 0" || strings.Join(strings.Fields(before[2]), " ") != "0 / (start) (end) all 0.0 (any)" {
		t.Errorf("shards list of a cluster never sharded:\n%s", strings.Join(before, "\n"))
	}
	after := lines(must(t, addr, "shards", "partition", "/locks"))
	if len(after) != 4 || !strings.HasSuffix(after[0], "; partitioned: /locks") ||
		strings.Join(strings.Fields(after[2]), " ") != "0 / (start) (end) all 1.0 (any)" ||
		strings.Join(strings.Fields(after[3]), " ") != "/locks (start) (end)" {
		t.Errorf("shards partition /locks:\n%s", strings.Join(after, "\n"))
	}
	v := decode[shardmap.View](t, must(t, addr, "shards", "list", "-o", "json"))
	if v.Version == 0 || len(v.Partitioned) != 1 || len(v.Shards) != 1 || len(v.Shards[0].Ranges) != 2 || v.Shards[0].Ranges[1].Space != "/locks" {
		t.Errorf("shards list -o json: %+v", v)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"shards", "partition", "/locks"}, 1, "partitioned already"},
		{[]string{"shards", "partition", "/locks/orders"}, 1, "below /locks"},
		{[]string{"shards", "partition", "locks"}, 1, "not absolute"},
		{[]string{"shards", "partition"}, 2, "accepts 1 arg"},
		{[]string{"shards", "frobnicate"}, 2, "unknown command"},
	} {
		if r := arbor(t, addr, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("arbor %v: %v, want exit %d saying %q", tc.args, r, tc.code, tc.want)
		}
	}
}

// TestShardsSplitMovesKeysToANewShardThatServesThem splits a member's
// meta group twice and uses both new shards through the CLI.
func TestShardsSplitMovesKeysToANewShardThatServesThem(t *testing.T) {
	t.Parallel()
	skipIfSharded(t)
	addr, _ := startServer(t)
	must(t, addr, "create", "/zoo", "z")
	must(t, addr, "shards", "partition", "/locks")
	must(t, addr, "create", "/locks")
	byName := lines(must(t, addr, "shards", "split", "--at", "m"))
	if len(byName) != 5 || strings.Join(strings.Fields(byName[4]), " ") != "1 / m (end) all 2.0 (any)" {
		t.Errorf("shards split --at m:\n%s", strings.Join(byName, "\n"))
	}
	byHash := decode[shardmap.View](t, must(t, addr, "shards", "split", "--parent", "/locks", "-o", "json"))
	if len(byHash.Shards) != 3 || byHash.Shards[2].Ranges[0] != (shardmap.RangeView{Space: "/locks", Start: "8000000000000000"}) {
		t.Errorf("shards split --parent /locks: %+v", byHash)
	}
	must(t, addr, "create", "/zoo/x", "in group 1")
	must(t, addr, "create", "/zulu")
	must(t, addr, "create", "/locks/a")
	must(t, addr, "create", "/locks/b")
	if got := must(t, addr, "get", "/zoo/x"); got != "in group 1\n" {
		t.Errorf("get /zoo/x = %q", got)
	}
	if got := lines(must(t, addr, "ls", "/")); strings.Join(got, " ") != "locks zoo zookeeper zulu" {
		t.Errorf("ls / = %q", got)
	}
	if got := lines(must(t, addr, "ls", "/locks")); strings.Join(got, " ") != "a b" {
		t.Errorf("ls /locks = %q", got)
	}
	// A split of shard 1 itself: /zulu moves to shard 3, /zoo stays.
	off := decode[shardmap.View](t, must(t, addr, "shards", "split", "--at", "zp", "-o", "json"))
	if len(off.Shards) != 4 || off.Shards[3].Group != 3 || off.Shards[3].SplitFrom != 0 || off.Shards[3].Ranges[0] != (shardmap.RangeView{Space: "/", Start: "zp"}) {
		t.Errorf("shards split --at zp: %+v", off)
	}
	must(t, addr, "create", "/zulu/x", "in shard 3")
	if got := must(t, addr, "get", "/zulu/x"); got != "in shard 3\n" {
		t.Errorf("get /zulu/x = %q", got)
	}
	if got := lines(must(t, addr, "ls", "/")); strings.Join(got, " ") != "locks zoo zookeeper zulu" {
		t.Errorf("ls / after the split of shard 1 = %q", got)
	}
	// A shard's leader, named and given back.
	if led := lines(must(t, addr, "shards", "lead", "1", "--on", "1")); len(led) != 7 || strings.Join(strings.Fields(led[4]), " ") != "1 / m zp all 3.0 1" {
		t.Errorf("shards lead 1 --on 1:\n%s", strings.Join(led, "\n"))
	}
	if back := lines(must(t, addr, "shards", "lead", "1", "--on", "0")); len(back) != 7 || strings.Join(strings.Fields(back[4]), " ") != "1 / m zp all 3.0 (any)" {
		t.Errorf("shards lead 1 --on 0:\n%s", strings.Join(back, "\n"))
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"shards", "split"}, 2, "needs --at NAME"},
		{[]string{"shards", "split", "--at", "m"}, 1, "starts a range of shard 1"},
		{[]string{"shards", "split", "--parent", "/zoo"}, 1, "not partitioned"},
		{[]string{"shards", "split", "--parent", "/locks", "--at", "xyz"}, 2, "16 hex digits"},
		{[]string{"shards", "lead", "1"}, 2, "needs --on MEMBER"},
		{[]string{"shards", "move", "1"}, 2, "needs --on MEMBER"},
		{[]string{"shards", "lead", "one", "--on", "1"}, 2, "not a shard's group number"},
		{[]string{"shards", "lead", "1", "--on", "4"}, 1, "not a voter"},
		{[]string{"shards", "lead", "7", "--on", "1"}, 1, "no shard 7"},
	} {
		if r := arbor(t, addr, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("arbor %v: %v, want exit %d saying %q", tc.args, r, tc.code, tc.want)
		}
	}
}

// skipIfSharded skips a test that makes a cluster's first map changes
// itself, from one shard, when -cli.shards has made them already.
func skipIfSharded(t *testing.T) {
	if mapNode() == 1 {
		t.Skip("it makes the map's first changes itself, from a cluster of one shard")
	}
}
