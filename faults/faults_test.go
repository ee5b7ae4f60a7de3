package faults

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

var (
	flagSeed     = flag.Int64("faults.seed", 0, "seed of the first round (0: one from the clock)")
	flagDuration = flag.Duration("faults.duration", 0, "how long to run rounds for each cluster size (0: one short round)")
	flagRound    = flag.Duration("faults.round", 0, "faults per round (default 25s with 3 members and 20s with 5; 60s when -faults.duration is set)")
	flagOut      = flag.String("faults.out", "", "directory for the data, logs and failing histories of failed rounds (default: a new one under $TMPDIR)")
)

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		round time.Duration
	}{
		{"three members", 3, 25 * time.Second},
		{"five members", 5, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			round := tc.round
			if *flagDuration > 0 {
				round = time.Minute
			}
			if *flagRound > 0 {
				round = *flagRound
			}
			seed := *flagSeed
			if seed == 0 {
				seed = time.Now().UnixNano() % 1_000_000_000
			}
			end := time.Now().Add(*flagDuration)
			var total roundStats
			for r := 0; r == 0 || time.Now().Add(round/2).Before(end); r++ {
				st := runRound(t, tc.n, seed+int64(r), round)
				total.add(st)
				if t.Failed() {
					break
				}
			}
			t.Logf("%d members, %d rounds: %s", tc.n, total.rounds, total)
		})
	}
}

// roundStats sums up rounds.
type roundStats struct {
	rounds, ops, faults, violations int
}

func (s *roundStats) add(o roundStats) {
	s.rounds += o.rounds
	s.ops += o.ops
	s.faults += o.faults
	s.violations += o.violations
}

func (s roundStats) String() string {
	return fmt.Sprintf("%d register operations, %d faults, %d violations", s.ops, s.faults, s.violations)
}

// runRound runs one cluster of n members through length of faults drawn
// from seed, with every workload, and then runs every check.
func runRound(t *testing.T, n int, seed int64, length time.Duration) roundStats {
	t.Helper()
	dir := *flagOut
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(dir, fmt.Sprintf("arbor-faults-%d-seed%d-", n, seed))
	if err != nil {
		t.Fatal(err)
	}
	sub := strings.ReplaceAll(t.Name(), " ", "_")
	replay := fmt.Sprintf("go test -race ./faults -run '%s' -faults.seed=%d -faults.round=%v", sub, seed, length)
	t.Logf("seed %d: %d members, %v of faults (replay: %s)", seed, n, length, replay)

	var vmu sync.Mutex
	var violations int
	violate := func(format string, args ...any) {
		vmu.Lock()
		violations++
		vmu.Unlock()
		t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d failed: data, member logs and any failing history are in %s; replay: %s", seed, dir, replay)
		} else {
			os.RemoveAll(dir)
		}
	}()

	c := startCluster(t, dir, n)
	clk := &clock{start: time.Now()}
	t.Logf("seed %d: time 0 is %s", seed, clk.start.UTC().Format("15:04:05.000"))
	f := &fleet{c: c, clock: clk, log: fileLogger(t, filepath.Join(dir, "clients.log"))}
	defer f.closeAll()
	setupCtx, cancelSetup := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelSetup()
	if err := makeRoots(setupCtx, f, "/lin", "/dur", "/sess", "/lockers"); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	reg := newRegisterWorkload(f, n+1)
	locks := newLockWorkload(f, 3)
	sess := newSessionWorkload(f, 3)
	watch := &watchWorkload{fleet: f, keys: func() string { return reg.key(0) }, max: 1 << 20}
	dur := &durabilityWorkload{fleet: f, max: 1 << 20}
	replicas := &replicaWatch{c: c}
	stalls := &stallMonitor{clock: clk, c: c}
	stalls.run(ctx, &wg)
	reg.run(ctx, &wg, seed)
	locks.run(ctx, &wg, seed)
	sess.run(ctx, &wg)
	watch.run(ctx, &wg, seed)
	dur.run(ctx, &wg)
	replicas.run(ctx, &wg)

	nem := &nemesis{c: c, sched: newSchedule(seed, n), clock: clk, logf: t.Logf,
		onCrashRecovered: func(ctx context.Context) { dur.afterCrash(ctx, violate) }}
	nem.run(ctx, time.Now().Add(length))
	// Every fault is over; let the workloads run on a healthy cluster for
	// a moment before stopping them.
	if _, ok := c.waitLeader(30 * time.Second); !ok {
		violate("no leader 30s after the last fault")
	}
	sleep(ctx, time.Second)
	stop()
	wg.Wait()
	windows := nem.faultWindows()

	for done := false; !done; {
		select {
		case crash := <-c.crashes:
			violate("%s", crash)
		default:
			done = true
		}
	}
	checkCtx, cancelCheck := context.WithTimeout(context.Background(), time.Minute)
	defer cancelCheck()
	report := []string{summarize(windows)}
	report = append(report, "sessions: "+sess.check(checkCtx, violate))
	report = append(report, "replicas: "+replicas.check(violate))
	report = append(report, "durability: "+dur.final(checkCtx, c, violate))
	f.closeAll()
	report = append(report, "clients: "+f.checkExpiries(append(windows, stalls.windows()...), violate))
	report = append(report, "machine: "+stalls.summary())
	report = append(report, "lock: "+locks.check(violate))
	report = append(report, "watches: "+watch.check(violate))
	reg.check(max(30*time.Second, length/2), dir, violate)
	ops, opText := reg.summary()
	report = append(report, fmt.Sprintf("register: %d operations in a linearizable history:%s", ops, opText))
	frames, dropped := c.linkStats()
	report = append(report, fmt.Sprintf("links: %d peer messages, %d dropped", frames, dropped))
	t.Logf("seed %d done:\n\t%s", seed, strings.Join(report, "\n\t"))
	return roundStats{rounds: 1, ops: ops, faults: len(windows), violations: violations}
}

// fileLogger logs at info level to path.
func fileLogger(t *testing.T, path string) *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Encoding = "console"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{path}, []string{path}
	cfg.DisableStacktrace, cfg.Sampling = true, nil
	log, err := cfg.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Sync() })
	return log
}

// makeRoots creates the workloads' parent nodes.
func makeRoots(ctx context.Context, f *fleet, paths ...string) error {
	c, err := f.dial(ctx, "setup")
	if err != nil {
		return err
	}
	defer c.close()
	for _, p := range paths {
		if _, err := c.Create(ctx, p, nil, client.Persistent); err != nil && !errors.Is(err, client.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}
