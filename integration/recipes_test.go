package integration

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// dialAll dials a client that may use any of addrs.
func dialAll(t *testing.T, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]client.Option{client.WithLogger(zaptest.NewLogger(t).Named("client"))}, opts...)
	c, err := client.Dial(ctx, addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestElectionKeepsOneLeaderThroughAClusterFailover(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const n = 5
	elections := make([]*recipes.Election, n)
	elected := make(chan int, n)
	failed := make(chan error, n) // a campaign that gave up: none should
	for i := range elections {
		cl := dialAll(t, c.addrs(), client.WithSessionTimeout(4*time.Second))
		elections[i] = recipes.NewElection(cl, "/service/leader")
		go func() {
			if err := elections[i].Campaign(testCtx(t), []byte(fmt.Sprint(i))); err == nil {
				elected <- i
			} else {
				failed <- fmt.Errorf("candidate %d: %w", i, err)
			}
		}()
	}
	// Sample who believes it leads, all along.
	var most atomic.Int32
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Microsecond):
			}
			var leaders int32
			for _, e := range elections {
				if e.IsLeader() {
					leaders++
				}
			}
			if leaders > most.Load() {
				most.Store(leaders)
			}
		}
	}()

	first := <-elected
	token := elections[first].Token()
	c.stop(c.leader()) // the raft leader dies; sessions live on through the failover
	c.leader()
	time.Sleep(time.Second)
	if !elections[first].IsLeader() {
		t.Fatal("the elected candidate lost its leadership in a failover shorter than its session timeout")
	}
	if err := elections[first].Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	var second int
	select {
	case second = <-elected:
	case err := <-failed:
		t.Fatal(err)
	case <-time.After(patience):
		t.Fatal("no new leader after the first resigned")
	}
	if elections[second].Token() <= token {
		t.Errorf("the second leader's token %d is not above the first's %d", elections[second].Token(), token)
	}
	close(stop)
	<-sampled
	if m := most.Load(); m != 1 {
		t.Errorf("at some moment %d candidates believed they led", m)
	}
}

// handover is what a test of a holder cut off from the quorum saw: when
// the holder's Lost closed and why, the deadline it had just before the
// cut, and when the next holder, on the majority's side, was granted the
// lock.
type handover struct {
	deadline, lost, granted time.Time
	reason                  error
}

// cutOffHolder takes the lock at path with held, a Mutex of a client
// dialed to member lone alone, queues waiter behind it, cuts lone off
// from the rest of the cluster and waits for waiter to hold. Each side
// records its own time: the holder when its Lost closes, the waiter when
// its Lock returns.
func cutOffHolder(t *testing.T, c *cluster, lone uint64, path string, held, waiter *recipes.Mutex, waiterClient *client.Client) handover {
	t.Helper()
	ctx := testCtx(t)
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lostAt := make(chan time.Time, 1)
	go func() {
		<-held.Lost()
		lostAt <- time.Now()
	}()
	grantedAt := make(chan time.Time, 1)
	go func() {
		if err := waiter.Lock(ctx); err != nil {
			t.Error(err)
			return
		}
		grantedAt <- time.Now()
	}()
	waitUntil(t, "the waiter to queue", patience, func() bool {
		names, _, err := waiterClient.Children(ctx, path)
		return err == nil && len(names) == 2
	})
	var rest []uint64
	for id := range c.servers {
		if id != lone {
			rest = append(rest, id)
		}
	}
	h := handover{deadline: held.Deadline()}
	c.partition([]uint64{lone}, rest)
	defer c.heal()
	select {
	case h.granted = <-grantedAt:
	case <-time.After(patience):
		t.Fatal("the waiter never held the lock")
	}
	select {
	case h.lost = <-lostAt:
	default:
		t.Fatalf("the lock moved on at %v while the cut-off holder still believed it held it (deadline %v)", h.granted, h.deadline)
	}
	h.reason = held.LostReason()
	t.Logf("cut-off holder: deadline %v, told at %v; next holder granted at %v (%v later)",
		h.deadline.Format(time.StampMicro), h.lost.Format(time.StampMicro), h.granted.Format(time.StampMicro), h.granted.Sub(h.lost))
	if !h.lost.Before(h.granted) {
		t.Errorf("the cut-off holder was told at %v, after the next holder was granted the lock at %v", h.lost, h.granted)
	}
	if waiter.Token() <= held.Token() && held.Token() != 0 {
		t.Errorf("token %d after %d", waiter.Token(), held.Token())
	}
	return h
}

