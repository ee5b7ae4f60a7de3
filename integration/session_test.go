package integration

import (
	"errors"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// waitState waits until c reports state want.
func waitState(t *testing.T, c *client.Client, want client.State, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for c.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %v after %v, want %v", c.State(), within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSilentSessionExpiresAndItsEphemeralsGo(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p := newProxy(t, s.Addr().String())
	const timeout = 500 * time.Millisecond
	quiet := dial(t, p.addr(), client.WithSessionTimeout(timeout))
	observer := dial(t, s.Addr().String())
	ctx := testCtx(t)
	if _, err := quiet.Create(ctx, "/eph", []byte("x"), client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	_, _, ch, err := observer.GetW(ctx, "/eph")
	if err != nil {
		t.Fatal(err)
	}
	p.freeze(true) // the client falls silent but its connection stays open
	start := time.Now()
	ev := waitEvent(t, ch, timeout+3*time.Second)
	if ev.Type != client.EventNodeDeleted || ev.Path != "/eph" {
		t.Fatalf("event %v, want NodeDeleted /eph", ev)
	}
	if took := time.Since(start); took > timeout+time.Second {
		t.Errorf("ephemeral removed %v after the client fell silent; want within timeout + 1s", took)
	}
	waitState(t, quiet, client.StateExpired, 3*time.Second)
	if _, _, err := quiet.Get(ctx, "/"); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("call on an expired session: %v, want ErrSessionExpired", err)
	}
}

func TestExpiredSessionClosesItsWatches(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p := newProxy(t, s.Addr().String())
	c := dial(t, p.addr(), client.WithSessionTimeout(300*time.Millisecond))
	ctx := testCtx(t)
	_, _, ch, err := c.ExistsW(ctx, "/never")
	if err != nil {
		t.Fatal(err)
	}
	p.freeze(true)
	ev := waitEvent(t, ch, 5*time.Second)
	if ev.Type != client.EventSession || ev.State != client.StateExpired || !errors.Is(ev.Err, client.ErrSessionExpired) {
		t.Fatalf("event %+v, want a session-expired event", ev)
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch channel not closed after the session event")
	}
}

func TestReconnectKeepsSessionEphemeralsAndWatches(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p := newProxy(t, s.Addr().String())
	c := dial(t, p.addr(), client.WithSessionTimeout(5*time.Second))
	other := dial(t, s.Addr().String())
	ctx := testCtx(t)
	id := c.SessionID()
	if _, err := c.Create(ctx, "/mine", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/shared", []byte("a"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, dataCh, err := c.GetW(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}
	_, _, idleCh, err := c.ChildrenW(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}

	p.cut(true) // the connection breaks and the server is out of reach
	waitState(t, c, client.StateDisconnected, 5*time.Second)
	if _, err := other.Set(ctx, "/shared", []byte("b"), -1); err != nil {
		t.Fatal(err) // changed while the client is away
	}
	p.setRefuse(false)
	waitState(t, c, client.StateConnected, 5*time.Second)

	if c.SessionID() != id {
		t.Fatalf("session %#x after reconnect, want %#x", c.SessionID(), id)
	}
	if ok, _, err := other.Exists(ctx, "/mine"); !ok || err != nil {
		t.Fatalf("ephemeral gone after a reconnect: %v %v", ok, err)
	}
	ev := waitEvent(t, dataCh, 5*time.Second)
	if ev.Type != client.EventNodeDataChanged {
		t.Fatalf("watch set before the disconnect: %v, want NodeDataChanged", ev)
	}
	noEvent(t, idleCh, 100*time.Millisecond) // its node's children did not change
	if _, err := other.Create(ctx, "/shared/kid", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, idleCh, 5*time.Second); ev.Type != client.EventNodeChildrenChanged {
		t.Fatalf("re-registered child watch: %v", ev)
	}
}

func TestRequestsInFlightFailWithConnectionLoss(t *testing.T) {
	t.Parallel()
	s := startServer(t, "", "")
	p := newProxy(t, s.Addr().String())
	c := dial(t, p.addr(), client.WithSessionTimeout(5*time.Second))
	ctx := testCtx(t)
	p.freeze(true)
	errc := make(chan error, 1)
	go func() { _, _, err := c.Get(ctx, "/"); errc <- err }()
	time.Sleep(100 * time.Millisecond)
	p.cut(false)
	p.freeze(false)
	select {
	case err := <-errc:
		if !errors.Is(err, client.ErrConnectionLoss) {
			t.Fatalf("in-flight call: %v, want ErrConnectionLoss", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight call hangs after its connection broke")
	}
	waitState(t, c, client.StateConnected, 5*time.Second)
	if _, _, err := c.Get(ctx, "/"); err != nil {
		t.Fatalf("call after reconnect: %v", err)
	}
}

func TestRestartKeepsSessionsOfClientsThatReconnect(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freePort(t)
	s := startServer(t, dir, addr)
	c := dial(t, addr, client.WithSessionTimeout(10*time.Second))
	ctx := testCtx(t)
	id := c.SessionID()
	if _, err := c.Create(ctx, "/survivor", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	startServer(t, dir, addr)
	waitState(t, c, client.StateConnected, 10*time.Second)
	if c.SessionID() != id {
		t.Fatalf("session %#x after the restart, want %#x", c.SessionID(), id)
	}
	if ok, _, err := c.Exists(ctx, "/survivor"); !ok || err != nil {
		t.Fatalf("ephemeral after the restart: %v %v", ok, err)
	}
}
