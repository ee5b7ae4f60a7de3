package recipes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/server"
)

// The server knows every lock a recipe takes: its holders and waiters,
// with their owners, tokens and how long they have held or waited.
func TestTheServerShowsEveryLocksHoldersAndWaiters(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	holder := NewMutex(c, "/locks/shown/a", WithOwner("web-1"))
	must(t, holder.Lock(ctx))
	waiter := NewRWMutex(s.dial(t), "/locks/shown/a", WithOwner("web-2"))
	waiting := waiting(t, s, "/locks/shown/a", 2, func() error { return waiter.RLock(ctx) })
	must(t, NewMutex(c, "/locks/shown/b").Lock(ctx))

	locks, err := c.Locks(ctx, "/locks/shown", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 2 || locks[0].Path != "/locks/shown/a" || locks[1].Path != "/locks/shown/b" {
		t.Fatalf("Locks = %+v", locks)
	}
	a := locks[0]
	if len(a.Holders) != 1 || len(a.Waiters) != 1 {
		t.Fatalf("/locks/shown/a: %+v", a)
	}
	if h := a.Holders[0]; h.Owner != "web-1" || h.Mode != "lock" || h.Token != holder.Token() || h.Session != c.SessionID() || h.Since == 0 {
		t.Errorf("holder %+v", h)
	}
	if w := a.Waiters[0]; w.Owner != "web-2" || w.Mode != "read" || w.Since < a.Holders[0].Since {
		t.Errorf("waiter %+v", w)
	}
	must(t, holder.Unlock(ctx))
	must(t, <-waiting)
	locks, err = c.Locks(ctx, "/locks/shown/a", true)
	if err != nil || len(locks) != 1 || len(locks[0].Holders) != 1 || locks[0].Holders[0].Owner != "web-2" || len(locks[0].Waiters) != 0 {
		t.Fatalf("after the handoff: %+v, %v", locks, err)
	}
	must(t, waiter.RUnlock(ctx))
}

// crossedHolds has p1 (on c1) hold /dl/a and p2 hold /dl/b, and returns
// c1 and the mutexes with which each could then wait for the other's
// lock: b1 (p1's for /dl/b) and a2 (p2's for /dl/a), and b2, p2's hold.
func crossedHolds(t *testing.T, s *testServer) (c1 *client.Client, b1, b2, a2 *Mutex) {
	t.Helper()
	ctx := ctxWait(t)
	c1, c2 := s.dial(t), s.dial(t)
	a1 := NewMutex(c1, "/dl/a", WithOwner("p1"), WithHolder("g1"))
	b1 = NewMutex(c1, "/dl/b", WithOwner("p1"), WithHolder("g1"))
	b2 = NewMutex(c2, "/dl/b", WithOwner("p2"), WithHolder("g2"))
	a2 = NewMutex(c2, "/dl/a", WithOwner("p2"), WithHolder("g2"))
	must(t, a1.Lock(ctx))
	must(t, b2.Lock(ctx))
	return c1, b1, b2, a2
}

// Two holders that each wait for the lock the other holds are a cycle of
// the server's wait-for graph, reported as one.
func TestATwoOwnerDeadlockIsReported(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c1, b1, _, a2 := crossedHolds(t, s)
	if cycles, err := c1.Deadlocks(ctx, true); err != nil || len(cycles) != 0 {
		t.Fatalf("Deadlocks before any wait = %v, %v", cycles, err)
	}
	stuck, cancel := context.WithCancel(ctx)
	defer cancel()
	w1 := waiting(t, s, "/dl/b", 2, func() error { return b1.Lock(stuck) })
	w2 := waiting(t, s, "/dl/a", 2, func() error { return a2.Lock(stuck) })
	cycles, err := c1.Deadlocks(ctx, true)
	if err != nil || len(cycles) != 1 || len(cycles[0]) != 2 {
		t.Fatalf("Deadlocks = %+v, %v; want one cycle of two", cycles, err)
	}
	if first := cycles[0][0]; first.Waiter.Owner != "p2" || first.Lock != "/dl/a" || first.Holder.Owner != "p1" {
		t.Errorf("the cycle starts with %+v, want p2's wait for /dl/a, the youngest", first)
	}
	cancel()
	<-w1
	<-w2
	if cycles, err := c1.Deadlocks(ctx, true); err != nil || len(cycles) != 0 {
		t.Errorf("Deadlocks once the waits ended = %v, %v", cycles, err)
	}
}

// With --end-deadlocks the leader ends the youngest wait of a deadlock:
// that waiter gets ErrDeadlock, holding nothing of the lock it waited for,
// the other wait goes on and holds once the ended one lets go of its own
// lock, and the history records the end.
func TestAServerThatEndsDeadlocksEndsTheYoungestWait(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(c *server.Config) { c.EndDeadlocks = true })
	ctx := ctxWait(t)
	c1, b1, b2, a2 := crossedHolds(t, s)
	w1 := waiting(t, s, "/dl/b", 2, func() error { return b1.Lock(ctx) })
	w2 := waiting(t, s, "/dl/a", 2, func() error { return a2.Lock(ctx) })
	if err := <-w2; !errors.Is(err, ErrDeadlock) {
		t.Fatalf("the youngest wait (p2's for /dl/a) ended with %v, want ErrDeadlock", err)
	}
	if a2.Held() {
		t.Fatal("the ended wait holds its lock")
	}
	select {
	case err := <-w1:
		t.Fatalf("the older wait ended too: %v", err)
	default:
	}
	must(t, b2.Unlock(ctx))
	must(t, <-w1)
	if b1.Token() <= b2.Token() {
		t.Errorf("the next holder's token %d, the last one's %d", b1.Token(), b2.Token())
	}
	evs, err := c1.LockHistory(ctx, "/dl/a", true)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs); n != 2 || evs[1].Kind != client.LockDeadlock || evs[1].Owner != "p2" || evs[1].By == "" {
		t.Errorf("history of /dl/a: %+v, want p1's acquisition and p2's wait ended for a deadlock", evs)
	}
	if cycles, err := c1.Deadlocks(ctx, true); err != nil || len(cycles) != 0 {
		t.Errorf("Deadlocks after the end = %v, %v", cycles, err)
	}
}

