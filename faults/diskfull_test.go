package faults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A member whose disk is full must stop rather than go on without
// writing (it would acknowledge what it did not make durable), and must
// not damage its store on the way: a restart on the still full disk
// stops again, and once the disk has room the member starts, catches up
// and holds every acknowledged write. Meanwhile the other members serve.
// The disk that fills is the leader's, which sends its entries before it
// writes them.
func TestAMemberWithAFullDiskStopsAndRecoversOnceItHasRoom(t *testing.T) {
	t.Parallel()
	dir := keptDir(t)
	c := startCluster(t, dir, 3)
	clk := &clock{start: time.Now()}
	f := &fleet{c: c, clock: clk, log: fileLogger(t, filepath.Join(dir, "clients.log"))}
	defer f.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := makeRoots(ctx, f, "/dur"); err != nil {
		t.Fatal(err)
	}
	work, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	dur := &durabilityWorkload{fleet: f, max: 1 << 20}
	dur.run(work, &wg)
	acked := func() int { return len(dur.ackTimes()) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("30s and still not: %s", what)
			}
		}
	}
	down := func(id uint64) func() bool {
		return func() bool { running, _ := c.state(id); return !running }
	}
	moreWrites := func(n int) func() bool {
		from := acked()
		return func() bool { return acked() >= from+n }
	}

	waitFor("20 writes acknowledged", moreWrites(20))
	lead, ok := c.waitLeader(15 * time.Second)
	if !ok {
		t.Fatal("no leader")
	}
	c.fillDisk(lead)
	waitFor("the leader stopped on its full disk", down(lead))
	served := moreWrites(20)
	waitFor("20 writes acknowledged by the other members", served)

	// A supervisor restarts it while the disk is still full.
	c.start(lead)
	waitFor("the member restarted on its full disk stopped again", down(lead))
	if n := c.diskStops.Load(); n != 2 {
		t.Fatalf("the member stopped %d times on its full disk, want 2 (log %s)", n, c.members[lead].log)
	}

	c.freeDisk(lead) // and starts it
	waitFor("20 more writes acknowledged", moreWrites(20))
	stop()
	wg.Wait()
	if _, ok := c.converged(30 * time.Second); !ok {
		t.Fatalf("the members did not converge after the disk had room again")
	}
	dur.final(ctx, c, t.Errorf)
	select {
	case crash := <-c.crashes:
		t.Errorf("%s", crash)
	default:
	}
	t.Logf("member %d (the leader) stopped on its full disk, and again on a restart; every member holds the %d acknowledged creates", lead, len(dur.ackedNames()))
	t.Logf("its log: %s", linesWith(c.members[lead].log, noSpace))
}

// linesWith returns the lines of the file at path that hold text.
func linesWith(path, text string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, text) {
			out = append(out, l)
		}
	}
	return out
}
