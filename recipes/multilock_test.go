package recipes

import (
	"context"
	"errors"
	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two MultiLocks over the same locks, given in opposite orders, never
// deadlock: they take the locks in one order.
func TestMultiLocksInOppositeOrdersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for _, parts := range [][]LockPart{{{Path: "/locks/m/a"}, {Path: "/locks/m/b"}}, {{Path: "/locks/m/b"}, {Path: "/locks/m/a"}}} {
		m, err := NewMultiLock(s.dial(t), parts)
		must(t, err)
		wg.Go(func() {
			for range 10 {
				ctx := ctxWait(t)
				if err := m.Lock(ctx); err != nil {
					errs <- err
					return
				}
				if n := inside.Add(1); n != 1 {
					errs <- errors.New("two MultiLocks hold together")
				}
				if m.Token("/locks/m/a") == 0 || m.Token("/locks/m/b") == 0 {
					errs <- errors.New("a held lock without a token")
				}
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					errs <- err
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

// A MultiLock that cannot have every lock before its deadline keeps none,
// and a part is the same lock as a Mutex or an RWMutex on its path.
func TestAMultiLockThatTimesOutReleasesWhatItTook(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	other := NewMutex(s.dial(t), "/locks/n/b")
	must(t, other.Lock(ctx))
	m, err := NewMultiLock(s.dial(t), []LockPart{{Path: "/locks/n/b"}, {Path: "/locks/n/a", Read: true}})
	must(t, err)
	short, cancel := context.WithTimeout(ctx, waitShort)
	defer cancel()
	if err := m.Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a MultiLock past its deadline: %v", err)
	}
	c := s.dial(t)
	if a, b := children(t, c, "/locks/n/a"), children(t, c, "/locks/n/b"); len(a) != 0 || len(b) != 1 {
		t.Fatalf("after the timeout: %v on a, %v on b; want nothing on a and the Mutex on b", a, b)
	}
	if ok, err := m.TryLock(ctx); err != nil || ok {
		t.Fatalf("TryLock with b held = %v, %v", ok, err)
	}
	must(t, other.Unlock(ctx))
	must(t, m.Lock(ctx))
	// Its read of a shares with readers and excludes writers.
	if ok, err := NewRWMutex(s.dial(t), "/locks/n/a").TryRLock(ctx); err != nil || !ok {
		t.Errorf("a reader beside the MultiLock's read = %v, %v", ok, err)
	}
	if ok, err := NewMutex(s.dial(t), "/locks/n/a").TryLock(ctx); err != nil || ok {
		t.Errorf("a Mutex beside the MultiLock's read = %v, %v", ok, err)
	}
	if ok, err := NewRWMutex(s.dial(t), "/locks/n/b").TryRLock(ctx); err != nil || ok {
		t.Errorf("a reader beside the MultiLock's exclusive hold = %v, %v", ok, err)
	}
	must(t, m.Unlock(ctx))
}

func TestAMultiLockNeedsDistinctPaths(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	if _, err := NewMultiLock(c, nil); err == nil {
		t.Error("a MultiLock of nothing")
	}
	if _, err := NewMultiLock(c, []LockPart{{Path: "/a"}, {Path: "/a", Read: true}}); err == nil {
		t.Error("a MultiLock naming a path twice")
	}
}

// A MultiLock is lost when any of its locks is, not only its first.
func TestAMultiLockIsLostWhenAnyPartIs(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	m, err := NewMultiLock(s.dial(t), []LockPart{{Path: "/locks/p/a"}, {Path: "/locks/p/b"}}, WithLease(time.Minute))
	must(t, err)
	must(t, m.Lock(ctx))
	lost := m.Lost()
	if _, err := s.dial(t).BreakLock(ctx, "/locks/p/b", "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-ctx.Done():
		t.Fatal("a MultiLock whose second lock was broken was never lost")
	}
	if err := m.LostReason(); !errors.Is(err, ErrNodeDeleted) {
		t.Errorf("LostReason = %v", err)
	}
}

// A MultiLock joins every queue in one write: while it waits for one lock,
// its node is in every queue, all with one acquisition id, and a Mutex
// that comes after it on a lock that was free waits behind it there.
func TestAMultiLockJoinsEveryQueueAtOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	other := NewMutex(s.dial(t), "/locks/j/b")
	must(t, other.Lock(ctx))
	m, err := NewMultiLock(s.dial(t), []LockPart{{Path: "/locks/j/a"}, {Path: "/locks/j/b"}})
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	waitFor(t, "the MultiLock to join both queues", func() bool {
		return len(children(t, c, "/locks/j/a")) == 1 && len(children(t, c, "/locks/j/b")) == 2
	})
	a, b := children(t, c, "/locks/j/a"), children(t, c, "/locks/j/b")
	ea, _ := lockq.Parse(a[0])
	eb, _ := lockq.Parse(b[1])
	if ea.ID != eb.ID {
		t.Errorf("the MultiLock's nodes %s and %s are not one acquisition", a[0], b[1])
	}
	if ok, err := NewMutex(s.dial(t), "/locks/j/a").TryLock(ctx); err != nil || ok {
		t.Errorf("a Mutex on a, which the waiting MultiLock queues for: %v, %v", ok, err)
	}
	must(t, other.Unlock(ctx))
	must(t, <-done)
	if m.Token("/locks/j/a") == 0 || m.Token("/locks/j/b") == 0 {
		t.Errorf("tokens %d, %d", m.Token("/locks/j/a"), m.Token("/locks/j/b"))
	}
	must(t, m.Unlock(ctx))
}

// A MultiLock whose joining write's answer is lost finds its nodes again
// (the write applied in every queue, or in none) and holds with them,
// leaving no second node behind.
func TestAMultiLockWhoseJoinAnswerIsLostFindsItsNodes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var k cutter
	c := s.dial(t, client.WithDialer(k.dial))
	must(t, makeDirs(ctxWait(t), c, "/locks/l/a", nil))
	must(t, makeDirs(ctxWait(t), c, "/locks/l/b", nil))
	m, err := NewMultiLock(c, []LockPart{{Path: "/locks/l/a"}, {Path: "/locks/l/b"}})
	must(t, err)
	k.dropAck.Store(true)
	must(t, m.Lock(ctxWait(t)))
	if k.dropAck.Load() {
		t.Fatal("the join's answer was not dropped")
	}
	for _, dir := range []string{"/locks/l/a", "/locks/l/b"} {
		if nodes := children(t, c, dir); len(nodes) != 1 {
			t.Errorf("%s: %v, want the one node of the join", dir, nodes)
		}
	}
	must(t, m.Unlock(ctxWait(t)))
}

func TestHierarchyPartsTakeIntentionsAbove(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		root, path string
		read       bool
		want       []LockPart
		bad        bool
	}{
		{"/locks", "/locks/orders/42", false, []LockPart{
			{Path: "/locks", Intent: true}, {Path: "/locks/orders", Intent: true}, {Path: "/locks/orders/42"}}, false},
		{"/locks/", "/locks/orders", true, []LockPart{
			{Path: "/locks", Intent: true, Read: true}, {Path: "/locks/orders", Read: true}}, false},
		{"/locks", "/locks", false, []LockPart{{Path: "/locks"}}, false},
		{"/locks", "/lockset/a", false, nil, true},
		{"/locks", "/locks/a/", false, nil, true},
		{"/", "/a", false, nil, true},
	} {
		got, err := HierarchyParts(tc.root, tc.path, tc.read)
		if tc.bad != (err != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("HierarchyParts(%q, %q, %v) = %v, %v; want %v (an error: %v)", tc.root, tc.path, tc.read, got, err, tc.want, tc.bad)
		}
	}
}

// A hierarchical lock on a path covers its subtree: its holder excludes
// the holders of the locks below it, and they exclude it, while holders of
// different locks below it, and readers, share.
func TestAHierarchicalLockCoversItsSubtree(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	lock := func(path string, read bool) *MultiLock {
		t.Helper()
		parts, err := HierarchyParts("/res", path, read)
		must(t, err)
		m, err := NewMultiLock(s.dial(t), parts)
		must(t, err)
		return m
	}
	try := func(m *MultiLock) bool {
		t.Helper()
		ok, err := m.TryLock(ctx)
		must(t, err)
		return ok
	}
	leaf1, leaf2 := lock("/res/orders/1", false), lock("/res/orders/2", false)
	if !try(leaf1) || !try(leaf2) {
		t.Fatal("two writers of different orders do not share /locks/orders")
	}
	orders := lock("/res/orders", false)
	if try(orders) {
		t.Fatal("a writer of /locks/orders holds beside writers of orders below it")
	}
	if try(lock("/res/orders", true)) {
		t.Error("a reader of /locks/orders holds beside writers below it")
	}
	must(t, leaf1.Unlock(ctx))
	must(t, leaf2.Unlock(ctx))
	if !try(orders) {
		t.Fatal("a writer of /locks/orders, alone")
	}
	if try(lock("/res/orders/3", false)) || try(lock("/res/orders/3", true)) {
		t.Error("a writer or a reader below /locks/orders holds beside its writer")
	}
	if !try(lock("/res/invoices/9", false)) {
		t.Error("a writer of another subtree does not share /locks")
	}
	must(t, orders.Unlock(ctx))
	reader := lock("/res/orders", true)
	if !try(reader) || !try(lock("/res/orders/5", true)) {
		t.Error("a reader of /locks/orders and a reader below it do not share")
	}
}

// The deadlock view sees through intention locks: a holder of an order
// waiting for a lock whose holder waits for all the orders is a cycle.
func TestADeadlockThroughAnIntentionLockIsFound(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	parts, err := HierarchyParts("/res", "/res/orders/1", false)
	must(t, err)
	order, err := NewMultiLock(c, parts, WithOwner("order-1"), WithHolder("order-1"))
	must(t, err)
	must(t, order.Lock(ctx))
	audit := s.dial(t)
	must(t, NewMutex(audit, "/locks/ledger", WithOwner("audit"), WithHolder("audit")).Lock(ctx))
	// audit, holding the ledger, waits for every order; order-1, holding
	// an order, waits for the ledger.
	parts, err = HierarchyParts("/res", "/res/orders", false)
	must(t, err)
	all, err := NewMultiLock(audit, parts, WithOwner("audit"), WithHolder("audit"))
	must(t, err)
	waits, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = all.Lock(waits) }()
	go func() { _ = NewMutex(c, "/locks/ledger", WithOwner("order-1"), WithHolder("order-1")).Lock(waits) }()
	waitFor(t, "the cycle", func() bool {
		cycles, err := c.Deadlocks(ctx, true)
		must(t, err)
		return len(cycles) == 1 && len(cycles[0]) == 2
	})
}

// An error before any node is queued (here, a lease the server refuses)
// is Lock's error: the MultiLock holds nothing, and says so.
func TestAMultiLockReportsAnErrorOfItsFirstPart(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	m, err := NewMultiLock(s.dial(t), []LockPart{{Path: "/locks/e/a"}, {Path: "/locks/e/b"}}, WithLease(500*time.Millisecond))
	must(t, err)
	if err := m.Lock(ctxWait(t)); err == nil {
		t.Fatal("Lock with a lease the server refuses succeeded")
	}
	if ok, err := m.TryLock(ctxWait(t)); ok || err == nil {
		t.Errorf("TryLock with a lease the server refuses: %v, %v", ok, err)
	}
}
