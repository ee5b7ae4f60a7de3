package recipes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

func TestMutexExcludesAndItsTokensIncrease(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const clients, goroutines, rounds = 10, 50, 10
	cs := make([]*client.Client, clients)
	for i := range cs {
		cs[i] = s.dial(t)
	}
	var inside atomic.Int32
	var counter int // guarded by the lock under test only
	var tokens []int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := NewMutex(cs[g%clients], "/locks/counter")
			for range rounds {
				if err := m.Lock(ctxWait(t)); err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- fmt.Errorf("%d holders at once", n)
				}
				counter++
				tokens = append(tokens, m.Token())
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := m.Unlock(ctxWait(t)); err != nil {
					errs <- err
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
	if counter != goroutines*rounds {
		t.Errorf("counter %d, want %d", counter, goroutines*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d: tokens must increase from holder to holder", tokens[i], tokens[i-1])
		}
	}
	if left := children(t, cs[0], "/locks/counter"); len(left) != 0 {
		t.Errorf("nodes left behind: %v", left)
	}
}

func TestAReleaseWakesOneWaiterInFIFOOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const waiters = 100
	cs := make([]*client.Client, 10)
	for i := range cs {
		cs[i] = s.dial(t)
	}
	holder := NewMutex(cs[0], "/locks/herd")
	must(t, holder.Lock(ctxWait(t)))

	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		m := NewMutex(cs[i%len(cs)], "/locks/herd")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctxWait(t)); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := m.Unlock(ctxWait(t)); err != nil {
				t.Error(err)
			}
		}()
		// Queue the waiters one after another, so their order is known.
		waitFor(t, "the waiter to queue", func() bool { return len(children(t, cs[0], "/locks/herd")) == i+2 })
	}
	// Every waiter watches its predecessor now.
	before := s.notifications(t)
	readsBefore := s.reads(t)
	must(t, holder.Unlock(ctxWait(t)))
	wg.Wait()
	if !slices.IsSorted(order) || len(order) != waiters {
		t.Errorf("acquired in order %v, want 0..%d", order, waiters-1)
	}
	// 101 releases: each but the last woke exactly its successor.
	if got := s.notifications(t) - before; got != waiters {
		t.Errorf("%d watch notifications for %d handoffs, want exactly one each", got, waiters)
	}
	// And a woken waiter reads nothing, however long the queue was when it
	// joined: the deletion's notification says its turn has come.
	if got := s.reads(t) - readsBefore; got != 0 {
		t.Errorf("%d reads for %d handoffs, want none", got, waiters)
	}
}

// The create of a lock node says where it stands (client.TellTurn): an
// uncontended Lock is one request, a TryLock of a held lock two (the
// create and the delete), and a waiter's join a create and the watch on
// the node it waits for, with no list of the queue.
func TestACreateSaysWhereTheNodeStands(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c1, c2 := s.dial(t), s.dial(t)
	ctx := ctxWait(t)
	a, b := NewMutex(c1, "/locks/turn"), NewMutex(c2, "/locks/turn")
	must(t, a.Lock(ctx)) // makes the lock's path
	must(t, a.Unlock(ctx))

	reads := s.reads(t)
	must(t, a.Lock(ctx))
	if got := s.reads(t) - reads; got != 0 {
		t.Errorf("an uncontended Lock read %d times, want none", got)
	}
	reads = s.reads(t)
	if ok, err := b.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock of a held lock: %v, %v", ok, err)
	}
	if got := s.reads(t) - reads; got != 0 {
		t.Errorf("a TryLock of a held lock read %d times, want none", got)
	}
	reads = s.reads(t)
	locked := make(chan error, 1)
	go func() { locked <- b.Lock(ctx) }()
	waitFor(t, "b to watch a's node", func() bool { return s.reads(t)-reads == 1 })
	must(t, a.Unlock(ctx))
	must(t, <-locked)
	if got := s.reads(t) - reads; got != 1 {
		t.Errorf("a waiter's Lock read %d times, want once: its watch", got)
	}
	must(t, b.Unlock(ctx))
}

