package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// Report is what a run measured. It is also the JSON of `arbor bench -o
// json`, documented in docs/cli.md: fields may be added, never renamed or
// removed. Durations are in milliseconds.
type Report struct {
	Workload     string   `json:"workload"`
	Servers      []string `json:"servers"`
	Path         string   `json:"path"` // the run's node
	Conns        int      `json:"conns"`
	Workers      int      `json:"workers"`
	Size         int      `json:"size"`
	Keys         int      `json:"keys"`
	ReadRatio    float64  `json:"readRatio"`
	Linearizable bool     `json:"linearizable,omitempty"` // get, mixed: linearizable reads
	Protocol     string   `json:"protocol,omitempty"`     // "zk": the load went through ZKServers; empty: Arbor's own
	ZKServers    []string `json:"zkServers,omitempty"`
	Contenders   int      `json:"contenders"`
	Watchers     int      `json:"watchers"`
	Locks        int      `json:"locks,omitempty"`   // locks: the locks, the lease, the hold and the target rate
	Mux          int      `json:"mux,omitempty"`     // locks: the shared connections to each member that carry the sessions; 0: one each
	LeaseMs      float64  `json:"leaseMs,omitempty"` // 0: the session's
	HoldMs       float64  `json:"holdMs,omitempty"`
	Rate         float64  `json:"rate,omitempty"`      // 0: no bound
	RenewRate    float64  `json:"renewRate,omitempty"` // locks: explicit renewals asked for, per second; 0: none
	WarmupMs     float64  `json:"warmupMs"`
	DurationMs   float64  `json:"durationMs"`
	MaxOps       int64    `json:"maxOps"` // the --ops bound; 0 for none

	ElapsedMs float64 `json:"elapsedMs"` // the measured phase, as it was
	Ops       int64   `json:"ops"`       // the workload's ops that succeeded in it
	OpsPerSec float64 `json:"opsPerSec"`
	Latency   Latency `json:"latencyMs"`

	Errors     int64            `json:"errors"`     // ops that failed in the measured phase
	ErrorKinds map[string]int64 `json:"errorKinds"` // the same by kind: "connection lost", "timeout", ...
	FirstError string           `json:"firstError,omitempty"`

	// ByOp has each kind of op timed: the workload's own (set, get,
	// create, acquire, notify, session) and those that go with them (mixed:
	// get and set; lock: release; locks: release, handoff and renew;
	// watch: the writer's set; session: connect and close).
	ByOp map[string]OpReport `json:"byOp"`

	// LateHandoffs, for locks, counts the handoffs of the measured phase
	// whose next holder held more than a second after the release was
	// sent: 0 is the pass of a lock service's "a waiter is told of a
	// release within 1 s, every time". Left out for other workloads.
	LateHandoffs *int64 `json:"lateHandoffs,omitempty"`

	// Storm is what a reconnect storm did (locks with Config.Storm);
	// left out without one.
	Storm *StormReport `json:"storm,omitempty"`
	// ServerMemory is each member's memory at the end of the run, from
	// Config.ServerMetrics; left out without them.
	ServerMemory []MemberMemory `json:"serverMemory,omitempty"`
}

