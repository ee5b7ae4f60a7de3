package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/wire"
)

// These tests run the client end to end against the fake server on
// loopback TCP.

func dialFake(t *testing.T, addrs []string, opts ...Option) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	c, err := Dial(ctx, addrs, append([]Option{WithLogger(zaptest.NewLogger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	closeAtEnd(t, c)
	return c
}

func TestCreateGetSetDeleteRoundTrip(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	if p, err := c.Create(ctx, "/app", []byte("v1"), Persistent); err != nil || p != "/app" {
		t.Fatalf("create: %q %v", p, err)
	}
	data, st, err := c.Get(ctx, "/app")
	if err != nil || string(data) != "v1" || st.Version != 0 || st.DataLength != 2 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	st, err = c.Set(ctx, "/app", []byte("v2"), 0)
	if err != nil || st.Version != 1 {
		t.Fatalf("set: %+v %v", st, err)
	}
	if _, err := c.Set(ctx, "/app", []byte("v3"), 0); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("set with a stale version: %v", err)
	}
	for _, name := range []string{"b", "a"} {
		if _, err := c.Create(ctx, "/app/"+name, nil, Ephemeral); err != nil {
			t.Fatal(err)
		}
	}
	kids, st, err := c.Children(ctx, "/app")
	if err != nil || !slices.Equal(kids, []string{"a", "b"}) || st.NumChildren != 2 {
		t.Fatalf("children: %v %+v %v", kids, st, err)
	}
	if err := c.Delete(ctx, "/app", -1); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete of a parent: %v", err)
	}
	if _, err := c.Create(ctx, "/app/a/x", nil, Persistent); !errors.Is(err, ErrNoChildrenForEphemerals) {
		t.Fatalf("create under an ephemeral: %v", err)
	}
	ok, st, err := c.Exists(ctx, "/app/a")
	if err != nil || !ok || st.EphemeralOwner != c.SessionID() {
		t.Fatalf("exists: %v %+v %v", ok, st, err)
	}
	if err := c.Sync(ctx, "/app"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/app/a", "/app/b", "/app"} {
		if err := c.Delete(ctx, p, -1); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _, err := c.Exists(ctx, "/app"); ok || err != nil {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
}

func TestCreateStatReturnsTheNewNodesStat(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	var last int64
	for _, p := range []string{"/a", "/b"} {
		got, st, err := c.CreateStat(ctx, p, []byte("xyz"), Persistent)
		must(t, err)
		if got != p || st.Czxid <= last || st.Czxid != st.Mzxid || st.DataLength != 3 {
			t.Errorf("CreateStat %s = %s, %+v (previous czxid %d)", p, got, st, last)
		}
		last = st.Czxid
	}
}

func TestSequentialCreatesNumberTheirNames(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	c.Create(ctx, "/q", nil, Persistent)
	var got []string
	for range 3 {
		p, err := c.Create(ctx, "/q/item-", nil, EphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	want := []string{"/q/item-0000000000", "/q/item-0000000001", "/q/item-0000000002"}
	if !slices.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
}

func TestMultiIsAllOrNothing(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	c.Create(ctx, "/m", []byte("0"), Persistent)
	_, err := c.Multi(ctx, CreateOp("/m/a", nil, Persistent), CheckOp("/m", 5), SetOp("/m", []byte("1"), -1))
	var me *MultiError
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(err, ErrBadVersion) {
		t.Fatalf("multi: %v, want op 1 to fail on its version", err)
	}
	if s.node("/m/a") != nil {
		t.Fatal("a failed multi applied its create")
	}
	res, err := c.Multi(ctx, CreateOp("/m/a", nil, Persistent), CheckOp("/m", 0), SetOp("/m", []byte("1"), 0))
	if err != nil || res[0].Path != "/m/a" || res[2].Stat.Version != 1 {
		t.Fatalf("multi: %+v %v", res, err)
	}
}

func TestWatchesFireOnTheChangesTheyWatch(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	c.Create(ctx, "/w", nil, Persistent)
	_, _, data, err := c.GetW(ctx, "/w")
	must(t, err)
	_, _, data2, err := c.GetW(ctx, "/w")
	must(t, err)
	_, _, kids, err := c.ChildrenW(ctx, "/w")
	must(t, err)
	ok, _, created, err := c.ExistsW(ctx, "/w/new")
	if ok || err != nil || created == nil {
		t.Fatalf("ExistsW of a missing node: %v %v %v", ok, created, err)
	}
	c.Create(ctx, "/w/new", nil, Persistent)
	c.Set(ctx, "/w", []byte("x"), -1)
	expectEvent(t, created, EventNodeCreated, "/w/new")
	expectEvent(t, kids, EventNodeChildrenChanged, "/w")
	expectEvent(t, data, EventNodeDataChanged, "/w")
	expectEvent(t, data2, EventNodeDataChanged, "/w")

	_, _, gone, err := c.ExistsW(ctx, "/w/new")
	must(t, err)
	c.Delete(ctx, "/w/new", -1)
	expectEvent(t, gone, EventNodeDeleted, "/w/new")
}

func TestWatchesAndEphemeralsSurviveAReconnect(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen(), s.listen()})
	ctx := context.Background()
	mustCreate(t, c, "/e", nil, Ephemeral)
	mustCreate(t, c, "/d", []byte("1"), Persistent)
	_, _, changed, err := c.GetW(ctx, "/d")
	must(t, err)
	id := c.SessionID()

	// The node changes while the client cannot reach any server.
	s.setRefuse(wire.CodeShuttingDown)
	s.dropConns()
	waitState(t, c, StateDisconnected)
	s.write(wire.Request{Op: wire.OpSetData, Path: "/d", Data: []byte("2"), Version: -1})
	s.setRefuse(wire.CodeOK)
	waitState(t, c, StateConnected)

	expectEvent(t, changed, EventNodeDataChanged, "/d")
	if c.SessionID() != id {
		t.Errorf("session %#x after the reconnect, want %#x", c.SessionID(), id)
	}
	if ok, _, err := c.Exists(ctx, "/e"); !ok || err != nil {
		t.Errorf("ephemeral after the reconnect: %v %v", ok, err)
	}
}

func TestCloseDeletesEphemeralsAtOnce(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	mustCreate(t, c, "/e", nil, Ephemeral)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if s.node("/e") != nil {
		t.Error("the ephemeral survived Close")
	}
	reqs := s.received()
	if last := reqs[len(reqs)-1]; last.Op != wire.OpClose {
		t.Errorf("last request %s, want close", last.Op)
	}
}

func TestAnExpiredSessionFailsEverything(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	_, _, watch, err := c.ExistsW(ctx, "/nothing")
	must(t, err)
	select {
	case <-c.Done():
		t.Fatal("Done is closed while the session lives")
	default:
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err while the session lives: %v", err)
	}
	s.expire(c.SessionID())
	waitState(t, c, StateExpired)
	<-c.Done()
	if err := c.Err(); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("Err after expiry: %v, want ErrSessionExpired", err)
	}
	if ev := wait(t, watch); ev.Type != EventSession || ev.State != StateExpired || !errors.Is(ev.Err, ErrSessionExpired) {
		t.Errorf("watch got %v", ev)
	}
	if _, err := c.Create(ctx, "/x", nil, Persistent); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("create after expiry: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after expiry: %v", err)
	}
	if err := c.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("Err after Close: %v, want ErrClosed", err)
	}
}

