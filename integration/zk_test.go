package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
	"github.com/arbor-coord/arbor/wire"
	"github.com/arbor-coord/arbor/zkwire"
	"github.com/go-zookeeper/zk"
)

// The tests in this file drive the ZooKeeper port (--zk-listen) with
// go-zookeeper, the Go client many programs use, with raw jute frames for
// what go-zookeeper does not speak (create2, addWatch, whoAmI, ...), with
// ZooKeeper's own zkCli.sh when it is installed, and over raw TCP for the
// four-letter words.

// withZK turns the ZooKeeper listener on, on any free loopback port.
func withZK(cfg *server.Config) { cfg.ZKListen = "127.0.0.1:0" }

// zkLogger sends go-zookeeper's log lines to the test's log while the test
// runs (the client may log after the test returned, when t.Logf panics).
type zkLogger struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func newZKLogger(t testing.TB) *zkLogger {
	l := &zkLogger{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (l *zkLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("go-zookeeper: "+format, args...)
	}
}

// zkClient is a go-zookeeper connection and the session events it saw.
type zkClient struct {
	*zk.Conn
	events chan zk.Event // session events, in order
}

// dialZK connects go-zookeeper to addrs and waits for its session.
func dialZK(t *testing.T, addrs []string, timeout time.Duration) *zkClient {
	t.Helper()
	c := &zkClient{events: make(chan zk.Event, 1024)}
	conn, _, err := zk.Connect(addrs, timeout, zk.WithLogger(newZKLogger(t)),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession {
				select {
				case c.events <- ev:
				default:
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	c.Conn = conn
	c.waitState(t, zk.StateHasSession, 10*time.Second)
	return c
}

// waitState waits for a session event of state want.
func (c *zkClient) waitState(t *testing.T, want zk.State, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-c.events:
			if ev.State == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %v session event within %v", want, within)
		}
	}
}

// rawZK speaks jute by hand, for the ops go-zookeeper lacks and for bad
// input.
type rawZK struct {
	t      *testing.T
	nc     net.Conn
	br     *bufio.Reader
	xid    int32
	resp   zkwire.ConnectResponse
	events []zkwire.Reply // notifications read while waiting for replies
}

func dialRawZK(t *testing.T, addr string, req zkwire.ConnectRequest) *rawZK {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(15 * time.Second))
	c := &rawZK{t: t, nc: nc, br: bufio.NewReader(nc)}
	if req.TimeOut == 0 {
		req.TimeOut = 5000
	}
	if req.Passwd == nil {
		req.Passwd = make([]byte, 16)
	}
	c.write(zkwire.AppendConnectRequest(nil, &req))
	body, err := wire.ReadFrame(c.br, nil, 1<<20)
	if err != nil {
		t.Fatalf("ConnectResponse: %v", err)
	}
	if err := zkwire.DecodeConnectResponse(body, &c.resp); err != nil {
		t.Fatal(err)
	}
	if c.resp.SessionID == 0 {
		t.Fatalf("session refused: %+v", c.resp)
	}
	return c
}

func (c *rawZK) write(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// read reads the next reply that is not a notification, as an answer to op.
func (c *rawZK) read(op zkwire.Op) (zkwire.Reply, error) {
	for {
		body, err := wire.ReadFrame(c.br, nil, 64<<20)
		if err != nil {
			return zkwire.Reply{}, err
		}
		var r zkwire.Reply
		if xid, _ := zkwire.PeekXid(body); xid == zkwire.XidNotification {
			op = zkwire.OpNotification
		}
		if err := zkwire.DecodeReply(body, op, &r); err != nil {
			c.t.Fatalf("%s reply: %v", op, err)
		}
		if r.Xid == zkwire.XidNotification {
			c.events = append(c.events, r)
			continue
		}
		return r, nil
	}
}

// call sends r (with the next xid unless it has a reserved one) and
// returns its reply.
func (c *rawZK) call(r zkwire.Request) zkwire.Reply {
	c.t.Helper()
	if r.Xid == 0 {
		c.xid++
		r.Xid = c.xid
	}
	c.write(zkwire.AppendRequest(nil, &r))
	rep, err := c.read(r.Op)
	if err != nil {
		c.t.Fatalf("%s %s: %v", r.Op, r.Path, err)
	}
	if rep.Xid != r.Xid {
		c.t.Fatalf("%s: reply xid %d, want %d", r.Op, rep.Xid, r.Xid)
	}
	return rep
}

// event returns the next notification, reading until one comes.
func (c *rawZK) event() zkwire.Reply {
	c.t.Helper()
	for len(c.events) == 0 {
		body, err := wire.ReadFrame(c.br, nil, 64<<20)
		if err != nil {
			c.t.Fatalf("waiting for a notification: %v", err)
		}
		var r zkwire.Reply
		if err := zkwire.DecodeReply(body, zkwire.OpNotification, &r); err != nil || r.Xid != zkwire.XidNotification {
			c.t.Fatalf("got %+v (%v), want a notification", r, err)
		}
		c.events = append(c.events, r)
	}
	ev := c.events[0]
	c.events = c.events[1:]
	return ev
}

func TestZooKeeperClientOperations(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	addr := s.ZKAddr().String()
	c := dialZK(t, []string{addr}, 5*time.Second)
	open := zk.WorldACL(zk.PermAll)

	t.Run("create, get, set, exists, children and delete behave as in ZooKeeper", func(t *testing.T) {
		if p, err := c.Create("/ops", []byte("v0"), 0, open); err != nil || p != "/ops" {
			t.Fatalf("create = %q, %v", p, err)
		}
		data, st, err := c.Get("/ops")
		if err != nil || string(data) != "v0" || st.Version != 0 || st.DataLength != 2 {
			t.Fatalf("get = %q, %+v, %v", data, st, err)
		}
		st, err = c.Set("/ops", []byte("v1"), 0)
		if err != nil || st.Version != 1 || st.Mzxid <= st.Czxid {
			t.Fatalf("set = %+v, %v", st, err)
		}
		if ok, st, err := c.Exists("/ops"); !ok || err != nil || st.Version != 1 {
			t.Fatalf("exists = %v, %+v, %v", ok, st, err)
		}
		for _, name := range []string{"b", "a"} {
			if _, err := c.Create("/ops/"+name, nil, 0, open); err != nil {
				t.Fatal(err)
			}
		}
		kids, st, err := c.Children("/ops")
		if err != nil || !slices.Equal(kids, []string{"a", "b"}) || st.NumChildren != 2 || st.Cversion != 2 {
			t.Fatalf("children = %v, %+v, %v", kids, st, err)
		}
		if err := c.Delete("/ops/a", -1); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := c.Exists("/ops/a"); ok || err != nil {
			t.Fatalf("deleted node: exists = %v, %v", ok, err)
		}
	})
	t.Run("errors are ZooKeeper's", func(t *testing.T) {
		eph, err := c.Create("/ops/eph", nil, zk.FlagEphemeral, open)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name string
			err  error
			want error
		}{
			{"get of a missing node", func() error { _, _, err := c.Get("/missing"); return err }(), zk.ErrNoNode},
			{"create of an existing node", func() error { _, err := c.Create("/ops", nil, 0, open); return err }(), zk.ErrNodeExists},
			{"create under a missing parent", func() error { _, err := c.Create("/no/parent", nil, 0, open); return err }(), zk.ErrNoNode},
			{"set with a stale version", func() error { _, err := c.Set("/ops", nil, 0); return err }(), zk.ErrBadVersion},
			{"delete of a node with children", c.Delete("/ops", -1), zk.ErrNotEmpty},
			{"a child of an ephemeral", func() error { _, err := c.Create(eph+"/x", nil, 0, open); return err }(), zk.ErrNoChildrenForEphemerals},
		} {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("%s: %v, want %v", tt.name, tt.err, tt.want)
			}
		}
		if _, st, _ := c.Exists(eph); st.EphemeralOwner != c.SessionID() {
			t.Errorf("ephemeral owner %#x, want the session %#x", st.EphemeralOwner, c.SessionID())
		}
	})
	t.Run("sequential names have ten digits from the parent's cversion", func(t *testing.T) {
		if _, err := c.Create("/seq", nil, 0, open); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			p, err := c.Create("/seq/n-", nil, zk.FlagSequence, open)
			if want := fmt.Sprintf("/seq/n-%010d", i); err != nil || p != want {
				t.Fatalf("create = %q, %v; want %q", p, err, want)
			}
		}
	})
	t.Run("container and TTL nodes show ephemeralOwner 0, as ZooKeeper shows them", func(t *testing.T) {
		// ZooKeeper keeps 0x8000000000000000 and 0xff00000000000000|ttl
		// in its persisted Stat and shows clients 0 (DataNode.copyStat):
		// a client taking a non-zero owner for an ephemeral stays right.
		if _, err := c.CreateContainer("/box", nil, zk.FlagContainer, open); err != nil {
			t.Fatal(err)
		}
		if _, st, err := c.Exists("/box"); err != nil || st.EphemeralOwner != 0 {
			t.Fatalf("container: %+v, %v", st, err)
		}
		if _, err := c.CreateTTL("/ttl", []byte("x"), zk.FlagTTL, open, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		st, err := c.Set("/ttl", []byte("y"), -1)
		if err != nil || st.EphemeralOwner != 0 || st.Version != 1 {
			t.Fatalf("TTL node's Stat after set: %+v, %v", st, err)
		}
		if _, err := c.CreateTTL("/ttl2", nil, zk.FlagTTL, open, 0); !errors.Is(err, zk.ErrBadArguments) {
			t.Fatalf("a TTL of 0: %v, want ErrBadArguments", err)
		}
	})
	t.Run("getACL and setACL keep an ACL and its aversion; bad ACLs are refused", func(t *testing.T) {
		acl, st, err := c.GetACL("/ops")
		if err != nil || len(acl) != 1 || acl[0] != (zk.ACL{Perms: zk.PermAll, Scheme: "world", ID: "anyone"}) || st.Version != 1 {
			t.Fatalf("getACL = %+v, %+v, %v", acl, st, err)
		}
		if st, err := c.SetACL("/ops", open, 0); err != nil || st.Aversion != 1 || st.Version != 1 {
			t.Fatalf("setACL of world:anyone = %+v, %v", st, err)
		}
		if _, err := c.SetACL("/ops", open, 3); !errors.Is(err, zk.ErrBadVersion) {
			t.Fatalf("setACL with a stale aversion: %v", err)
		}
		if _, err := c.SetACL("/missing", open, -1); !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("setACL of a missing node: %v", err)
		}
		readOnly := zk.WorldACL(zk.PermRead)
		if _, err := c.Create("/acl", []byte("r"), 0, readOnly); err != nil {
			t.Fatalf("create with %v: %v", readOnly, err)
		}
		if acl, _, err := c.GetACL("/acl"); err != nil || len(acl) != 1 || acl[0] != readOnly[0] {
			t.Fatalf("getACL of /acl = %+v, %v", acl, err)
		}
		if _, err := c.Set("/acl", []byte("w"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("set of a read-only node: %v, want ErrNoAuth", err)
		}
		for _, acl := range [][]zk.ACL{{{Perms: zk.PermAll, Scheme: "world", ID: "someone"}}, {{Perms: zk.PermAll, Scheme: "ip", ID: "nope"}}, {}} {
			if _, err := c.SetACL("/ops", acl, -1); !errors.Is(err, zk.ErrInvalidACL) {
				t.Errorf("setACL %v: %v, want ErrInvalidACL", acl, err)
			}
			if _, err := c.Create("/bad-acl", nil, 0, acl); !errors.Is(err, zk.ErrInvalidACL) {
				t.Errorf("create with %v: %v, want ErrInvalidACL", acl, err)
			}
		}
	})
	t.Run("sync answers its path", func(t *testing.T) {
		if p, err := c.Sync("/ops"); err != nil || p != "/ops" {
			t.Fatalf("sync = %q, %v", p, err)
		}
	})
	t.Run("multi applies all its ops or none", func(t *testing.T) {
		res, err := c.Multi(
			&zk.CreateRequest{Path: "/multi", Data: []byte("m"), Acl: open},
			&zk.SetDataRequest{Path: "/multi", Data: []byte("n"), Version: 0},
			&zk.CheckVersionRequest{Path: "/multi", Version: 1},
			&zk.CreateRequest{Path: "/multi/c", Acl: open},
			&zk.DeleteRequest{Path: "/multi/c", Version: 0},
		)
		if err != nil || len(res) != 5 || res[0].String != "/multi" || res[1].Stat == nil || res[1].Stat.Version != 1 {
			t.Fatalf("multi = %+v, %v", res, err)
		}
		res, err = c.Multi(
			&zk.SetDataRequest{Path: "/multi", Data: []byte("lost"), Version: -1},
			&zk.CheckVersionRequest{Path: "/multi", Version: 7},
			&zk.CreateRequest{Path: "/multi/d", Acl: open},
		)
		if !errors.Is(err, zk.ErrBadVersion) || len(res) != 3 || res[0].Error != nil ||
			!errors.Is(res[1].Error, zk.ErrBadVersion) || res[2].Error == nil {
			t.Fatalf("failed multi = %+v, %v", res, err)
		}
		if data, _, _ := c.Get("/multi"); string(data) != "n" {
			t.Fatalf("a failed multi changed /multi to %q", data)
		}
	})
	t.Run("digest auth is accepted; an unknown scheme fails and the client carries on", func(t *testing.T) {
		if err := c.AddAuth("digest", []byte("alice:secret")); err != nil {
			t.Fatalf("digest auth: %v", err)
		}
		if err := c.AddAuth("kerberos", []byte("x")); !errors.Is(err, zk.ErrAuthFailed) {
			t.Fatalf("unknown scheme: %v, want ErrAuthFailed", err)
		}
		c.waitState(t, zk.StateHasSession, 10*time.Second) // the server closed the connection; the client reattached
		if _, _, err := c.Get("/ops"); err != nil {
			t.Fatalf("get after a failed auth: %v", err)
		}
	})
}