// OpReport is one kind of op in a Report.
type OpReport struct {
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"opsPerSec"`
	Latency   Latency `json:"latencyMs"`
}

// Latency is a distribution of latencies, in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func latencyOf(h *histogram) Latency {
	return Latency{
		P50: ms(h.quantile(0.5)), P90: ms(h.quantile(0.9)), P99: ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)), Min: ms(time.Duration(h.min)), Mean: ms(h.mean()),
		Max: ms(time.Duration(h.max)),
	}
}

// report merges what the loops recorded, once they have ended.
func (r *runner) report(ctx context.Context) (*Report, error) {
	at := r.measureAt.Load()
	if at < 0 {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted before the measured phase: %w", context.Cause(ctx))
		}
		err := errors.New("the load ended during the warmup")
		for _, rec := range r.recs {
			if rec.first != nil {
				return nil, fmt.Errorf("%w: %w", err, rec.first)
			}
		}
		return nil, err
	}
	cfg := r.cfg
	elapsed := r.end.Sub(r.start.Add(time.Duration(at)))
	rep := &Report{
		Workload: cfg.Workload, Servers: cfg.Servers, Path: r.path,
		Conns: cfg.Conns, Mux: cfg.Mux, Workers: cfg.Workers, Size: cfg.Size, Keys: cfg.Keys, ReadRatio: cfg.ReadRatio, Linearizable: cfg.Linearizable,
		Contenders: cfg.Contenders, Watchers: cfg.Watchers,
		WarmupMs: ms(cfg.Warmup), DurationMs: ms(cfg.Duration), MaxOps: cfg.Ops,
		ElapsedMs: ms(elapsed), ErrorKinds: map[string]int64{}, ByOp: map[string]OpReport{},
	}
	if cfg.Protocol == "zk" {
		rep.Protocol, rep.ZKServers = "zk", cfg.ZKServers
	}
	if cfg.Workload == "watch" {
		rep.Size = max(cfg.Size, stampLen)
	}
	if cfg.Workload == "locks" {
		rep.Locks, rep.LeaseMs, rep.HoldMs, rep.Rate, rep.RenewRate = cfg.Locks, ms(cfg.Lease), ms(cfg.Hold), cfg.Rate, cfg.RenewRate
	}
	var all histogram
	for op := range numOps {
		var h histogram
		for _, rec := range r.recs {
			h.merge(rec.hists[op])
		}
		if h.n == 0 {
			continue
		}
		rep.ByOp[opNames[op]] = OpReport{Ops: int64(h.n), OpsPerSec: float64(h.n) / elapsed.Seconds(), Latency: latencyOf(&h)}
		if r.primary[op] {
			all.merge(&h)
		}
	}
	rep.Ops = int64(all.n)
	rep.OpsPerSec = float64(all.n) / elapsed.Seconds()
	rep.Latency = latencyOf(&all)
	for _, rec := range r.recs {
		for k, n := range rec.errs {
			rep.ErrorKinds[k] += n
			rep.Errors += n
		}
		if rec.first != nil && rep.FirstError == "" {
			rep.FirstError = rec.first.Error()
		}
	}
	return rep, nil
}

// what says what one op of each workload is, in the text report.
var what = map[string]string{
	"set": "setData", "get": "getData", "create": "sequential creates", "mixed": "getData and setData",
	"lock": "lock handoffs", "locks": "acquisitions", "watch": "notifications", "session": "sessions opened and closed",
}

// WriteText writes the report for people to read.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "workload    %s: %s\n", rep.Workload, rep.setup())
	fmt.Fprintf(&b, "phase       %s measured after a %s warmup", msDuration(rep.ElapsedMs), msDuration(rep.WarmupMs))
	if rep.MaxOps > 0 {
		fmt.Fprintf(&b, " (at most %d ops)", rep.MaxOps)
	}
	fmt.Fprintf(&b, "\nthroughput  %.0f ops/s (%d %s)\n", rep.OpsPerSec, rep.Ops, what[rep.Workload])
	fmt.Fprintf(&b, "latency     %s\n", rep.Latency)
	fmt.Fprintf(&b, "errors      %d", rep.Errors)
	for i, k := range slices.Sorted(maps.Keys(rep.ErrorKinds)) {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s %d", sep, k, rep.ErrorKinds[k])
	}
	if rep.FirstError != "" {
		fmt.Fprintf(&b, "\nfirst error %s", rep.FirstError)
	}
	if rep.ErrorKinds[client.ErrTooManyConnections.Error()] > 0 {
		b.WriteString("\nhint        the servers refused connections over a limit: arbord's --max-conns-per-ip (60 by default) counts every session from this host")
	}
	b.WriteString("\n")
	if len(rep.ByOp) > 1 || rep.Ops == 0 {
		label := "by op"
		for _, name := range opNames {
			op, ok := rep.ByOp[name]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "%-11s %-7s %.0f ops/s, %s\n", label, name, op.OpsPerSec, op.Latency)
			label = ""
		}
	}
	if handoffs := rep.ByOp["handoff"].Ops; rep.LateHandoffs != nil && handoffs > 0 {
		if late := *rep.LateHandoffs; late == 0 {
			fmt.Fprintf(&b, "told        all %d next holders within 1s of the release\n", handoffs)
		} else {
			fmt.Fprintf(&b, "told        %d of %d next holders more than 1s after the release\n", late, handoffs)
		}
	}
	writeMemoryText(&b, rep.ServerMemory)
	if rep.Storm != nil {
		rep.Storm.writeText(&b, rep.LeaseMs > 0)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// setup describes the load of the report's workload.
func (rep *Report) setup() string {
	switch rep.Workload {
	case "lock":
		return fmt.Sprintf("%d contenders on one lock", rep.Contenders)
	case "locks":
		lease, rate := "the session", "no bound"
		if rep.LeaseMs > 0 {
			lease = "a lease of " + msDuration(rep.LeaseMs)
		}
		if rep.Rate > 0 {
			rate = fmt.Sprintf("at most %.0f/s", rep.Rate)
		}
		over := fmt.Sprintf("%d conns", rep.Conns)
		if rep.Mux > 0 {
			over = fmt.Sprintf("%d sessions on %d connections to each member", rep.Conns, rep.Mux)
		}
		s := fmt.Sprintf("%d locks × %d holders over %s, holds of %s bound to %s, cycles %s",
			rep.Locks, rep.Contenders, over, msDuration(rep.HoldMs), lease, rate)
		if rep.RenewRate > 0 {
			s += fmt.Sprintf(", renewals about %.0f/s", rep.RenewRate)
		}
		return s
	case "watch":
		return fmt.Sprintf("%d watchers of one node, one writer, %d-byte values", rep.Watchers, rep.Size)
	case "session":
		return fmt.Sprintf("%d workers", rep.Workers)
	}
	s := fmt.Sprintf("%d conns, %d workers, %d-byte values", rep.Conns, rep.Workers, rep.Size)
	if rep.Workload != "create" {
		s += fmt.Sprintf(", %d keys", rep.Keys)
	}
	if rep.Workload == "mixed" {
		s += fmt.Sprintf(", %.0f%% reads", 100*rep.ReadRatio)
	}
	if rep.Protocol == "zk" {
		s += ", ZooKeeper's protocol"
	}
	if rep.Linearizable {
		s += ", linearizable reads"
	}
	return s
}

func (l Latency) String() string {
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, p99.9 %s (min %s, mean %s, max %s) ms",
		num(l.P50), num(l.P90), num(l.P99), num(l.P999), num(l.Min), num(l.Mean), num(l.Max))
}

// num prints a latency in ms with three significant digits or more.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func msDuration(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Millisecond).String()
}
