package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"math"
	"net"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap/zaptest"
)

// startServer runs a single-node server on loopback ports with its data in
// dir (a fresh one when dir is "").
func startServer(t *testing.T, dir string, mod ...func(*Config)) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := Config{
		Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: dir,
		MinSessionTimeout: 200 * time.Millisecond, TickInterval: 10 * time.Millisecond,
		Logger:          zaptest.NewLogger(t),
		FourLetterWords: []string{"*"}, // every word, for the tests that ask (the default is srvr and isro)
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if len(cfg.Peers) == 0 && cfg.PeerNetwork == nil {
		shardLocks(t, s)
	}
	return s
}

// flagShards runs the tests' single servers with their lock root's
// children (the HTTP lock API's locks) spread over this many shards by
// hash (docs/scale-out.md): go test ./server -server.shards=4.
var flagShards = flag.Int("server.shards", 0, "spread the children of the lock root over this many shards by hash on every single server")

// shardLocks partitions s's lock root and splits its hashes into
// *flagShards equal ranges, if asked, and waits until every shard runs,
// led: internal/shardtest's Spread, which this package's own tests
// cannot import (it imports the server), through the map's change here.
func shardLocks(t *testing.T, s *Server) {
	t.Helper()
	n := *flagShards
	if n < 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := s.cfg.LockRoot
	if m, _ := s.ShardMap(); m != nil && m.IsPartitioned(root) {
		return // split before a restart
	}
	if _, _, err := s.changeShardMap(ctx, func(m *shardmap.Map) (*shardmap.Map, error) { return m.Partition(root) }); err != nil {
		t.Fatalf("partition %s: %v", root, err)
	}
	for k := uint64(n - 1); k >= 1; k-- {
		if _, err := s.SplitShards(ctx, root, binary.BigEndian.AppendUint64(nil, k*(math.MaxUint64/uint64(n)))); err != nil {
			t.Fatalf("split of %s's hashes: %v", root, err)
		}
	}
}

// rawConn speaks the wire protocol by hand, for tests of what a misbehaving
// client can send.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawConn) connect(req wire.ConnectRequest) wire.ConnectResponse {
	c.t.Helper()
	if req.ProtocolVersion == 0 {
		req.ProtocolVersion = wire.ProtocolVersion
	}
	if req.TimeoutMs == 0 {
		req.TimeoutMs = 5000
	}
	c.write(wire.AppendConnectRequest(nil, &req))
	body, err := wire.ReadFrame(c.br, nil, 1<<20)
	if err != nil {
		c.t.Fatalf("handshake reply: %v", err)
	}
	var resp wire.ConnectResponse
	if err := wire.DecodeConnectResponse(body, &resp); err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// reply reads the next frame as the reply to a request of op.
func (c *rawConn) reply(op wire.Op) (wire.Reply, error) {
	c.t.Helper()
	body, err := wire.ReadFrame(c.br, nil, 64<<20)
	if err != nil {
		return wire.Reply{}, err
	}
	var r wire.Reply
	if err := wire.DecodeReply(body, op, &r); err != nil {
		c.t.Fatal(err)
	}
	return r, nil
}

func (c *rawConn) call(req wire.Request) wire.Reply {
	c.t.Helper()
	c.write(wire.AppendRequest(nil, &req))
	r, err := c.reply(req.Op)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Op, req.Path, err)
	}
	return r
}
