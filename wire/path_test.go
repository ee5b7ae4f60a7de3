package wire_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

type namedPath struct {
	path       string
	sequential bool
}

func paths(r *wire.Request) []namedPath {
	var got []namedPath
	for p, seq := range r.Paths {
		got = append(got, namedPath{p, seq})
	}
	return got
}

func TestRequestPathsNameEveryPathARequestCarries(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  wire.Request
		want []namedPath
	}{
		{"a getData names its path", wire.Request{Op: wire.OpGetData, Path: "/a"}, []namedPath{{"/a", false}}},
		{"a sequential create names its prefix as sequential",
			wire.Request{Op: wire.OpCreate, Path: "/q/item-", Mode: wire.ModePersistentSequential}, []namedPath{{"/q/item-", true}}},
		{"a persistent create names its path", wire.Request{Op: wire.OpCreate, Path: "/a"}, []namedPath{{"/a", false}}},
		{"a getEphemerals names its prefix", wire.Request{Op: wire.OpGetEphemerals, Path: "/app/lock-"}, []namedPath{{"/app/lock-", false}}},
		{"a multi names its sub-requests' paths in order", wire.Request{Op: wire.OpMulti, Ops: []wire.Request{
			{Op: wire.OpCheck, Path: "/a"},
			{Op: wire.OpCreate, Path: "/a/s-", Mode: wire.ModeEphemeralSequential},
			{Op: wire.OpDelete, Path: "/b"},
		}}, []namedPath{{"/a", false}, {"/a/s-", true}, {"/b", false}}},
		{"a setWatches2 names every watch list", wire.Request{Op: wire.OpSetWatches2,
			DataWatches: []string{"/d"}, ExistWatches: []string{"/e"}, ChildWatches: []string{"/c"},
			PersistentWatches: []string{"/p"}, RecursiveWatches: []string{"/r"},
		}, []namedPath{{"/d", false}, {"/e", false}, {"/c", false}, {"/p", false}, {"/r", false}}},
		{"a ping names none", wire.Request{Op: wire.OpPing}, nil},
		{"an auth names none", wire.Request{Op: wire.OpAuth, AuthScheme: "digest"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := paths(&tt.req); !slices.Equal(got, tt.want) {
				t.Fatalf("Paths = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("an op names its path exactly when its frame carries it", func(t *testing.T) {
		const marker = "/marker-path"
		for op := wire.Op(-20); op < 300; op++ {
			if !op.Known() || op == wire.OpMulti || op == wire.OpSetWatches || op == wire.OpSetWatches2 {
				continue // no Path field of their own: covered above
			}
			req := wire.Request{Op: op, Path: marker}
			carried := bytes.Contains(wire.AppendRequest(nil, &req), []byte(marker))
			named := slices.Equal(paths(&req), []namedPath{{marker, false}})
			if carried != named {
				t.Errorf("%s: its frame carries the path: %v; Paths names it: %v", op, carried, named)
			}
		}
	})
	t.Run("ranging over them allocates nothing", func(t *testing.T) {
		req := wire.Request{Op: wire.OpMulti, Ops: []wire.Request{{Op: wire.OpCheck, Path: "/a"}, {Op: wire.OpDelete, Path: "/b"}}}
		watches := wire.Request{Op: wire.OpSetWatches2, DataWatches: []string{"/d"}, RecursiveWatches: []string{"/r"}}
		n := 0
		if allocs := testing.AllocsPerRun(100, func() {
			for range req.Paths {
				n++
			}
			for range watches.Paths {
				n++
			}
		}); allocs != 0 {
			t.Fatalf("%v allocations", allocs)
		}
	})
	t.Run("stopping early stops", func(t *testing.T) {
		req := wire.Request{Op: wire.OpSetWatches, DataWatches: []string{"/a", "/b"}, ChildWatches: []string{"/c"}}
		for p := range req.Paths {
			if p != "/a" {
				t.Fatalf("got %q after the first path", p)
			}
			break
		}
	})
}
