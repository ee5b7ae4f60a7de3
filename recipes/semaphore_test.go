package recipes

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

func TestSemaphoreAdmitsAtMostN(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const n, goroutines, rounds = 3, 12, 4
	cs := []*client.Client{s.dial(t), s.dial(t), s.dial(t)}
	var holders atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*rounds)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := NewSemaphore(cs[g%len(cs)], "/sem", n)
			for range rounds {
				l, err := sem.Acquire(ctxWait(t))
				if err != nil {
					errs <- err
					return
				}
				h := holders.Add(1)
				if h > n {
					errs <- fmt.Errorf("%d holders of a semaphore of %d", h, n)
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				if err := l.Release(ctxWait(t)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if left := children(t, cs[0], "/sem/leases"); len(left) != 0 {
		t.Errorf("leases left: %v", left)
	}
}

// TestTryAcquireAndRelease also shows that n holders are admitted at once.
func TestTryAcquireAndRelease(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	ctx := ctxWait(t)
	sem := NewSemaphore(c, "/sem2", 2)
	a, err := sem.Acquire(ctx)
	must(t, err)
	b, err := sem.TryAcquire(ctx)
	if err != nil || b == nil {
		t.Fatalf("TryAcquire with a lease free = %v, %v", b, err)
	}
	if none, err := sem.TryAcquire(ctx); none != nil || err != nil {
		t.Fatalf("TryAcquire with none free = %v, %v; want nil, nil", none, err)
	}
	if n := len(children(t, c, "/sem2/leases")); n != 2 {
		t.Errorf("%d leases after a failed TryAcquire, want 2", n)
	}
	if b.Token() <= a.Token() {
		t.Errorf("tokens %d then %d", a.Token(), b.Token())
	}
	must(t, a.Release(ctx))
	if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second Release: %v, want ErrNotHeld", err)
	}
	c2, err := sem.TryAcquire(ctx)
	if err != nil || c2 == nil {
		t.Fatalf("TryAcquire after a release = %v, %v", c2, err)
	}
	must(t, b.Release(ctx))
	must(t, c2.Release(ctx))
}

func TestBarrierHoldsWaitersUntilRemoved(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	ctx := ctxWait(t)
	b := NewBarrier(c, "/barriers/start")
	must(t, b.Wait(ctx)) // not set: no wait
	must(t, b.Set(ctx))
	must(t, b.Set(ctx))
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := NewBarrier(s.dial(t), "/barriers/start").Wait(ctx); err != nil {
				t.Error(err)
			}
			passed.Add(1)
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if p := passed.Load(); p != 0 {
		t.Fatalf("%d waiters passed a raised barrier", p)
	}
	must(t, b.Remove(ctx))
	wg.Wait()
	must(t, b.Remove(ctx))
}

func TestDoubleBarrierEntersAndLeavesTogether(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const n = 5
	var entered, left atomic.Int32
	var wg sync.WaitGroup
	for round := range 2 { // the barrier can be used again
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := ctxWait(t)
				d := NewDoubleBarrier(s.dial(t), "/barriers/double", n)
				entered.Add(1)
				if err := d.Enter(ctx); err != nil {
					t.Error(err)
					return
				}
				if e := entered.Load(); e < int32(n*(round+1)) {
					t.Errorf("passed Enter with %d of %d entered", e-int32(n*round), n)
				}
				left.Add(1)
				if err := d.Leave(ctx); err != nil {
					t.Error(err)
					return
				}
				if l := left.Load(); l < int32(n*(round+1)) {
					t.Errorf("passed Leave with %d of %d leaving", l-int32(n*round), n)
				}
			}()
			time.Sleep(10 * time.Millisecond) // stagger the arrivals
		}
		wg.Wait()
	}
	if nodes, _, err := s.dial(t).Children(ctxWait(t), "/barriers/double"); err == nil && len(nodes) != 0 {
		t.Errorf("left behind: %v", nodes)
	}
}