func TestZooKeeperOpsBeyondGoZookeeper(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	addr := s.ZKAddr().String()
	c := dialRawZK(t, addr, zkwire.ConnectRequest{})
	open := zkwire.OpenACL

	t.Run("create2 and createContainer answer the path and the Stat", func(t *testing.T) {
		r := c.call(zkwire.Request{Op: zkwire.OpCreate2, Path: "/r", Data: []byte("d"), ACL: open})
		if r.Err != 0 || r.Path != "/r" || r.Stat.DataLength != 1 || r.Stat.Czxid != shardZxid(r.Zxid) {
			t.Fatalf("create2 = %+v", r)
		}
		r = c.call(zkwire.Request{Op: zkwire.OpCreateContainer, Path: "/r/box", ACL: open, Flags: int32(wire.ModeContainer)})
		if r.Err != 0 || r.Path != "/r/box" || r.Stat.EphemeralOwner != 0 {
			t.Fatalf("createContainer = %+v", r)
		}
		if r := c.call(zkwire.Request{Op: zkwire.OpCreateContainer, Path: "/r/x", ACL: open}); r.Err != int32(wire.CodeBadArguments) {
			t.Fatalf("createContainer of a persistent mode = %+v, want BadArguments", r)
		}
		for _, name := range []string{"e1", "e2"} {
			c.call(zkwire.Request{Op: zkwire.OpCreate, Path: "/r/" + name, ACL: open, Flags: int32(wire.ModeEphemeral)})
		}
	})
	t.Run("getChildren answers the names alone, getChildren2 the Stat too", func(t *testing.T) {
		r := c.call(zkwire.Request{Op: zkwire.OpGetChildren, Path: "/r"})
		if r.Err != 0 || !slices.Equal(r.Children, []string{"box", "e1", "e2"}) {
			t.Fatalf("getChildren = %+v", r)
		}
		r = c.call(zkwire.Request{Op: zkwire.OpGetChildren2, Path: "/r"})
		if r.Err != 0 || r.Stat.NumChildren != 3 {
			t.Fatalf("getChildren2 = %+v", r)
		}
	})
	t.Run("getAllChildrenNumber and getEphemerals", func(t *testing.T) {
		if r := c.call(zkwire.Request{Op: zkwire.OpGetAllChildrenNumber, Path: "/"}); r.Err != 0 || r.Number != int32(7+mapNode()) {
			t.Fatalf("getAllChildrenNumber = %+v, want %d (4 and the system nodes)", r, 7+mapNode())
		}
		for prefix, want := range map[string][]string{"/r/e": {"/r/e1", "/r/e2"}, "": {"/r/e1", "/r/e2"}, "/r/": {"/r/e1", "/r/e2"}, "/x": nil} {
			if r := c.call(zkwire.Request{Op: zkwire.OpGetEphemerals, Path: prefix}); r.Err != 0 || !slices.Equal(r.Children, want) {
				t.Fatalf("getEphemerals(%q) = %+v, want %v", prefix, r, want)
			}
		}
	})
	t.Run("multiRead reads each op, an error for each that fails", func(t *testing.T) {
		r := c.call(zkwire.Request{Op: zkwire.OpMultiRead, Ops: []zkwire.Request{
			{Op: zkwire.OpGetData, Path: "/r"}, {Op: zkwire.OpGetChildren, Path: "/r"}, {Op: zkwire.OpGetData, Path: "/nope"},
		}})
		if r.Err != 0 || len(r.Results) != 3 || string(r.Results[0].Data) != "d" || len(r.Results[1].Children) != 3 ||
			r.Results[2].Op != zkwire.OpError || r.Results[2].Err != int32(wire.CodeNoNode) {
			t.Fatalf("multiRead = %+v", r)
		}
		bad := c.call(zkwire.Request{Op: zkwire.OpMultiRead, Ops: []zkwire.Request{{Op: zkwire.OpDelete, Path: "/r"}}})
		if bad.Err != int32(wire.CodeBadArguments) {
			t.Fatalf("multiRead with a delete = %+v", bad)
		}
	})
	t.Run("multi answers as ZooKeeper: path alone for create and create2, a failure in every result", func(t *testing.T) {
		r := c.call(zkwire.Request{Op: zkwire.OpMulti, Ops: []zkwire.Request{
			{Op: zkwire.OpCreate, Path: "/r/m1", ACL: open},
			{Op: zkwire.OpCreate2, Path: "/r/m2", ACL: open},
			{Op: zkwire.OpCreateContainer, Path: "/r/m3", ACL: open, Flags: int32(wire.ModeContainer)},
			{Op: zkwire.OpDelete, Path: "/r/m1", Version: -1},
			{Op: zkwire.OpDelete, Path: "/r/m2", Version: -1},
			{Op: zkwire.OpDelete, Path: "/r/m3", Version: -1},
		}})
		var got []string
		for _, res := range r.Results {
			got = append(got, fmt.Sprintf("%s %s %d", res.Op, res.Path, res.Stat.Czxid))
		}
		want := []string{"create /r/m1 0", "create /r/m2 0", fmt.Sprintf("create2 /r/m3 %d", shardZxid(r.Zxid)), "delete  0", "delete  0", "delete  0"}
		if r.Err != 0 || !slices.Equal(got, want) {
			t.Fatalf("multi = %+v %v, want %v", r, got, want)
		}
		r = c.call(zkwire.Request{Op: zkwire.OpMulti, Ops: []zkwire.Request{
			{Op: zkwire.OpCreate, Path: "/r/m4", ACL: open},
			{Op: zkwire.OpCheck, Path: "/r", Version: 99},
			{Op: zkwire.OpDelete, Path: "/r/e1", Version: -1},
		}})
		got = nil
		for _, res := range r.Results {
			got = append(got, fmt.Sprintf("%s %d", res.Op, res.Err))
		}
		if r.Err != 0 || !slices.Equal(got, []string{"error 0", "error -103", "error -2"}) {
			t.Fatalf("failed multi = %+v %v", r, got)
		}
	})
	t.Run("whoAmI gives the ip, and the digest user after auth", func(t *testing.T) {
		r := c.call(zkwire.Request{Op: zkwire.OpWhoAmI})
		if r.Err != 0 || len(r.Clients) != 1 || r.Clients[0] != (zkwire.ClientInfo{AuthScheme: "ip", User: "127.0.0.1"}) {
			t.Fatalf("whoAmI = %+v", r)
		}
		if r := c.call(zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "digest", Auth: []byte("bob:pw")}); r.Err != 0 {
			t.Fatalf("auth = %+v", r)
		}
		r = c.call(zkwire.Request{Op: zkwire.OpWhoAmI})
		if len(r.Clients) != 2 || r.Clients[1] != (zkwire.ClientInfo{AuthScheme: "digest", User: "bob"}) {
			t.Fatalf("whoAmI after auth = %+v", r)
		}
	})
	t.Run("an unknown op gets Unimplemented and the connection carries on", func(t *testing.T) {
		if r := c.call(zkwire.Request{Op: 77}); r.Err != int32(wire.CodeUnimplemented) {
			t.Fatalf("op 77 = %+v", r)
		}
		if r := c.call(zkwire.Request{Op: zkwire.OpReconfig}); r.Err != -123 {
			t.Fatalf("reconfig = %+v, want ReconfigDisabled", r)
		}
		// A getData whose path length runs past the frame.
		c.xid++
		frame := zkwire.AppendRequest(nil, &zkwire.Request{Xid: c.xid, Op: zkwire.OpGetData, Path: "/r"})
		frame[15] = 0x7f
		c.write(frame)
		if r, err := c.read(zkwire.OpGetData); err != nil || r.Xid != c.xid || r.Err != int32(wire.CodeMarshallingError) {
			t.Fatalf("malformed getData = %+v, %v; want MarshallingError", r, err)
		}
		if r := c.call(zkwire.Request{Op: zkwire.OpExists, Path: "/r"}); r.Err != 0 {
			t.Fatalf("exists after bad input = %+v", r)
		}
	})
	t.Run("the readOnly flag is answered when the client sent one", func(t *testing.T) {
		with := dialRawZK(t, addr, zkwire.ConnectRequest{ReadOnly: true, HasReadOnly: true})
		if !with.resp.HasReadOnly || with.resp.ReadOnly {
			t.Fatalf("ConnectResponse %+v: want a readOnly flag, false", with.resp)
		}
		without := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if without.resp.HasReadOnly {
			t.Fatalf("ConnectResponse %+v: want no readOnly flag", without.resp)
		}
	})
	t.Run("an unknown auth scheme gets AuthFailed and the connection closes", func(t *testing.T) {
		other := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := other.call(zkwire.Request{Xid: zkwire.XidAuth, Op: zkwire.OpAuth, Scheme: "sasl"}); r.Err != int32(wire.CodeAuthFailed) {
			t.Fatalf("auth = %+v", r)
		}
		if _, err := other.read(zkwire.OpPing); !errors.Is(err, io.EOF) {
			t.Fatalf("connection after a failed auth: %v, want EOF", err)
		}
	})
}