func TestMutexIsReentrantAndTryLockLeavesNothing(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c1, c2 := s.dial(t), s.dial(t)
	ctx := ctxWait(t)
	a, b := NewMutex(c1, "/locks/re"), NewMutex(c2, "/locks/re")
	must(t, a.Lock(ctx))
	token := a.Token()
	must(t, a.Lock(ctx))
	if a.Token() != token {
		t.Errorf("a reentrant Lock changed the token")
	}
	if ok, err := b.TryLock(ctx); ok || err != nil {
		t.Fatalf("TryLock of a held lock = %v, %v; want false", ok, err)
	}
	if n := len(children(t, c1, "/locks/re")); n != 1 {
		t.Errorf("%d nodes after a failed TryLock, want the holder's only", n)
	}
	must(t, a.Unlock(ctx))
	if ok, _ := b.TryLock(ctx); ok {
		t.Fatal("TryLock succeeded while a still held once")
	}
	must(t, a.Unlock(ctx))
	if err := a.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Unlock of an unheld lock: %v, want ErrNotHeld", err)
	}
	ok, err := b.TryLock(ctx)
	if !ok || err != nil {
		t.Fatalf("TryLock of a free lock = %v, %v", ok, err)
	}
	if b.Token() <= token {
		t.Errorf("token %d after %d", b.Token(), token)
	}
	must(t, b.Unlock(ctx))
}

func TestCancellingAWaiterRemovesItsNode(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c1, c2, c3 := s.dial(t), s.dial(t), s.dial(t)
	holder := NewMutex(c1, "/locks/cancel")
	must(t, holder.Lock(ctxWait(t)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewMutex(c2, "/locks/cancel").Lock(ctx) }()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, c1, "/locks/cancel")) == 2 })
	third := NewMutex(c3, "/locks/cancel")
	acquired := make(chan error, 1)
	go func() { acquired <- third.Lock(ctxWait(t)) }()
	waitFor(t, "the third to queue", func() bool { return len(children(t, c1, "/locks/cancel")) == 3 })

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Lock: %v", err)
	}
	waitFor(t, "the cancelled waiter's node to go", func() bool { return len(children(t, c1, "/locks/cancel")) == 2 })
	// The waiter behind the cancelled one now waits for the holder.
	must(t, holder.Unlock(ctxWait(t)))
	must(t, <-acquired)
	must(t, third.Unlock(ctxWait(t)))
}

func TestAHolderCutOffLosesTheLockToTheNextWaiter(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var k cutter
	dead := s.dial(t, client.WithDialer(k.dial), client.WithSessionTimeout(time.Second))
	next := s.dial(t)
	held := NewMutex(dead, "/locks/crash")
	must(t, held.Lock(ctxWait(t)))
	waiter := NewMutex(next, "/locks/crash")
	acquired := make(chan error, 1)
	go func() { acquired <- waiter.Lock(ctxWait(t)) }()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, next, "/locks/crash")) == 2 })

	start := time.Now()
	k.cut() // no close: the server hears nothing more from the holder
	select {
	case err := <-acquired:
		must(t, err)
	case <-time.After(dead.SessionTimeout() + time.Second + time.Second): // +1s of slack for -race
		t.Fatal("the next waiter did not get the lock after the holder's session timeout")
	}
	t.Logf("handed over %v after the cut (session timeout %v)", time.Since(start), dead.SessionTimeout())
	// The holder counts its deadline from the send of the requests the
	// server answered, so Lost closes before the server hands the lock on.
	if !isClosed(held.Lost()) {
		t.Error("the next waiter holds the lock while the cut-off holder's Lost is still open")
	}
	if waiter.Token() <= held.Token() {
		t.Errorf("token %d after %d", waiter.Token(), held.Token())
	}
	k.heal() // the dead holder comes back: its session is gone
	if held.Held() {
		t.Error("the dead holder still believes it holds the lock")
	}
	// Its deadline passed before the session's end was known: that is the
	// reason the hold gives.
	if err := held.Lock(ctxWait(t)); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("a reentrant Lock after the session expired: %v, want ErrDeadlinePassed", err)
	}
	if err := held.Unlock(ctxWait(t)); !errors.Is(err, ErrDeadlinePassed) {
		t.Errorf("Unlock after the session expired: %v, want ErrDeadlinePassed", err)
	}
	must(t, waiter.Unlock(ctxWait(t)))
}

func TestACreateWhoseAnswerIsLostIsFoundAgain(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var k cutter
	c := s.dial(t, client.WithDialer(k.dial))
	m := NewMutex(c, "/locks/lost-answer")
	must(t, makeDirs(ctxWait(t), c, "/locks/lost-answer", nil)) // so the first create succeeds
	k.dropAck.Store(true)
	must(t, m.Lock(ctxWait(t)))
	if k.dropAck.Load() {
		t.Fatal("the create's answer was not dropped")
	}
	nodes := children(t, c, "/locks/lost-answer")
	if len(nodes) != 1 || !strings.HasSuffix(nodes[0], "-0000000000") {
		t.Fatalf("nodes %v, want exactly the first one created, found again", nodes)
	}
	must(t, m.Unlock(ctxWait(t)))
	if nodes := children(t, c, "/locks/lost-answer"); len(nodes) != 0 {
		t.Errorf("nodes left: %v", nodes)
	}
}

