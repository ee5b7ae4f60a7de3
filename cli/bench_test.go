package cli

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// The JSON of bench, as docs/cli.md documents it (see json_test.go).
type jBench struct {
	Workload   string           `json:"workload"`
	Servers    []string         `json:"servers"`
	Path       string           `json:"path"`
	Conns      int              `json:"conns"`
	Workers    int              `json:"workers"`
	Size       int              `json:"size"`
	Keys       int              `json:"keys"`
	ReadRatio  float64          `json:"readRatio"`
	Contenders int              `json:"contenders"`
	Watchers   int              `json:"watchers"`
	Locks      int              `json:"locks"`
	Mux        int              `json:"mux"`
	LeaseMs    float64          `json:"leaseMs"`
	HoldMs     float64          `json:"holdMs"`
	Rate       float64          `json:"rate"`
	RenewRate  float64          `json:"renewRate"`
	WarmupMs   float64          `json:"warmupMs"`
	DurationMs float64          `json:"durationMs"`
	MaxOps     int64            `json:"maxOps"`
	ElapsedMs  float64          `json:"elapsedMs"`
	Ops        int64            `json:"ops"`
	OpsPerSec  float64          `json:"opsPerSec"`
	Latency    jLatency         `json:"latencyMs"`
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"errorKinds"`
	FirstError string           `json:"firstError"`
	// LateHandoffs is there for locks only.
	LateHandoffs *int64 `json:"lateHandoffs"`
	ByOp         map[string]struct {
		Ops       int64    `json:"ops"`
		OpsPerSec float64  `json:"opsPerSec"`
		Latency   jLatency `json:"latencyMs"`
	} `json:"byOp"`
}

type jLatency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// ordered says what is wrong with l, if anything: the percentiles must not
// decrease, and lie between the least and the greatest value.
func (l jLatency) ordered() string {
	v := []float64{l.Min, l.P50, l.P90, l.P99, l.P999, l.Max}
	if !slices.IsSorted(v) || l.Max <= 0 || l.Mean < l.Min || l.Mean > l.Max {
		return "latencies out of order: " + fmtFloats(v) + ", mean " + strconv.FormatFloat(l.Mean, 'f', -1, 64)
	}
	return ""
}

func fmtFloats(v []float64) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return "min p50 p90 p99 p99.9 max = " + strings.Join(s, " ")
}

// small is a short run with little load, so that the tests stay quick: it
// ends after 40 ops, or 20s if the server stalls (the machine may be busy
// with other tests, and a loaded disk can hold an fsync for a second).
var small = []string{"--ops", "40", "--duration", "20s", "--warmup", "50ms", "--conns", "2", "--workers", "4",
	"--keys", "16", "--contenders", "3", "--watchers", "3", "--size", "64"}

func TestBenchEachWorkloadReportsItsLoad(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	c := dial(t, addr)
	for _, tc := range []struct {
		workload       string
		extra          []string
		byOp           []string // the kinds of op its report times
		minOps, maxOps int64
	}{
		{"set", nil, []string{"set"}, 40, 40},
		{"get", nil, []string{"get"}, 40, 40},
		{"create", nil, []string{"create"}, 40, 40},
		{"mixed", []string{"--read-ratio", "0.5"}, []string{"get", "set"}, 40, 40},
		// Waits for the lock that the end of the run cuts short do not count.
		{"lock", nil, []string{"acquire", "release"}, 1, 40},
		// 4 locks of 2 holders each, leased: the handoffs are timed too.
		{"locks", []string{"--locks", "4", "--contenders", "2", "--lease", "5s"}, []string{"acquire", "release", "handoff"}, 1, 40},
		// Holders that renew their leases while they hold: the renewals are timed.
		{"locks", []string{"--locks", "4", "--contenders", "1", "--lease", "5s", "--hold", "100ms", "--renew-rate", "200"}, []string{"acquire", "release", "renew"}, 1, 40},
		// A write counts for its 3 notifications.
		{"watch", nil, []string{"notify", "set"}, 40, 42},
		{"session", nil, []string{"session", "connect", "close"}, 40, 40},
	} {
		t.Run(tc.workload+" prints a sane JSON report and leaves nothing behind", func(t *testing.T) {
			r := arbor(t, addr, append(append([]string{"bench", tc.workload, "-o", "json"}, small...), tc.extra...)...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("bench: %v", r)
			}
			rep := decode[jBench](t, r.stdout)
			if rep.Workload != tc.workload || rep.Ops < tc.minOps || rep.Ops > tc.maxOps || rep.OpsPerSec <= 0 ||
				rep.Errors != 0 || len(rep.ErrorKinds) != 0 || rep.FirstError != "" {
				t.Errorf("report %+v: want %d to %d ops and no errors", rep, tc.minOps, tc.maxOps)
			}
			if rep.ElapsedMs <= 0 || rep.ElapsedMs > 20_000 || rep.DurationMs != 20_000 || rep.WarmupMs != 50 || rep.MaxOps != 40 {
				t.Errorf("measured %v ms of a phase of %v ms or %d ops after a %v ms warmup",
					rep.ElapsedMs, rep.DurationMs, rep.MaxOps, rep.WarmupMs)
			}
			if got := float64(rep.Ops) / rep.ElapsedMs * 1000; got < rep.OpsPerSec*0.99 || got > rep.OpsPerSec*1.01 {
				t.Errorf("%d ops in %v ms is %v ops/s, not the %v reported", rep.Ops, rep.ElapsedMs, got, rep.OpsPerSec)
			}
			if msg := rep.Latency.ordered(); msg != "" {
				t.Error(msg)
			}
			var names []string
			for name, op := range rep.ByOp {
				names = append(names, name)
				if msg := op.Latency.ordered(); op.Ops <= 0 || msg != "" {
					t.Errorf("%s: %d ops; %s", name, op.Ops, msg)
				}
			}
			if slices.Sort(names); !slices.Equal(names, slices.Sorted(slices.Values(tc.byOp))) {
				t.Errorf("byOp has %v, want %v", names, tc.byOp)
			}
			if late := rep.LateHandoffs; (late != nil) != (tc.workload == "locks") || late != nil && (*late < 0 || *late > rep.ByOp["handoff"].Ops) {
				t.Errorf("lateHandoffs %v of %d handoffs", late, rep.ByOp["handoff"].Ops)
			}
			if wantMux := map[bool]int{true: 16}[tc.workload == "locks"]; rep.Mux != wantMux {
				t.Errorf("mux %d, want %d: the locks workload's sessions share 16 connections by default", rep.Mux, wantMux)
			}
			if !strings.HasPrefix(rep.Path, "/bench/"+tc.workload+"-") {
				t.Errorf("the run's node is %q", rep.Path)
			}
			if ok, _, err := c.Exists(context.Background(), "/bench"); ok || err != nil {
				t.Errorf("/bench is still there after the run (%v)", err)
			}
		})
		t.Run(tc.workload+" prints a sane text report", func(t *testing.T) {
			r := arbor(t, addr, append(append([]string{"bench", tc.workload}, small...), tc.extra...)...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("bench: %v", r)
			}
			checkBenchText(t, r.stdout)
			if ok, _, err := c.Exists(context.Background(), "/bench"); ok || err != nil {
				t.Errorf("/bench is still there after the run (%v)", err)
			}
		})
	}
}

var (
	throughputLine = regexp.MustCompile(`(?m)^throughput  (\d+) ops/s \((\d+) `)
	latencyLine    = regexp.MustCompile(`(?m)^latency     p50 ([\d.]+), p90 ([\d.]+), p99 ([\d.]+), p99\.9 ([\d.]+) \(min ([\d.]+), mean [\d.]+, max ([\d.]+)\) ms$`)
)

// checkBenchText checks the text report: N ops/s with N > 0, latencies in
// order, no errors.
func checkBenchText(t *testing.T, out string) {
	t.Helper()
	m := throughputLine.FindStringSubmatch(out)
	if m == nil || m[1] == "0" || m[2] == "0" {
		t.Errorf("no throughput above 0 in %q", out)
	}
	m = latencyLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no latency line in %q", out)
	}
	var v []float64
	for _, s := range []string{m[5], m[1], m[2], m[3], m[4], m[6]} {
		f, _ := strconv.ParseFloat(s, 64)
		v = append(v, f)
	}
	if !slices.IsSorted(v) {
		t.Errorf("latencies out of order: %s", fmtFloats(v))
	}
	if !strings.Contains(out, "\nerrors      0\n") {
		t.Errorf("errors in %q", out)
	}
}

func TestBenchRefusesBadFlagsWithStatus2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{},
		{"nosuch"},
		{"set", "get"},
		{"set", "--conns", "0"},
		{"set", "--workers", "-1"},
		{"set", "--workers", "100000"},
		{"set", "--size", "-1"},
		{"set", "--keys", "0"},
		{"mixed", "--read-ratio", "1.5"},
		{"set", "--duration", "0"},
		{"set", "--duration", "soon"},
		{"set", "--warmup", "-1s"},
		{"set", "--ops", "-5"},
		{"set", "--prefix", "bench"},
		{"set", "--prefix", "/"},
		{"set", "--prefix", "/bench/"},
		{"lock", "--contenders", "0"},
		{"locks", "--locks", "0"},
		{"locks", "--locks", "10000", "--contenders", "16"},
		{"locks", "--lease", "100ms"},
		{"locks", "--hold", "-1s"},
		{"locks", "--rate", "-3"},
		{"locks", "--renew-rate", "-1"},
		{"locks", "--renew-rate", "100", "--hold", "1s"},
		{"locks", "--renew-rate", "100", "--lease", "5s"},
		{"set", "--renew-rate", "100", "--lease", "5s", "--hold", "1s"},
		{"locks", "--storm-after", "1s", "--storm-member", "127.0.0.1:1"},
		{"locks", "--storm-after", "1s", "--storm-pid", "1"},
		{"locks", "--storm-member", "127.0.0.1:1", "--storm-pid", "1"},
		{"locks", "--storm-after", "20s", "--storm-member", "127.0.0.1:1", "--storm-pid", "1"},
		{"set", "--storm-after", "1s", "--storm-member", "127.0.0.1:1", "--storm-pid", "1"},
		{"watch", "--watchers", "0"},
		{"set", "--nosuch"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// No server: the flags are refused before any connection.
			r := arbor(t, "127.0.0.1:1", append([]string{"bench"}, args...)...)
			if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "Run 'arbor bench --help' for usage.") {
				t.Errorf("got %v, want exit 2 and a usage hint", r)
			}
		})
	}
}

func TestBenchOpsEndsTheMeasuredPhase(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	start := time.Now()
	out := must(t, addr, "bench", "get", "-o", "json", "--ops", "200", "--duration", "20s", "--warmup", "0",
		"--conns", "2", "--workers", "4", "--keys", "16")
	rep := decode[jBench](t, out)
	if rep.Ops != 200 || rep.MaxOps != 200 || rep.Errors != 0 {
		t.Errorf("%d ops, %d errors with --ops 200", rep.Ops, rep.Errors)
	}
	if took := time.Since(start); took > 10*time.Second || rep.ElapsedMs > 10_000 {
		t.Errorf("the run took %v (%v ms measured): --ops did not end it", took, rep.ElapsedMs)
	}
}

func TestBenchKeepsTheRunsNodesWithKeep(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	c := dial(t, addr)
	ctx := context.Background()
	if _, err := c.Create(ctx, "/load", []byte("mine"), client.Persistent); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/load/other", nil, client.Persistent); err != nil {
		t.Fatal(err)
	}
	rep := decode[jBench](t, must(t, addr, "bench", "set", "-o", "json", "--prefix", "/load", "--keep",
		"--ops", "20", "--warmup", "0", "--conns", "1", "--workers", "2", "--keys", "5"))
	names, _, err := c.Children(ctx, rep.Path)
	if err != nil || len(names) != 5 {
		t.Errorf("the run's node %s has %v (%v), want its 5 keys", rep.Path, names, err)
	}

	// Without --keep, the run's node goes, and a prefix that was there stays.
	rep = decode[jBench](t, must(t, addr, "bench", "set", "-o", "json", "--prefix", "/load",
		"--ops", "20", "--warmup", "0", "--conns", "1", "--workers", "2", "--keys", "5"))
	if ok, _, _ := c.Exists(ctx, rep.Path); ok {
		t.Errorf("%s is still there", rep.Path)
	}
	names, _, err = c.Children(ctx, "/load")
	if err != nil || len(names) != 2 || !slices.Contains(names, "other") {
		t.Errorf("/load has %v (%v), want other and the kept run", names, err)
	}
}

// progressLine is what --progress prints each second.
var progressRE = regexp.MustCompile(`^bench (\w+): (warmup|measure) \d+s, (\d+) ops, \d+ ops/s$`)

func TestBenchProgressGoesToStderr(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	r := arbor(t, addr, "bench", "get", "--progress", "--duration", "1200ms", "--warmup", "0",
		"--conns", "1", "--workers", "2", "--keys", "4")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if m := progressRE.FindStringSubmatch(lines[0]); m == nil || m[1] != "get" || m[2] != "measure" {
		t.Errorf("stderr %q, want a progress line of the measured phase", r.stderr)
	}
	for _, line := range lines[1:] {
		// The server may have stalled for the whole second (see small).
		if !progressRE.MatchString(line) && line != "arbor: no get op succeeded" {
			t.Errorf("stderr has %q", line)
		}
	}
	if !throughputLine.MatchString(r.stdout) {
		t.Errorf("no report in %q", r.stdout)
	}
}

func TestBenchInterruptedReportsWhatItMeasured(t *testing.T) {
	t.Parallel()
	addr, _ := startServer(t)
	c := dial(t, addr)
	b := start(t, addr, "bench", "set", "-o", "json", "--progress", "--duration", "60s", "--warmup", "0",
		"--conns", "1", "--workers", "2", "--keys", "4")
	waitFor(t, "progress with ops done", func() bool {
		for _, line := range strings.Split(b.stderr.String(), "\n") {
			if m := progressRE.FindStringSubmatch(line); m != nil && m[3] != "0" {
				return true
			}
		}
		return false
	})
	if code := b.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit %d; stderr %q", code, b.stderr)
	}
	rep := decode[jBench](t, b.stdout.String())
	if rep.Ops <= 0 || rep.ElapsedMs >= 60_000 || rep.Errors != 0 {
		t.Errorf("report %+v", rep)
	}
	if ok, _, _ := c.Exists(context.Background(), "/bench"); ok {
		t.Error("/bench is still there")
	}
}

func TestBenchWithoutAServerFails(t *testing.T) {
	t.Parallel()
	r := arbor(t, "127.0.0.1:1", "bench", "set", "--timeout", "300ms")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach 127.0.0.1:1") {
		t.Errorf("got %v, want exit 1: cannot reach", r)
	}
}
