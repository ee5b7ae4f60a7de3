package recipes

import (
	"context"
	"errors"
	"testing"
	"time"
)

// waiting starts f in the background and returns its result channel,
// checking that f is still waiting once the queue at path has n nodes.
func waiting(t *testing.T, s *testServer, path string, n int, f func() error) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	c := s.dial(t)
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, c, path)) >= n })
	stillWaiting(t, done)
	return done
}

func stillWaiting(t *testing.T, done chan error) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("a waiter went ahead: %v", err)
	default:
	}
}

func TestADowngradeLetsTheReadersBehindInAndNotTheWriters(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	w, r, w2 := NewRWMutex(s.dial(t), "/locks/down"), NewRWMutex(s.dial(t), "/locks/down"), NewRWMutex(s.dial(t), "/locks/down")
	must(t, w.Lock(ctx))
	writeToken := w.Token()
	read := waiting(t, s, "/locks/down", 2, func() error { return r.RLock(ctx) })
	write := waiting(t, s, "/locks/down", 3, func() error { return w2.Lock(ctx) })

	must(t, w.Downgrade(ctx))
	must(t, <-read) // the reader behind comes in
	stillWaiting(t, write)
	if w.Token() <= writeToken {
		t.Errorf("the token after a downgrade is %d, not over the write hold's %d", w.Token(), writeToken)
	}
	if err := w.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Unlock after a downgrade: %v, want ErrNotHeld (it holds a read)", err)
	}
	must(t, w.RUnlock(ctx))
	stillWaiting(t, write)
	must(t, r.RUnlock(ctx))
	must(t, <-write)
	must(t, w2.Unlock(ctx))
	if nodes := children(t, s.dial(t), "/locks/down"); len(nodes) != 0 {
		t.Errorf("nodes left: %v", nodes)
	}
}

func TestAnUpgradeWaitsForTheOtherReadersAndHoldsBackNewOnes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	r1, r2, r3 := NewRWMutex(s.dial(t), "/locks/up"), NewRWMutex(s.dial(t), "/locks/up"), NewRWMutex(s.dial(t), "/locks/up")
	must(t, r1.RLock(ctx))
	must(t, r2.RLock(ctx))
	up := waiting(t, s, "/locks/up", 3, func() error { return r1.Upgrade(ctx) })
	if ok, err := r3.TryRLock(ctx); err != nil || ok {
		t.Fatalf("TryRLock while a holder upgrades = %v, %v; want false", ok, err)
	}
	late := waiting(t, s, "/locks/up", 4, func() error { return r3.RLock(ctx) })

	must(t, r2.RUnlock(ctx)) // the last other reader leaves
	must(t, <-up)
	stillWaiting(t, late)
	if err := r1.RUnlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("RUnlock after an upgrade: %v, want ErrNotHeld (it holds the write)", err)
	}
	must(t, r1.Unlock(ctx))
	must(t, <-late)
	must(t, r3.RUnlock(ctx))
}

func TestAnUpgradeGoesAheadOfAWaitingWriter(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	r, w := NewRWMutex(s.dial(t), "/locks/first"), NewRWMutex(s.dial(t), "/locks/first")
	must(t, r.RLock(ctx))
	write := waiting(t, s, "/locks/first", 2, func() error { return w.Lock(ctx) })
	must(t, r.Upgrade(ctx)) // no other reader: at once
	stillWaiting(t, write)
	must(t, r.Unlock(ctx))
	must(t, <-write)
	if w.Token() <= r.Token() && r.Token() != 0 {
		t.Errorf("the writer after the upgrade has token %d", w.Token())
	}
	must(t, w.Unlock(ctx))
}

func TestASecondUpgradeIsRefusedAtOnceAndKeepsItsRead(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	r1, r2 := NewRWMutex(s.dial(t), "/locks/two"), NewRWMutex(s.dial(t), "/locks/two")
	must(t, r1.RLock(ctx))
	must(t, r2.RLock(ctx))
	up := waiting(t, s, "/locks/two", 3, func() error { return r1.Upgrade(ctx) })
	if err := r2.Upgrade(ctx); !errors.Is(err, ErrUpgradeInProgress) {
		t.Fatalf("a second Upgrade: %v, want ErrUpgradeInProgress", err)
	}
	stillWaiting(t, up)
	must(t, r2.RUnlock(ctx)) // it still held its read
	must(t, <-up)
	must(t, r1.Unlock(ctx))
}

