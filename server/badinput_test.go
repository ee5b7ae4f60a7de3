package server

import (
	"encoding/binary"
	"testing"

	"github.com/arbor-coord/arbor/wire"
)

func TestBadInputIsRefusedAndOthersCarryOn(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	good := dialRaw(t, s)
	if resp := good.connect(wire.ConnectRequest{}); resp.Err != wire.CodeOK || resp.SessionID == 0 {
		t.Fatalf("handshake: %+v", resp)
	}
	good.call(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/kept", Data: []byte("v")})

	t.Run("an oversize frame gets a closing frame and the connection closes", func(t *testing.T) {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		hdr := binary.BigEndian.AppendUint32(nil, uint32(s.cfg.MaxFrame+1))
		c.write(hdr)
		r, err := c.reply(wire.OpPing)
		if err != nil {
			t.Fatal(err)
		}
		if r.Xid != wire.XidClosing || r.Err != wire.CodeFrameTooLarge {
			t.Fatalf("got %+v, want a closing frame with FrameTooLarge", r)
		}
		if _, err := c.reply(wire.OpPing); err == nil {
			t.Fatal("connection still open")
		}
	})
	t.Run("a malformed frame gets a closing frame and the connection closes", func(t *testing.T) {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		c.write([]byte{0, 0, 0, 3, 0xc1, 0xc1, 0xc1})
		r, err := c.reply(wire.OpPing)
		if err != nil {
			t.Fatal(err)
		}
		if r.Xid != wire.XidClosing || r.Err != wire.CodeMalformed {
			t.Fatalf("got %+v, want a closing frame with Malformed", r)
		}
	})
	t.Run("an unknown op is answered with Unimplemented and the connection carries on", func(t *testing.T) {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		frame := wire.AppendRequest(nil, &wire.Request{Xid: 7, Op: wire.OpPing})
		// Rewrite the op (the array's second element, a positive fixint) to 77.
		frame[len(frame)-1] = 77
		c.write(frame)
		if r, _ := c.reply(wire.OpPing); r.Xid != 7 || r.Err != wire.CodeUnimplemented {
			t.Fatalf("got %+v, want xid 7 Unimplemented", r)
		}
		if r := c.call(wire.Request{Xid: 8, Op: wire.OpExists, Path: "/kept"}); r.Err != wire.CodeOK {
			t.Fatalf("exists after an unknown op: %+v", r)
		}
	})
	t.Run("invalid paths are refused with BadArguments", func(t *testing.T) {
		for _, p := range []string{"kept", "/kept/", "//", "/a/./b", "/a/../b", "/a\x00b", "/a\x7fb"} {
			for _, op := range []wire.Op{wire.OpCreate, wire.OpSetData, wire.OpDelete, wire.OpGetData, wire.OpExists, wire.OpGetChildren} {
				if r := good.call(wire.Request{Xid: 2, Op: op, Path: p}); r.Err != wire.CodeBadArguments {
					t.Fatalf("%s %q: %v, want BadArguments", op, p, r.Err)
				}
			}
		}
	})
	t.Run("data over the limit is refused with DataTooLarge", func(t *testing.T) {
		r := good.call(wire.Request{Xid: 3, Op: wire.OpSetData, Path: "/kept", Data: make([]byte, s.cfg.MaxDataSize+1), Version: -1})
		if r.Err != wire.CodeDataTooLarge {
			t.Fatalf("got %v, want DataTooLarge", r.Err)
		}
	})
	t.Run("a wrong session password is refused", func(t *testing.T) {
		c := dialRaw(t, s)
		first := c.connect(wire.ConnectRequest{})
		other := dialRaw(t, s)
		resp := other.connect(wire.ConnectRequest{SessionID: first.SessionID, Password: []byte("not the password")})
		if resp.Err != wire.CodeBadPassword {
			t.Fatalf("got %v, want BadPassword", resp.Err)
		}
	})
	t.Run("an unknown session id is refused as expired", func(t *testing.T) {
		c := dialRaw(t, s)
		if resp := c.connect(wire.ConnectRequest{SessionID: 12345, Password: make([]byte, 16)}); resp.Err != wire.CodeSessionExpired {
			t.Fatalf("got %v, want SessionExpired", resp.Err)
		}
	})
	t.Run("a client ahead of the server is sent elsewhere", func(t *testing.T) {
		c := dialRaw(t, s)
		first := c.connect(wire.ConnectRequest{})
		other := dialRaw(t, s)
		resp := other.connect(wire.ConnectRequest{SessionID: first.SessionID, Password: first.Password, LastZxidSeen: 1 << 40})
		if resp.Err != wire.CodeNotCaughtUp {
			t.Fatalf("got %v, want NotCaughtUp", resp.Err)
		}
	})
	t.Run("a new session from a client ahead of the server is sent elsewhere", func(t *testing.T) {
		c := dialRaw(t, s)
		if resp := c.connect(wire.ConnectRequest{LastZxidSeen: 1 << 40}); resp.Err != wire.CodeNotCaughtUp || resp.SessionID != 0 {
			t.Fatalf("got %+v, want NotCaughtUp and no session", resp)
		}
	})

	// Through all of that the first client was served.
	r := good.call(wire.Request{Xid: 9, Op: wire.OpGetData, Path: "/kept"})
	if r.Err != wire.CodeOK || string(r.Data) != "v" {
		t.Fatalf("the good client got %+v", r)
	}
}

func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", func(c *Config) { c.MaxConns = 1 })
	dialRaw(t, s).connect(wire.ConnectRequest{})
	if resp := dialRaw(t, s).connect(wire.ConnectRequest{}); resp.Err != wire.CodeTooManyConnections {
		t.Fatalf("second connection: %v, want TooManyConnections", resp.Err)
	}
}

