package cli

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

type jTree struct {
	Path       string   `json:"path"`
	Name       string   `json:"name"`
	Data       string   `json:"data"`
	Encoding   string   `json:"encoding"`
	Ephemeral  bool     `json:"ephemeral"`
	Sequential bool     `json:"sequential"`
	Stat       jStat    `json:"stat"`
	Truncated  bool     `json:"truncated"`
	Children   []*jTree `json:"children"`
}

func TestTreeDrawsTheSubtree(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	c := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range []struct {
		path, data string
		mode       client.CreateMode
	}{
		{"/app", "cfg", client.Persistent},
		{"/app/a-long", strings.Repeat("x", 40), client.Persistent},
		{"/app/bin", "\xff\x00z", client.Persistent},
		{"/app/job-", "", client.PersistentSequential},
		{"/app/lock", "", client.Ephemeral},
		{"/app/nl", "line1\nline2 \"q\"", client.Persistent},
		{"/app/sub", "", client.Persistent},
		{"/app/sub/deep", "", client.Persistent},
		{"/app/sub/deep/deeper", "d", client.Persistent},
		{"/app/utf", strings.Repeat("é", 20), client.Persistent}, // 40 bytes
	} {
		if _, err := c.Create(ctx, n.path, []byte(n.data), n.mode); err != nil {
			t.Fatal(err)
		}
	}
	runSteps(t, addr, []step{
		{"tree draws every node with marks and a preview of its data", []string{"tree", "/app"}, 0,
			`/app "cfg"
├── a-long "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"…
├── bin "\xff\x00z"
├── job-0000000002 [s]
├── lock [e]
├── nl "line1\nline2 \"q\""
├── sub
│   └── deep
│       └── deeper "d"
└── utf "éééééééééééééééé"…
`, ""},
		{"tree -d stops at the depth and counts what it hides", []string{"tree", "-d", "1", "/app/sub"}, 0,
			"/app/sub\n└── deep [+1]\n", ""},
		{"tree without a path draws from the root", []string{"tree", "-d", "1"}, 0, fmt.Sprintf("/\n├── app [+7] \"cfg\"\n└── zookeeper [+%d]\n", 2+mapNode()), ""},
		{"tree of a missing node fails", []string{"tree", "/nope"}, 1, "", "no node at /nope"},
		{"a negative depth is a usage error", []string{"tree", "-d", "-1", "/"}, 2, "", "below 0"},
	})

	stat := func(path string) jStat {
		t.Helper()
		_, st, err := c.Get(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		return wantStat(st)
	}
	t.Run("the JSON nests the nodes with their full data", func(t *testing.T) {
		got := decode[jTree](t, must(t, addr, "tree", "-o", "json", "/app/sub"))
		want := jTree{Path: "/app/sub", Name: "sub", Encoding: "utf8", Stat: stat("/app/sub"), Children: []*jTree{
			{Path: "/app/sub/deep", Name: "deep", Encoding: "utf8", Stat: stat("/app/sub/deep"), Children: []*jTree{
				{Path: "/app/sub/deep/deeper", Name: "deeper", Data: "d", Encoding: "utf8", Stat: stat("/app/sub/deep/deeper"), Children: []*jTree{}},
			}},
		}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("tree -o json =\n%+v\nwant\n%+v", got, want)
		}
	})
	t.Run("the JSON marks nodes cut by the depth as truncated", func(t *testing.T) {
		got := decode[jTree](t, must(t, addr, "tree", "-o", "json", "-d", "1", "/app"))
		var marks []string
		for _, ch := range got.Children {
			m := ch.Name + ":" + ch.Encoding
			if ch.Ephemeral {
				m += ":e"
			}
			if ch.Sequential {
				m += ":s"
			}
			if ch.Truncated {
				m += ":truncated"
			}
			marks = append(marks, m)
		}
		want := []string{"a-long:utf8", "bin:base64", "job-0000000002:utf8:s", "lock:utf8:e", "nl:utf8",
			"sub:utf8:truncated", "utf:utf8"}
		if !reflect.DeepEqual(marks, want) {
			t.Fatalf("children %v, want %v", marks, want)
		}
	})
}

func TestPreviewAndSequentialNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ data, want string }{
		{"", ""},
		{"short", `"short"`},
		{strings.Repeat("a", 32), `"` + strings.Repeat("a", 32) + `"`},
		{strings.Repeat("a", 33), `"` + strings.Repeat("a", 32) + `"…`},
		{strings.Repeat("a", 31) + "é", `"` + strings.Repeat("a", 31) + `"…`}, // not cut inside the é
		{"tab\there", `"tab\there"`},
	} {
		if got := preview([]byte(tc.data)); got != tc.want {
			t.Errorf("preview(%q) = %s, want %s", tc.data, got, tc.want)
		}
	}
	for name, want := range map[string]bool{"job-0000000001": true, "0000000001": true, "job-000000001": false, "job-00000000x1": false, "": false} {
		if got := isSequential(name); got != want {
			t.Errorf("isSequential(%q) = %v", name, got)
		}
	}
}
