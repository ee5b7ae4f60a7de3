package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
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

// sessionZK connects a ZooKeeper client with a new session to s, closed
// at the test's end.
func sessionZK(t *testing.T, s *Server) *zkConn {
	t.Helper()
	c, err := dialZK(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.nc.Close() })
	if _, err := c.connect(zkwire.ConnectRequest{TimeOut: 10000}); err != nil {
		t.Fatal(err)
	}
	return c
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
	t.Parallel()
	s := startZKServer(t)
	steady := sessionZK(t, s)
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
	t.Parallel()
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

// call sends r (with the next xid, unless it has one) and returns the
// reply to it, skipping notifications.
func (c *zkConn) call(t *testing.T, r zkwire.Request) zkwire.Reply {
	t.Helper()
	if r.Xid == 0 {
		c.xid++
		r.Xid = c.xid
	}
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(zkwire.AppendRequest(nil, &r)); err != nil {
		t.Fatal(err)
	}
	for {
		body, err := wire.ReadFrame(c.br, nil, 64<<20)
		if err != nil {
			t.Fatalf("%s: %v", r.Op, err)
		}
		var reply zkwire.Reply
		if err := zkwire.DecodeReply(body, r.Op, &reply); err != nil {
			t.Fatal(err)
		}
		if reply.Xid == r.Xid {
			return reply
		}
	}
}

func TestZooKeeperACLOps(t *testing.T) {
	t.Parallel()
	s := startZKServer(t, func(c *Config) { c.SuperDigest = rootDigest })
	auth := func(c *zkConn, cred string) zkwire.Reply {
		return c.call(t, zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "digest", Auth: []byte(cred)})
	}
	alice := sessionZK(t, s)
	if r := auth(alice, "alice:secret"); r.Err != 0 {
		t.Fatalf("auth: %d", r.Err)
	}
	mine := []zkwire.ACL{{Perms: zkwire.PermAll, ID: zkwire.ID{Scheme: "digest", ID: aliceDigest}}, {Perms: zkwire.PermRead, ID: zkwire.Anyone}}
	if r := alice.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: "/z", Data: []byte("d"), ACL: mine}); r.Err != 0 {
		t.Fatalf("create with a digest ACL: %d", r.Err)
	}
	if r := alice.call(t, zkwire.Request{Op: zkwire.OpGetACL, Path: "/z"}); r.Err != 0 || !reflect.DeepEqual(r.ACL, mine) {
		t.Fatalf("getACL: %d %+v", r.Err, r.ACL)
	}
	if r := alice.call(t, zkwire.Request{Op: zkwire.OpWhoAmI}); r.Err != 0 ||
		!reflect.DeepEqual(r.Clients, []zkwire.ClientInfo{{AuthScheme: "ip", User: "127.0.0.1"}, {AuthScheme: "digest", User: "alice"}}) {
		t.Fatalf("whoAmI: %d %+v", r.Err, r.Clients)
	}

	other := sessionZK(t, s)
	if r := other.call(t, zkwire.Request{Op: zkwire.OpSetData, Path: "/z", Data: []byte("x"), Version: -1}); r.Err != int32(wire.CodeNoAuth) {
		t.Fatalf("setData by a stranger: %d, want NoAuth", r.Err)
	}
	masked := []zkwire.ACL{{Perms: zkwire.PermAll, ID: zkwire.ID{Scheme: "digest", ID: "alice:x"}}, mine[1]}
	if r := other.call(t, zkwire.Request{Op: zkwire.OpGetACL, Path: "/z"}); r.Err != 0 || !reflect.DeepEqual(r.ACL, masked) {
		t.Fatalf("getACL by a reader: %d %+v, want %+v", r.Err, r.ACL, masked)
	}
	if r := other.call(t, zkwire.Request{Op: zkwire.OpMulti, Ops: []zkwire.Request{
		{Op: zkwire.OpCheck, Path: "/z", Version: -1},
		{Op: zkwire.OpSetData, Path: "/z", Data: []byte("x"), Version: -1},
	}}); r.Err != 0 || len(r.Results) != 2 || r.Results[1].Err != int32(wire.CodeNoAuth) {
		t.Fatalf("multi with a refused setData: %d %+v", r.Err, r.Results)
	}

	if r := alice.call(t, zkwire.Request{Op: zkwire.OpSetACL, Path: "/z", ACL: zkwire.OpenACL, Version: 3}); r.Err != int32(wire.CodeBadVersion) {
		t.Fatalf("setACL with a wrong aversion: %d", r.Err)
	}
	if r := alice.call(t, zkwire.Request{Op: zkwire.OpSetACL, Path: "/z", ACL: zkwire.OpenACL, Version: 0}); r.Err != 0 || r.Stat.Aversion != 1 {
		t.Fatalf("setACL: %d %+v", r.Err, r.Stat)
	}
	for _, acl := range [][]zkwire.ACL{nil, {{Perms: zkwire.PermAll, ID: zkwire.ID{Scheme: "world", ID: "me"}}}} {
		if r := alice.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: "/bad", ACL: acl}); r.Err != int32(wire.CodeInvalidACL) {
			t.Errorf("create with ACL %+v: %d, want InvalidACL", acl, r.Err)
		}
		if r := alice.call(t, zkwire.Request{Op: zkwire.OpSetACL, Path: "/z", ACL: acl, Version: -1}); r.Err != int32(wire.CodeInvalidACL) {
			t.Errorf("setACL with ACL %+v: %d, want InvalidACL", acl, r.Err)
		}
	}

	// A failed auth is answered with AuthFailed, and the connection closes,
	// as ZooKeeper does.
	if r := auth(other, "no colon"); r.Xid != zkwire.XidAuth || r.Err != int32(wire.CodeAuthFailed) {
		t.Fatalf("bad auth: %+v", r)
	}
	if !other.closed() {
		t.Error("the connection stayed open after a failed auth")
	}
}

