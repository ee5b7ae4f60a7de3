package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/wire"
)

// Renewals that arrive together go into the log as batches, and each is
// answered with its own lease's expiry and version; one of a lease that
// ended fails alone.
func TestRenewalsThatArriveTogetherShareLogEntries(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	ctx := context.Background()
	const clients, perClient = 8, 25
	type held struct {
		c     *client.Client
		lease client.Lease
	}
	var leases []held
	for range clients {
		c := dialClient(t, s)
		for range perClient {
			l, err := c.CreateLease(ctx, 10*time.Second, "w")
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, held{c, l})
		}
	}
	ended := leases[17]
	if err := ended.c.CloseLease(ctx, ended.lease.ID); err != nil {
		t.Fatal(err)
	}

	before := s.node.Applied()
	var wg sync.WaitGroup
	errs := make([]error, len(leases))
	renewed := make([]client.Lease, len(leases))
	for i, h := range leases {
		wg.Go(func() { renewed[i], errs[i] = h.c.RenewLease(ctx, h.lease.ID, 0) })
	}
	wg.Wait()
	entries := s.node.Applied() - before

	for i, h := range leases {
		switch {
		case i == 17:
			if !errors.Is(errs[i], client.ErrLeaseExpired) {
				t.Errorf("the renewal of the ended lease: %v, want ErrLeaseExpired", errs[i])
			}
		case errs[i] != nil:
			t.Errorf("renewal %d: %v", i, errs[i])
		case renewed[i].ID != h.lease.ID || renewed[i].Version != 2 || !renewed[i].Expires.After(h.lease.Expires.Add(-time.Millisecond)):
			t.Errorf("renewal %d of %+v answered %+v", i, h.lease, renewed[i])
		}
	}
	if entries >= uint64(len(leases)) {
		t.Errorf("%d renewals sent at once took %d log entries, want fewer", len(leases), entries)
	}
	t.Logf("%d renewals in %d entries", len(leases), entries)
}

// A connection's writes apply in the order it sent them, a renewal waiting
// for its batch included: a close of the lease sent after its renewal
// does not overtake it.
func TestARenewalWaitingForItsBatchGoesBeforeTheConnectionsNextWrite(t *testing.T) {
	t.Parallel()
	s := startServer(t, "")
	c := dialRaw(t, s)
	c.connect(wire.ConnectRequest{})
	created := c.call(wire.Request{Xid: 1, Op: wire.OpLeaseCreate, TTL: 10_000, Owner: "w"})
	if created.Err != wire.CodeOK {
		t.Fatalf("leaseCreate: %v", created.Err)
	}
	lease := created.Lease.ID

	// Every batch slot taken: the renewal waits, as on a busy member.
	s.renewals.mu.Lock()
	s.renewals.inflight = maxRenewalBatches
	s.renewals.mu.Unlock()
	defer func() {
		s.renewals.mu.Lock()
		s.renewals.inflight = 0
		s.renewals.mu.Unlock()
	}()

	var frames []byte
	frames = wire.AppendRequest(frames, &wire.Request{Xid: 2, Op: wire.OpLeaseRenew, Lease: lease})
	frames = wire.AppendRequest(frames, &wire.Request{Xid: 3, Op: wire.OpLeaseClose, Lease: lease})
	c.write(frames)
	renewed, err := c.reply(wire.OpLeaseRenew)
	if err != nil || renewed.Err != wire.CodeOK || renewed.Lease.Version != 2 {
		t.Fatalf("the renewal sent before the close: %+v, %v", renewed, err)
	}
	closed, err := c.reply(wire.OpLeaseClose)
	if err != nil || closed.Err != wire.CodeOK || closed.Zxid <= renewed.Zxid {
		t.Fatalf("the close: %+v, %v; want it applied after the renewal (zxid %d)", closed, err, renewed.Zxid)
	}
}
