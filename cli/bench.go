package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbor-coord/arbor/bench"
)

// The locks workload's defaults for --conns and --mux: ten thousand
// sessions, over 16 connections to each member.
const (
	locksSessions = 10000
	locksMux      = 16
)

func (e *env) benchCommand() *cobra.Command {
	cfg := bench.Config{
		Conns: 8, Workers: 64, Size: 256, Keys: 1000, ReadRatio: 0.9, Contenders: 16, Watchers: 16, Locks: 64,
		Warmup: 2 * time.Second, Duration: 10 * time.Second, Prefix: "/bench",
	}
	var progress bool
	var storm bench.Storm
	var stormPID int
	cmd := &cobra.Command{
		Use:   "bench WORKLOAD",
		Short: "Put load on the servers and measure throughput and latency",
		Long: "Run one workload against the servers and print its throughput (N ops/s), its\n" +
			"latency (p50, p90, p99, p99.9) and its errors by kind. WORKLOAD is one of:\n\n" +
			"  set      setData of --size bytes on --keys nodes\n" +
			"  get      getData of the same\n" +
			"  create   persistent sequential creates of --size bytes\n" +
			"  mixed    getData with probability --read-ratio, else setData\n" +
			"  lock     --contenders sessions take turns on one lock: handoffs/s, acquire latency\n" +
			"  locks    a lock service's load: --locks locks, each taken in turn by --contenders\n" +
			"           holders (1: uncontended) over --conns sessions (default 10000, carried by\n" +
			"           --mux connections to each member, default 16), each hold --hold long and\n" +
			"           bound to a --lease, at most --rate cycles/s in all: acquires/s, acquire,\n" +
			"           release and handoff latency (a release's send to the next grant); with\n" +
			"           --renew-rate, the holders renew their leases while they hold, that many/s\n" +
			"  watch    --watchers sessions with a persistent watch on one node that a writer\n" +
			"           sets: notifications/s, latency from the write's send to each receipt\n" +
			"  session  sessions opened and closed per second, by --workers goroutines\n\n" +
			"set, get, create and mixed run --workers goroutines over --conns sessions.\n" +
			"With --protocol zk their load goes through the members' ZooKeeper ports,\n" +
			"--zk-servers, and their nodes are made and removed through --servers.\n" +
			"The load runs for --warmup, not counted, then for --duration (or --ops ops).\n" +
			"With --storm-after, locks kills the member --storm-member (process --storm-pid)\n" +
			"that far into the measured phase and reports how its sessions came back on the\n" +
			"others and what was lost: sessions, holds, leases.\n" +
			"Its nodes go under a node of the run's own below --prefix, deleted at the end\n" +
			"unless --keep. A progress line goes to stderr each second when stderr is a\n" +
			"terminal, or with --progress.",
		Example: "  arbor bench set\n" +
			"  arbor bench get --conns 8 --workers 64 --duration 30s\n" +
			"  arbor bench mixed --read-ratio 0.8 -o json\n" +
			"  arbor bench set --protocol zk --zk-servers 127.0.0.1:2181\n" +
			"  arbor bench lock --contenders 16\n" +
			"  arbor bench locks --locks 1000 --contenders 1 --lease 10s --rate 2000\n" +
			"  arbor bench locks --locks 10000 --conns 10000 --lease 10s --hold 30s --renew-rate 50000\n" +
			"  arbor bench locks --locks 3000 --conns 3000 --hold 5s --storm-after 5s --storm-member 127.0.0.1:2282 --storm-pid 4242",
		Args:      usageArgs(cobra.ExactArgs(1)),
		ValidArgs: bench.Workloads,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Workload, cfg.Servers, cfg.Timeout = args[0], e.serverList(), e.timeout
			if cfg.Workload == "locks" {
				// A lock service's clients: many sessions, over few
				// connections.
				if !cmd.Flags().Changed("conns") {
					cfg.Conns = locksSessions
				}
				if !cmd.Flags().Changed("mux") {
					cfg.Mux = locksMux
				}
			}
			opts, err := e.clientOptions()
			if err != nil {
				return err
			}
			cfg.ClientOptions = opts
			if storm.After != 0 || storm.Member != "" || stormPID != 0 {
				if stormPID <= 0 {
					return usagef("a storm needs --storm-after, --storm-member and --storm-pid, the member's process id")
				}
				storm.Kill = killProcess(stormPID)
				cfg.Storm = &storm
			}
			if err := cfg.Check(); err != nil {
				return usageError{err}
			}
			var line *progressLine
			if progress || isTerminalWriter(e.stderr) {
				line = &progressLine{w: e.stderr, workload: cfg.Workload, overwrite: isTerminalWriter(e.stderr)}
				cfg.Progress = line.print
			}
			rep, err := bench.Run(cmd.Context(), cfg)
			line.finish()
			if rep == nil {
				return err
			}
			if perr := e.printReport(rep); perr != nil {
				return perr
			}
			// Holders that renew through a run shorter than their hold
			// measure renewals alone, and that is a result too.
			if err == nil && rep.Ops == 0 && len(rep.ByOp) == 0 {
				err = fmt.Errorf("no %s op succeeded", rep.Workload)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Conns, "conns", cfg.Conns, "sessions the workers share (set, get, create, mixed); the holders' sessions (locks)")
	f.Lookup("conns").DefValue = fmt.Sprintf("%d; locks: %d", cfg.Conns, locksSessions)
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "goroutines making requests (set, get, create, mixed, session)")
	f.IntVar(&cfg.Size, "size", cfg.Size, "bytes of each value (watch: at least 16)")
	f.IntVar(&cfg.Keys, "keys", cfg.Keys, "nodes the workers go over (set, get, mixed)")
	f.Float64Var(&cfg.ReadRatio, "read-ratio", cfg.ReadRatio, "the share of getData (mixed), from 0 to 1")
	f.StringVar(&cfg.Protocol, "protocol", "arbor", "the load's protocol (set, get, create, mixed): arbor, or zk through --zk-servers")
	f.StringSliceVar(&cfg.ZKServers, "zk-servers", nil, "the members' ZooKeeper ports (--protocol zk), comma-separated")
	f.BoolVar(&cfg.Linearizable, "linearizable", false, "linearizable getData (get, mixed)")
	f.IntVar(&cfg.Contenders, "contenders", cfg.Contenders, "sessions taking turns on the lock (lock); holders of each lock (locks)")
	f.IntVar(&cfg.Locks, "locks", cfg.Locks, "locks (locks)")
	f.IntVar(&cfg.Mux, "mux", 0, "carry the sessions over this many multiplexed connections to each member (locks; 0: a connection per session)")
	f.Lookup("mux").DefValue = fmt.Sprintf("locks: %d", locksMux)
	f.DurationVar(&cfg.Lease, "lease", 0, "bind each hold to a lease of this TTL, renewed at a third of it (locks; 0: the session)")
	f.DurationVar(&cfg.Hold, "hold", 0, "how long each hold lasts (locks)")
	f.Float64Var(&cfg.Rate, "rate", 0, "acquire/release cycles per second of all holders together at most (locks; 0: no bound)")
	f.Float64Var(&cfg.RenewRate, "renew-rate", 0, "explicit lease renewals per second of all holders together, while they hold (locks, with --lease and --hold; 0: the recipe's own only)")
	f.DurationVar(&storm.After, "storm-after", 0, "kill --storm-member this far into the measured phase and report how its sessions come back (locks; 0: no storm)")
	f.StringVar(&storm.Member, "storm-member", "", "the member a storm kills: its client address, one of --servers")
	f.IntVar(&stormPID, "storm-pid", 0, "the process id of --storm-member, which the storm sends SIGKILL")
	f.StringSliceVar(&cfg.ServerMetrics, "server-metrics", nil, "the members' /metrics URLs (http://127.0.0.1:2481/metrics,...), whose RSS and heap the report gives at the end")
	f.IntVar(&cfg.Watchers, "watchers", cfg.Watchers, "sessions watching the node (watch)")
	f.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "load first, not counted")
	f.DurationVar(&cfg.Duration, "duration", cfg.Duration, "the measured phase")
	f.Int64Var(&cfg.Ops, "ops", 0, "end the measured phase after this many ops too (0: no limit)")
	f.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "the node the run's nodes go under")
	f.BoolVar(&cfg.Keep, "keep", false, "leave the run's nodes in place")
	f.BoolVar(&progress, "progress", false, "print progress to stderr even when it is not a terminal")
	return cmd
}

// killProcess returns a function that kills process pid at once, as a
// crash would (SIGKILL on Unix).
func killProcess(pid int) func() error {
	return func() error {
		p, err := os.FindProcess(pid)
		if err != nil {
			return err
		}
		return p.Kill()
	}
}

func (e *env) printReport(rep *bench.Report) error {
	if e.json() {
		return e.printJSON(rep)
	}
	return rep.WriteText(e.stdout)
}

// isTerminalWriter reports whether w is a terminal (or another character
// device).
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine prints a run's progress: on a terminal, one line rewritten
// in place and erased at the end; elsewhere, a line each time.
type progressLine struct {
	w         io.Writer
	workload  string
	overwrite bool

	mu      sync.Mutex // mu guards printed
	printed bool
}

func (p *progressLine) print(pr bench.Progress) {
	line := fmt.Sprintf("bench %s: %s %s, %d ops, %.0f ops/s",
		p.workload, pr.Phase, pr.Elapsed.Round(time.Second), pr.Ops, pr.Rate)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overwrite {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.printed = true
}

// finish erases the line on a terminal. p may be nil.
func (p *progressLine) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overwrite && p.printed {
		io.WriteString(p.w, "\r\x1b[K")
	}
}