func TestZooKeeperWatches(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	addr := s.ZKAddr().String()
	c := dialZK(t, []string{addr}, 5*time.Second)
	writer := dial(t, s.Addr().String())
	ctx := testCtx(t)
	open := zk.WorldACL(zk.PermAll)
	if _, err := c.Create("/w", []byte("0"), 0, open); err != nil {
		t.Fatal(err)
	}

	t.Run("one-shot data, exist and child watches fire once", func(t *testing.T) {
		_, _, data, err := c.GetW("/w")
		if err != nil {
			t.Fatal(err)
		}
		_, _, kids, err := c.ChildrenW("/w")
		if err != nil {
			t.Fatal(err)
		}
		ok, _, created, err := c.ExistsW("/w/new")
		if err != nil || ok {
			t.Fatalf("existsW = %v, %v", ok, err)
		}
		if _, err := writer.Set(ctx, "/w", []byte("1"), -1); err != nil {
			t.Fatal(err)
		}
		if ev := waitEvent(t, data, 5*time.Second); ev.Type != zk.EventNodeDataChanged || ev.Path != "/w" {
			t.Fatalf("data watch: %+v", ev)
		}
		if _, err := writer.Create(ctx, "/w/new", nil, client.Persistent); err != nil {
			t.Fatal(err)
		}
		if ev := waitEvent(t, created, 5*time.Second); ev.Type != zk.EventNodeCreated || ev.Path != "/w/new" {
			t.Fatalf("exist watch: %+v", ev)
		}
		if ev := waitEvent(t, kids, 5*time.Second); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/w" {
			t.Fatalf("child watch: %+v", ev)
		}
		if _, ok := <-data; ok {
			t.Fatal("a one-shot watch fired twice")
		}
	})
	t.Run("persistent and recursive watches through addWatch, removed by removeWatches", func(t *testing.T) {
		raw := dialRawZK(t, addr, zkwire.ConnectRequest{})
		for _, w := range []zkwire.Request{{Op: zkwire.OpAddWatch, Path: "/w", Mode: 0}, {Op: zkwire.OpAddWatch, Path: "/rec", Mode: 1}} {
			if r := raw.call(w); r.Err != 0 {
				t.Fatalf("addWatch %+v = %+v", w, r)
			}
		}
		if r := raw.call(zkwire.Request{Op: zkwire.OpCheckWatches, Path: "/w", WatcherType: 4}); r.Err != 0 {
			t.Fatalf("checkWatches of the persistent watch = %+v", r)
		}
		if r := raw.call(zkwire.Request{Op: zkwire.OpCheckWatches, Path: "/w", WatcherType: 1}); r.Err != int32(wire.CodeNoWatcher) {
			t.Fatalf("checkWatches of a child watch never set = %+v", r)
		}
		for i := range 2 {
			if _, err := writer.Set(ctx, "/w", []byte{byte(i)}, -1); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{"/rec", "/rec/a", "/rec/a/b"} {
			if _, err := writer.Create(ctx, p, nil, client.Persistent); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"3 /w", "3 /w", "1 /rec", "1 /rec/a", "1 /rec/a/b"}
		for _, w := range want {
			if ev := raw.event(); fmt.Sprintf("%d %s", ev.EventType, ev.Path) != w {
				t.Fatalf("event %+v, want %s", ev, w)
			}
		}
		if r := raw.call(zkwire.Request{Op: zkwire.OpRemoveWatches, Path: "/w", WatcherType: 4}); r.Err != 0 {
			t.Fatalf("removeWatches = %+v", r)
		}
		if r := raw.call(zkwire.Request{Op: zkwire.OpRemoveWatches, Path: "/w", WatcherType: 4}); r.Err != int32(wire.CodeNoWatcher) {
			t.Fatalf("second removeWatches = %+v, want NoWatcher", r)
		}
	})
	t.Run("setWatches2 on a reattached session replays what the persistent watch missed", func(t *testing.T) {
		first := dialRawZK(t, addr, zkwire.ConnectRequest{})
		if r := first.call(zkwire.Request{Op: zkwire.OpAddWatch, Path: "/w", Mode: 0}); r.Err != 0 {
			t.Fatal(r)
		}
		seen := first.call(zkwire.Request{Op: zkwire.OpExists, Path: "/w"}).Zxid
		first.nc.Close() // the connection goes, the session stays
		st, err := writer.Set(ctx, "/w", []byte("missed"), -1)
		if err != nil {
			t.Fatal(err)
		}
		again := dialRawZK(t, addr, zkwire.ConnectRequest{SessionID: first.resp.SessionID, Passwd: first.resp.Passwd, LastZxidSeen: seen})
		if again.resp.SessionID != first.resp.SessionID {
			t.Fatalf("reattached to session %#x, want %#x", again.resp.SessionID, first.resp.SessionID)
		}
		r := again.call(zkwire.Request{Xid: zkwire.XidSetWatches, Op: zkwire.OpSetWatches2, RelativeZxid: seen, PersistentWatches: []string{"/w"}})
		if r.Err != 0 || len(again.events) != 1 || again.events[0].EventType != 3 || shardZxid(again.events[0].Zxid) != st.Mzxid {
			t.Fatalf("setWatches2 = %+v, events before it %+v; want the missed NodeDataChanged at zxid %d", r, again.events, st.Mzxid)
		}
	})
}

