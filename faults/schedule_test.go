package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultKind is one kind of fault the nemesis injects.
type faultKind int

const (
	faultKillLeader    faultKind = iota // kill -9 the leader (and, in larger clusters, maybe another), restart it
	faultKill                           // kill -9 a minority of members, restart them
	faultPauseLeader                    // SIGSTOP the leader for longer than a session timeout, then SIGCONT
	faultPause                          // SIGSTOP a minority of members, likewise
	faultIsolateLeader                  // cut the leader (and maybe others) off from the rest, both ways
	faultIsolate                        // cut a minority off from the rest, both ways
	faultOneWay                         // cut a minority's links in one direction only
	faultLoss                           // drop a share of the messages on a minority's links
	faultDelay                          // delay every message on every link
	faultCrashAll                       // kill -9 every member, restart them all
	faultDiskFull                       // fill a minority's disks (writes fail with ENOSPC), then free them
	numFaultKinds

	// machineStall and memberStall are no faults the nemesis injects: the
	// test process, or a member, stood still for a while (stallMonitor).
	machineStall = numFaultKinds
	memberStall  = numFaultKinds + 1
	leaderless   = numFaultKinds + 2 // no leader for a while (stallMonitor)
)

var faultNames = [numFaultKinds]string{
	"kill-leader", "kill", "pause-leader", "pause", "isolate-leader", "isolate",
	"one-way", "loss", "delay", "crash-all", "disk-full",
}

func (k faultKind) String() string {
	switch k {
	case machineStall:
		return "machine-stall"
	case memberStall:
		return "member-stall"
	case leaderless:
		return "no-leader"
	}
	return faultNames[k]
}

// faultWeights: how often the schedule draws each kind. The leader is the
// most frequent target.
var faultWeights = [numFaultKinds]int{4, 2, 2, 1, 2, 1, 1, 2, 1, 1, 2}

// fault is one step of a schedule: everything about it that is random,
// drawn from the seed. Which member is "the leader" is found when the step
// runs.
type fault struct {
	kind  faultKind
	size  int           // members affected, 1 up to a minority
	perm  []int         // a permutation of member indexes: targets are taken from it in order
	dur   time.Duration // how long the fault lasts
	gap   time.Duration // quiet time after it
	loss  float64       // faultLoss: the share of messages dropped
	delay time.Duration // faultDelay: added to every message
	reset bool          // partitions: reset connections (true) or blackhole them; one-way: cut outgoing (true) or incoming
}

func (f fault) String() string {
	s := fmt.Sprintf("%s size=%d dur=%v", f.kind, f.size, f.dur.Round(time.Millisecond))
	switch f.kind {
	case faultLoss:
		s += fmt.Sprintf(" loss=%.2f", f.loss)
	case faultDelay:
		s += fmt.Sprintf(" delay=%v", f.delay.Round(time.Millisecond))
	case faultIsolate, faultIsolateLeader:
		s += map[bool]string{true: " reset", false: " blackhole"}[f.reset]
	case faultOneWay:
		s += map[bool]string{true: " outgoing", false: " incoming"}[f.reset]
	}
	return s
}

// schedule draws faults from a seed. Every step draws the same number of
// values whatever it turns out to be, so the same seed gives the same
// sequence of faults, however the cluster behaves meanwhile.
type schedule struct {
	rng     *rand.Rand
	n       int // members
	step    int
	crashAt int // the step that is always a crash of the whole cluster
}

func newSchedule(seed int64, n int) *schedule {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6172626f72)) // "arbor"
	return &schedule{rng: rng, n: n, crashAt: 1 + rng.IntN(3)}
}

func (s *schedule) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

