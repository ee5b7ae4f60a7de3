package server

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// FuzzFrames sends arbitrary bytes, after a valid handshake, to a real
// server on loopback, and checks that the server neither crashes nor stops
// serving: a client connected all along, and a new one, are still
// answered. Membership changes are left out: a loopback client may remove
// the member, which then stops, by design.
//
//	go test ./server -run XXX -fuzz FuzzFrames -fuzztime 1m
func FuzzFrames(f *testing.F) {
	s, err := New(Config{
		Listen: "127.0.0.1:0", HTTP: "-", DataDir: f.TempDir(),
		MinSessionTimeout: 200 * time.Millisecond, TickInterval: 10 * time.Millisecond,
		Logger: zap.NewNop(),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	steady, err := fuzzDial(s, 60_000)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { steady.nc.Close() })

	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if hasMembershipChange(data) {
			t.Skip("membership changes may stop the member by design")
		}
		c, err := fuzzDial(s, 200)
		if err != nil {
			t.Fatalf("handshake before the input: %v", err)
		}
		_ = c.nc.SetDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = c.nc.Write(data)
		// Drain what the server answers until it closes or goes quiet, so
		// that its writes never block on us.
		_, _ = c.br.WriteTo(discard{})
		c.nc.Close()

		select {
		case <-s.Done():
			t.Fatalf("the server stopped after % x: %v", data, s.node.Err())
		default:
		}
		if err := steady.exists("/"); err != nil {
			t.Fatalf("the connected client was not answered after % x: %v", data, err)
		}
		fresh, err := fuzzDial(s, 200)
		if err != nil {
			t.Fatalf("a new client could not connect after % x: %v", data, err)
		}
		defer fresh.nc.Close()
		if err := fresh.exists("/"); err != nil {
			t.Fatalf("a new client was not answered after % x: %v", data, err)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// fuzzConn is a hand-driven client connection.
type fuzzConn struct {
	nc  net.Conn
	br  *bufio.Reader
	xid int32
}

func fuzzDial(s *Server, timeoutMs int32) (*fuzzConn, error) {
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		return nil, err
	}
	c := &fuzzConn{nc: nc, br: bufio.NewReader(nc)}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := wire.ConnectRequest{ProtocolVersion: wire.ProtocolVersion, TimeoutMs: timeoutMs}
	if _, err := nc.Write(wire.AppendConnectRequest(nil, &req)); err != nil {
		nc.Close()
		return nil, err
	}
	body, err := wire.ReadFrame(c.br, nil, 1<<20)
	if err != nil {
		nc.Close()
		return nil, err
	}
	var resp wire.ConnectResponse
	if err := wire.DecodeConnectResponse(body, &resp); err != nil {
		nc.Close()
		return nil, err
	}
	if resp.Err != wire.CodeOK {
		nc.Close()
		return nil, resp.Err.Err()
	}
	return c, nil
}

// exists sends an exists request and waits for its answer (skipping any
// notification before it).
func (c *fuzzConn) exists(path string) error {
	c.xid++
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(wire.AppendRequest(nil, &wire.Request{Xid: c.xid, Op: wire.OpExists, Path: path})); err != nil {
		return err
	}
	for {
		body, err := wire.ReadFrame(c.br, nil, 64<<20)
		if err != nil {
			return err
		}
		var r wire.Reply
		if err := wire.DecodeReply(body, wire.OpExists, &r); err != nil {
			return err
		}
		if r.Xid == c.xid {
			return r.Err.Err()
		}
	}
}

// hasMembershipChange reports whether any whole frame in data decodes as
// a membership change.
func hasMembershipChange(data []byte) bool {
	r := bytes.NewReader(data)
	for {
		body, err := wire.ReadFrame(r, nil, 1<<20)
		if err != nil {
			return false
		}
		var req wire.Request
		if wire.DecodeRequest(body, &req) != nil {
			continue
		}
		ops := append([]wire.Request{req}, req.Ops...)
		for _, op := range ops {
			switch op.Op {
			case wire.OpMemberAdd, wire.OpMemberRemove, wire.OpMemberPromote:
				return true
			}
		}
	}
}

// fuzzSeeds are valid request streams, streams with a bad frame among
// good ones, and bare garbage.
func fuzzSeeds() [][]byte {
	frames := func(reqs ...wire.Request) []byte {
		var b []byte
		for i := range reqs {
			b = wire.AppendRequest(b, &reqs[i])
		}
		return b
	}
	valid := frames(
		wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/f", Data: []byte("x")},
		wire.Request{Xid: 2, Op: wire.OpGetData, Path: "/f", Watch: true},
		wire.Request{Xid: 3, Op: wire.OpSetData, Path: "/f", Data: []byte("y"), Version: -1},
		wire.Request{Xid: 4, Op: wire.OpGetChildren, Path: "/", Watch: true},
		wire.Request{Xid: 5, Op: wire.OpSync, Path: "/f"},
		wire.Request{Xid: 6, Op: wire.OpExists, Path: "/g", Watch: true},
		wire.Request{Xid: 7, Op: wire.OpDelete, Path: "/f", Version: -1},
	)
	multi := frames(wire.Request{Xid: 1, Op: wire.OpMulti, Ops: []wire.Request{
		{Op: wire.OpCreate, Path: "/m", Data: []byte("1")},
		{Op: wire.OpCheck, Path: "/m", Version: 0},
		{Op: wire.OpSetData, Path: "/m", Data: []byte("2"), Version: 0},
		{Op: wire.OpDelete, Path: "/m", Version: -1},
	}})
	ephemeral := frames(
		wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/e-", Mode: wire.ModeEphemeralSequential},
		wire.Request{Xid: 2, Op: wire.OpGetEphemerals, Path: "/"},
		wire.Request{Xid: 3, Op: wire.OpGetAllChildrenNumber, Path: "/"},
		wire.Request{Xid: 4, Op: wire.OpPing},
		wire.Request{Xid: 5, Op: wire.OpSetWatches, RelativeZxid: 1, DataWatches: []string{"/a"}, ChildWatches: []string{"/"}},
		wire.Request{Xid: 6, Op: wire.OpStatus},
		wire.Request{Xid: 7, Op: wire.OpClose},
	)
	oversize := binary.BigEndian.AppendUint32(nil, 1<<30)
	reservedXid := frames(
		wire.Request{Xid: 1, Op: wire.OpExists, Path: "/"},
		wire.Request{Xid: wire.XidNotification, Op: wire.OpGetData, Path: "/"},
		wire.Request{Xid: 2, Op: wire.OpExists, Path: "/"},
	)
	longNames := frames(
		wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/" + strings.Repeat("n", DefaultMaxName+1)},
		wire.Request{Xid: 2, Op: wire.OpCreate, Path: "/" + strings.Repeat("s", DefaultMaxName-wire.SequenceDigits+1), Mode: wire.ModePersistentSequential},
		wire.Request{Xid: wire.XidSetWatches, Op: wire.OpSetWatches, DataWatches: []string{"/ok", "bad"}},
	)
	return [][]byte{
		valid, multi, ephemeral, oversize, reservedXid, longNames,
		append(bytes.Clone(valid[:len(valid)/2]), 0, 0, 0, 3, 0xc1, 0xc1, 0xc1),
		append(frames(wire.Request{Xid: 1, Op: wire.OpCreate, Path: "/bad/../path"}), valid...),
		{0, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 1, 2, 3},
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		nil,
	}
}
