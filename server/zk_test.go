package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"go.uber.org/zap"
)

// zkConn speaks ZooKeeper's protocol by hand.
type zkConn struct {
	nc  net.Conn
	br  *bufio.Reader
	xid int32
}

func dialZK(s *Server) (*zkConn, error) {
	nc, err := net.Dial("tcp", s.ZKAddr().String())
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &zkConn{nc: nc, br: bufio.NewReader(nc)}, nil
}

// connect sends a ConnectRequest and returns the answer, or the error
// reading it (io.EOF when the server closed without one).
func (c *zkConn) connect(req zkwire.ConnectRequest) (zkwire.ConnectResponse, error) {
	var resp zkwire.ConnectResponse
	if req.Passwd == nil {
		req.Passwd = make([]byte, zkwire.PasswordSize)
	}
	if _, err := c.nc.Write(zkwire.AppendConnectRequest(nil, &req)); err != nil {
		return resp, err
	}
	body, err := wire.ReadFrame(c.br, nil, 1<<20)
	if err != nil {
		return resp, err
	}
	return resp, zkwire.DecodeConnectResponse(body, &resp)
}

// exists asks whether path exists and waits for the answer, skipping
// notifications.
func (c *zkConn) exists(path string) (int32, error) {
	c.xid++
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(zkwire.AppendRequest(nil, &zkwire.Request{Xid: c.xid, Op: zkwire.OpExists, Path: path})); err != nil {
		return 0, err
	}
	for {
		body, err := wire.ReadFrame(c.br, nil, 64<<20)
		if err != nil {
			return 0, err
		}
		var r zkwire.Reply
		if err := zkwire.DecodeReply(body, zkwire.OpExists, &r); err != nil {
			return 0, err
		}
		if r.Xid == c.xid {
			return r.Err, nil
		}
	}
}

// closed reports whether the server closed the connection without sending
// anything more.
func (c *zkConn) closed() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	return errors.Is(err, io.EOF)
}

func startZKServer(t *testing.T, mod ...func(*Config)) *Server {
	return startServer(t, "", append([]func(*Config){func(c *Config) { c.ZKListen = "127.0.0.1:0" }}, mod...)...)
}

