package server

import (
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
)

// A read sees the connection's earlier writes and none of its later ones,
// however the requests are pipelined.
func TestPipelinedReadSeesExactlyTheEarlierWrites(t *testing.T) {
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/x", Data: []byte("old")})
	c.call(wire.Request{Xid: 2, Op: wire.OpCreate, Path: "/y"})
	for round := 0; round < 20; round++ {
		var frames []byte
		frames = wire.AppendRequest(frames, &wire.Request{Xid: 3, Op: wire.OpSetData, Path: "/y", Data: []byte("y"), Version: -1})
		frames = wire.AppendRequest(frames, &wire.Request{Xid: 4, Op: wire.OpGetData, Path: "/x"})
		frames = wire.AppendRequest(frames, &wire.Request{Xid: 5, Op: wire.OpSetData, Path: "/x", Data: []byte("new"), Version: -1})
		frames = wire.AppendRequest(frames, &wire.Request{Xid: 6, Op: wire.OpGetData, Path: "/x"})
		frames = wire.AppendRequest(frames, &wire.Request{Xid: 7, Op: wire.OpSetData, Path: "/x", Data: []byte("old"), Version: -1})
		c.write(frames)
		for _, want := range []struct {
			xid  int32
			op   wire.Op
			data string
		}{{3, wire.OpSetData, ""}, {4, wire.OpGetData, "old"}, {5, wire.OpSetData, ""}, {6, wire.OpGetData, "new"}, {7, wire.OpSetData, ""}} {
			r, err := c.reply(want.op)
			if err != nil {
				t.Fatal(err)
			}
			if r.Xid != want.xid || r.Err != wire.CodeOK || (want.op == wire.OpGetData && string(r.Data) != want.data) {
				t.Fatalf("round %d: reply %+v, want xid %d data %q", round, r, want.xid, want.data)
			}
		}
	}
}

// A client that sends requests and never reads its replies is dropped and
// does not keep the server from closing.
func TestAClientThatDoesNotReadIsDropped(t *testing.T) {
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	c.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/big", Data: make([]byte, 1<<20)})
	var frames []byte
	for i := 0; i < 100; i++ {
		frames = wire.AppendRequest(frames, &wire.Request{Xid: int32(2 + i), Op: wire.OpGetData, Path: "/big"})
	}
	go c.nc.Write(frames) // and never read
	time.Sleep(500 * time.Millisecond)
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(writeTimeout + 5*time.Second):
		t.Fatal("Close hangs on a client that does not read")
	}
}