func TestZooKeeperLockRecipeUnderContention(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	addr := s.ZKAddr().String()
	const clients, rounds = 4, 5
	var holders, entered atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, clients*rounds)
	for i := range clients {
		c := dialZK(t, []string{addr}, 5*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l := zk.NewLock(c.Conn, "/locks/zk", zk.WorldACL(zk.PermAll))
				if err := l.Lock(); err != nil {
					errs <- fmt.Errorf("client %d: lock: %w", i, err)
					return
				}
				if n := holders.Add(1); n != 1 {
					errs <- fmt.Errorf("client %d holds the lock with %d others", i, n-1)
				}
				entered.Add(1)
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				if err := l.Unlock(); err != nil {
					errs <- fmt.Errorf("client %d: unlock: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := entered.Load(); n != clients*rounds {
		t.Fatalf("the lock was held %d times, want %d", n, clients*rounds)
	}
}

func TestZooKeeperSessionExpiresAndItsEphemeralGoesForBothProtocols(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	p := newProxy(t, s.ZKAddr().String())
	c := dialZK(t, []string{p.addr()}, 600*time.Millisecond)
	observer := dial(t, s.Addr().String())
	ctx := testCtx(t)
	if _, err := c.Create("/zkeph", []byte("x"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, st, ch, err := observer.GetW(ctx, "/zkeph")
	if err != nil || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("the Arbor client sees %+v, %v; want the ZooKeeper session %#x as owner", st, err, c.SessionID())
	}
	p.freeze(true) // the ZooKeeper client falls silent
	if ev := waitEvent(t, ch, 5*time.Second); ev.Type != client.EventNodeDeleted {
		t.Fatalf("event %v, want NodeDeleted", ev)
	}
	p.freeze(false)
	c.waitState(t, zk.StateExpired, 10*time.Second)
	// go-zookeeper then starts a new session by itself.
	c.waitState(t, zk.StateHasSession, 10*time.Second)
	if _, err := c.Create("/after", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create on the new session: %v", err)
	}
}

func TestZooKeeperAndArborClientsShareTheTree(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	zc := dialZK(t, []string{s.ZKAddr().String()}, 5*time.Second)
	ac := dial(t, s.Addr().String())
	ctx := testCtx(t)
	open := zk.WorldACL(zk.PermAll)

	if _, err := ac.Create(ctx, "/shared", []byte("from arbor"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	data, zst, err := zc.Get("/shared")
	if err != nil || string(data) != "from arbor" {
		t.Fatalf("ZooKeeper client reads %q, %v", data, err)
	}
	if _, err := zc.Create("/shared/z-", []byte("from zk"), zk.FlagSequence, open); err != nil {
		t.Fatal(err)
	}
	p, err := ac.Create(ctx, "/shared/z-", nil, client.PersistentSequential)
	if err != nil || p != "/shared/z-0000000001" {
		t.Fatalf("sequence after the ZooKeeper client's: %q, %v", p, err)
	}
	kids, _, err := ac.Children(ctx, "/shared")
	if err != nil || !slices.Equal(kids, []string{"z-0000000000", "z-0000000001"}) {
		t.Fatalf("the Arbor client lists %v, %v", kids, err)
	}
	ast, err := ac.Set(ctx, "/shared", []byte("v2"), zst.Version)
	if err != nil {
		t.Fatal(err)
	}
	_, _, zw, err := zc.GetW("/shared")
	if err != nil {
		t.Fatal(err)
	}
	_, _, aw, err := ac.GetW(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Set("/shared", []byte("v3"), ast.Version); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, zw, 5*time.Second); ev.Type != zk.EventNodeDataChanged {
		t.Fatalf("ZooKeeper watch: %+v", ev)
	}
	if ev := waitEvent(t, aw, 5*time.Second); ev.Type != client.EventNodeDataChanged {
		t.Fatalf("Arbor watch: %+v", ev)
	}
}

func TestZooKeeperClientReconnectsToAnotherMember(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *server.Config) { cfg.ZKListen = freePort(t) })
	var addrs []string
	byAddr := map[string]uint64{}
	for id := uint64(1); id <= 3; id++ {
		addrs = append(addrs, c.cfgs[id].ZKListen)
		byAddr[c.cfgs[id].ZKListen] = id
	}
	stats, ok := zk.FLWSrvr(addrs, 2*time.Second)
	if !ok {
		t.Fatalf("srvr: %+v", stats)
	}
	modes := map[zk.Mode]int{}
	for _, st := range stats {
		modes[st.Mode]++
	}
	if modes[zk.ModeLeader] != 1 || modes[zk.ModeFollower] != 2 {
		t.Fatalf("srvr modes %v, want a leader and two followers", modes)
	}

	zc := dialZK(t, addrs, 4*time.Second)
	open := zk.WorldACL(zk.PermAll)
	if _, err := zc.Create("/moved", []byte("0"), 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := zc.Create("/moved/eph", nil, zk.FlagEphemeral, open); err != nil {
		t.Fatal(err)
	}
	_, _, w, err := zc.GetW("/moved")
	if err != nil {
		t.Fatal(err)
	}
	session := zc.SessionID()
	gone := byAddr[zc.Server()]
	c.stop(gone)
	zc.waitState(t, zk.StateHasSession, 15*time.Second)
	// go-zookeeper restores its watches after it reports the session, and
	// reads its last zxid unsynchronized as it does, while its reader may
	// write it for a reply (its upstream issue #260: a data race under
	// -race). So no request goes out until the new member has the watch.
	waitUntil(t, "the watch restored on the new member", patience, func() bool {
		return strings.Contains(fourLetterWord(t, zc.Server(), "wchs"), "Total watches:1\n")
	})
	if zc.SessionID() != session || byAddr[zc.Server()] == gone {
		t.Fatalf("after the member stopped: session %#x on %s, want %#x on another member", zc.SessionID(), zc.Server(), session)
	}
	if ok, _, err := zc.Exists("/moved/eph"); !ok || err != nil {
		t.Fatalf("the session's ephemeral after the move: %v, %v", ok, err)
	}
	var other uint64
	for id := range c.servers {
		other = id
	}
	ac := dial(t, c.addr(other))
	if _, err := ac.Set(testCtx(t), "/moved", []byte("1"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, w, 10*time.Second); ev.Type != zk.EventNodeDataChanged || ev.Path != "/moved" {
		t.Fatalf("the watch restored on the new member: %+v", ev)
	}
}

// fourLetterWord sends word to the ZooKeeper port at addr and returns the
// answer.
func fourLetterWord(t *testing.T, addr, word string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(word)); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("%s: %v", word, err)
	}
	return string(out)
}

func TestFourLetterWords(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "", withZK)
	addr := s.ZKAddr().String()
	zc := dialZK(t, []string{addr}, 5*time.Second)
	dial(t, s.Addr().String()) // an Arbor client is listed too
	if _, _, _, err := zc.ExistsW("/watched"); err != nil {
		t.Fatal(err)
	}
	word := func(w string) string {
		t.Helper()
		return fourLetterWord(t, addr, w)
	}

	if got := word("ruok"); got != "imok" {
		t.Errorf("ruok = %q", got)
	}
	if got := word("isro"); got != "rw" {
		t.Errorf("isro = %q", got)
	}
	if got := word("reqs"); got != "reqs is not executed because it is not in the whitelist.\n" {
		t.Errorf("reqs = %q", got)
	}
	srvr, ok := zk.FLWSrvr([]string{addr}, 2*time.Second)
	if !ok || srvr[0].Mode != zk.ModeStandalone || srvr[0].NodeCount != int64(4+mapNode()) || srvr[0].Connections < 2 {
		t.Errorf("srvr = %+v (%q)", srvr[0], word("srvr"))
	}
	// A client hears its session's ConnectResponse just before the server
	// binds the connection to the session, which cons lists.
	waitUntil(t, "both clients in cons", 5*time.Second, func() bool { return strings.Count(word("cons"), "sid=0x") == 2 })
	cons, ok := zk.FLWCons([]string{addr}, 2*time.Second)
	if !ok || len(cons[0].Clients) != 2 || !slices.ContainsFunc(cons[0].Clients, func(cl *zk.ServerClient) bool {
		return cl.SessionID == zc.SessionID() && cl.Timeout == 5000 && cl.Received > 0
	}) {
		t.Errorf("cons = %+v (%q)", cons[0], word("cons"))
	}
	if got := word("stat"); !strings.Contains(got, "Clients:\n /127.0.0.1:") || !strings.Contains(got, "Mode: standalone\n") {
		t.Errorf("stat = %q", got)
	}
	mntr := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(word("mntr")), "\n") {
		k, v, _ := strings.Cut(line, "\t")
		mntr[k] = v
	}
	for k, want := range map[string]string{"zk_server_state": "standalone", "zk_znode_count": strconv.Itoa(4 + mapNode()), "zk_watch_count": "1",
		"zk_global_sessions": "2", "zk_ephemerals_count": "0"} {
		if mntr[k] != want {
			t.Errorf("mntr %s = %q, want %q (all: %v)", k, mntr[k], want, mntr)
		}
	}
	_, port, _ := net.SplitHostPort(addr)
	if got := word("conf"); !strings.Contains(got, "clientPort="+port+"\n") || !strings.Contains(got, "serverId=1\n") {
		t.Errorf("conf = %q", got)
	}
	if got := word("envi"); !strings.HasPrefix(got, "Environment:\nzookeeper.version=") {
		t.Errorf("envi = %q", got)
	}
	if got := word("wchs"); got != "1 connections watching 1 paths\nTotal watches:1\n" {
		t.Errorf("wchs = %q", got)
	}
	if _, err := zc.Create("/dumped", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("0x%x", zc.SessionID())
	dump := word("dump")
	for _, want := range []string{"SessionTracker dump:\nSession Sets (", ")/(2):\n", "\t" + id + "\n",
		"ephemeral nodes dump:\nSessions with Ephemerals (1):\n" + id + ":\n\t/dumped\n",
		"Connections dump:\nConnections Sets (", "sessionId: " + id + "\n"} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %q:\n%s", want, dump)
		}
	}
}

