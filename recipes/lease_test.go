package recipes

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// fenced is a resource that keeps the highest token it has seen and
// refuses writes with a lower one.
type fenced struct {
	mu  sync.Mutex
	max int64
}

func (f *fenced) write(token int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.max {
		return false
	}
	f.max = token
	return true
}

// A holder that stops renewing its lease (a stuck process whose session's
// heartbeats go on) loses the lock to the next waiter, with a higher
// token, and the resource refuses its late write. It is told before the
// next waiter holds: its deadline passed first.
func TestAHolderThatStopsRenewingLosesTheLockWhileItsSessionLives(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	stuck := NewMutex(s.dial(t), "/locks/lease", WithLease(time.Second))
	stuck.h.every = time.Hour // it will not renew
	must(t, stuck.Lock(ctx))
	lostAt := make(chan time.Time, 1)
	go func() {
		<-stuck.Lost()
		lostAt <- time.Now()
	}()
	var res fenced
	if !res.write(stuck.Token()) {
		t.Fatal("the first holder's write was refused")
	}
	next := NewMutex(s.dial(t), "/locks/lease")
	must(t, next.Lock(ctx)) // once the lease has ended
	granted := time.Now()
	select {
	case at := <-lostAt:
		if !at.Before(granted) {
			t.Errorf("the stuck holder was told at %v, after the next one held at %v", at, granted)
		}
	default:
		t.Fatal("the next waiter holds while the stuck holder's Lost is open")
	}
	if next.Token() <= stuck.Token() {
		t.Fatalf("the next holder's token %d is not over %d", next.Token(), stuck.Token())
	}
	if !res.write(next.Token()) {
		t.Fatal("the next holder's write was refused")
	}
	if res.write(stuck.Token()) {
		t.Error("the resource took the stuck holder's late write")
	}
	if err := stuck.LostReason(); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("LostReason = %v, want ErrDeadlinePassed", err)
	}
	if _, err := stuck.Renew(ctx); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("Renew after the lease ended: %v", err)
	}
	if err := stuck.Unlock(ctx); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("Unlock of a lost hold: %v, want the reason", err)
	}
	must(t, next.Unlock(ctx))
}

// A hold whose lease is renewed outlives its TTL, and a renewal never
// changes its token.
func TestARenewedLeaseKeepsTheLock(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	m := NewMutex(s.dial(t), "/locks/renewed", WithLease(time.Second))
	if _, err := m.Renew(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Renew without a hold: %v", err)
	}
	must(t, m.Lock(ctx))
	token := m.Token()
	exp, err := m.Renew(ctx)
	if err != nil || time.Until(exp) <= 0 {
		t.Fatalf("Renew = %v, %v", exp, err)
	}
	other := NewMutex(s.dial(t), "/locks/renewed")
	// Three TTLs: the value renews by itself meanwhile.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ok, err := other.TryLock(ctx); err != nil || ok {
			t.Fatalf("another took a renewed lock: %v, %v", ok, err)
		}
	}
	if isClosed(m.Lost()) || m.Token() != token {
		t.Fatalf("after renewals: lost %v (%v), token %d (was %d)", isClosed(m.Lost()), m.LostReason(), m.Token(), token)
	}
	must(t, m.Unlock(ctx))
	if nodes := children(t, s.dial(t), "/locks/renewed"); len(nodes) != 0 {
		t.Errorf("nodes left: %v", nodes)
	}
	if ok, err := other.TryLock(ctx); err != nil || !ok {
		t.Fatalf("TryLock after the release = %v, %v", ok, err)
	}
	must(t, other.Unlock(ctx))
}

// Renew asks the server once: the renewal itself says whether the lock's
// node is still the lease's, with no read after it.
func TestRenewIsOneRequest(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	m := NewMutex(s.dial(t), "/locks/one", WithLease(time.Minute))
	m.h.every = time.Hour // no renewal but the test's
	must(t, m.Lock(ctx))
	renewals, reads := s.metric(t, `arbor_requests_total{op="leaseRenew"`), s.reads(t)
	if _, err := m.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.metric(t, `arbor_requests_total{op="leaseRenew"`) - renewals; n != 1 {
		t.Errorf("Renew sent %d renewals, want 1", n)
	}
	if n := s.reads(t) - reads; n != 0 {
		t.Errorf("Renew sent %d reads as well, want none", n)
	}
	must(t, m.Unlock(ctx))
}

// A hold bound to a lease whose node someone deletes is lost with
// ErrNodeDeleted, its lease and session alive.
func TestAHoldWhoseNodeIsDeletedIsLost(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	m := NewMutex(s.dial(t), "/locks/deleted", WithLease(time.Minute))
	must(t, m.Lock(ctx))
	nodes := children(t, c, "/locks/deleted")
	must(t, c.Delete(ctx, "/locks/deleted/"+nodes[0], -1))
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("a hold whose node was deleted was never lost")
	}
	if err := m.LostReason(); !errors.Is(err, ErrNodeDeleted) {
		t.Errorf("LostReason = %v, want ErrNodeDeleted", err)
	}
	if _, err := m.Renew(ctx); !errors.Is(err, ErrNodeDeleted) {
		t.Errorf("Renew of a lost hold: %v", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, ErrNodeDeleted) {
		t.Errorf("Unlock of a lost hold: %v", err)
	}
}

func TestAReleaseEndsTheLease(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	m := NewMutex(c, "/locks/ends", WithLease(time.Minute))
	must(t, m.Lock(ctx))
	lease := m.h.t.lease
	must(t, m.Unlock(ctx))
	if _, err := c.RenewLease(ctx, lease, 0); !errors.Is(err, client.ErrLeaseExpired) {
		t.Errorf("the lease of a released hold: %v, want ErrLeaseExpired", err)
	}
	if m.LostReason() != nil {
		t.Errorf("a released hold has a lost reason: %v", m.LostReason())
	}
}

// A hold that keeps renewing ends at its maximum hold, and the lock goes
// to the next waiter.
func TestAHoldEndsAtItsMaximumHoldWhateverItsRenewals(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	m := NewMutex(s.dial(t), "/locks/max", WithLease(time.Second), WithMaxHold(1500*time.Millisecond))
	must(t, m.Lock(ctx))
	next := NewMutex(s.dial(t), "/locks/max")
	must(t, next.Lock(ctx)) // once the maximum hold has passed, renewals or not
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("the holder was never told")
	}
	if err := m.LostReason(); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("LostReason = %v, want ErrDeadlinePassed: the maximum hold is known to the holder", err)
	}
	must(t, next.Unlock(ctx))
}

// A waiter's lease is renewed while it waits: a wait longer than its TTL
// ends with the lock, not with the lease gone.
func TestAWaitersLeaseLivesThroughALongWait(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	holder := NewMutex(s.dial(t), "/locks/longwait")
	must(t, holder.Lock(ctx))
	waiter := NewMutex(s.dial(t), "/locks/longwait", WithLease(time.Second))
	w := waiting(t, s, "/locks/longwait", 2, func() error { return waiter.Lock(ctx) })
	time.Sleep(2500 * time.Millisecond) // over two TTLs of the waiter's lease
	stillWaiting(t, w)
	must(t, holder.Unlock(ctx))
	must(t, <-w)
	if isClosed(waiter.Lost()) {
		t.Fatalf("the waiter lost its hold at once: %v", waiter.LostReason())
	}
	if nodes := children(t, s.dial(t), "/locks/longwait"); len(nodes) != 1 {
		t.Errorf("the holder's nodes: %v, want its one", nodes)
	}
	must(t, waiter.Unlock(ctx))
}