// A member cut off from the leader can no longer keep its clients'
// sessions alive. A lock holder behind it must stop, at its stop-by
// deadline, before anyone else gets the lock: for a hold of the session
// alone, the deadline counts on the cut-off member's noticing within a
// third of the session timeout (the test cluster's election timeout is
// 0.2 to 0.4 s).
func TestAHolderBehindACutOffMemberSeesLostBeforeTheLockMovesOn(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	lead := c.leader()
	lone := c.follower()
	held := recipes.NewMutex(dial(t, c.addr(lone), client.WithSessionTimeout(3*time.Second)), "/locks/cut")
	wc := dial(t, c.addr(lead))
	h := cutOffHolder(t, c, lone, "/locks/cut", held, recipes.NewMutex(wc, "/locks/cut"), wc)
	if !errors.Is(h.reason, recipes.ErrDeadlinePassed) && !errors.Is(h.reason, client.ErrSessionExpired) {
		t.Errorf("LostReason = %v, want the deadline or the session's end", h.reason)
	}
}

// A holder bound to a lease, behind a member that is then cut off from
// the quorum, stops at its stop-by deadline, before the lock is granted on
// the majority's side: its last successful renewal, which a quorum took,
// bounds both its lease's end and its session's.
func TestALeasedHolderCutOffWithItsMemberStopsBeforeTheNextHolderStarts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		lease, session time.Duration
	}{
		{"when the lease ends first", 2 * time.Second, 10 * time.Second},
		{"when the session ends first", 30 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 3)
			lead := c.leader()
			lone := c.follower()
			path := "/locks/leased"
			held := recipes.NewMutex(dial(t, c.addr(lone), client.WithSessionTimeout(tc.session)), path, recipes.WithLease(tc.lease))
			wc := dial(t, c.addr(lead))
			h := cutOffHolder(t, c, lone, path, held, recipes.NewMutex(wc, path), wc)
			if !errors.Is(h.reason, recipes.ErrDeadlinePassed) {
				t.Errorf("LostReason = %v, want ErrDeadlinePassed", h.reason)
			}
			if h.lost.Before(h.deadline) {
				t.Errorf("told at %v, before the deadline %v it had at the cut", h.lost, h.deadline)
			}
		})
	}
}

// A lock asked for while its member has no quorum is not refused: the
// recipe looks for its node and tries again until the quorum is back (or
// its context ends), as it does through a lost connection.
func TestALockAskedForWithoutAQuorumHoldsOnceTheQuorumIsBack(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cut := c.follower()
	cl := dialAll(t, []string{c.addr(cut)}, client.WithSessionTimeout(30*time.Second))
	var others []uint64
	for id := range c.servers {
		if id != cut {
			others = append(others, id)
		}
	}
	c.partition([]uint64{cut}, others)
	m := recipes.NewMutex(cl, "/locks/noquorum")
	done := make(chan error, 1)
	go func() { done <- m.Lock(testCtx(t)) }()
	waitUntil(t, "the cut member to lose its leader", patience, func() bool { return c.servers[cut].Status().Leader == 0 })
	select {
	case err := <-done:
		t.Fatalf("Lock without a quorum ended with %v, want it to wait", err)
	default:
	}
	c.heal()
	if err := <-done; err != nil {
		t.Fatalf("Lock once the quorum was back: %v", err)
	}
	if !m.Held() || m.Token() == 0 {
		t.Errorf("held %v, token %d", m.Held(), m.Token())
	}
}