func TestReservedXidsEndTheConnectionWithBadArguments(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	unknownOp := func(xid int32) []byte {
		frame := wire.AppendRequest(nil, &wire.Request{Xid: xid, Op: wire.OpPing})
		frame[len(frame)-1] = 77 // the op, a positive fixint, becomes an unknown one
		return frame
	}
	request := func(req wire.Request) []byte { return wire.AppendRequest(nil, &req) }
	for _, tt := range []struct {
		name  string
		frame []byte
	}{
		{"a getData with the notification xid", request(wire.Request{Xid: wire.XidNotification, Op: wire.OpGetData, Path: "/"})},
		{"a getData with the closing xid", request(wire.Request{Xid: wire.XidClosing, Op: wire.OpGetData, Path: "/"})},
		{"a create with an unassigned negative xid", request(wire.Request{Xid: -5, Op: wire.OpCreate, Path: "/never"})},
		{"an exists with the lowest xid", request(wire.Request{Xid: -1 << 31, Op: wire.OpExists, Path: "/"})},
		{"a ping with the notification xid", request(wire.Request{Xid: wire.XidNotification, Op: wire.OpPing})},
		{"a setWatches with the ping xid", request(wire.Request{Xid: wire.XidPing, Op: wire.OpSetWatches})},
		{"a ping with the setWatches xid", request(wire.Request{Xid: wire.XidSetWatches, Op: wire.OpPing})},
		{"an unknown op with the notification xid", unknownOp(wire.XidNotification)},
	} {
		t.Run(tt.name+" is answered by a closing frame after the replies before it", func(t *testing.T) {
			c := dialRaw(t, s)
			c.connect(wire.ConnectRequest{})
			// Pipelined behind a request that is answered first.
			c.write(append(request(wire.Request{Xid: 1, Op: wire.OpExists, Path: "/"}), tt.frame...))
			if r, err := c.reply(wire.OpExists); err != nil || r.Xid != 1 || r.Err != wire.CodeOK {
				t.Fatalf("the request before it: %+v, %v", r, err)
			}
			r, err := c.reply(wire.OpPing)
			if err != nil {
				t.Fatal(err)
			}
			if r.Xid != wire.XidClosing || r.Err != wire.CodeBadArguments {
				t.Fatalf("got %+v, want a closing frame with BadArguments", r)
			}
			if _, err := c.reply(wire.OpPing); err == nil {
				t.Fatal("connection still open")
			}
		})
	}
	t.Run("the create refused for its xid was not made", func(t *testing.T) {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		if r := c.call(wire.Request{Xid: 1, Op: wire.OpExists, Path: "/never"}); r.Err != wire.CodeNoNode {
			t.Fatalf("exists /never: %v, want NoNode", r.Err)
		}
	})
	t.Run("a ping with its xid and a setWatches with its xid are answered", func(t *testing.T) {
		c := dialRaw(t, s)
		c.connect(wire.ConnectRequest{})
		if r := c.call(wire.Request{Xid: wire.XidPing, Op: wire.OpPing}); r.Xid != wire.XidPing || r.Err != wire.CodeOK {
			t.Fatalf("ping: %+v", r)
		}
		for _, op := range []wire.Op{wire.OpSetWatches, wire.OpSetWatches2} {
			if r := c.call(wire.Request{Xid: wire.XidSetWatches, Op: op, DataWatches: []string{"/"}}); r.Xid != wire.XidSetWatches || r.Err != wire.CodeOK {
				t.Fatalf("%s: %+v", op, r)
			}
		}
	})
	if got := metric(t, s, `arbor_requests_total{op="getData",result="bad_arguments"}`); got != 2 {
		t.Errorf("getData refused for its xid, in metrics: %v, want 2", got)
	}
}
