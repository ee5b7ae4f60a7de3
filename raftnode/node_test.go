package raftnode

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap/zaptest"
)

// counter is a state machine that sums the uint64s proposed to it.
type counter struct {
	mu       sync.Mutex
	sum      uint64
	applied  uint64
	restores int
}

func (c *counter) Apply(index uint64, payload []byte) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum += binary.BigEndian.Uint64(payload)
	c.applied = index
	return c.sum
}

func (c *counter) Snapshot() (func(io.Writer) error, error) {
	sum := c.value()
	return func(w io.Writer) error {
		_, err := w.Write(binary.BigEndian.AppendUint64(nil, sum))
		return err
	}, nil
}

func (c *counter) Restore(r io.Reader, index uint64) error {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum, c.applied = binary.BigEndian.Uint64(b[:]), index
	c.restores++
	return nil
}

func (c *counter) value() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum
}

func startNode(t *testing.T, dir string, sm StateMachine, every uint64) *Node {
	t.Helper()
	n, err := Start(Config{ID: 1, Dir: dir, SnapshotEvery: every, CatchUpEntries: 5, TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t)}, sm)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func add(t *testing.T, n *Node, v uint64) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	o := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, v)).Wait(ctx)
	if o.Err != nil {
		t.Fatalf("propose %d: %v", v, o.Err)
	}
	return o
}

func TestProposeReturnsTheApplyResult(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), &counter{}, 0)
	defer n.Stop()
	var last uint64
	for i := uint64(1); i <= 10; i++ {
		o := add(t, n, i)
		if o.Index <= last {
			t.Fatalf("index %d after %d: not increasing", o.Index, last)
		}
		last = o.Index
		if want := i * (i + 1) / 2; o.Result.(uint64) != want {
			t.Fatalf("result %v, want %d", o.Result, want)
		}
	}
	if n.Applied() != last {
		t.Fatalf("Applied() = %d, want %d", n.Applied(), last)
	}
}

func TestConcurrentProposalsAllApplyOnce(t *testing.T) {
	t.Parallel()
	sm := &counter{}
	n := startNode(t, t.TempDir(), sm, 0)
	defer n.Stop()
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				add(t, n, 1)
			}
		}()
	}
	wg.Wait()
	if got := sm.value(); got != 800 {
		t.Fatalf("sum %d, want 800", got)
	}
}

func TestRestartReplaysTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNode(t, dir, &counter{}, 0)
	for i := 0; i < 20; i++ {
		add(t, n, 2)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	sm := &counter{}
	n = startNode(t, dir, sm, 0)
	defer n.Stop()
	if err := n.WaitApplied(context.Background(), 20); err != nil {
		t.Fatal(err)
	}
	if got := sm.value(); got != 40 {
		t.Fatalf("after restart the sum is %d, want 40", got)
	}
	if o := add(t, n, 1); o.Result.(uint64) != 41 {
		t.Fatalf("after restart a new proposal gives %v, want 41", o.Result)
	}
}

func TestTheCommitIndexIsNeverBehindWhatWasAppliedNorLostOnRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNode(t, dir, &counter{}, 0)
	var last uint64
	for i := 0; i < 5; i++ {
		last = add(t, n, 1).Index
		if c, a := n.Commit(), n.Applied(); c < last || c < a {
			t.Fatalf("commit %d, applied %d, after an entry at %d was applied", c, a, last)
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, dir, &counter{}, 0)
	defer n.Stop()
	if c := n.Commit(); c < last {
		t.Fatalf("after restart the commit index is %d, it was %d", c, last)
	}
}

func TestSnapshotCompactsAndRestartRestoresIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNode(t, dir, &counter{}, 10)
	for i := 0; i < 35; i++ {
		add(t, n, 1)
	}
	// (The snapshot, and the compaction after it, run in the background.)
	waitFor(t, "the log compacted", func() bool { first, _ := n.storage.FirstIndex(); return first > 1 })
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	sm := &counter{}
	n = startNode(t, dir, sm, 10)
	defer n.Stop()
	if sm.restores != 1 {
		t.Fatalf("restored %d snapshots at start, want 1", sm.restores)
	}
	if err := n.WaitApplied(context.Background(), 36); err != nil {
		t.Fatal(err)
	}
	if got := sm.value(); got != 35 {
		t.Fatalf("after restart the sum is %d, want 35", got)
	}
}