func TestTheSessionExpiresLocallyWhenNoServerCanBeReached(t *testing.T) {
	s := newFakeServer(t)
	m := newClock()
	start := m.Now() // the handshake: the server was last heard from then
	c := dialFake(t, []string{s.listen()}, WithSessionTimeout(400*time.Millisecond), withClock(m))
	s.stopListening()
	s.dropConns()
	// The client retries with backoff, each wait and attempt cut to the
	// session's time left, and expires the session once it is all gone.
	advanceUntil(t, m, "the session to expire", func() bool { return c.State() == StateExpired })
	if d := m.Now().Sub(start); d != 400*time.Millisecond {
		t.Errorf("expired %v after the server was last heard from, want the 400ms timeout", d)
	}
}

func TestAServerBehindTheClientIsSkipped(t *testing.T) {
	s := newFakeServer(t)
	behind := newFakeServer(t) // has applied nothing
	behind.setRefuse(wire.CodeTooManyConnections)
	addrs := map[string]string{"good": s.listen(), "behind": behind.listen()}
	var d net.Dialer
	c := dialFake(t, []string{"good", "behind"}, WithDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addrs[addr])
	}))
	mustCreate(t, c, "/z", nil, Persistent)
	behind.mu.Lock()
	behind.sessions[c.SessionID()] = s.sessions[c.SessionID()]
	behind.refuse = wire.CodeOK
	behind.mu.Unlock()
	for range 5 {
		old := currentConn(c)
		s.dropConns()
		waitNewConn(t, c, old)
		if ok, _, err := c.Exists(context.Background(), "/z"); !ok || err != nil {
			t.Fatalf("exists after the reconnect: %v %v (reattached to a server behind the client?)", ok, err)
		}
	}
	if n := len(behind.received()); n != 0 {
		t.Errorf("the server behind the client served %d requests", n)
	}
}