func (s *schedule) next() fault {
	total := 0
	for _, w := range faultWeights {
		total += w
	}
	pick := s.rng.IntN(total)
	kind := faultKind(0)
	for ; pick >= faultWeights[kind]; kind++ {
		pick -= faultWeights[kind]
	}
	f := fault{
		kind:  kind,
		size:  1 + s.rng.IntN((s.n-1)/2),
		perm:  s.rng.Perm(s.n),
		loss:  0.05 + 0.3*s.rng.Float64(),
		delay: s.between(5*time.Millisecond, 50*time.Millisecond),
		reset: s.rng.IntN(2) == 0,
		gap:   s.between(300*time.Millisecond, 1500*time.Millisecond),
	}
	short := s.between(200*time.Millisecond, 2*time.Second)
	pause := sessionTimeout + s.between(500*time.Millisecond, 2*time.Second)
	cut := s.between(time.Second, 4*time.Second)
	if s.step == s.crashAt {
		f.kind = faultCrashAll
	}
	s.step++
	switch f.kind {
	case faultKillLeader, faultKill, faultCrashAll:
		f.dur = short
	case faultPauseLeader, faultPause:
		f.dur = pause
	default:
		f.dur = cut
	}
	return f
}

// window is a fault as it happened, in time since the run started.
type window struct {
	kind       faultKind
	members    []uint64
	start, end time.Duration
}

// nemesis injects a schedule's faults into a cluster, one at a time, and
// records when each was in force.
type nemesis struct {
	c     *cluster
	sched *schedule
	clock *clock
	logf  func(format string, args ...any)

	// onCrashRecovered runs after each crash of the whole cluster, once a
	// leader is back: the durability check.
	onCrashRecovered func(ctx context.Context)

	mu      sync.Mutex // guards windows
	windows []window
}

// run injects faults until ctx ends or until the time is up.
func (n *nemesis) run(ctx context.Context, until time.Time) {
	for ctx.Err() == nil && time.Now().Before(until) {
		f := n.sched.next()
		n.inject(ctx, f)
		// Settle before the next fault: every member is back, and a
		// leader is agreed on.
		if _, ok := n.c.waitLeader(15 * time.Second); !ok {
			n.logf("no leader 15s after %v", f)
		}
		sleep(ctx, f.gap)
	}
}