func TestReadIndexWaitsForTheApplyOfEarlierWrites(t *testing.T) {
	t.Parallel()
	sm := &counter{}
	n := startNode(t, t.TempDir(), sm, 0)
	defer n.Stop()
	add(t, n, 5)
	if err := n.ReadIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sm.value() != 5 {
		t.Fatalf("read after ReadIndex sees %d, want 5", sm.value())
	}
}

func TestStopFailsWhatIsPending(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), &counter{}, 0)
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	o := n.Propose(context.Background(), binary.BigEndian.AppendUint64(nil, 1)).Wait(context.Background())
	if !errors.Is(o.Err, ErrStopped) {
		t.Fatalf("propose after stop: %v, want ErrStopped", o.Err)
	}
	if err := n.ReadIndex(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("ReadIndex after stop: %v, want ErrStopped", err)
	}
}

// gatedCounter is a counter whose snapshots' writes wait for its gate, or
// fail.
type gatedCounter struct {
	counter
	entered chan struct{} // receives once per snapshot's write
	gate    chan struct{} // a write waits until it is closed
	err     error         // what a write returns
}

func (g *gatedCounter) Snapshot() (func(io.Writer) error, error) {
	write, err := g.counter.Snapshot()
	if err != nil {
		return nil, err
	}
	return func(w io.Writer) error {
		g.entered <- struct{}{}
		<-g.gate
		if g.err != nil {
			return g.err
		}
		return write(w)
	}, nil
}

func TestWritesAreAppliedWhileASnapshotIsWritten(t *testing.T) {
	t.Parallel()
	sm := &gatedCounter{entered: make(chan struct{}, 16), gate: make(chan struct{})}
	n := startNode(t, t.TempDir(), sm, 5)
	defer n.Stop()
	defer close(sm.gate)
	added := uint64(0)
	for snapshotting := false; !snapshotting; {
		if added == 5 {
			t.Fatal("no snapshot after 5 entries")
		}
		add(t, n, 1) // answered before the snapshot that follows it starts
		added++
		select {
		case <-sm.entered:
			snapshotting = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	// The snapshot's write is stuck; entries are committed, applied and
	// answered all the same, and no second snapshot starts meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 10; i++ {
		if o := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 1)).Wait(ctx); o.Err != nil {
			t.Fatalf("a write while a snapshot is written: %v", o.Err)
		}
	}
	if got := sm.value(); got != added+10 {
		t.Fatalf("sum %d, want %d", got, added+10)
	}
	if snap := n.storage.snapshotIndex(); snap != 0 {
		t.Fatalf("a snapshot at %d is stored while the first is still written", snap)
	}
	select {
	case <-sm.entered:
		t.Fatal("a second snapshot started while the first was written")
	default:
	}
	sm.gate <- struct{}{} // let this snapshot finish; later ones pass once the gate closes
	for n.storage.snapshotIndex() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the snapshot was not stored once its write went on")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAFailedSnapshotStopsTheNode(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	sm := &gatedCounter{entered: make(chan struct{}, 16), gate: make(chan struct{}), err: boom}
	close(sm.gate)
	n := startNode(t, t.TempDir(), sm, 3)
	defer n.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		if o := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 1)).Wait(ctx); o.Err != nil {
			break
		}
	}
	select {
	case <-n.Done():
	case <-ctx.Done():
		t.Fatal("the node still runs after its snapshot failed")
	}
	if err := n.Err(); !errors.Is(err, boom) {
		t.Fatalf("Err() = %v, want the snapshot's error", err)
	}
	if o := n.Propose(ctx, binary.BigEndian.AppendUint64(nil, 1)).Wait(ctx); !errors.Is(o.Err, boom) {
		t.Fatalf("propose after the failure: %v, want the snapshot's error", o.Err)
	}
}

