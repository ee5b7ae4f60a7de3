package server

import (
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

// The connection speaks the lower of the client's protocol version and
// the server's.
func TestTheHandshakeAgreesOnTheLowerVersion(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	for _, tc := range []struct{ client, want int32 }{
		{1, 1},
		{wire.LinearizableReads, wire.LinearizableReads},
		{wire.ProtocolVersion + 7, wire.ProtocolVersion},
	} {
		if resp := dialRaw(t, s).connect(wire.ConnectRequest{ProtocolVersion: tc.client}); resp.Err != wire.CodeOK || resp.ProtocolVersion != tc.want {
			t.Errorf("a client of version %d: the server answers version %d (%v), want %d", tc.client, resp.ProtocolVersion, resp.Err, tc.want)
		}
	}
}

// Linearizable reads of every kind answer as plain ones do, each seeing
// the writes sent before it, also when the client pipelines them behind a
// write.
func TestLinearizableReadsAnswerInOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t, t.TempDir())
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	var frames []byte
	frames = wire.AppendRequest(frames, &wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/a", Data: []byte("v")})
	reads := []wire.Request{
		{Xid: 2, Op: wire.OpGetData, Path: "/a"},
		{Xid: 3, Op: wire.OpExists, Path: "/a"},
		{Xid: 4, Op: wire.OpGetChildren, Path: "/"},
		{Xid: 5, Op: wire.OpGetACL, Path: "/a"},
		{Xid: 6, Op: wire.OpGetAllChildrenNumber, Path: "/"},
		{Xid: 7, Op: wire.OpGetData, Path: "/missing"},
	}
	for i := range reads {
		reads[i].Linearizable = true
		frames = wire.AppendRequest(frames, &reads[i])
	}
	c.write(frames)
	if r, err := c.reply(wire.OpCreate); err != nil || r.Err != wire.CodeOK {
		t.Fatalf("create: %+v, %v", r, err)
	}
	for _, req := range reads {
		r, err := c.reply(req.Op)
		if err != nil {
			t.Fatal(err)
		}
		want := wire.CodeOK
		if req.Path == "/missing" {
			want = wire.CodeNoNode
		}
		if r.Xid != req.Xid || r.Err != want {
			t.Fatalf("%s %s: reply %d with %v, want %d with %v", req.Op, req.Path, r.Xid, r.Err, req.Xid, want)
		}
		if r.Zxid < 1 || req.Op == wire.OpGetData && r.Err == wire.CodeOK && string(r.Data) != "v" {
			t.Fatalf("%s %s: %+v, does not see the create", req.Op, req.Path, r)
		}
	}
}