func TestConcurrentCallersGetTheirOwnAnswers(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			path := fmt.Sprintf("/g%d", g)
			if _, err := c.Create(ctx, path, []byte(path), Persistent); err != nil {
				errs <- err
				return
			}
			for i := range 20 {
				if _, err := c.Set(ctx, path, []byte(fmt.Sprint(path, i)), int32(i)); err != nil {
					errs <- err
					return
				}
				data, _, err := c.Get(ctx, path)
				if err == nil && string(data) != fmt.Sprint(path, i) {
					err = fmt.Errorf("get %s = %q after set %d", path, data, i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func currentConn(c *Client) *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// waitNewConn waits until c is connected on another connection than old.
func waitNewConn(t *testing.T, c *Client, old *conn) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for cur := currentConn(c); cur == nil || cur == old; cur = currentConn(c) {
		if time.Now().After(deadline) {
			t.Fatal("the client did not reconnect")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func expectEvent(t *testing.T, ch <-chan Event, typ EventType, path string) {
	t.Helper()
	ev := wait(t, ch)
	if ev.Type != typ || ev.Path != path || ev.Err != nil {
		t.Errorf("got %v, want %s %s", ev, typ, path)
	}
	if _, open := <-ch; open {
		t.Errorf("the watch on %s is still open after its event", path)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, c *Client, path string, data []byte, mode CreateMode) {
	t.Helper()
	if _, err := c.Create(context.Background(), path, data, mode); err != nil {
		t.Fatal(err)
	}
}

func TestARenewingClientStartsANewSessionAfterAnExpiry(t *testing.T) {
	s := newFakeServer(t)
	c := dialFake(t, []string{s.listen()}, WithSessionRenewal())
	ctx := context.Background()
	old, oldDone := c.Session()
	_, _, watch, err := c.ExistsW(ctx, "/nothing")
	must(t, err)
	mustCreate(t, c, "/e", nil, Ephemeral)
	s.expire(old)
	<-oldDone
	if ev := wait(t, watch); ev.Type != EventSession || !errors.Is(ev.Err, ErrSessionExpired) {
		t.Errorf("the old session's watch got %v", ev)
	}
	waitState(t, c, StateConnected)
	id, done := c.Session()
	if id == old || id == 0 {
		t.Fatalf("session %#x after the renewal, the old one was %#x", id, old)
	}
	select {
	case <-done:
		t.Fatal("the new session's Done is closed")
	default:
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err in the new session: %v", err)
	}
	if ok, _, err := c.Exists(ctx, "/e"); ok || err != nil {
		t.Errorf("the old session's ephemeral: %v, %v; want gone", ok, err)
	}
	_, _, watch, err = c.ExistsW(ctx, "/later")
	must(t, err)
	mustCreate(t, c, "/later", nil, Persistent)
	if ev := wait(t, watch); ev.Type != EventNodeCreated {
		t.Errorf("a watch of the new session got %v", ev)
	}
}

// A linearizable read carries its flag to a server that knows it; to an
// older one, which would skip the flag, the client sends a sync first.
func TestALinearizableReadIsFlaggedOrSyncedFirst(t *testing.T) {
	for _, tc := range []struct {
		version int32
		want    []wire.Request
	}{
		{wire.LinearizableReads, []wire.Request{{Op: wire.OpGetData, Path: "/a", Linearizable: true}}},
		{1, []wire.Request{{Op: wire.OpSync, Path: "/"}, {Op: wire.OpGetData, Path: "/a"}}},
	} {
		t.Run(fmt.Sprintf("protocol version %d", tc.version), func(t *testing.T) {
			s := newFakeServer(t)
			s.version = tc.version
			c := dialFake(t, []string{s.listen()})
			mustCreate(t, c, "/a", []byte("v"), Persistent)
			before := len(s.received())
			if data, _, err := c.Get(context.Background(), "/a", Linearizable()); err != nil || string(data) != "v" {
				t.Fatalf("Get: %q, %v", data, err)
			}
			var got []wire.Request
			for _, r := range s.received()[before:] {
				got = append(got, wire.Request{Op: r.Op, Path: r.Path, Linearizable: r.Linearizable})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("the server got %+v, want %+v", got, tc.want)
			}
		})
	}
}