// Nothing a client sends behind a failed login runs: ZooKeeper stops
// reading the connection then. The creates here arrive in the same write
// as the failed auth, so they are read and queued before it is answered.
func TestNothingSentAfterAFailedLoginRuns(t *testing.T) {
	t.Parallel()
	s := startZKServer(t)
	for i := range 20 {
		c, err := dialZK(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.connect(zkwire.ConnectRequest{TimeOut: 10000}); err != nil {
			t.Fatal(err)
		}
		batch := zkwire.AppendRequest(nil, &zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "digest", Auth: []byte("no colon")})
		for j := range 4 {
			batch = zkwire.AppendRequest(batch, &zkwire.Request{Xid: int32(j + 1), Op: zkwire.OpCreate,
				Path: fmt.Sprintf("/after-%d-%d", i, j), ACL: zkwire.OpenACL})
		}
		if _, err := c.nc.Write(batch); err != nil {
			t.Fatal(err)
		}
		// The auth's AuthFailed, then the end (EOF, or a reset for the
		// frames the server left unread), never a create's answer.
		_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			body, err := wire.ReadFrame(c.br, nil, 1<<20)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection stayed open after a failed auth")
			}
			if err != nil {
				break
			}
			if xid := int32(binary.BigEndian.Uint32(body)); xid != zkwire.XidAuth {
				t.Fatalf("a request sent after a failed login was answered (xid %d)", xid)
			}
		}
		c.nc.Close()
	}
	// A write of another client's, applied after anything proposed before.
	c := sessionZK(t, s)
	if r := c.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: "/last", ACL: zkwire.OpenACL}); r.Err != 0 {
		t.Fatalf("create: %d", r.Err)
	}
	var ran []string
	s.fsm.read(func(tr *tree.Tree) {
		kids, _, _ := tr.Children("/")
		for _, k := range kids {
			if strings.HasPrefix(k, "after-") {
				ran = append(ran, k)
			}
		}
	})
	if len(ran) > 0 {
		t.Fatalf("creates sent after a failed login ran: %v", ran)
	}
}