// The server's lock metrics follow the locks: holds and waits as they end,
// the queues, leases that expire and deadlocks.
func TestTheServersLockMetricsFollowTheLocks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c1, c2 := s.dial(t), s.dial(t)
	a1 := NewMutex(c1, "/m/a", WithHolder("g1"))
	must(t, a1.Lock(ctx))
	a2 := NewMutex(c2, "/m/a", WithHolder("g2"))
	w := waiting(t, s, "/m/a", 2, func() error { return a2.Lock(ctx) })
	if got := s.metric(t, `arbor_lock_queue_length{lock="/m/a"} `); got != 1 {
		t.Errorf("the queue of /m/a: %d, want 1", got)
	}
	if got := s.metric(t, "arbor_lock_max_queue_length "); got != 1 {
		t.Errorf("the longest queue: %d", got)
	}
	if got := s.metric(t, "arbor_locks "); got != 1 {
		t.Errorf("arbor_locks = %d, want 1", got)
	}
	must(t, a1.Unlock(ctx))
	must(t, <-w)
	if hold, acquire := s.metric(t, "arbor_lock_hold_seconds_count "), s.metric(t, "arbor_lock_acquire_seconds_count "); hold != 1 || acquire != 2 {
		t.Errorf("holds ended %d, acquisitions %d; want 1 and 2", hold, acquire)
	}

	// A wait given up, a deadlock, and a lease that expires.
	short, cancel := context.WithTimeout(ctx, waitShort)
	if err := NewMutex(c1, "/m/a").Lock(short); err == nil {
		t.Fatal("a Lock of a held lock did not time out")
	}
	cancel()
	waitFor(t, "the wait timeout to count", func() bool { return s.metric(t, "arbor_lock_wait_timeouts_total ") == 1 })
	b1 := NewMutex(c1, "/m/b", WithHolder("g1"))
	must(t, b1.Lock(ctx))
	stuck, stop := context.WithCancel(ctx)
	defer stop()
	go NewMutex(c1, "/m/a", WithHolder("g1")).Lock(stuck)
	go NewMutex(c2, "/m/b", WithHolder("g2")).Lock(stuck)
	waitFor(t, "the deadlock to count", func() bool { return s.metric(t, "arbor_lock_deadlocks_total ") == 1 })
	stop()
	l := NewMutex(c1, "/m/c", WithLease(time.Second))
	l.h.every = time.Hour // no renewal
	must(t, l.Lock(ctx))
	if _, err := l.Renew(ctx); err != nil { // one, by hand
		t.Fatal(err)
	}
	if got := s.metric(t, "arbor_lock_renewal_seconds_count "); got != 1 {
		t.Errorf("renewals seen: %d, want 1", got)
	}
	waitFor(t, "the lease expiry to count", func() bool { return s.metric(t, "arbor_lock_lease_expiries_total ") == 1 })
}