// TestLargeEntriesAreSnapshottedByBytesAndNotHeldInMemory writes entries
// of 8 KiB with snapshots due only every 10,000 entries: the log's bytes
// make the snapshots, the entries kept behind them are bounded in bytes,
// and memory holds only the newest entries.
func TestLargeEntriesAreSnapshottedByBytesAndNotHeldInMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{ID: 1, Dir: dir, SnapshotEvery: 10000, SnapshotBytes: 64 << 10, CatchUpEntries: 1000, CatchUpBytes: 16 << 10,
		LogCacheBytes: 20 << 10, TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t)}
	n, err := Start(cfg, &counter{})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 8<<10)
	binary.BigEndian.PutUint64(payload, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 40 {
		if o := n.Propose(ctx, payload).Wait(ctx); o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	if snap := n.storage.snapshotIndex(); snap < 8 {
		t.Errorf("the last snapshot is at %d: 64 KiB of 8 KiB entries should have made one by entry 8", snap)
	}
	first, _ := n.storage.FirstIndex()
	if kept := n.storage.LogBytes(first-1, n.storage.snapshotIndex()); kept > 16<<10 {
		t.Errorf("%d bytes of entries kept behind the snapshot, over the 16 KiB asked", kept)
	}
	if cached := n.storage.CachedBytes(); cached > 20<<10 {
		t.Errorf("%d bytes of entries in memory, over the 20 KiB asked", cached)
	}
	must(t, n.Stop())
	sm := &counter{}
	if n, err = Start(cfg, sm); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if err := n.WaitApplied(ctx, 41); err != nil {
		t.Fatal(err)
	}
	if got := sm.value(); got != 40 {
		t.Fatalf("after a restart the sum is %d, want 40", got)
	}
}

// A leader whose proposals not yet committed are over UncommittedBytes
// refuses more with ErrUncommittedFull, not as if it had no leader, and
// takes them again once those commit.
func TestALeaderRefusesProposalsPastItsUncommittedBytes(t *testing.T) {
	t.Parallel()
	sm := &counter{}
	n, err := Start(Config{ID: 1, Dir: t.TempDir(), UncommittedBytes: 16 << 10,
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t)}, sm)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	add(t, n, 0) // a leader
	payload := make([]byte, 8<<10)
	binary.BigEndian.PutUint64(payload, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var refused, committed atomic.Int64
	for round := 0; round < 20 && refused.Load() == 0; round++ {
		// Proposals from many goroutines at once reach raft in one batch,
		// before the first of them commits.
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				switch o := n.Propose(ctx, payload).Wait(ctx); {
				case o.Err == nil:
					committed.Add(1)
				case errors.Is(o.Err, ErrUncommittedFull):
					refused.Add(1)
				default:
					t.Errorf("a proposal failed with %v, want nil or ErrUncommittedFull", o.Err)
				}
			})
		}
		wg.Wait()
	}
	if refused.Load() == 0 {
		t.Fatal("no proposal was refused for the uncommitted bytes")
	}
	if got := sm.value(); got != uint64(committed.Load()) {
		t.Fatalf("the state machine counted %d, but %d proposals committed", got, committed.Load())
	}
	add(t, n, 1) // room again
}

// TestAMembershipChangeDuringASnapshotGetsOneOfItsOwn: a snapshot asked
// for after a membership change (snapshotNow) while the first snapshot is
// still written follows it once it is stored, at the later index, so
// that the stored snapshot names the new membership.
func TestAMembershipChangeDuringASnapshotGetsOneOfItsOwn(t *testing.T) {
	t.Parallel()
	sm := &gatedCounter{entered: make(chan struct{}, 16), gate: make(chan struct{})}
	n := startNode(t, t.TempDir(), sm, 5)
	defer n.Stop()
	opened := false
	defer func() {
		if !opened {
			close(sm.gate)
		}
	}()
	for snapshotting := false; !snapshotting; {
		add(t, n, 1)
		select {
		case <-sm.entered:
			snapshotting = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	add(t, n, 1) // past the index being written
	want := n.Applied()
	if err := n.handOver(applyTask{snapshotNow: true}); err != nil {
		t.Fatal(err)
	}
	if err := n.waitIdle(); err != nil {
		t.Fatal(err)
	}
	close(sm.gate)
	opened = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for n.storage.snapshotIndex() < want {
		if ctx.Err() != nil {
			t.Fatalf("stored snapshot at %d, want one at %d", n.storage.snapshotIndex(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAViewTheStoreDoesNotNeedIsLetGo: the state machine's write is
// called, with a writer that fails, when a newer snapshot is stored.
func TestAViewTheStoreDoesNotNeedIsLetGo(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir(), &counter{}, 3)
	defer n.Stop()
	for range 5 {
		add(t, n, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for n.storage.snapshotIndex() < 3 {
		if ctx.Err() != nil {
			t.Fatal("no snapshot after 5 entries")
		}
		time.Sleep(5 * time.Millisecond)
	}
	calls := 0
	var got error
	cs := raftpb.ConfState{Voters: []uint64{1}}
	st, err := n.storeSnapshot(1, &cs, func(w io.Writer) error {
		calls++
		_, got = w.Write([]byte("x"))
		return got
	}, 0)
	if err != nil || st.Saved {
		t.Fatalf("storeSnapshot below the stored one = %+v, %v; want it dropped", st, err)
	}
	if calls != 1 || got == nil {
		t.Fatalf("write called %d times, its write's error %v; want once, failing", calls, got)
	}
}