// getEphemerals is one op, run by the pipeline for both protocols: the
// same session asks through each and gets the same paths for the same
// prefix, matched as a string. Only what a prefix may be differs, each
// protocol's own rule: ZooKeeper's takes any string (empty for all), Arbor's
// a valid path.
func TestGetEphemeralsAnswersBothProtocolsAlike(t *testing.T) {
	t.Parallel()
	s := startZKServer(t)
	z, err := dialZK(s)
	if err != nil {
		t.Fatal(err)
	}
	defer z.nc.Close()
	resp, err := z.connect(zkwire.ConnectRequest{TimeOut: 60000})
	if err != nil {
		t.Fatal(err)
	}
	z.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: "/r", ACL: zkwire.OpenACL})
	for _, p := range []string{"/r/e1", "/r/e2", "/rx"} {
		if r := z.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: p, ACL: zkwire.OpenACL, Flags: int32(wire.ModeEphemeral)}); r.Err != 0 {
			t.Fatalf("create %s: %d", p, r.Err)
		}
	}
	tests := []struct {
		prefix   string
		want     []string
		arborErr wire.Code // Arbor's protocol refuses a prefix that is no path
	}{
		{"/r/e", []string{"/r/e1", "/r/e2"}, wire.CodeOK},
		{"/r", []string{"/r/e1", "/r/e2", "/rx"}, wire.CodeOK},
		{"/", []string{"/r/e1", "/r/e2", "/rx"}, wire.CodeOK},
		{"/r/", []string{"/r/e1", "/r/e2"}, wire.CodeBadArguments},
		{"", []string{"/r/e1", "/r/e2", "/rx"}, wire.CodeBadArguments},
		{"r", nil, wire.CodeBadArguments},
	}
	for _, tt := range tests {
		if r := z.call(t, zkwire.Request{Op: zkwire.OpGetEphemerals, Path: tt.prefix}); r.Err != 0 || !slices.Equal(r.Children, tt.want) {
			t.Errorf("ZooKeeper's getEphemerals(%q) = %d %q, want %q", tt.prefix, r.Err, r.Children, tt.want)
		}
	}
	a := dialRaw(t, s) // the same session, moved to Arbor's protocol
	if r := a.connect(wire.ConnectRequest{SessionID: resp.SessionID, Password: resp.Passwd, TimeoutMs: 60000}); r.Err != wire.CodeOK {
		t.Fatalf("reattach over Arbor's protocol: %s", r.Err)
	}
	for i, tt := range tests {
		r := a.call(wire.Request{Xid: int32(i + 1), Op: wire.OpGetEphemerals, Path: tt.prefix})
		want := tt.want
		if tt.arborErr != wire.CodeOK {
			want = nil
		}
		if r.Err != tt.arborErr || !slices.Equal(r.Children, want) {
			t.Errorf("Arbor's getEphemerals(%q) = %s %q, want %s %q", tt.prefix, r.Err, r.Children, tt.arborErr, want)
		}
	}
}

