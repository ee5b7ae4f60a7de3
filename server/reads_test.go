package server

import (
	"reflect"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

func TestGetEphemeralsAndGetAllChildrenNumber(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	a, b := dialRaw(t, s), dialRaw(t, s)
	a.connect(wire.ConnectRequest{})
	b.connect(wire.ConnectRequest{})
	a.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/app"})
	a.call(wire.Request{Xid: 2, Op: wire.OpCreate, Path: "/app/a", Mode: wire.ModeEphemeral})
	a.call(wire.Request{Xid: 3, Op: wire.OpCreate, Path: "/app2", Mode: wire.ModeEphemeral})
	b.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/app/b", Mode: wire.ModeEphemeral})

	for _, tc := range []struct {
		name string
		conn *rawConn
		req  wire.Request
		want wire.Reply
	}{
		{"getEphemerals lists the calling session's ephemerals under a string prefix", a,
			wire.Request{Xid: 10, Op: wire.OpGetEphemerals, Path: "/app"},
			wire.Reply{Xid: 10, Children: []string{"/app/a", "/app2"}}},
		{"getEphemerals of another session lists that session's", b,
			wire.Request{Xid: 10, Op: wire.OpGetEphemerals, Path: "/"},
			wire.Reply{Xid: 10, Children: []string{"/app/b"}}},
		{"getEphemerals refuses a prefix that is not a path", a,
			wire.Request{Xid: 11, Op: wire.OpGetEphemerals, Path: "app"},
			wire.Reply{Xid: 11, Err: wire.CodeBadArguments}},
		{"getAllChildrenNumber counts every descendant", a,
			wire.Request{Xid: 12, Op: wire.OpGetAllChildrenNumber, Path: "/"},
			wire.Reply{Xid: 12, Descendants: 7}}, // the system nodes too
		{"getAllChildrenNumber of a missing node is NoNode", a,
			wire.Request{Xid: 13, Op: wire.OpGetAllChildrenNumber, Path: "/nope"},
			wire.Reply{Xid: 13, Err: wire.CodeNoNode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.conn.call(tc.req)
			got.Zxid = 0
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("reply %+v, want %+v", got, tc.want)
			}
		})
	}
}