func TestANodeOfAnExpiredSessionIsNotAdopted(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	old, c := s.dial(t), s.dial(t)
	stale, err := newQueue(old, "/locks/stale", options{}).enqueue(ctxWait(t), lockq.Exclusive, nil, 0)
	must(t, err)
	// A node with the same protected name in another session must not be
	// taken as one's own.
	e, _, err := newQueue(c, "/locks/stale", options{}).findOwn(ctxWait(t), stale.prefix, c.SessionID())
	must(t, err)
	if e.Name != "" {
		t.Fatalf("adopted %s, a node of another session", e.Name)
	}
	if nodes := children(t, c, "/locks/stale"); len(nodes) != 0 {
		t.Errorf("the stale node was not deleted: %v", nodes)
	}
}

func TestContendersShowsHoldersAndWaitersInOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	ctx := ctxWait(t)
	r1, r2, w := NewRWMutex(c, "/locks/show", WithOwner("r1")), NewRWMutex(c, "/locks/show"), NewRWMutex(c, "/locks/show", WithData([]byte("w")))
	must(t, r1.RLock(ctx))
	must(t, r2.RLock(ctx))
	go w.Lock(ctx)
	waitFor(t, "the writer to queue", func() bool { return len(children(t, c, "/locks/show")) == 3 })
	got, err := Contenders(ctx, c, "/locks/show")
	must(t, err)
	host, _ := os.Hostname()
	want := []struct {
		kind  string
		holds bool
		owner string
	}{{"read", true, "r1"}, {"read", true, fmt.Sprintf("%s:%d", host, os.Getpid())}, {"write", false, "w"}}
	if len(got) != len(want) {
		t.Fatalf("contenders %+v", got)
	}
	holders := map[string]bool{}
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Holds != w.holds || g.Owner != w.owner || g.Session != c.SessionID() || g.Created.IsZero() {
			t.Errorf("contender %d = %+v, want kind %s holds %v owner %q", i, g, w.kind, w.holds, w.owner)
		}
		holders[g.Holder] = true
	}
	if len(holders) != 3 || holders[""] {
		t.Errorf("three values of one session hold as holders %v, want three ids", holders)
	}
	if got, err := Contenders(ctx, c, "/locks/none"); err != nil || len(got) != 0 {
		t.Errorf("Contenders of a missing path = %v, %v", got, err)
	}
	must(t, r1.RUnlock(ctx))
	must(t, r2.RUnlock(ctx))
}

func TestAWaiterWhoseSessionExpiresGetsErrSessionExpired(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var k cutter
	holder := NewMutex(s.dial(t), "/locks/expire")
	must(t, holder.Lock(ctxWait(t)))
	c := s.dial(t, client.WithDialer(k.dial), client.WithSessionTimeout(time.Second))
	waited := make(chan error, 1)
	go func() { waited <- NewMutex(c, "/locks/expire").Lock(ctxWait(t)) }()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, c, "/locks/expire")) == 2 })
	k.cut()
	if err := <-waited; !errors.Is(err, client.ErrSessionExpired) {
		t.Errorf("Lock of a waiter whose session expired: %v, want ErrSessionExpired", err)
	}
	must(t, holder.Unlock(ctxWait(t)))
}

// A release whose answer is lost is tried again: the retry finds the node
// gone, learns from the lock history that it was its own release, and
// succeeds without touching the next holder, who took the lock meanwhile.
func TestAReleaseWhoseAnswerIsLostLeavesTheNextHolderAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var k cutter
	c, other := s.dial(t, client.WithDialer(k.dial)), s.dial(t)
	m := NewMutex(c, "/locks/retry", WithLease(10*time.Second))
	must(t, m.Lock(ctxWait(t)))
	next := NewMutex(other, "/locks/retry")
	got := make(chan error, 1)
	go func() { got <- next.Lock(ctxWait(t)) }()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, other, "/locks/retry")) == 2 })
	k.dropAck.Store(true)
	if err := m.Unlock(ctxWait(t)); err != nil {
		t.Fatalf("Unlock whose first answer was lost: %v", err)
	}
	if k.dropAck.Load() {
		t.Fatal("the delete's answer was not dropped")
	}
	must(t, <-got)
	if v, err := other.CheckToken(ctxWait(t), "/locks/retry", next.Token()); err != nil || !v.Current || len(v.Holders) != 1 {
		t.Errorf("the next holder after the retried release: %+v, %v", v, err)
	}
	must(t, next.Unlock(ctxWait(t)))
}

