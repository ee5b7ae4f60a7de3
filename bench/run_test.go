package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/server"
	"go.uber.org/zap/zaptest"
)

// startServer runs a server on a loopback port and returns its address.
func startServer(t *testing.T, maxData int) string {
	return startMember(t, maxData).Addr().String()
}

// startMember runs a single-node server on loopback.
func startMember(t *testing.T, maxData int) *server.Server {
	t.Helper()
	s, err := server.New(server.Config{
		Listen: "127.0.0.1:0", HTTP: "-", DataDir: t.TempDir(), MaxDataSize: maxData,
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func config(addr, workload string) Config {
	return Config{
		Servers: []string{addr}, Workload: workload, Conns: 2, Workers: 4, Size: 64, Keys: 8,
		ReadRatio: 0.5, Contenders: 2, Watchers: 2, Warmup: 50 * time.Millisecond,
		Duration: 300 * time.Millisecond, Prefix: "/bench", Timeout: 5 * time.Second,
	}
}

func TestTheMeasuredPhaseLastsDuration(t *testing.T) {
	addr := startServer(t, 0)
	start := time.Now()
	rep, err := Run(context.Background(), config(addr, "set"))
	if err != nil {
		t.Fatal(err)
	}
	// The phase ends once the ops begun in it are answered: a stalled disk
	// can hold the last ones, up to the request timeout.
	if rep.ElapsedMs < 300 || rep.ElapsedMs > 300+5000 {
		t.Errorf("measured %v ms, want 300 ms and the last ops' time", rep.ElapsedMs)
	}
	if took := time.Since(start); took < 350*time.Millisecond {
		t.Errorf("the run took %v, less than its warmup and measured phase", took)
	}
}

func TestFailedOpsAreCountedByKindAndNotTimed(t *testing.T) {
	addr := startServer(t, 100)
	cfg := config(addr, "create")
	cfg.Size = 200 // more than the server takes
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	kind := client.ErrDataTooLarge.Error()
	if rep.Ops != 0 || rep.Errors == 0 || rep.ErrorKinds[kind] != rep.Errors || len(rep.ErrorKinds) != 1 || rep.FirstError == "" {
		t.Errorf("ops %d, errors %d %v (first %q): want only %q errors", rep.Ops, rep.Errors, rep.ErrorKinds, rep.FirstError, kind)
	}
	if rep.Latency != (Latency{}) || len(rep.ByOp) != 0 {
		t.Errorf("failed ops were timed: %+v %+v", rep.Latency, rep.ByOp)
	}
}

func TestAnInterruptedWarmupIsAnError(t *testing.T) {
	addr := startServer(t, 0)
	cfg := config(addr, "get")
	cfg.Warmup = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Progress = func(Progress) {}
	time.AfterFunc(200*time.Millisecond, cancel)
	rep, err := Run(ctx, cfg)
	if rep != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, %v; want no report and the interrupt", rep, err)
	}
}

func TestErrorKinds(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("get /x: %w", client.ErrNoNode):                  "no node",
		fmt.Errorf("set /x: %w", client.ErrConnectionLoss):          client.ErrConnectionLoss.Error(),
		fmt.Errorf("set /x: %w", context.DeadlineExceeded):          "timeout",
		fmt.Errorf("lock /l: %w", client.ErrSessionExpired):         client.ErrSessionExpired.Error(),
		errors.New("something else"):                                "other",
		fmt.Errorf("unlock /l: %w", recipes.ErrDeadlinePassed):      recipes.ErrDeadlinePassed.Error(),
		fmt.Errorf("w: %w", fmt.Errorf("%w", client.ErrEventsLost)): client.ErrEventsLost.Error(),
	} {
		if got := errorKind(err); got != want {
			t.Errorf("errorKind(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestCheckRefusesWhatCannotRun(t *testing.T) {
	good := config("127.0.0.1:1", "set")
	if err := good.Check(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	storm := good
	stormed(&storm)
	if err := storm.Check(); err != nil {
		t.Fatalf("a good storm: %v", err)
	}
	for name, change := range map[string]func(*Config){
		"an unknown workload":        func(c *Config) { c.Workload = "put" },
		"no servers":                 func(c *Config) { c.Servers = nil },
		"no conns":                   func(c *Config) { c.Conns = 0 },
		"too many workers":           func(c *Config) { c.Workers = maxCount + 1 },
		"a negative size":            func(c *Config) { c.Size = -1 },
		"a read ratio above 1":       func(c *Config) { c.ReadRatio = 1.01 },
		"a read ratio that is NaN":   func(c *Config) { c.ReadRatio = zero / zero },
		"no duration":                func(c *Config) { c.Duration = 0 },
		"a negative warmup":          func(c *Config) { c.Warmup = -time.Second },
		"negative ops":               func(c *Config) { c.Ops = -1 },
		"no timeout":                 func(c *Config) { c.Timeout = 0 },
		"the root as prefix":         func(c *Config) { c.Prefix = "/" },
		"a relative prefix":          func(c *Config) { c.Prefix = "bench" },
		"no contenders":              func(c *Config) { c.Contenders = 0 },
		"no watchers":                func(c *Config) { c.Watchers = 0 },
		"no keys":                    func(c *Config) { c.Keys = 0 },
		"a prefix with a slash end":  func(c *Config) { c.Prefix = "/bench/" },
		"locks without locks":        func(c *Config) { c.Workload, c.Locks = "locks", 0 },
		"metrics not a URL":          func(c *Config) { c.ServerMetrics = []string{"127.0.0.1:2481"} },
		"too many holders":           func(c *Config) { c.Workload, c.Locks, c.Contenders = "locks", maxHolders, 2 },
		"a lease too short":          func(c *Config) { c.Lease = time.Millisecond },
		"a negative hold":            func(c *Config) { c.Hold = -time.Second },
		"a negative rate":            func(c *Config) { c.Rate = -1 },
		"a negative renew rate":      func(c *Config) { c.RenewRate = -1 },
		"renewals without a lease":   func(c *Config) { c.Workload, c.Locks, c.Hold, c.RenewRate = "locks", 1, time.Second, 10 },
		"renewals without a hold":    func(c *Config) { c.Workload, c.Locks, c.Lease, c.RenewRate = "locks", 1, time.Second, 10 },
		"an unknown protocol":        func(c *Config) { c.Protocol = "http" },
		"zk without its servers":     func(c *Config) { c.Protocol = "zk" },
		"zk with linearizable reads": func(c *Config) { c.Protocol, c.ZKServers, c.Linearizable = "zk", c.Servers, true },
		"zk for a lock":              func(c *Config) { c.Protocol, c.ZKServers, c.Workload = "zk", c.Servers, "lock" },
		"a storm in set":             func(c *Config) { c.Storm = goodStorm(c) },
		"a storm after the phase":    func(c *Config) { stormed(c); c.Storm.After = c.Duration },
		"a storm before the phase":   func(c *Config) { stormed(c); c.Storm.After = 0 },
		"a storm on another member":  func(c *Config) { stormed(c); c.Storm.Member = "127.0.0.1:2" },
		"a storm that cannot kill":   func(c *Config) { stormed(c); c.Storm.Kill = nil },
		"a negative mux":             func(c *Config) { c.Workload, c.Locks, c.Mux = "locks", 1, -1 },
		"a mux for set":              func(c *Config) { c.Mux = 16 },
	} {
		c := good
		change(&c)
		if err := c.Check(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

var zero float64

// goodStorm is a storm within c's measured phase.
func goodStorm(c *Config) *Storm {
	return &Storm{After: c.Duration / 2, Member: c.Servers[0], Kill: func() error { return nil }}
}

// stormed makes c a locks workload with a good storm.
func stormed(c *Config) { c.Workload, c.Locks, c.Storm = "locks", 1, goodStorm(c) }

// TestTheReportHasTheMembersMemory reads a real member's /metrics at the
// end of a run, and says what is wrong with a URL that is not one.
func TestTheReportHasTheMembersMemory(t *testing.T) {
	s, err := server.New(server.Config{
		Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", DataDir: t.TempDir(),
		TickInterval: 10 * time.Millisecond, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := config(s.Addr().String(), "set")
	metrics := "http://" + s.HTTPAddr().String() + "/metrics"
	cfg.ServerMetrics = []string{metrics, "http://" + s.HTTPAddr().String() + "/healthz"}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.ServerMemory) != 2 {
		t.Fatalf("server memory %+v, want two members'", rep.ServerMemory)
	}
	if m := rep.ServerMemory[0]; m.URL != metrics || m.Error != "" || m.RSSBytes < 1e6 || m.HeapInuseBytes < 1e5 {
		t.Errorf("the member's memory %+v, want its RSS and heap", m)
	}
	if m := rep.ServerMemory[1]; m.Error == "" {
		t.Errorf("memory read from /healthz %+v, want an error", m)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "memory      "+metrics+": RSS ") {
		t.Errorf("text report without the member's memory:\n%s", text.String())
	}
}

func TestABackoffDoublesUpToItsBoundAndWaitsWithinIt(t *testing.T) {
	var b backoff
	for _, want := range []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000} {
		d := b.next()
		if bound := time.Duration(b); bound != want*time.Millisecond || d < 0 || d >= bound {
			t.Fatalf("wait %v below a bound of %v, want a bound of %v", d, bound, want*time.Millisecond)
		}
	}
}

// A run whose locks an operator spread over shards (its locks' parent
// partitioned, and split) cleans up all it made but that parent and the
// way to it, which a sharded cluster keeps, and is no error.
func TestARunOverShardedLocksCleansUpAllButThePartitionedParent(t *testing.T) {
	s := startMember(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, []string{s.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const run, parent = "/bench/locks-0000000000", "/bench/locks-0000000000/locks" // the first run's
	if _, err := c.PartitionShards(ctx, parent); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SplitShards(ctx, parent, nil); err != nil {
		t.Fatal(err)
	}
	cfg := config(s.Addr().String(), "locks")
	cfg.Locks = 16
	rep, err := Run(ctx, cfg)
	if err != nil || rep.Ops == 0 {
		t.Fatalf("a run over sharded locks: %v, %+v", err, rep)
	}
	if kids, _, err := c.Children(ctx, run); err != nil || len(kids) != 1 || kids[0] != "locks" {
		t.Errorf("left under the run: %v, %v; want only locks, the partitioned parent", kids, err)
	}
	if kids, _, err := c.Children(ctx, parent); err != nil || len(kids) != 0 {
		t.Errorf("left under the locks' parent: %v, %v; want nothing", kids, err)
	}
}