// targets resolves a fault's members: the leader first for the leader
// kinds, then members in the fault's drawn order.
func (n *nemesis) targets(f fault) []uint64 {
	var out []uint64
	if f.kind == faultKillLeader || f.kind == faultPauseLeader || f.kind == faultIsolateLeader {
		if lead, ok := n.c.leader(); ok {
			out = append(out, lead)
		}
	}
	for _, i := range f.perm {
		if len(out) >= f.size {
			break
		}
		if id := n.c.ids[i]; !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if f.kind == faultCrashAll || f.kind == faultDelay {
		out = slices.Clone(n.c.ids)
	}
	return out
}

func (n *nemesis) inject(ctx context.Context, f fault) {
	ids := n.targets(f)
	w := window{kind: f.kind, members: ids, start: n.clock.now()}
	n.logf("%v fault %v on %v", w.start.Round(time.Millisecond), f, ids)
	c := n.c
	others := func(id uint64) []uint64 {
		var out []uint64
		for _, o := range c.ids {
			if !slices.Contains(ids, o) {
				out = append(out, o)
			}
		}
		return out
	}
	switch f.kind {
	case faultKillLeader, faultKill, faultCrashAll:
		for _, id := range ids {
			c.kill(id)
		}
		sleep(ctx, f.dur)
		for _, id := range ids {
			c.start(id)
		}
	case faultDiskFull:
		// Each member stops at its first write. Halfway through, it is
		// started again, as a supervisor would, and stops again: its store
		// cannot even be opened on a full disk. Once the disk has room it
		// is started for good.
		for _, id := range ids {
			c.fillDisk(id)
		}
		sleep(ctx, f.dur/2)
		for _, id := range ids {
			if running, _ := c.state(id); running {
				n.logf("%v member %d still runs on its full disk", n.clock.now().Round(time.Millisecond), id)
			}
			c.start(id)
		}
		sleep(ctx, f.dur/2)
		for _, id := range ids {
			if running, _ := c.state(id); running {
				n.logf("%v member %d still runs on its full disk", n.clock.now().Round(time.Millisecond), id)
			}
			c.freeDisk(id)
		}
	case faultPauseLeader, faultPause:
		for _, id := range ids {
			c.pause(id)
		}
		sleep(ctx, f.dur)
		for _, id := range ids {
			c.resume(id)
		}
	case faultIsolateLeader, faultIsolate:
		mode := map[bool]linkMode{true: linkReset, false: linkBlackhole}[f.reset]
		for _, id := range ids {
			for _, o := range others(id) {
				c.links[[2]uint64{id, o}].set(mode, 0, 0)
				c.links[[2]uint64{o, id}].set(mode, 0, 0)
			}
		}
		sleep(ctx, f.dur)
		c.heal()
	case faultOneWay:
		for _, id := range ids {
			for _, o := range others(id) {
				key := [2]uint64{o, id}
				if f.reset {
					key = [2]uint64{id, o}
				}
				c.links[key].set(linkBlackhole, 0, 0)
			}
		}
		sleep(ctx, f.dur)
		c.heal()
	case faultLoss:
		for _, id := range ids {
			for _, o := range others(id) {
				c.links[[2]uint64{id, o}].set(linkPass, f.loss, 0)
				c.links[[2]uint64{o, id}].set(linkPass, f.loss, 0)
			}
		}
		sleep(ctx, f.dur)
		c.heal()
	case faultDelay:
		for _, l := range c.links {
			l.set(linkPass, 0, f.delay)
		}
		sleep(ctx, f.dur)
		c.heal()
	}
	w.end = n.clock.now()
	n.mu.Lock()
	n.windows = append(n.windows, w)
	n.mu.Unlock()
	if f.kind == faultCrashAll {
		if _, ok := c.waitLeader(30 * time.Second); !ok {
			n.logf("no leader 30s after restarting every member")
			return
		}
		if n.onCrashRecovered != nil {
			n.onCrashRecovered(ctx)
		}
	}
}

// faultWindows returns the faults injected so far.
func (n *nemesis) faultWindows() []window {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.windows)
}

// summary counts the faults by kind.
func summarize(ws []window) string {
	var counts [numFaultKinds]int
	for _, w := range ws {
		counts[w.kind]++
	}
	var parts []string
	for k, n := range counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", faultKind(k), n))
		}
	}
	return fmt.Sprintf("%d faults (%s)", len(ws), strings.Join(parts, " "))
}

// clock gives times since the start of a run (monotonic).
type clock struct{ start time.Time }

func (c *clock) now() time.Duration { return time.Since(c.start) }

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func TestTheSameSeedGivesTheSameSchedule(t *testing.T) {
	draw := func(seed int64) []string {
		s := newSchedule(seed, 5)
		var out []string
		for range 50 {
			f := s.next()
			out = append(out, fmt.Sprint(f, f.perm, f.gap))
		}
		return out
	}
	a, b, other := draw(42), draw(42), draw(43)
	if !slices.Equal(a, b) {
		t.Fatal("seed 42 gave two different schedules")
	}
	if slices.Equal(a, other) {
		t.Fatal("seeds 42 and 43 gave the same schedule")
	}
	kinds := map[string]bool{}
	crashes := 0
	s := newSchedule(42, 3)
	for i := range 400 {
		f := s.next()
		kinds[f.kind.String()] = true
		if f.kind == faultCrashAll {
			crashes++
		}
		if i == s.crashAt && f.kind != faultCrashAll {
			t.Fatalf("step %d is %v, want the crash of every member", i, f.kind)
		}
		if f.size != 1 {
			t.Fatalf("a 3-member schedule affects %d members at once", f.size)
		}
	}
	if len(kinds) != int(numFaultKinds) || crashes == 0 {
		t.Fatalf("400 steps drew only %v", kinds)
	}
}