// A release or a renewal that comes after the lock moved on (it was broken
// while its lease lived) says the hold is gone, and acts on nothing: the
// next holder keeps the lock.
func TestAReleaseOrRenewalAfterTheLockMovedOnSaysSo(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, other := s.dial(t), s.dial(t)
	m := NewMutex(c, "/locks/moved", WithLease(10*time.Second))
	m.h.every = time.Hour // no renewal but the test's
	must(t, m.Lock(ctxWait(t)))
	next := NewMutex(other, "/locks/moved")
	got := make(chan error, 1)
	go func() { got <- next.Lock(ctxWait(t)) }()
	waitFor(t, "the waiter to queue", func() bool { return len(children(t, other, "/locks/moved")) == 2 })
	if _, err := other.BreakLock(ctxWait(t), "/locks/moved", "a test"); err != nil {
		t.Fatal(err)
	}
	must(t, <-got)
	if _, err := m.Renew(ctxWait(t)); !errors.Is(err, ErrBroken) {
		t.Errorf("Renew after the break: %v, want ErrBroken", err)
	}
	if err := m.Unlock(ctxWait(t)); !errors.Is(err, ErrBroken) {
		t.Errorf("Unlock after the break: %v, want ErrBroken", err)
	}
	if v, err := other.CheckToken(ctxWait(t), "/locks/moved", next.Token()); err != nil || !v.Current {
		t.Errorf("the next holder after the late renewal and release: %+v, %v", v, err)
	}
}

// A holder that asked for a lock-delay and is lost without releasing (its
// session ends, or an admin breaks the lock) leaves the lock to the
// delay: the next waiter, a Go recipe that watched the holder's node,
// holds no sooner than the delay after the loss, as the lock history's
// times show.
func TestALockDelayKeepsTheLockAfterTheHolderIsLost(t *testing.T) {
	t.Parallel()
	cut := func(t *testing.T, k *cutter, _ *client.Client, _ string) { k.cut() }
	for _, tc := range []struct {
		name  string
		end   string
		lose  func(t *testing.T, k *cutter, admin *client.Client, path string)
		lease time.Duration // of the session, which the hold is bound to
	}{
		{"session ends", client.LockSessionEnded, cut, 0},
		// (On a sharded cluster, the lease ends in the lock's shard with
		// the session, whose close there must put the delay first.)
		{"session of its lease ends", client.LockSessionEnded, cut, 30 * time.Second},
		{"break", client.LockBroken, func(t *testing.T, _ *cutter, admin *client.Client, path string) {
			_, err := admin.BreakLock(ctxWait(t), path, "a test")
			must(t, err)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			var k cutter
			dead := s.dial(t, client.WithDialer(k.dial), client.WithSessionTimeout(time.Second))
			next := s.dial(t)
			const delay = 1500 * time.Millisecond
			path := "/locks/delayed"
			opts := []Option{WithOwner("dead"), WithLockDelay(delay)}
			if tc.lease > 0 {
				opts = append(opts, WithLease(tc.lease))
			}
			held := NewMutex(dead, path, opts...)
			must(t, held.Lock(ctxWait(t)))
			waiter := NewMutex(next, path, WithOwner("next"))
			acquired := make(chan error, 1)
			go func() { acquired <- waiter.Lock(ctxWait(t)) }()
			waitFor(t, "the waiter to queue", func() bool { return len(children(t, next, path)) == 2 })
			tc.lose(t, &k, next, path)
			must(t, <-acquired)
			evs, err := next.LockHistory(ctxWait(t), path, true)
			must(t, err)
			var ended, got int64
			for _, ev := range evs {
				switch {
				case ev.Owner == "dead" && ev.Kind == tc.end:
					ended = ev.Time
				case ev.Owner == "next" && ev.Kind == client.LockAcquired:
					got = ev.Time
				}
			}
			if ended == 0 || got-ended < delay.Milliseconds() {
				t.Errorf("the next waiter held %d ms after the holder was lost, want at least %v: %+v", got-ended, delay, evs)
			}
			must(t, waiter.Unlock(ctxWait(t)))
		})
	}
}
