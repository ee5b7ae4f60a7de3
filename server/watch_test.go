package server

import (
	"testing"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

func TestWatchRegistryFiresOnceAndForgetsClosedConnections(t *testing.T) {
	type fired struct {
		c    *conn
		typ  wire.EventType
		path string
	}
	var got []fired
	w := newWatchRegistry(func(c *conn, _ int64, typ wire.EventType, path string) { got = append(got, fired{c, typ, path}) })
	a, b := &conn{}, &conn{}
	w.addData("/x", a)
	w.addData("/x", a) // once per connection and path
	w.addChild("/x", a)
	w.addData("/x", b)
	w.addChild("/y", b)
	if w.size() != 4 {
		t.Fatalf("size %d, want 4", w.size())
	}
	w.trigger([]tree.Event{{Type: wire.EventNodeDataChanged, Path: "/x"}}, 5)
	if len(got) != 2 || w.size() != 2 {
		t.Fatalf("data change fired %v, %d left; want a and b fired, 2 left", got, w.size())
	}
	w.trigger([]tree.Event{{Type: wire.EventNodeDataChanged, Path: "/x"}}, 6)
	if len(got) != 2 {
		t.Fatalf("a fired watch fired again: %v", got)
	}
	w.removeConn(b)
	if w.size() != 1 || len(w.byConn[b]) != 0 {
		t.Fatalf("after b closed: %d watches, b indexes %v", w.size(), w.byConn[b])
	}
	w.trigger([]tree.Event{{Type: wire.EventNodeDeleted, Path: "/x"}}, 7)
	if len(got) != 3 || got[2] != (fired{a, wire.EventNodeDeleted, "/x"}) || w.size() != 0 || len(w.byConn[a]) != 0 {
		t.Fatalf("delete fired %v, %d left, a indexes %v", got, w.size(), w.byConn[a])
	}
}