// The four-letter words answered are Config.FourLetterWords, ZooKeeper's
// 4lw.commands.whitelist: by default srvr, and isro with read-only mode.
func TestFourLetterWordsAreWhitelisted(t *testing.T) {
	t.Parallel()
	refused := func(w string) string { return w + " is not executed because it is not in the whitelist.\n" }
	for _, tt := range []struct {
		name     string
		words    []string
		readOnly bool
		answered []string
		refused  []string
	}{
		{"ZooKeeper's default", nil, true, []string{"srvr", "isro"}, []string{"ruok", "mntr", "dump", "cons", "envi"}},
		{"the default without read-only mode", nil, false, []string{"srvr"}, []string{"isro", "ruok"}},
		{"a list", []string{"ruok", "mntr"}, true, []string{"ruok", "mntr"}, []string{"srvr", "isro"}},
		{"every word", []string{"*"}, true, []string{"ruok", "srvr", "isro", "mntr", "dump", "cons", "envi", "wchs", "wchc", "wchp", "conf", "stat", "dirs"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startZKServer(t, func(c *Config) { c.FourLetterWords, c.NoReadOnly = tt.words, !tt.readOnly })
			for _, w := range tt.answered {
				if got := askWord(t, s, w); got == refused(w) || got == "" {
					t.Errorf("%s: %q, want an answer", w, got)
				}
			}
			for _, w := range tt.refused {
				if got := askWord(t, s, w); got != refused(w) {
					t.Errorf("%s: %q, want %q", w, got, refused(w))
				}
			}
		})
	}
	if _, err := New(Config{Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(), FourLetterWords: []string{"srvr", "nope"}}); err == nil {
		t.Error("a whitelist with a word Arbor does not know was taken")
	}
}

// A four-letter word that lists paths (dump, wchc, wchp) lists only those
// its connection's own identities may read, as /commands/ does: a node's
// ACL keeps its name from whoever reaches the port.
func TestFourLetterWordsListOnlyReadablePaths(t *testing.T) {
	t.Parallel()
	s := startZKServer(t)
	c := sessionZK(t, s)
	secret := []zkwire.ACL{{Perms: zkwire.PermAll, ID: zkwire.ID{Scheme: "digest", ID: aliceDigest}}}
	for path, acl := range map[string][]zkwire.ACL{"/open-node": zkwire.OpenACL, "/secret-node": secret} {
		if r := c.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: path, ACL: acl, Flags: 1}); r.Err != 0 {
			t.Fatalf("create %s: %d", path, r.Err)
		}
		if r := c.call(t, zkwire.Request{Op: zkwire.OpAddWatch, Path: path}); r.Err != 0 && path == "/open-node" {
			t.Fatalf("addWatch %s: %d", path, r.Err)
		}
	}
	for _, w := range []string{"dump", "wchc", "wchp"} {
		if got := askWord(t, s, w); !strings.Contains(got, "/open-node") || strings.Contains(got, "secret") {
			t.Errorf("%s lists %q: want /open-node and not /secret-node", w, got)
		}
	}
}

// askWord asks s the four-letter word w and returns the whole answer.
func askWord(t *testing.T, s *Server, w string) string {
	t.Helper()
	nc, err := net.Dial("tcp", s.ZKAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(w)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("%s: %v", w, err)
	}
	return string(b)
}

// callEvents is call, with the notifications that came before the reply,
// as "type path".
func (c *zkConn) callEvents(t *testing.T, r zkwire.Request) (zkwire.Reply, []string) {
	t.Helper()
	c.xid++
	if r.Xid == 0 {
		r.Xid = c.xid
	}
	_ = c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(zkwire.AppendRequest(nil, &r)); err != nil {
		t.Fatal(err)
	}
	var events []string
	for {
		body, err := wire.ReadFrame(c.br, nil, 64<<20)
		if err != nil {
			t.Fatalf("%s: %v", r.Op, err)
		}
		xid, err := zkwire.PeekXid(body)
		if err != nil {
			t.Fatal(err)
		}
		op := r.Op
		if xid == zkwire.XidNotification {
			op = zkwire.OpNotification
		}
		var reply zkwire.Reply
		if err := zkwire.DecodeReply(body, op, &reply); err != nil {
			t.Fatal(err)
		}
		if xid != zkwire.XidNotification {
			return reply, events
		}
		events = append(events, fmt.Sprintf("%d %s", reply.EventType, reply.Path))
	}
}

