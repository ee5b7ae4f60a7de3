package server

import (
	"io"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// A read sees the connection's earlier writes and none of its later ones,
// however the requests are pipelined.
func TestPipelinedReadSeesExactlyTheEarlierWrites(t *testing.T) {
	t.Parallel()
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

// A client that sends requests and never reads its replies is dropped once
// a write to it has waited the write timeout out: the server logs why,
// closes the connection (the client, reading at last, gets what was
// queued and then EOF), lets go of the memory its replies held, and does
// not wait for it when it closes.
func TestAClientThatDoesNotReadIsDropped(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.WarnLevel)
	s := startServer(t, "", func(c *Config) {
		c.writeTimeout = 100 * time.Millisecond
		c.Logger = zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	})
	// A session far longer than the test: only the drop ends the connection.
	staller := stallingClient(t, s, 100, time.Minute)
	waitLog(t, logs, "closing connection: client is not reading its replies")
	_ = staller.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, staller.nc); err != nil {
		t.Fatalf("the dropped client's connection did not end with EOF: %v", err)
	}
	waitFor(t, "the dropped client's replies to be let go", func() bool { return s.memory.replies.Load() == 0 })
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs after a client that did not read")
	}
}

// Close does not wait for a client that does not read: a write to it that
// would wait the write timeout out (an hour here) does not hold Close up.
func TestAClientThatDoesNotReadDoesNotHoldUpClose(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.writeTimeout = time.Hour })
	stallingClient(t, s, 100, time.Minute)
	waitFor(t, "the replies to the client to pile up", func() bool { return s.memory.replies.Load() > replyHighWater })
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waits for a client that does not read")
	}
}
