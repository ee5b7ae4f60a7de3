package recipes

import (
	"context"
	"testing"
)

// The server knows every lock a recipe takes: its holders and waiters,
// with their owners, tokens and how long they have held or waited.
func TestTheServerShowsEveryLocksHoldersAndWaiters(t *testing.T) {
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

// Two holders that each wait for the lock the other holds are a cycle of
// the server's wait-for graph, reported as one.
func TestATwoOwnerDeadlockIsReported(t *testing.T) {
	s := startServer(t)
	ctx := ctxWait(t)
	c1, c2 := s.dial(t), s.dial(t)
	a1 := NewMutex(c1, "/dl/a", WithOwner("p1"), WithHolder("g1"))
	b1 := NewMutex(c1, "/dl/b", WithOwner("p1"), WithHolder("g1"))
	b2 := NewMutex(c2, "/dl/b", WithOwner("p2"), WithHolder("g2"))
	a2 := NewMutex(c2, "/dl/a", WithOwner("p2"), WithHolder("g2"))
	must(t, a1.Lock(ctx))
	must(t, b2.Lock(ctx))
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