// zkCli finds ZooKeeper's command-line client, from Debian's zookeeper
// package or on PATH.
func zkCli() string {
	if p, err := exec.LookPath("zkCli.sh"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/share/zookeeper/bin/zkCli.sh", "/opt/zookeeper/bin/zkCli.sh"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// needZkCli returns zkCli.sh's path, and skips t, saying why, when it or
// java is missing.
func needZkCli(t *testing.T) string {
	t.Helper()
	cli := zkCli()
	if cli == "" {
		t.Skip("zkCli.sh not found (on PATH or in /usr/share/zookeeper/bin): install Debian's zookeeper package to run ZooKeeper's own CLI against the compat port")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("zkCli.sh found but no java to run it")
	}
	return cli
}

// runZkCli runs zkCli.sh against the server at addr with script on its
// standard input, and returns what it wrote.
func runZkCli(t *testing.T, cli, addr, script string) []byte {
	t.Helper()
	cmd := exec.CommandContext(testCtx(t), cli, "-server", addr)
	cmd.Stdin = strings.NewReader(script)
	cmd.Env = append(os.Environ(), "ZOO_LOG_DIR="+t.TempDir(), "ZOO_LOG4J_PROP=ERROR,CONSOLE")
	cmd.Dir = filepath.Dir(cli)
	out, err := cmd.CombinedOutput()
	t.Logf("zkCli.sh output:\n%s", out)
	if err != nil {
		t.Fatalf("zkCli.sh: %v", err)
	}
	return out
}

func TestZkCliScriptedSession(t *testing.T) {
	t.Parallel()
	cli := needZkCli(t)
	s := startServer(t, "", "", withZK)
	script := strings.Join([]string{
		"ls /",
		"create /zkcli data0",
		"create -e -s /zkcli/eph- e",
		"ls /zkcli",
		"get -s /zkcli",
		"set /zkcli data1",
		"get -s /zkcli",
		"create /zkcli/a",
		"create /zkcli/a/b",
		"delete /zkcli/a/b",
		"stat /zkcli/a",
		"deleteall /zkcli",
		"stat /zkcli",
		"create /kept k",
		"quit",
	}, "\n") + "\n"
	out := runZkCli(t, cli, s.ZKAddr().String(), script)
	for _, want := range []string{
		"Created /zkcli\n", "Created /zkcli/eph-0000000000\n", "[eph-0000000000]\n",
		"data0\n", "numChildren = 1\n", "data1\n", "dataVersion = 1\n",
		"Created /zkcli/a/b\n", "cversion = 2\n",
		"Node does not exist: /zkcli\n", "Created /kept\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("zkCli.sh output lacks %q", want)
		}
	}
	ac := dial(t, s.Addr().String())
	if ok, _, _ := ac.Exists(testCtx(t), "/zkcli"); ok {
		t.Error("/zkcli still exists after deleteall")
	}
	if data, _, err := ac.Get(testCtx(t), "/kept"); err != nil || string(data) != "k" {
		t.Errorf("/kept = %q, %v", data, err)
	}
}
