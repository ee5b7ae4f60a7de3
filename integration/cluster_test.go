package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/server"
)

func TestClusterReplicatesEveryWriteToEveryMember(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	for id := uint64(1); id <= 3; id++ {
		cl := dial(t, c.addr(id))
		if _, err := cl.Create(ctx, fmt.Sprintf("/from-%d", id), []byte("x"), client.Persistent); err != nil {
			t.Fatalf("write through member %d: %v", id, err)
		}
	}
	c.converged()
	for id := uint64(1); id <= 3; id++ {
		names, _, err := dial(t, c.addr(id)).Children(ctx, "/")
		if err != nil || len(names) != 4 { // and /zookeeper
			t.Fatalf("member %d sees %v, %v", id, names, err)
		}
	}
}

func TestLeaderLossDuringWritesLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	cl := dial(t, c.addr(c.follower()))
	if _, err := cl.Create(ctx, "/load", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const writers = 4
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/load/w%d-%d", w, i)
				if _, err := cl.Create(ctx, p, nil, client.Persistent); err == nil {
					mu.Lock()
					acked = append(acked, p)
					mu.Unlock()
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitUntil(t, "writes acknowledged under load", patience, func() bool { return count() >= 20 })
	old := c.leader()
	if dialed := cl.SessionID(); dialed == 0 {
		t.Fatal("no session")
	}
	killed := time.Now()
	c.stop(old)
	lead := c.leader()
	t.Logf("member %d took over %v after member %d stopped", lead, time.Since(killed), old)
	// Each writer has one write in flight: past before+writers
	// acknowledgements, a write made after the loss was acknowledged.
	before := count()
	waitUntil(t, fmt.Sprintf("a write made after the leader's loss acknowledged (%d before)", before), patience,
		func() bool { return count() > before+writers })
	close(stop)
	wg.Wait()
	c.start(old)
	c.converged()
	check := dial(t, c.addr(old))
	for _, p := range acked {
		if ok, _, err := check.Exists(ctx, p); !ok || err != nil {
			t.Fatalf("acknowledged %s missing on the restarted member: %v", p, err)
		}
	}
	t.Logf("%d acknowledged writes, all on every member", len(acked))
}

func TestMinorityPartitionRefusesWritesAndHeals(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	lone := c.follower()
	var rest []uint64
	for id := range c.servers {
		if id != lone {
			rest = append(rest, id)
		}
	}
	minority := dial(t, c.addr(lone))
	majority := dial(t, c.addr(rest[0]))
	c.partition([]uint64{lone}, rest)

	// Refused, not left waiting: a write that hung would end at ctx's
	// deadline with a context error instead.
	_, err := minority.Create(ctx, "/minority", nil, client.Persistent)
	if !errors.Is(err, client.ErrNoQuorum) {
		t.Fatalf("write in the minority: %v, want ErrNoQuorum", err)
	}
	// The majority writes once it has a leader of each group: one (the
	// meta group's, or a shard's on a sharded cluster) may have been the
	// lone member when it was cut off, or moved there meanwhile on a
	// loaded machine, and the majority elects another.
	for i := 0; i < 10; i++ {
		path := fmt.Sprintf("/majority-%d", i)
		var err error
		tries := 0
		waitUntil(t, "a write in the majority", patience, func() bool {
			_, err = majority.Create(ctx, path, nil, client.Persistent)
			tries++
			return !errors.Is(err, client.ErrNoQuorum)
		})
		if err != nil && !(tries > 1 && errors.Is(err, client.ErrNodeExists)) { // (a refused try may have been applied)
			t.Fatalf("write in the majority: %v", err)
		}
	}
	c.heal()
	c.converged()
	if ok, _, _ := majority.Exists(ctx, "/minority"); ok {
		t.Fatal("the refused minority write was applied")
	}
	if err := minority.Sync(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := minority.Exists(ctx, "/majority-9"); !ok || err != nil {
		t.Fatalf("the healed member misses the majority's writes: %v", err)
	}
}

// recordingDialer dials TCP and remembers the last address it reached.
type recordingDialer struct {
	mu   sync.Mutex
	last string
}

func (d *recordingDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", addr)
	if err == nil {
		d.mu.Lock()
		d.last = addr
		d.mu.Unlock()
	}
	return conn, err
}

func (d *recordingDialer) current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

func (c *cluster) memberAt(addr string) uint64 {
	for id, cfg := range c.cfgs {
		if cfg.Listen == addr {
			return id
		}
	}
	c.t.Fatalf("no member at %s", addr)
	return 0
}

func TestClientFailoverKeepsSessionEphemeralsAndWatches(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	var d recordingDialer
	cl, err := client.Dial(ctx, c.addrs(), client.WithSessionTimeout(5*time.Second), client.WithDialer(d.dial))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id := cl.SessionID()
	if _, err := cl.Create(ctx, "/mine", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Create(ctx, "/shared", []byte("a"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := cl.GetW(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}
	dead := c.memberAt(d.current())
	c.stop(dead)
	var other uint64
	for m := range c.servers {
		other = m
	}
	writer := dial(t, c.addr(other))
	if _, err := writer.Set(ctx, "/shared", []byte("b"), -1); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvent(t, watch, patience); ev.Type != client.EventNodeDataChanged {
		t.Fatalf("watch after failover: %v", ev)
	}
	if got := c.memberAt(d.current()); got == dead {
		t.Fatalf("still on the dead member %d", dead)
	}
	if cl.SessionID() != id {
		t.Fatalf("session %#x after failover, want %#x", cl.SessionID(), id)
	}
	if ok, _, err := writer.Exists(ctx, "/mine"); !ok || err != nil {
		t.Fatalf("ephemeral lost in the failover: %v", err)
	}
}

// The new leader expires the session of a client that is gone, and only
// that one. (A second close of it would be refused by the tree, the
// session being unknown, and so change nothing: there is nothing to wait
// for after the first.)
func TestGoneClientsSessionExpiresAcrossALeaderChange(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	lead := c.leader()
	var member uint64 // a follower that survives
	for id := range c.servers {
		if id != lead {
			member = id
		}
	}
	p := newProxy(t, c.addr(member))
	gone := dial(t, p.addr(), client.WithSessionTimeout(time.Second))
	observer := dial(t, c.addr(member))
	if _, err := gone.Create(ctx, "/gone", nil, client.Ephemeral); err != nil {
		t.Fatal(err)
	}
	_, _, watch, err := observer.ExistsW(ctx, "/gone")
	if err != nil {
		t.Fatal(err)
	}
	before := c.servers[member].Status().Sessions
	observed := observer.SessionID()
	p.freeze(true) // the client is gone, its connection still open
	c.stop(lead)   // and the leader that tracked it with it
	if ev := waitEvent(t, watch, patience); ev.Type != client.EventNodeDeleted {
		t.Fatalf("event %v, want NodeDeleted", ev)
	}
	c.converged() // every member applied what member did: the close
	for id, s := range c.servers {
		if got := s.Status().Sessions; got != before-1 {
			t.Fatalf("member %d has %d sessions, want %d", id, got, before-1)
		}
	}
	if observer.SessionID() != observed {
		t.Fatalf("the observer's session changed from %#x to %#x", observed, observer.SessionID())
	}
}

func TestARestartedMemberCatchesUpFromASnapshot(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3, func(cfg *server.Config) { cfg.SnapshotEvery, cfg.CatchUpEntries = 20, 5 })
	ctx := testCtx(t)
	behind := c.follower()
	c.stop(behind)
	var lead uint64
	for id := range c.servers {
		lead = id
	}
	cl := dial(t, c.addr(lead))
	for i := 0; i < 100; i++ {
		if _, err := cl.Create(ctx, fmt.Sprintf("/n%d", i), []byte("v"), client.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	// The others compacted their logs far past what the stopped member has,
	// so it can only catch up from a snapshot.
	c.start(behind)
	c.converged()
	names, _, err := dial(t, c.addr(behind)).Children(ctx, "/")
	if err != nil || len(names) != 101 {
		t.Fatalf("the restarted member has %d nodes, %v; want 100 and /zookeeper", len(names), err)
	}
}

func TestFiveMembersSurviveLossDelayAndTwoFailures(t *testing.T) {
	t.Parallel()
	// A proposal forwarded to the leader and lost is not resent by raft: its
	// write times out (outcome unknown) and the client retries. A short
	// request timeout keeps that quick.
	c := startCluster(t, 5, func(cfg *server.Config) { cfg.RequestTimeout = 500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Every link loses one message in twenty and is 5 ms slow.
	c.net.Drop(raftnode.AnyMember, raftnode.AnyMember, 0.05)
	c.net.Delay(raftnode.AnyMember, raftnode.AnyMember, 5*time.Millisecond)
	var addrs []string
	for id := uint64(1); id <= 5; id++ {
		addrs = append(addrs, c.addr(id))
	}
	cl, err := client.Dial(ctx, addrs, client.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	write := func(p string) {
		t.Helper()
		// A retried create finds the node if the attempt that timed out was
		// applied after all.
		err := retry(func() error { _, err := cl.Create(ctx, p, nil, client.Persistent); return err })
		if err != nil && !errors.Is(err, client.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	start := time.Now()
	for i := 0; i < 20; i++ {
		write(fmt.Sprintf("/a%d", i))
	}
	t.Logf("20 writes with loss and delay: %v", time.Since(start))
	lead := c.leader()
	c.stop(lead)
	c.stop(c.follower())
	start = time.Now()
	for i := 0; i < 20; i++ {
		write(fmt.Sprintf("/b%d", i))
	}
	t.Logf("20 writes after losing two members: %v", time.Since(start))
	c.heal()
	c.converged()
	names, _, err := dial(t, c.addr(c.follower())).Children(ctx, "/")
	if err != nil || len(names) != 41 {
		t.Fatalf("a surviving member has %d nodes, %v; want 40 and /zookeeper", len(names), err)
	}
}

// A leader that is stopped hands its leadership over first: by the time
// its Close returns another member leads, and writes go on without an
// election timeout's wait.
func TestAStoppedLeaderHandsItsLeadershipOver(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := testCtx(t)
	cl := dialAll(t, c.addrs())
	if _, err := cl.Create(ctx, "/handover", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	old := c.leader()
	c.stop(old)
	var leads []uint64
	for id, s := range c.servers {
		if st := s.Status(); st.Leader == id {
			leads = append(leads, id)
		}
	}
	if len(leads) != 1 {
		t.Fatalf("right after the leader's Close, members %v lead; want one (the one it handed over to)", leads)
	}
	if _, err := cl.Set(ctx, "/handover", []byte("after"), -1); err != nil {
		t.Fatalf("a write after the handover: %v", err)
	}
}
