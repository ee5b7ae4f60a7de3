package integration

import (
	"context"
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

// A member cut off from the leader can no longer keep its clients'
// sessions alive. Its clients must give their sessions up no later than
// the leader expires them: a lock holder behind it must see Lost before
// anyone else gets the lock.
func TestAHolderBehindACutOffMemberSeesLostBeforeTheLockMovesOn(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t)
	lead := c.leader()
	lone := c.follower()
	held := recipes.NewMutex(dial(t, c.addr(lone), client.WithSessionTimeout(2*time.Second)), "/locks/cut")
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := recipes.NewMutex(dial(t, c.addr(lead)), "/locks/cut")
	acquired := make(chan error, 1)
	go func() { acquired <- waiter.Lock(ctx) }()
	var rest []uint64
	for id := range c.servers {
		if id != lone {
			rest = append(rest, id)
		}
	}
	time.Sleep(100 * time.Millisecond) // let the waiter queue
	c.partition([]uint64{lone}, rest)
	if err := <-acquired; err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Lost():
	default:
		t.Fatal("the lock moved on while the cut-off holder still believed it held it")
	}
	if waiter.Token() <= held.Token() && held.Token() != 0 {
		t.Errorf("token %d after %d", waiter.Token(), held.Token())
	}
	c.heal()
}

// A lock asked for while its member has no quorum is not refused: the
// recipe looks for its node and tries again until the quorum is back (or
// its context ends), as it does through a lost connection.
func TestALockAskedForWithoutAQuorumHoldsOnceTheQuorumIsBack(t *testing.T) {
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