func TestAnUpgradeThatTimesOutKeepsTheReadHold(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	r1, r2, r3 := NewRWMutex(s.dial(t), "/locks/keep"), NewRWMutex(s.dial(t), "/locks/keep"), NewRWMutex(s.dial(t), "/locks/keep")
	must(t, r1.RLock(ctx))
	must(t, r2.RLock(ctx))
	short, cancel := context.WithTimeout(ctx, waitShort)
	defer cancel()
	if err := r1.Upgrade(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an Upgrade past its deadline: %v", err)
	}
	if ok, err := r3.TryRLock(ctx); err != nil || !ok {
		t.Fatalf("TryRLock after the upgrade gave up = %v, %v; want true", ok, err)
	}
	for _, r := range []*RWMutex{r1, r2, r3} {
		must(t, r.RUnlock(ctx))
	}
	if nodes := children(t, s.dial(t), "/locks/keep"); len(nodes) != 0 {
		t.Errorf("nodes left: %v", nodes)
	}
}

func TestUpgradeAndDowngradeNeedTheOtherHold(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	rw := NewRWMutex(s.dial(t), "/locks/none")
	if err := rw.Upgrade(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Upgrade without a hold: %v", err)
	}
	must(t, rw.Lock(ctx))
	if err := rw.Upgrade(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Upgrade of a write hold: %v", err)
	}
	must(t, rw.Unlock(ctx))
	if err := rw.Downgrade(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Downgrade without a hold: %v", err)
	}
}

// A reader that came to hold while an upgrade waited (the writer between
// them gave up) is waited for too: the upgrade never holds beside it.
func TestAnUpgradeWaitsForAReaderThatCameToHoldWhileItWaited(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	path := "/locks/late"
	r1, r2, r4 := NewRWMutex(s.dial(t), path), NewRWMutex(s.dial(t), path), NewRWMutex(s.dial(t), path)
	w := NewRWMutex(s.dial(t), path)
	must(t, r1.RLock(ctx))
	must(t, r2.RLock(ctx))
	wctx, cancelW := context.WithCancel(ctx)
	write := waiting(t, s, path, 3, func() error { return w.Lock(wctx) })
	read4 := waiting(t, s, path, 4, func() error { return r4.RLock(ctx) })
	up := waiting(t, s, path, 5, func() error { return r1.Upgrade(ctx) })
	cancelW()
	if err := <-write; !errors.Is(err, context.Canceled) {
		t.Fatalf("the writer's Lock: %v", err)
	}
	must(t, <-read4) // it holds now
	must(t, r2.RUnlock(ctx))
	time.Sleep(200 * time.Millisecond) // time for a wrong grant to show
	stillWaiting(t, up)                // r4 holds read
	must(t, r4.RUnlock(ctx))
	must(t, <-up)
	must(t, r1.Unlock(ctx))
}

// A reader that queued behind an upgrade under way gets its read when the
// upgrade is taken back.
func TestATakenBackUpgradeWakesTheReadersBehindIt(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	path := "/locks/back"
	r1, r2, r3 := NewRWMutex(s.dial(t), path), NewRWMutex(s.dial(t), path), NewRWMutex(s.dial(t), path)
	must(t, r1.RLock(ctx))
	must(t, r2.RLock(ctx))
	uctx, cancel := context.WithCancel(ctx)
	up := waiting(t, s, path, 3, func() error { return r1.Upgrade(uctx) })
	read := waiting(t, s, path, 4, func() error { return r3.RLock(ctx) })
	cancel()
	if err := <-up; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled Upgrade: %v", err)
	}
	must(t, <-read)
	for _, r := range []*RWMutex{r1, r2, r3} {
		must(t, r.RUnlock(ctx))
	}
}
