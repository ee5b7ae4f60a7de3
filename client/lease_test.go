package client_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

func TestALeaseIsRenewedAndClosedWithItsNodes(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	ctx := testContext(t)
	l, err := c.CreateLease(ctx, 10*time.Second, "w1")
	if err != nil || l.ID == 0 || l.Version != 1 || l.TTL != 10*time.Second || time.Until(l.Expires) <= 0 {
		t.Fatalf("CreateLease = %+v, %v", l, err)
	}
	if _, err := c.Create(ctx, "/held", nil, client.Ephemeral, client.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	if _, st, err := c.Get(ctx, "/held"); err != nil || st.EphemeralOwner != l.ID {
		t.Fatalf("the lease's node: owner %#x, %v; want the lease %#x", st.EphemeralOwner, err, l.ID)
	}
	r, err := c.RenewLease(ctx, l.ID, 20*time.Second)
	if err != nil || r.ID != l.ID || r.Version != 2 || r.TTL != 20*time.Second || !r.Expires.After(l.Expires) {
		t.Fatalf("RenewLease = %+v, %v", r, err)
	}
	if err := c.CloseLease(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := c.Exists(ctx, "/held"); ok || err != nil {
		t.Fatalf("the node of a closed lease: exists %v, %v", ok, err)
	}
	if _, err := c.RenewLease(ctx, l.ID, 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Errorf("renewing a closed lease: %v, want ErrLeaseExpired", err)
	}
	if _, err := c.Create(ctx, "/late", nil, client.Ephemeral, client.WithLease(l.ID)); !errors.Is(err, client.ErrLeaseExpired) {
		t.Errorf("a node of a closed lease: %v, want ErrLeaseExpired", err)
	}
	if c.Err() != nil {
		t.Errorf("the session ended with its lease: %v", c.Err())
	}
}

// A renewal asked to look at a node says whether the lease still has it.
func TestARenewalSaysWhetherTheLeaseHasTheNodeItLooksAt(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	ctx := testContext(t)
	l, err := c.CreateLease(ctx, 10*time.Second, "w1")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []struct {
		path string
		opts []client.CreateOption
	}{{"/held", []client.CreateOption{client.WithLease(l.ID)}}, {"/session's", nil}} {
		if _, err := c.Create(ctx, n.path, nil, client.Ephemeral, n.opts...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		opts []client.LeaseOption
		want client.NodeState
	}{
		{"its node", []client.LeaseOption{client.LookAt("/held")}, client.NodeHeld},
		{"the session's node", []client.LeaseOption{client.LookAt("/session's")}, client.NodeGone},
		{"no node", []client.LeaseOption{client.LookAt("/none")}, client.NodeGone},
		{"nothing asked", nil, client.NodeNotLooked},
	} {
		r, err := c.RenewLease(ctx, l.ID, 0, tc.opts...)
		if err != nil || r.Node != tc.want {
			t.Errorf("renewal looking at %s: %+v, %v; want node %v", tc.name, r, err, tc.want)
		}
	}
	if _, err := c.RenewLease(ctx, l.ID, 0, client.LookAt("no/slash")); !errors.Is(err, client.ErrBadArguments) {
		t.Errorf("a renewal looking at a bad path: %v, want ErrBadArguments", err)
	}
}

// A lease not renewed ends, and its node with it, while the session that
// made it lives on.
func TestALeaseThatIsNotRenewedEndsWhileItsSessionLives(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	ctx := testContext(t)
	l, err := c.CreateLease(ctx, time.Second, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/stuck", nil, client.Ephemeral, client.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	_, _, ev, err := c.ExistsW(ctx, "/stuck")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		if e.Type != client.EventNodeDeleted {
			t.Fatalf("event %v, want the node's deletion", e)
		}
	case <-ctx.Done():
		t.Fatal("the lease never ended")
	}
	if _, err := c.RenewLease(ctx, l.ID, 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Errorf("renewing an expired lease: %v, want ErrLeaseExpired", err)
	}
	if c.Err() != nil || c.State() != client.StateConnected {
		t.Errorf("the session did not live on: %v, %v", c.Err(), c.State())
	}
}

func TestALeaseIsItsSessionsAndEndsWithIt(t *testing.T) {
	_, addr := startServer(t)
	a, b := dial(t, addr), dial(t, addr)
	ctx := testContext(t)
	l, err := a.CreateLease(ctx, 0, "a")
	if err != nil || l.TTL != 30*time.Second {
		t.Fatalf("CreateLease with the default TTL = %+v, %v", l, err)
	}
	if _, err := b.RenewLease(ctx, l.ID, 0); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("another session's renewal: %v, want ErrNoAuth", err)
	}
	if _, err := b.Create(ctx, "/b", nil, client.Ephemeral, client.WithLease(l.ID)); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("another session's node on the lease: %v, want ErrNoAuth", err)
	}
	if _, err := a.Create(ctx, "/a", nil, client.Ephemeral, client.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := b.Exists(ctx, "/a"); ok || err != nil {
		t.Errorf("a closed session's lease kept its node: %v, %v", ok, err)
	}
}

func TestLeaseArgumentsAreChecked(t *testing.T) {
	_, addr := startServer(t)
	c := dial(t, addr)
	ctx := testContext(t)
	for _, ttl := range []time.Duration{5, time.Millisecond, 2 * time.Hour} {
		if _, err := c.CreateLease(ctx, ttl, ""); !errors.Is(err, client.ErrBadArguments) {
			t.Errorf("a lease of %v: %v, want ErrBadArguments", ttl, err)
		}
	}
	l, err := c.CreateLease(ctx, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/p", nil, client.Persistent, client.WithLease(l.ID)); !errors.Is(err, client.ErrBadArguments) {
		t.Errorf("a persistent node on a lease: %v, want ErrBadArguments", err)
	}
	if _, err := c.CreateLease(ctx, time.Minute, "", client.MaxHold(time.Millisecond)); !errors.Is(err, client.ErrBadArguments) {
		t.Errorf("a maximum hold of 1 ms: %v, want ErrBadArguments", err)
	}
	if l, err := c.CreateLease(ctx, time.Minute, "", client.MaxHold(time.Hour)); err != nil || l.MaxUntil.Sub(l.Expires) < 58*time.Minute {
		t.Errorf("a lease with a maximum hold of an hour: %+v, %v", l, err)
	}
	if _, err := c.RenewLease(ctx, c.SessionID(), 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Errorf("renewing a session as a lease: %v, want ErrLeaseExpired", err)
	}
}

// A session's leases and their nodes count against its ephemeral limit.
func TestLeasesCountAgainstTheEphemeralLimit(t *testing.T) {
	s := newServer(t, server.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), MaxEphemerals: 2,
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	c := dial(t, s.Addr().String())
	ctx := testContext(t)
	l, err := c.CreateLease(ctx, time.Minute, "") // one
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/a", nil, client.Ephemeral, client.WithLease(l.ID)); err != nil { // two
		t.Fatal(err)
	}
	if _, err := c.CreateLease(ctx, time.Minute, ""); !errors.Is(err, client.ErrQuotaExceeded) {
		t.Errorf("a lease past the limit: %v, want ErrQuotaExceeded", err)
	}
	if _, err := c.Create(ctx, "/b", nil, client.Ephemeral, client.WithLease(l.ID)); !errors.Is(err, client.ErrQuotaExceeded) {
		t.Errorf("a lease's node past the limit: %v, want ErrQuotaExceeded", err)
	}
}