// TestAZooKeeperClientsZxidSaysWhichShardItWasIn: on a sharded member, a
// ZooKeeper reply's zxid names the shard of its zxid (wire.Position), so that
// a client's restore of its watches, which gives back one zxid, keeps the
// watches of that shard that saw no change, as ZooKeeper would, and fires
// the others, whose shard it says nothing of, at once. A batch of reads
// over several shards says nothing (0), and a restore's reply gives the
// client its position back.
func TestAZooKeeperClientsZxidSaysWhichShardItWasIn(t *testing.T) {
	t.Parallel()
	s := startZKServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.SplitShards(ctx, "/", []byte("m")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "shard 1 led", func() bool { return len(s.Status().Shards) == 1 && s.Status().Shards[0].Leader == 1 })
	zc := sessionZK(t, s)
	for _, p := range []string{"/app", "/zoo"} { // the meta group's, shard 1's
		if r := zc.call(t, zkwire.Request{Op: zkwire.OpCreate, Path: p, ACL: zkwire.OpenACL}); r.Err != 0 {
			t.Fatalf("create %s: %+v", p, r)
		}
	}
	read := func(p string) int64 {
		t.Helper()
		r := zc.call(t, zkwire.Request{Op: zkwire.OpGetData, Path: p})
		if r.Err != 0 {
			t.Fatalf("getData %s: %+v", p, r)
		}
		return r.Zxid
	}
	inZoo, inApp := read("/zoo"), read("/app")
	if g, z := wire.PositionOf(inZoo); g != 1 || z != s.group(1).fsm.lastZxid() {
		t.Fatalf("a read of shard 1 carries %#x: group %d, zxid %d; shard 1 is at %d", inZoo, g, z, s.group(1).fsm.lastZxid())
	}
	if g, z := wire.PositionOf(inApp); g != shardmap.MetaGroup || z != s.fsm.lastZxid() {
		t.Fatalf("a read of the meta group carries %#x: group %d, zxid %d", inApp, g, z)
	}
	if r := zc.call(t, zkwire.Request{Op: zkwire.OpMultiRead, Ops: []zkwire.Request{
		{Op: zkwire.OpGetData, Path: "/app"}, {Op: zkwire.OpGetData, Path: "/zoo"}}}); r.Zxid != 0 {
		t.Fatalf("a batch of reads over two shards carries %#x, want 0", r.Zxid)
	}

	restore := func(rel int64) []string {
		t.Helper()
		r, events := zc.callEvents(t, zkwire.Request{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches, RelativeZxid: rel,
			DataWatches: []string{"/app", "/zoo"}})
		if r.Err != 0 || r.Zxid != rel {
			t.Fatalf("setWatches from %#x: %+v, want its position back", rel, r)
		}
		return events
	}
	const changed = "3 " // NodeDataChanged
	if got := restore(inZoo); !slices.Equal(got, []string{changed + "/app"}) {
		t.Errorf("restored from shard 1's zxid: fired %v, want only /app's (the meta group's, which it says nothing of)", got)
	}
	if got := restore(inApp); !slices.Equal(got, []string{changed + "/zoo"}) {
		t.Errorf("restored from the meta group's zxid: fired %v, want only /zoo's", got)
	}
	// (Each restore left a watch that did not fire; a change fires it once.)
	r, events := zc.callEvents(t, zkwire.Request{Op: zkwire.OpSetData, Path: "/zoo", Data: []byte("1"), Version: -1})
	if g, _ := wire.PositionOf(r.Zxid); r.Err != 0 || g != 1 {
		t.Fatalf("setData of /zoo: %+v, its zxid not shard 1's", r)
	}
	if !slices.Equal(events, []string{changed + "/zoo"}) {
		t.Errorf("after a change of /zoo: %v", events)
	}
	if got := restore(inZoo); !slices.Equal(got, []string{changed + "/app", changed + "/zoo"}) {
		t.Errorf("restored from before /zoo changed: fired %v, want both", got)
	}
}