func TestZooKeeperBadInputClosesOnlyItsConnection(t *testing.T) {
	s := startZKServer(t)
	steady, err := dialZK(s)
	if err != nil {
		t.Fatal(err)
	}
	defer steady.nc.Close()
	if _, err := steady.connect(zkwire.ConnectRequest{TimeOut: 10000}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		connect bool // send a valid ConnectRequest first
		input   []byte
	}{
		{"a malformed ConnectRequest", false, []byte{0, 0, 0, 3, 1, 2, 3}},
		{"a ConnectRequest over the frame limit", false, binary.BigEndian.AppendUint32(nil, uint32(s.cfg.MaxFrame+1))},
		{"a request too short for its header", true, []byte{0, 0, 0, 4, 0, 0, 0, 1}},
		{"a request over the frame limit", true, binary.BigEndian.AppendUint32(nil, uint32(s.cfg.MaxFrame+1))},
	} {
		t.Run(tt.name+" closes the connection without a word", func(t *testing.T) {
			c, err := dialZK(s)
			if err != nil {
				t.Fatal(err)
			}
			defer c.nc.Close()
			if tt.connect {
				if _, err := c.connect(zkwire.ConnectRequest{TimeOut: 10000}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.nc.Write(tt.input); err != nil {
				t.Fatal(err)
			}
			if !c.closed() {
				t.Fatal("connection still open, or the server sent something")
			}
		})
	}
	if code, err := steady.exists("/"); err != nil || code != 0 {
		t.Fatalf("the connected client after bad input elsewhere: %d, %v", code, err)
	}
}

func TestZooKeeperHandshakeRefusals(t *testing.T) {
	s := startZKServer(t)
	t.Run("an unknown session is told it expired: timeout 0, session 0", func(t *testing.T) {
		c, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.nc.Close()
		resp, err := c.connect(zkwire.ConnectRequest{SessionID: 0x7fff, Passwd: make([]byte, 16), TimeOut: 5000})
		if err != nil || resp.SessionID != 0 || resp.TimeOut != 0 || len(resp.Passwd) != zkwire.PasswordSize {
			t.Fatalf("resp %+v, %v", resp, err)
		}
		if !c.closed() {
			t.Fatal("connection left open")
		}
	})
	t.Run("a wrong password is answered like an expired session", func(t *testing.T) {
		c, _ := dialZK(s)
		defer c.nc.Close()
		resp, err := c.connect(zkwire.ConnectRequest{TimeOut: 5000})
		if err != nil || resp.SessionID == 0 {
			t.Fatalf("new session: %+v, %v", resp, err)
		}
		c.nc.Close()
		again, _ := dialZK(s)
		defer again.nc.Close()
		wrong := append([]byte(nil), resp.Passwd...)
		wrong[0] ^= 1
		if r, err := again.connect(zkwire.ConnectRequest{SessionID: resp.SessionID, Passwd: wrong, TimeOut: 5000}); err != nil || r.SessionID != 0 {
			t.Fatalf("resp %+v, %v; want the expired answer", r, err)
		}
	})
	t.Run("a client that has seen more than the server is closed without an answer", func(t *testing.T) {
		c, _ := dialZK(s)
		defer c.nc.Close()
		resp, err := c.connect(zkwire.ConnectRequest{TimeOut: 5000})
		if err != nil {
			t.Fatal(err)
		}
		c.nc.Close()
		ahead, _ := dialZK(s)
		defer ahead.nc.Close()
		req := zkwire.ConnectRequest{SessionID: resp.SessionID, Passwd: resp.Passwd, LastZxidSeen: 1 << 40, TimeOut: 5000}
		if _, err := ahead.connect(req); !errors.Is(err, io.EOF) {
			t.Fatalf("err %v, want EOF", err)
		}
	})
	t.Run("past the connection limit the server closes without an answer", func(t *testing.T) {
		s := startZKServer(t, func(c *Config) { c.MaxConns = 2 })
		a, _ := dialZK(s)
		defer a.nc.Close()
		b, _ := dialZK(s)
		defer b.nc.Close()
		for _, c := range []*zkConn{a, b} {
			if _, err := c.connect(zkwire.ConnectRequest{TimeOut: 5000}); err != nil {
				t.Fatal(err)
			}
		}
		over, _ := dialZK(s)
		defer over.nc.Close()
		if _, err := over.connect(zkwire.ConnectRequest{TimeOut: 5000}); !errors.Is(err, io.EOF) {
			t.Fatalf("err %v, want EOF", err)
		}
	})
}

func TestZooKeeperCodesMapToZooKeepers(t *testing.T) {
	for code, want := range map[wire.Code]int32{
		wire.CodeOK: 0, wire.CodeNoNode: -101, wire.CodeNoWatcher: -121, codeReconfigDisabled: -123,
		wire.CodeDataTooLarge: -8, wire.CodeNoQuorum: -4, wire.CodeNotCaughtUp: -4, wire.CodeShuttingDown: -4,
		wire.CodeMalformed: -5, wire.CodeBadPassword: -115, wire.Code(-999): -1,
	} {
		if got := zkCode(code); got != want {
			t.Errorf("zkCode(%d) = %d, want %d", code, got, want)
		}
	}
}

// FuzzZKFrames sends arbitrary bytes after a valid ZooKeeper handshake (or
// instead of one) to a real server, and checks that it neither crashes nor
// stops serving: a ZooKeeper client connected all along, and a new one, are
// still answered.
//
//	go test ./server -run XXX -fuzz FuzzZKFrames -fuzztime 1m
func FuzzZKFrames(f *testing.F) {
	s, err := New(Config{
		Listen: "127.0.0.1:0", ZKListen: "127.0.0.1:0", HTTP: "-", DataDir: f.TempDir(),
		MinSessionTimeout: 200 * time.Millisecond, TickInterval: 10 * time.Millisecond,
		Logger: zap.NewNop(),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	steady, err := dialZK(s)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { steady.nc.Close() })
	if _, err := steady.connect(zkwire.ConnectRequest{TimeOut: 60_000}); err != nil {
		f.Fatal(err)
	}
	frame := func(r zkwire.Request) []byte { return zkwire.AppendRequest(nil, &r) }
	for _, seed := range [][]byte{
		frame(zkwire.Request{Xid: 1, Op: zkwire.OpCreate, Path: "/f", Data: []byte("x"), ACL: zkwire.OpenACL}),
		frame(zkwire.Request{Xid: 1, Op: zkwire.OpMulti, Ops: []zkwire.Request{{Op: zkwire.OpCheck, Path: "/", Version: -1}}}),
		frame(zkwire.Request{Xid: 1, Op: zkwire.OpMultiRead, Ops: []zkwire.Request{{Op: zkwire.OpGetData, Path: "/", Watch: true}}}),
		frame(zkwire.Request{Xid: 1, Op: zkwire.OpAddWatch, Path: "/", Mode: 1}),
		frame(zkwire.Request{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches2, DataWatches: []string{"/"}}),
		frame(zkwire.Request{Xid: 1, Op: zkwire.OpSetACL, Path: "/", ACL: zkwire.OpenACL, Version: -1}),
		frame(zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "digest", Auth: []byte("a:b")}),
		frame(zkwire.Request{Xid: 1, Op: zkwire.OpWhoAmI}),
		{0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 77},
		[]byte("ruok"),
	} {
		f.Add(true, seed)
		f.Add(false, seed)
	}
	f.Fuzz(func(t *testing.T, connect bool, data []byte) {
		c, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.nc.Close()
		if connect {
			if _, err := c.connect(zkwire.ConnectRequest{TimeOut: 200}); err != nil {
				t.Fatalf("handshake before the input: %v", err)
			}
		}
		_ = c.nc.SetDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.nc.Write(data)
		_, _ = c.br.WriteTo(discard{})
		c.nc.Close()

		select {
		case <-s.Done():
			t.Fatalf("the server stopped after % x: %v", data, s.node.Err())
		default:
		}
		if code, err := steady.exists("/"); err != nil || code != 0 {
			t.Fatalf("the connected client was not answered after % x: %d, %v", data, code, err)
		}
		fresh, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.nc.Close()
		if _, err := fresh.connect(zkwire.ConnectRequest{TimeOut: 200}); err != nil {
			t.Fatalf("a new client could not connect after % x: %v", data, err)
		}
		if code, err := fresh.exists("/"); err != nil || code != 0 {
			t.Fatalf("a new client was not answered after % x: %d, %v", data, code, err)
		}
	})
}