// httpAcquire takes the lock NAME (at /locks/NAME) through the server's
// HTTP lock API, trying once, and returns the status.
func httpAcquire(t *testing.T, s *testServer, name, mode string) int {
	t.Helper()
	base := strings.TrimSuffix(s.metrics, "/metrics")
	body := fmt.Sprintf(`{"client_id":"http","mode":%q}`, mode)
	resp, err := http.Post(base+"/api/v1/locks/"+name+"/acquire", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A Go recipe and an HTTP client on the same lock exclude each other, in
// every mode.
func TestGoAndHTTPLocksExcludeEachOther(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	m := NewMutex(c, "/locks/shared")
	must(t, m.Lock(ctx))
	for _, mode := range []string{"exclusive", "read", "write"} {
		if code := httpAcquire(t, s, "shared", mode); code != http.StatusConflict {
			t.Errorf("an HTTP %s acquire while a Mutex holds: %d, want 409", mode, code)
		}
	}
	must(t, m.Unlock(ctx))
	if code := httpAcquire(t, s, "shared", "read"); code != http.StatusOK {
		t.Fatalf("an HTTP read acquire of a free lock: %d", code)
	}
	if ok, err := NewRWMutex(c, "/locks/shared").TryRLock(ctx); err != nil || !ok {
		t.Errorf("a Go reader beside an HTTP reader = %v, %v", ok, err)
	}
	if ok, err := m.TryLock(ctx); err != nil || ok {
		t.Errorf("a Mutex while an HTTP client reads = %v, %v", ok, err)
	}
}

// Breaking a lock under contention frees it for the next waiter, with a
// higher token, and tells a holder bound to a lease.
func TestABreakUnderContentionHandsTheLockOn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	admin := s.dial(t)
	stuck := NewMutex(s.dial(t), "/locks/brk", WithLease(time.Minute))
	must(t, stuck.Lock(ctx))
	next := NewMutex(s.dial(t), "/locks/brk")
	w := waiting(t, s, "/locks/brk", 2, func() error { return next.Lock(ctx) })
	nodes, err := admin.BreakLock(ctx, "/locks/brk", "stuck in a test")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("BreakLock = %v, %v", nodes, err)
	}
	must(t, <-w)
	if next.Token() <= stuck.Token() {
		t.Errorf("the next holder's token %d is not over %d", next.Token(), stuck.Token())
	}
	select {
	case <-stuck.Lost():
	case <-ctx.Done():
		t.Fatal("the broken holder was never told")
	}
	if err := stuck.LostReason(); !errors.Is(err, ErrBroken) || !errors.Is(err, ErrNodeDeleted) ||
		!strings.Contains(err.Error(), `"stuck in a test"`) {
		t.Errorf("LostReason = %v, want ErrBroken (and ErrNodeDeleted) with the reason", err)
	}
	if got := s.metric(t, "arbor_lock_breaks_total "); got != 1 {
		t.Errorf("arbor_lock_breaks_total = %d", got)
	}
	must(t, next.Unlock(ctx))
	if _, err := admin.BreakLock(ctx, "/locks/brk", ""); !errors.Is(err, client.ErrNoNode) {
		t.Errorf("breaking a free lock: %v, want ErrNoNode", err)
	}
	// Breaking needs ADMIN on the lock.
	must(t, next.Lock(ctx))
	if _, err := admin.SetACL(ctx, "/locks/brk", []client.ACL{{Perms: client.PermRead | client.PermCreate | client.PermDelete, Scheme: "world", ID: "anyone"}}, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.BreakLock(ctx, "/locks/brk", ""); !errors.Is(err, client.ErrNoAuth) {
		t.Errorf("breaking without ADMIN: %v, want ErrNoAuth", err)
	}
	must(t, next.Unlock(ctx))
}
