package server

import (
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

func TestSetWatchesWithABadPathIsRefusedWhole(t *testing.T) {
	t.Parallel()
	s := startZKServer(t)
	good := dialRaw(t, s)
	good.connect(wire.ConnectRequest{})
	good.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/w"})
	for _, tt := range []struct {
		name string
		req  wire.Request
	}{
		{"a relative data watch", wire.Request{Op: wire.OpSetWatches, DataWatches: []string{"/w", "w"}}},
		{"an exist watch with a dot-dot segment", wire.Request{Op: wire.OpSetWatches, ExistWatches: []string{"/a/../w"}}},
		{"a child watch with a trailing slash", wire.Request{Op: wire.OpSetWatches, ChildWatches: []string{"/w/"}}},
		{"a persistent watch with a NUL", wire.Request{Op: wire.OpSetWatches2, PersistentWatches: []string{"/w", "/w\x00x"}}},
		{"an empty recursive watch", wire.Request{Op: wire.OpSetWatches2, DataWatches: []string{"/w"}, RecursiveWatches: []string{""}}},
	} {
		t.Run("setWatches with "+tt.name+" is refused with BadArguments and registers nothing", func(t *testing.T) {
			c := dialRaw(t, s)
			c.connect(wire.ConnectRequest{})
			tt.req.Xid = wire.XidSetWatches
			if r := c.call(tt.req); r.Err != wire.CodeBadArguments {
				t.Fatalf("got %v, want BadArguments", r.Err)
			}
			if n := s.watches.size(); n != 0 {
				t.Fatalf("%d watches registered", n)
			}
			// The connection carries on.
			if r := c.call(wire.Request{Xid: 2, Op: wire.OpExists, Path: "/w"}); r.Err != wire.CodeOK {
				t.Fatalf("exists after the refusal: %v", r.Err)
			}
		})
	}
	t.Run("a ZooKeeper client's setWatches with a bad path is refused with BadArguments and registers nothing", func(t *testing.T) {
		z := connectZK(t, s)
		r := z.call(t, zkwire.Request{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches2,
			DataWatches: []string{"/w"}, PersistentWatches: []string{"no/slash"}})
		if r.Err != int32(wire.CodeBadArguments) {
			t.Fatalf("got %d, want BadArguments", r.Err)
		}
		if n := s.watches.size(); n != 0 {
			t.Fatalf("%d watches registered", n)
		}
	})
}

func TestPathsAndNamesOverTheLimitsAreRefused(t *testing.T) {
	t.Parallel()
	const maxPath, maxName = 64, 16
	s := startZKServer(t, func(c *Config) { c.MaxPath, c.MaxName = maxPath, maxName })
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	name := func(b byte, n int) string { return strings.Repeat(string(b), n) }
	// Three nested nodes with names at the limit: a 51-byte path.
	deep := "/" + name('a', maxName) + "/" + name('b', maxName) + "/" + name('c', maxName)
	for _, p := range []string{deep[:17], deep[:34], deep} {
		if r := c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: p}); r.Err != wire.CodeOK {
			t.Fatalf("create %s: %v", p, r.Err)
		}
	}
	pathAt := deep + "/" + name('d', maxPath-len(deep)-1) // exactly maxPath bytes
	for _, tt := range []struct {
		name string
		req  wire.Request
		want wire.Code
	}{
		{"a path at the limit is served", wire.Request{Op: wire.OpExists, Path: pathAt}, wire.CodeNoNode},
		{"a path a byte over the limit is refused", wire.Request{Op: wire.OpExists, Path: pathAt + "d"}, wire.CodeBadArguments},
		{"a name at the limit is served", wire.Request{Op: wire.OpExists, Path: "/" + name('n', maxName)}, wire.CodeNoNode},
		{"a name a byte over the limit is refused", wire.Request{Op: wire.OpExists, Path: "/" + name('n', maxName+1)}, wire.CodeBadArguments},
		{"a long name inside a path is refused", wire.Request{Op: wire.OpExists, Path: "/" + name('n', maxName+1) + "/x"}, wire.CodeBadArguments},
		{"a 1 MiB name is refused", wire.Request{Op: wire.OpCreate, Path: "/" + name('n', 1<<20)}, wire.CodeBadArguments},
		{"a sequential create whose name fits with its ten digits is made",
			wire.Request{Op: wire.OpCreate, Path: "/" + name('s', maxName-wire.SequenceDigits), Mode: wire.ModePersistentSequential}, wire.CodeOK},
		{"a sequential create whose name is over with its ten digits is refused",
			wire.Request{Op: wire.OpCreate, Path: "/" + name('s', maxName-wire.SequenceDigits+1), Mode: wire.ModePersistentSequential}, wire.CodeBadArguments},
		{"the same name without the sequential flag is made",
			wire.Request{Op: wire.OpCreate, Path: "/" + name('s', maxName-wire.SequenceDigits+1)}, wire.CodeOK},
		{"a sequential create whose path fits with its ten digits is made",
			wire.Request{Op: wire.OpCreate, Path: deep + "/" + name('q', maxPath-len(deep)-1-wire.SequenceDigits), Mode: wire.ModeEphemeralSequential}, wire.CodeOK},
		{"a sequential create whose path is over with its ten digits is refused",
			wire.Request{Op: wire.OpCreate, Path: deep + "/" + name('q', maxPath-len(deep)-wire.SequenceDigits), Mode: wire.ModeEphemeralSequential}, wire.CodeBadArguments},
		{"a multi with a sub-request over the limit is refused whole", wire.Request{Op: wire.OpMulti, Ops: []wire.Request{
			{Op: wire.OpCreate, Path: "/multi-ok"},
			{Op: wire.OpCheck, Path: "/" + name('m', maxName+1), Version: -1},
		}}, wire.CodeBadArguments},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Xid = 2
			if r := c.call(tt.req); r.Err != tt.want {
				t.Fatalf("%s: %v, want %v", tt.req.Op, r.Err, tt.want)
			}
		})
	}
	t.Run("the multi refused for one path made nothing", func(t *testing.T) {
		if r := c.call(wire.Request{Xid: 3, Op: wire.OpExists, Path: "/multi-ok"}); r.Err != wire.CodeNoNode {
			t.Fatalf("exists /multi-ok: %v, want NoNode", r.Err)
		}
	})

	long := "/" + name('x', maxName+1)
	t.Run("every op that names a path is held to the limits", func(t *testing.T) {
		for _, req := range []wire.Request{
			{Op: wire.OpCreate, Path: long},
			{Op: wire.OpDelete, Path: long, Version: -1},
			{Op: wire.OpSetData, Path: long, Version: -1},
			{Op: wire.OpGetData, Path: long},
			{Op: wire.OpExists, Path: long, Watch: true},
			{Op: wire.OpGetChildren, Path: long},
			{Op: wire.OpGetACL, Path: long},
			{Op: wire.OpSetACL, Path: long, ACL: wire.OpenACL, Version: -1},
			{Op: wire.OpSync, Path: long},
			{Op: wire.OpGetEphemerals, Path: long},
			{Op: wire.OpGetAllChildrenNumber, Path: long},
			{Op: wire.OpAddWatch, Path: long, AddWatchMode: wire.AddWatchPersistent},
			{Op: wire.OpRemoveWatches, Path: long, WatcherType: wire.WatcherAny},
			{Op: wire.OpMulti, Ops: []wire.Request{{Op: wire.OpSetData, Path: long, Version: -1}}},
			{Xid: wire.XidSetWatches, Op: wire.OpSetWatches, DataWatches: []string{"/"}, ChildWatches: []string{long}},
			{Xid: wire.XidSetWatches, Op: wire.OpSetWatches2, RecursiveWatches: []string{long}},
		} {
			if req.Xid == 0 {
				req.Xid = 4
			}
			if r := c.call(req); r.Err != wire.CodeBadArguments {
				t.Errorf("%s: %v, want BadArguments", req.Op, r.Err)
			}
		}
		if n := s.watches.size(); n != 0 {
			t.Fatalf("%d watches registered", n)
		}
	})

	t.Run("a ZooKeeper client is held to the same limits", func(t *testing.T) {
		z := connectZK(t, s)
		bad := int32(wire.CodeBadArguments)
		if r := z.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: long, ACL: []zkwire.ACL{{Perms: 31, ID: zkwire.ID{Scheme: "world", ID: "anyone"}}}}); r.Err != bad {
			t.Errorf("create: %d, want BadArguments", r.Err)
		}
		if r := z.call(t, zkwire.Request{Op: zkwire.OpGetData, Path: long}); r.Err != bad {
			t.Errorf("getData: %d, want BadArguments", r.Err)
		}
		if r := z.call(t, zkwire.Request{Op: zkwire.OpGetEphemerals, Path: "/" + name('x', maxPath)}); r.Err != bad {
			t.Errorf("getEphemerals: %d, want BadArguments", r.Err)
		}
		if r := z.call(t, zkwire.Request{Op: zkwire.OpCheckWatches, Path: long, WatcherType: 3}); r.Err != bad {
			t.Errorf("checkWatches: %d, want BadArguments", r.Err)
		}
		r := z.call(t, zkwire.Request{Op: zkwire.OpMultiRead, Ops: []zkwire.Request{
			{Op: zkwire.OpGetData, Path: "/"},
			{Op: zkwire.OpGetChildren, Path: long},
		}})
		if r.Err != 0 || len(r.Results) != 2 || r.Results[0].Op != zkwire.OpGetData || r.Results[1].Err != bad {
			t.Errorf("multiRead: %+v, want the first read served and the second failed with BadArguments", r)
		}
	})

	if got := metric(t, s, `arbor_limit{limit="path_length"}`); got != maxPath {
		t.Errorf("path_length limit in metrics: %v", got)
	}
	if got := metric(t, s, `arbor_limit{limit="name_length"}`); got != maxName {
		t.Errorf("name_length limit in metrics: %v", got)
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="path_length"}`); got != 4 { // the 1 MiB name is over both
		t.Errorf("path_length refusals: %v, want 4", got)
	}
	if got := metric(t, s, `arbor_limit_refusals_total{limit="name_length"}`); got < 20 {
		t.Errorf("name_length refusals: %v, want every one counted", got)
	}
}

func TestPathLimitsCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxPath, c.MaxName = NoLimit, NoLimit })
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	long := "/" + strings.Repeat("n", 64<<10)
	if r := c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: long}); r.Err != wire.CodeOK {
		t.Fatalf("create of a 64 KiB name with no limits: %v", r.Err)
	}
}
