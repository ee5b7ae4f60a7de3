package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// servedWindow is the longest the clients may go without a success of a
// kind (an acknowledged write, a lock granted) while a majority is up:
// four of the longest election timeouts of the clusters under test
// (20 ticks of 25 ms), room for an election, the clients' reconnects
// and their backoff.
const servedWindow = 2 * time.Second

// A five-member cluster loses two members at once, one planned and one
// not: a member is restarted as an operator does (SIGTERM, then started
// again on the same data) while another is killed with -9 and restarted
// later. It runs twice, first restarting the leader and killing a
// follower, then killing the leader and restarting a follower. Throughout,
// a writer creates nodes and three contenders take a lock and write to a
// fence with its token, and:
//
//   - while both are down, the other three acknowledge writes and grant
//     the lock;
//   - no spell of servedWindow goes by without an acknowledged write, and
//     none without a lock granted (unless the test process itself stood
//     still: that stops every client and every peer link);
//   - every acknowledged write is on every member at the end;
//   - the lock is exclusive: no fencing token twice, no two holds at once,
//     the tokens the fence accepted never go down, a later holder's token
//     is higher;
//   - no session expires (a restart and a kill allow none);
//   - the planned restart ends with exit status 0, and no member exits by
//     itself.
func TestFiveMembersServeThroughAPlannedRestartAndAKillAtOnce(t *testing.T) {
	t.Parallel()
	dir := keptDir(t)
	c := startCluster(t, dir, 5)
	clk := &clock{start: time.Now()}
	f := &fleet{c: c, clock: clk, log: fileLogger(t, filepath.Join(dir, "clients.log"))}
	defer f.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := makeRoots(ctx, f, "/dur", "/lockers"); err != nil {
		t.Fatal(err)
	}
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var wg, stallWG sync.WaitGroup
	writes := &durabilityWorkload{fleet: f, max: 1 << 20}
	locks := newLockWorkload(f, 3)
	stalls := &stallMonitor{clock: clk, c: c}
	stallCtx, stopStalls := context.WithCancel(ctx)
	defer stopStalls()
	stalls.run(stallCtx, &stallWG)
	writes.run(work, &wg)
	locks.run(work, &wg, 1)

	granted := func() []time.Duration {
		locks.mu.Lock()
		defer locks.mu.Unlock()
		var at []time.Duration
		for _, a := range locks.acqs {
			if a.err == nil {
				at = append(at, a.locked)
			}
		}
		return at
	}
	// served waits until the clients have had 50 more writes acknowledged
	// and the lock granted 10 more times.
	served := func(while string) {
		t.Helper()
		w0, l0 := len(writes.ackTimes()), len(granted())
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			w, l := len(writes.ackTimes())-w0, len(granted())-l0
			if w >= 50 && l >= 10 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: in 30s, only %d writes acknowledged and the lock granted %d times", while, w, l)
			}
		}
	}
	// rejoined waits until member id, started again, has applied what the
	// leader had applied when the wait began.
	rejoined := func(id uint64) {
		t.Helper()
		lead, ok := c.waitLeader(30 * time.Second)
		if !ok {
			t.Fatalf("no leader ")
		}
		st, err := c.status(lead)
		if err != nil {
			t.Fatalf("status of the leader: %v", err)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if mine, err := c.status(id); err == nil && mine.Leader != 0 && mine.Applied >= st.Applied {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d, started again, did not apply up to %d in 30s", id, st.Applied)
			}
		}
	}

	served("before any fault")
	from := clk.now()
	for _, leaderPlanned := range []bool{true, false} {
		lead, ok := c.waitLeader(15 * time.Second)
		if !ok {
			t.Fatalf("no leader ")
		}
		other := c.ids[(slices.Index(c.ids, lead)+1)%len(c.ids)] // a follower
		planned, killed := other, lead
		if leaderPlanned {
			planned, killed = lead, other
		}
		t.Logf("%v: member %d restarted (SIGTERM), member %d killed (-9); %d leads", clk.now().Round(time.Millisecond), planned, killed, lead)
		var stopErr error
		var both sync.WaitGroup
		both.Add(2)
		go func() { defer both.Done(); stopErr = c.stop(planned, 20*time.Second) }()
		go func() { defer both.Done(); c.kill(killed) }()
		both.Wait()
		if stopErr != nil {
			t.Errorf("the planned restart: %v", stopErr)
		}
		served(fmt.Sprintf("members %d and %d down", planned, killed))
		c.start(planned)
		rejoined(planned)
		served(fmt.Sprintf("member %d back, %d down", planned, killed))
		c.start(killed)
		rejoined(killed)
		served(fmt.Sprintf("members %d and %d back", planned, killed))
	}
	to := clk.now()
	stopWork()
	wg.Wait()

	stopStalls()
	stallWG.Wait()
	var machine []window
	for _, w := range stalls.windows() {
		if w.kind == machineStall {
			machine = append(machine, w)
		}
	}
	for _, g := range unserved(writes.ackTimes(), from, to, servedWindow, machine) {
		t.Errorf("no write was acknowledged from %v to %v", g.start.Round(time.Millisecond), g.end.Round(time.Millisecond))
	}
	for _, g := range unserved(granted(), from, to, servedWindow, machine) {
		t.Errorf("the lock was granted to nobody from %v to %v", g.start.Round(time.Millisecond), g.end.Round(time.Millisecond))
	}
	lockReport := locks.check(t.Errorf)
	if _, ok := c.converged(30 * time.Second); !ok {
		t.Errorf("the members did not converge")
	}
	writes.final(ctx, c, t.Errorf)
	f.closeAll()
	expiries := f.checkExpiries(stalls.windows(), t.Errorf)
	for done := false; !done; {
		select {
		case crash := <-c.crashes:
			t.Errorf("%s", crash)
		default:
			done = true
		}
	}
	t.Logf("from %v to %v: %d writes acknowledged, the longest wait %v; lock: %s, the longest wait %v; clients: %s; machine: %s",
		from.Round(time.Millisecond), to.Round(time.Millisecond), len(writes.ackTimes()), longestGap(writes.ackTimes(), from, to).Round(time.Millisecond),
		lockReport, longestGap(granted(), from, to).Round(time.Millisecond), expiries, stalls.summary())
}

// unserved returns the spells within [from, to] longer than d without any
// of the events at, leaving out those that overlap one of excused.
func unserved(at []time.Duration, from, to, d time.Duration, excused []window) []window {
	var out []window
	for _, g := range gaps(at, from, to) {
		if g.end-g.start <= d {
			continue
		}
		if !slices.ContainsFunc(excused, func(w window) bool { return w.start < g.end && g.start < w.end }) {
			out = append(out, g)
		}
	}
	return out
}

// longestGap is the longest spell within [from, to] without any of at.
func longestGap(at []time.Duration, from, to time.Duration) time.Duration {
	var longest time.Duration
	for _, g := range gaps(at, from, to) {
		longest = max(longest, g.end-g.start)
	}
	return longest
}

// gaps returns the spells between the events at within [from, to],
// from's and to's included.
func gaps(at []time.Duration, from, to time.Duration) []window {
	at = slices.Clone(at)
	slices.Sort(at)
	var out []window
	prev := from
	for _, e := range at {
		if e < from || e > to {
			continue
		}
		out = append(out, window{start: prev, end: e})
		prev = e
	}
	return append(out, window{start: prev, end: to})
}
