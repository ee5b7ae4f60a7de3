package recipes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// contenders runs each lock function of locks in a goroutine of its own, in
// the order given, waiting until each one's node is queued before starting
// the next, so that their order of arrival is known. Each records its name
// in the order it held, holds until the next one is due and releases. The
// returned function waits for them all and returns that order.
type contender struct {
	name   string
	lock   func(context.Context) error
	unlock func(context.Context) error
}

func startContenders(t *testing.T, c *client.Client, path string, cs []contender) func() []string {
	t.Helper()
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, ct := range cs {
		queued := len(children(t, c, path))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ct.lock(ctxWait(t)); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, ct.name)
			mu.Unlock()
			if err := ct.unlock(ctxWait(t)); err != nil {
				t.Error(err)
			}
		}()
		waitFor(t, ct.name+" to queue", func() bool { return len(children(t, c, path)) == queued+1 })
	}
	return func() []string {
		wg.Wait()
		return order
	}
}

func mutexContender(name string, m *Mutex) contender {
	return contender{name, m.Lock, m.Unlock}
}

func TestAHighPriorityWaiterBehindTenLowOnesHoldsNext(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const path = "/locks/payments"
	holderClient := s.dial(t)
	holder := NewMutex(holderClient, path)
	must(t, holder.Lock(ctxWait(t)))

	var cs []contender
	for i := range 10 {
		cs = append(cs, mutexContender(fmt.Sprintf("low-%d", i), NewMutex(s.dial(t), path))) // each of its own session
	}
	wait := startContenders(t, holderClient, path, cs)

	// The high one's create rewrites the holder's node, which low-0
	// watches: low-0 wakes once, reads the queue and comes to watch it.
	before := s.notifications(t)
	wait2 := startContenders(t, holderClient, path, []contender{mutexContender("high", NewMutex(s.dial(t), path, WithPriority(9)))})
	waitFor(t, "low-0 to look again", func() bool { return s.notifications(t) == before+1 })
	q := children(t, holderClient, path)
	if len(q) != 12 || !strings.Contains(q[1], ".p9.k") {
		t.Fatalf("queue %v: want the high one second", q)
	}

	before = s.notifications(t)
	must(t, holder.Unlock(ctxWait(t)))
	order := append(wait2(), wait()...)
	want := []string{"high"}
	for i := range 10 {
		want = append(want, fmt.Sprintf("low-%d", i))
	}
	if !slices.Equal(order, want) {
		t.Errorf("held in order %v, want %v", order, want)
	}
	// 12 releases: each but the last woke exactly its successor.
	if got := s.notifications(t) - before; got != 11 {
		t.Errorf("%d watch notifications for 11 handoffs, want exactly one each", got)
	}
}

func TestPrioritiesAcrossModes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const path = "/locks/mixed"
	c := s.dial(t)
	w0 := NewRWMutex(c, path)
	must(t, w0.Lock(ctxWait(t)))
	var readers atomic.Int32
	rw := func(name string, read bool, opts ...Option) contender {
		m := NewRWMutex(s.dial(t), path, opts...)
		if !read {
			return contender{name, m.Lock, m.Unlock}
		}
		return contender{name, func(ctx context.Context) error {
			if err := m.RLock(ctx); err != nil {
				return err
			}
			readers.Add(1)
			return nil
		}, func(ctx context.Context) error {
			readers.Add(-1)
			return m.RUnlock(ctx)
		}}
	}
	wait := startContenders(t, c, path, []contender{
		rw("write-low", false),
		rw("read-low", true),
		rw("read-high", true, WithPriority(5)), // before write-low: it shares with nobody, waits for w0
		mutexContender("exclusive-higher", NewMutex(s.dial(t), path, WithPriority(7))),
	})
	// A Mutex of priority 7 goes before the waiters of lower priority,
	// read-high too, and after the holder.
	var kinds []string
	for _, e := range lockq.Sort(children(t, c, path)) {
		kinds = append(kinds, string(e.Kind)+fmt.Sprint(e.Priority()))
	}
	if got := strings.Join(kinds, " "); got != "write0 lock7 read5 write0 read0" {
		t.Fatalf("queue %s", got)
	}
	must(t, w0.Unlock(ctxWait(t)))
	order := wait()
	if want := []string{"exclusive-higher", "read-high", "write-low", "read-low"}; !slices.Equal(order, want) {
		t.Errorf("held in order %v, want %v", order, want)
	}
}

