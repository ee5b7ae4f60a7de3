package cli

import (
	"context"
	"encoding/base64"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// The JSON shapes as docs/cli.md documents them. They are spelled out here
// rather than taken from the package, and decode refuses unknown fields,
// so that a renamed or added field fails these tests.

type jStat struct {
	Czxid          int64  `json:"czxid"`
	Mzxid          int64  `json:"mzxid"`
	Pzxid          int64  `json:"pzxid"`
	Ctime          int64  `json:"ctime"`
	Mtime          int64  `json:"mtime"`
	Version        int32  `json:"version"`
	Cversion       int32  `json:"cversion"`
	Aversion       int32  `json:"aversion"`
	EphemeralOwner string `json:"ephemeralOwner"`
	DataLength     int32  `json:"dataLength"`
	NumChildren    int32  `json:"numChildren"`
}

func wantStat(st client.Stat) jStat {
	return jStat{st.Czxid, st.Mzxid, st.Pzxid, st.Ctime, st.Mtime, st.Version, st.Cversion, st.Aversion,
		"0x" + strconv.FormatUint(uint64(st.EphemeralOwner), 16), st.DataLength, st.NumChildren}
}

type jPath struct {
	Path string `json:"path"`
	Stat *jStat `json:"stat"`
}

type jGet struct {
	Path     string `json:"path"`
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	Stat     jStat  `json:"stat"`
}

type jLs struct {
	Path     string   `json:"path"`
	Children []string `json:"children"`
	Stat     *jStat   `json:"stat"`
}

type jLsRecursive struct {
	Path  string   `json:"path"`
	Paths []string `json:"paths"`
	Stat  *jStat   `json:"stat"`
}

type jCount struct {
	Path  string `json:"path"`
	Count int    `json:"count"`
}

type jDeleteall struct {
	Path    string `json:"path"`
	Deleted int    `json:"deleted"`
}

type jEphemeral struct {
	Path  string `json:"path"`
	Owner string `json:"owner"`
}

type jEphemerals struct {
	Ephemerals []jEphemeral `json:"ephemerals"`
}

type jEvent struct {
	Type     string  `json:"type"`
	Path     string  `json:"path"`
	Zxid     int64   `json:"zxid"`
	Data     *string `json:"data"` // watch's NodeCreated and NodeDataChanged only
	Encoding string  `json:"encoding"`
}

type jMembers struct {
	Members []struct {
		ID   uint64 `json:"id"`
		Peer string `json:"peer"`
		Role string `json:"role"`
	} `json:"members"`
}

type jStatus struct {
	ID       int64  `json:"id"`
	Leader   int64  `json:"leader"`
	Term     int64  `json:"term"`
	Applied  int64  `json:"applied"`
	Zxid     int64  `json:"zxid"`
	Digest   string `json:"digest"`
	Sessions int64  `json:"sessions"`
	Znodes   int64  `json:"znodes"`
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stat := func(path string) jStat {
		t.Helper()
		_, st, err := c.Get(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return wantStat(st)
	}
	ptr := func(s jStat) *jStat { return &s }
	binary := "\xff\xfe bin"

	t.Run("create gives the created path", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"/app", "cfg"}, "/app"},
			{[]string{"/app/bin", binary}, "/app/bin"},
			{[]string{"-s", "/app/job-", "text"}, "/app/job-0000000001"},
		} {
			out := must(t, addr, append([]string{"-o", "json", "create"}, tc.args...)...)
			if got := decode[jPath](t, out); got != (jPath{Path: tc.want}) {
				t.Errorf("create %q = %+v, want path %s", tc.args, got, tc.want)
			}
		}
	})
	t.Run("get gives text data as utf8 with the Stat", func(t *testing.T) {
		got := decode[jGet](t, must(t, addr, "get", "-o", "json", "/app"))
		if want := (jGet{"/app", "cfg", "utf8", stat("/app")}); got != want {
			t.Errorf("get = %+v, want %+v", got, want)
		}
	})
	t.Run("get gives data that is not UTF-8 as base64", func(t *testing.T) {
		got := decode[jGet](t, must(t, addr, "get", "-o", "json", "/app/bin"))
		want := jGet{"/app/bin", base64.StdEncoding.EncodeToString([]byte(binary)), "base64", stat("/app/bin")}
		if got != want {
			t.Errorf("get = %+v, want %+v", got, want)
		}
	})
	t.Run("set gives the new Stat", func(t *testing.T) {
		got := decode[jPath](t, must(t, addr, "set", "-o", "json", "/app", "v2"))
		if want := (jPath{"/app", ptr(stat("/app"))}); !reflect.DeepEqual(got, want) || got.Stat.Version != 1 {
			t.Errorf("set = %+v, want %+v at version 1", got, want)
		}
	})
	t.Run("stat gives the Stat", func(t *testing.T) {
		got := decode[jPath](t, must(t, addr, "stat", "-o", "json", "/app"))
		if want := (jPath{"/app", ptr(stat("/app"))}); !reflect.DeepEqual(got, want) {
			t.Errorf("stat = %+v, want %+v", got, want)
		}
	})
	t.Run("ls gives the children, and with -s the Stat", func(t *testing.T) {
		got := decode[jLs](t, must(t, addr, "ls", "-o", "json", "/app"))
		if want := (jLs{Path: "/app", Children: []string{"bin", "job-0000000001"}}); !reflect.DeepEqual(got, want) {
			t.Errorf("ls = %+v, want %+v", got, want)
		}
		got = decode[jLs](t, must(t, addr, "ls", "-s", "-o", "json", "/app"))
		if want := (jLs{"/app", []string{"bin", "job-0000000001"}, ptr(stat("/app"))}); !reflect.DeepEqual(got, want) {
			t.Errorf("ls -s = %+v, want %+v", got, want)
		}
	})
	t.Run("ls of a leaf gives an empty list, not null", func(t *testing.T) {
		if out := must(t, addr, "ls", "-o", "json", "/app/bin"); out != `{"path":"/app/bin","children":[]}`+"\n" {
			t.Errorf("ls of a leaf = %s", out)
		}
	})
	t.Run("ls -R gives the paths", func(t *testing.T) {
		got := decode[jLsRecursive](t, must(t, addr, "ls", "-R", "-o", "json", "/"))
		want := jLsRecursive{Path: "/", Paths: append([]string{"/", "/app", "/app/bin", "/app/job-0000000001", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"}, mapPaths()...)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ls -R = %+v, want %+v", got, want)
		}
	})
	t.Run("count gives the number of descendants", func(t *testing.T) {
		if got := decode[jCount](t, must(t, addr, "count", "-o", "json", "/")); got != (jCount{"/", 6 + mapNode()}) {
			t.Errorf("count = %+v", got)
		}
	})
	t.Run("sync gives the path", func(t *testing.T) {
		if got := decode[jPath](t, must(t, addr, "sync", "-o", "json", "/app")); got != (jPath{Path: "/app"}) {
			t.Errorf("sync = %+v", got)
		}
	})
	t.Run("ephemerals gives paths and owners", func(t *testing.T) {
		if _, err := c.Create(ctx, "/app/e", nil, client.Ephemeral); err != nil {
			t.Fatal(err)
		}
		got := decode[jEphemerals](t, must(t, addr, "ephemerals", "-o", "json", "/app"))
		want := jEphemerals{[]jEphemeral{{"/app/e", sessionHex(c.SessionID())}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ephemerals /app = %+v, want %+v", got, want)
		}
		if out := must(t, addr, "ephemerals", "-o", "json"); out != `{"ephemerals":[]}`+"\n" {
			t.Errorf("ephemerals of a fresh session = %s", out)
		}
	})
	t.Run("delete gives the path", func(t *testing.T) {
		if got := decode[jPath](t, must(t, addr, "delete", "-o", "json", "/app/e")); got != (jPath{Path: "/app/e"}) {
			t.Errorf("delete = %+v", got)
		}
	})
	t.Run("deleteall gives how many nodes it deleted", func(t *testing.T) {
		if got := decode[jDeleteall](t, must(t, addr, "deleteall", "-o", "json", "/app")); got != (jDeleteall{"/app", 3}) {
			t.Errorf("deleteall = %+v", got)
		}
	})
	t.Run("member list gives the members", func(t *testing.T) {
		got := decode[jMembers](t, must(t, addr, "member", "list", "-o", "json"))
		if len(got.Members) != 1 || got.Members[0].ID != 1 || got.Members[0].Role != "voter" {
			t.Errorf("member list = %+v", got)
		}
	})
	t.Run("status gives the member's state", func(t *testing.T) {
		got := decode[jStatus](t, must(t, addr, "status", "-o", "json"))
		st, err := c.ServerStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != 1 || got.Leader != 1 || got.Term != st.Term || len(got.Digest) != 16 || got.Znodes != int64(4+mapNode()) || got.Sessions < 1 {
			t.Errorf("status = %+v; the server says %+v", got, st)
		}
	})
}
