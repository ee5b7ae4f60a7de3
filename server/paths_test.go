package server

import (
	"testing"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
)

func TestSetWatchesWithABadPathIsRefusedWhole(t *testing.T) {
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
		z, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		defer z.nc.Close()
		if _, err := z.connect(zkwire.ConnectRequest{TimeOut: 5000}); err != nil {
			t.Fatal(err)
		}
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