func TestAgingBoundsHowOftenAWaiterIsPassed(t *testing.T) {
	t.Parallel()
	// The holder's node has sequence number 0, the low waiter's 1; each
	// change to the lock's children after that (a join, a leave) counts
	// one, and the high waiter's sequence number is the count.
	for _, tt := range []struct {
		changes int
		passed  bool
	}{
		{changes: lockq.AgingWindow - 1, passed: true}, // the high one's sequence number is AgingWindow above the low one's
		{changes: lockq.AgingWindow, passed: false},    // one more than that
	} {
		t.Run(fmt.Sprintf("after %d changes", tt.changes), func(t *testing.T) {
			s := startServer(t)
			const path = "/locks/aging"
			c := s.dial(t)
			holder := NewMutex(c, path)
			must(t, holder.Lock(ctxWait(t)))
			wait := startContenders(t, c, path, []contender{mutexContender("low", NewMutex(s.dial(t), path))})
			other := NewMutex(s.dial(t), path)
			for range tt.changes / 2 {
				if ok, err := other.TryLock(ctxWait(t)); ok || err != nil { // a join and a leave
					t.Fatalf("TryLock = %v, %v", ok, err)
				}
			}
			if tt.changes%2 == 1 {
				_, err := c.Create(ctxWait(t), path+"/note", nil, client.Persistent) // not a queue node, but a change
				must(t, err)
			}
			wait2 := startContenders(t, c, path, []contender{mutexContender("high", NewMutex(s.dial(t), path, WithPriority(lockq.MaxPriority)))})
			q := lockq.Sort(children(t, c, path))
			if len(q) != 3 || q[0].Seq != 0 || max(q[1].Seq, q[2].Seq) != int64(2+tt.changes) {
				t.Fatalf("queue %v", q)
			}
			if got := q[1].Priority() == lockq.MaxPriority; got != tt.passed {
				t.Errorf("high passed low: %v, want %v (sequence numbers %d and %d)", got, tt.passed, q[1].Seq, q[2].Seq)
			}
			must(t, holder.Unlock(ctxWait(t)))
			wait()
			wait2()
		})
	}
}

// A MultiLock joins every queue at the end, in one write: a priority
// would place it differently in each queue, and two MultiLocks could then
// each hold a lock the other waits for.
func TestAMultiLockTakesNoPriority(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	if _, err := NewMultiLock(s.dial(t), []LockPart{{Path: "/locks/m/a"}, {Path: "/locks/m/b"}}, WithPriority(3)); err == nil ||
		!strings.Contains(err.Error(), "priority") {
		t.Errorf("a MultiLock with a priority: %v, want an error", err)
	}
}

// TestAHolderWaitingElsewhereInheritsItsWaitersPriority is the priority
// inversion: a batch job of no priority holds the payments lock and waits
// for the ledger lock, held by someone else, behind which three jobs of
// middle priority queue. A payment of high priority comes to wait for the
// payments lock. With inheritance, the batch job's wait for the ledger is
// served at the payment's priority, ahead of the middle jobs, so the
// payment waits for the batch job alone; without (the batch job's two
// locks taken by unrelated holders), it waits for the middle jobs too.
func TestAHolderWaitingElsewhereInheritsItsWaitersPriority(t *testing.T) {
	t.Parallel()
	for _, inherits := range []bool{true, false} {
		t.Run(fmt.Sprintf("inheritance %v", inherits), func(t *testing.T) {
			s := startServer(t)
			const payments, ledger = "/locks/payments", "/locks/ledger"
			c := s.dial(t)
			other := NewMutex(s.dial(t), ledger)
			must(t, other.Lock(ctxWait(t)))

			batch := s.dial(t)
			batchPayments := NewMutex(batch, payments, WithHolder("batch"))
			batchLedger := NewMutex(batch, ledger, WithHolder("batch"))
			if !inherits {
				batchLedger = NewMutex(batch, ledger) // a holder of its own
			}
			must(t, batchPayments.Lock(ctxWait(t)))
			var mu sync.Mutex
			var ledgerOrder []string
			record := func(name string) {
				mu.Lock()
				ledgerOrder = append(ledgerOrder, name)
				mu.Unlock()
			}
			batchDone := startContenders(t, c, ledger, []contender{{"batch", func(ctx context.Context) error {
				if err := batchLedger.Lock(ctx); err != nil {
					return err
				}
				record("batch")
				return nil
			}, func(ctx context.Context) error {
				if err := batchLedger.Unlock(ctx); err != nil {
					return err
				}
				return batchPayments.Unlock(ctx) // its work done, it lets the payments lock go
			}}})

			var middles []contender
			for i := range 3 {
				m := NewMutex(s.dial(t), ledger, WithPriority(5))
				name := fmt.Sprintf("middle-%d", i)
				middles = append(middles, contender{name, func(ctx context.Context) error {
					if err := m.Lock(ctx); err != nil {
						return err
					}
					record(name)
					return nil
				}, m.Unlock})
			}
			middlesDone := startContenders(t, c, ledger, middles)
			if q := children(t, c, ledger); !strings.HasPrefix(q[len(q)-1], "_c_") || strings.Contains(q[len(q)-1], ".p5") {
				t.Fatalf("ledger queue %v: want the middle jobs ahead of the batch job", q)
			}

			payment := NewMutex(s.dial(t), payments, WithPriority(9))
			paymentDone := startContenders(t, c, payments, []contender{mutexContender("payment", payment)})
			if inherits {
				// The batch job joins the ledger's queue again at 9, ahead
				// of the middle jobs.
				waitFor(t, "the batch job to inherit priority 9", func() bool {
					q := children(t, c, ledger)
					return len(q) == 5 && strings.Contains(q[1], ".p9.")
				})
			}
			must(t, other.Unlock(ctxWait(t)))
			paymentDone()
			batchDone()
			middlesDone()
			want := []string{"middle-0", "middle-1", "middle-2", "batch"}
			if inherits {
				want = []string{"batch", "middle-0", "middle-1", "middle-2"}
			}
			if !slices.Equal(ledgerOrder, want) {
				t.Errorf("the ledger was held in order %v, want %v", ledgerOrder, want)
			}
		})
	}
}

// TestInheritanceFollowsAChainOfLocks: a waiter of priority 9 waits for a
// lock held by l, which waits for one held by k, which waits behind a
// waiter of priority 5 for a third: k inherits 9 through l's node, which
// carries the priority l inherited, and goes ahead of the waiter of 5.
func TestInheritanceFollowsAChainOfLocks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	j := NewMutex(s.dial(t), "/locks/c")
	must(t, j.Lock(ctxWait(t)))
	kc, lc := s.dial(t), s.dial(t)
	kb, kcLock := NewMutex(kc, "/locks/b", WithHolder("k")), NewMutex(kc, "/locks/c", WithHolder("k"))
	la, lb := NewMutex(lc, "/locks/a", WithHolder("l")), NewMutex(lc, "/locks/b", WithHolder("l"))
	must(t, kb.Lock(ctxWait(t)))
	must(t, la.Lock(ctxWait(t)))
	release := func(ms ...*Mutex) func(context.Context) error {
		return func(ctx context.Context) error {
			for _, m := range ms {
				if err := m.Unlock(ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	kDone := startContenders(t, c, "/locks/c", []contender{{"k", kcLock.Lock, release(kcLock, kb)}})
	middle := startContenders(t, c, "/locks/c", []contender{mutexContender("middle", NewMutex(s.dial(t), "/locks/c", WithPriority(5)))})
	lDone := startContenders(t, c, "/locks/b", []contender{{"l", lb.Lock, release(lb, la)}})
	if q := children(t, c, "/locks/c"); len(q) != 3 || !strings.Contains(q[1], ".p5") {
		t.Fatalf("queue of c %v: want the waiter of 5 ahead of k", q)
	}
	high := startContenders(t, c, "/locks/a", []contender{mutexContender("high", NewMutex(s.dial(t), "/locks/a", WithPriority(9)))})
	waitFor(t, "k to inherit 9 through l", func() bool {
		q := children(t, c, "/locks/c")
		return len(q) == 3 && strings.Contains(q[1], ".p9.")
	})
	if q := children(t, c, "/locks/b"); len(q) != 2 || !strings.Contains(q[1], ".p9") {
		t.Errorf("queue of b %v: want l's wait at 9", q)
	}
	must(t, j.Unlock(ctxWait(t)))
	kDone()
	lDone()
	high()
	middle()
}

// A requeue whose answer was lost, and whose retry saw the old node, may
// still apply: the wait's next list takes its new node, rather than
// deleting it as a stray and failing as if its node were gone.
func TestAListTakesARequeueThatAppliedAfterItsAnswerWasLost(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	holder := NewMutex(s.dial(t), "/locks/requeued")
	must(t, holder.Lock(ctx))
	q := newQueue(c, "/locks/requeued", options{})
	me, err := q.enqueue(ctx, lockq.Exclusive, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The requeue, applied as the lost multi would have been: the old node
	// gone, a node of the same base at priority 5 in its place.
	base := lockq.Base(me.ID)
	made, err := c.Create(ctx, q.dir+"/"+lockq.Prefix(lockq.ID(base, 5, ""), lockq.Exclusive), nil, client.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.Delete(ctx, q.path(me.Entry), -1))
	me.lossy, me.prefix = true, lockq.Mark+base

	es, _, err := q.list(ctx, &me)
	if err != nil {
		t.Fatalf("list after the late requeue: %v", err)
	}
	if q.path(me.Entry) != made || me.Priority() != 5 || len(es) != 2 {
		t.Fatalf("the wait's node %s (priority %d), queue %v; want %s", q.path(me.Entry), me.Priority(), es, made)
	}
	if me.czxid == 0 {
		t.Error("the taken node's token is unknown")
	}
}
