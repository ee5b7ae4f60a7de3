package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
	"github.com/arbor-coord/arbor/wire"
)

// Workloads are the workloads Run knows.
var Workloads = []string{"set", "get", "create", "mixed", "lock", "locks", "watch", "session"}

// Config is what to run.
type Config struct {
	Servers  []string
	Workload string // one of Workloads
	// ClientOptions are given to every client.Dial of the run (client.WithTLS, say).
	ClientOptions []client.Option
	// Protocol is the protocol of the load: "arbor" (or empty), Arbor's own
	// through package client; or "zk", ZooKeeper's through ZKServers, the
	// same members' ZooKeeper ports (set, get, create and mixed only). The
	// run's nodes are made and removed through Servers either way.
	Protocol  string
	ZKServers []string

	Conns     int     // set, get, create, mixed: sessions shared by the workers
	Workers   int     // set, get, create, mixed, session: goroutines making requests
	Size      int     // bytes of each value (watch: at least 16)
	Keys      int     // set, get, mixed: nodes the workers go over
	ReadRatio float64 // mixed: the share of getData, 0 to 1
	// get, mixed: getData with client.Linearizable, a raft read index
	// each (shared by the reads that arrive together)
	Linearizable bool
	Contenders   int // lock: sessions taking turns on the lock; locks: holders of each lock
	Watchers     int // watch: sessions watching the node

	// locks: Locks locks, each taken in turn by Contenders holders over
	// Conns sessions, each hold bound to a lease of Lease (0: the
	// session) and lasting Hold; the cycles of all holders together at
	// most Rate per second (0: no bound). With RenewRate, each holder
	// also renews its lease while it holds, explicitly, so that the
	// renewals of all holders together come at about RenewRate per
	// second when every lock is held (0: only the recipe's own, at a
	// third of the TTL).
	Locks int
	// Mux, in the locks workload, carries the sessions over Mux
	// multiplexed connections to each member (client.Mux), session i on
	// connection i mod Mux (0: a connection per session).
	Mux       int
	Lease     time.Duration
	Hold      time.Duration
	Rate      float64
	RenewRate float64
	// Storm, in the locks workload, kills a member during the measured
	// phase and measures how the sessions that were on it come back (a
	// reconnect storm). Nil: none.
	Storm *Storm
	// ServerMetrics are the members' /metrics URLs (http://host:2481/metrics),
	// read at the end of the measured phase for the report's ServerMemory.
	ServerMetrics []string

	Warmup   time.Duration // load that is not counted, first
	Duration time.Duration // the measured phase
	Ops      int64         // if not 0, the measured phase also ends once this many ops began

	Prefix string // the node the run's nodes go under
	Keep   bool   // leave the run's nodes in place
	// Timeout bounds connecting and each request of setup and cleanup; a
	// request of the load may take until Timeout after the measured phase.
	Timeout time.Duration

	// Progress, if set, is called about once a second while the load runs,
	// always from the same goroutine.
	Progress func(Progress)
}

// Progress is how far a run is.
type Progress struct {
	Phase   string        // "warmup" or "measure"
	Elapsed time.Duration // since the phase began
	Ops     int64         // ops done in the phase
	Rate    float64       // ops/s over the last interval
}

// zkWorkloads are the workloads Config.Protocol "zk" runs.
var zkWorkloads = []string{"set", "get", "create", "mixed"}

// maxCount bounds the counts of a Config, against mistakes.
const maxCount = 10000

// maxHolders bounds the holders of the locks workload: a goroutine each.
const maxHolders = 20000

// Check reports the first thing wrong with c.
func (c Config) Check() error {
	count := func(name string, v, lo int) error {
		if v < lo || v > maxCount {
			return fmt.Errorf("%s must be from %d to %d, not %d", name, lo, maxCount, v)
		}
		return nil
	}
	switch {
	case !slices.Contains(Workloads, c.Workload):
		return fmt.Errorf("unknown workload %q: want one of %s", c.Workload, strings.Join(Workloads, ", "))
	case len(c.Servers) == 0:
		return errors.New("no servers")
	case c.Protocol != "" && c.Protocol != "arbor" && c.Protocol != "zk":
		return fmt.Errorf("unknown protocol %q: want arbor or zk", c.Protocol)
	case c.Protocol == "zk" && !slices.Contains(zkWorkloads, c.Workload):
		return fmt.Errorf("workload %s has no ZooKeeper form: want one of %s", c.Workload, strings.Join(zkWorkloads, ", "))
	case c.Protocol == "zk" && len(c.ZKServers) == 0:
		return errors.New("no ZooKeeper servers for protocol zk")
	case c.Protocol == "zk" && c.Linearizable:
		return errors.New("ZooKeeper's protocol has no linearizable getData")
	case c.Size < 0 || c.Size > 16<<20:
		return fmt.Errorf("size must be from 0 to %d bytes, not %d", 16<<20, c.Size)
	case c.Keys < 1 || c.Keys > 1_000_000:
		return fmt.Errorf("keys must be from 1 to 1000000, not %d", c.Keys)
	case !(c.ReadRatio >= 0 && c.ReadRatio <= 1):
		return fmt.Errorf("read ratio must be from 0 to 1, not %v", c.ReadRatio)
	case c.Duration <= 0:
		return fmt.Errorf("duration must be positive, not %v", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("warmup must not be negative: %v", c.Warmup)
	case c.Ops < 0:
		return fmt.Errorf("ops must not be negative: %d", c.Ops)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be positive, not %v", c.Timeout)
	case c.Prefix == "/" || wire.ValidatePath(c.Prefix, false) != nil:
		return fmt.Errorf("prefix %q is not a path below /", c.Prefix)
	case c.Mux < 0 || c.Mux > maxCount:
		return fmt.Errorf("mux must be from 0 to %d, not %d", maxCount, c.Mux)
	case c.Mux > 0 && c.Workload != "locks":
		return errors.New("mux is for the locks workload")
	case c.Workload == "locks" && (c.Locks < 1 || c.Locks*c.Contenders > maxHolders):
		return fmt.Errorf("locks × contenders must be from 1 to %d, not %d × %d", maxHolders, c.Locks, c.Contenders)
	case c.Lease != 0 && (c.Lease < time.Second || c.Lease > time.Hour):
		return fmt.Errorf("lease must be 0 (the session's) or from 1s to 1h, not %v", c.Lease)
	case c.Hold < 0 || c.Hold > time.Minute:
		return fmt.Errorf("hold must be from 0 to 1m, not %v", c.Hold)
	case !(c.Rate >= 0):
		return fmt.Errorf("rate must not be negative: %v", c.Rate)
	case !(c.RenewRate >= 0):
		return fmt.Errorf("renew rate must not be negative: %v", c.RenewRate)
	case c.RenewRate > 0 && (c.Workload != "locks" || c.Lease == 0 || c.Hold == 0):
		return errors.New("a renew rate needs the locks workload with a lease and a hold to renew in")
	}
	for _, u := range c.ServerMetrics {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("server metrics %q is not an http:// or https:// URL", u)
		}
	}
	for _, err := range []error{
		count("conns", c.Conns, 1), count("workers", c.Workers, 1),
		count("contenders", c.Contenders, 1), count("watchers", c.Watchers, 1),
		c.Storm.check(c),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// Run runs the workload of cfg and reports it. When ctx ends during the
// measured phase, the phase ends there and Run reports what it measured;
// when it ends before, Run returns ctx's error. Either way the run's nodes
// are deleted (unless cfg.Keep). The report says how many ops failed, and
// why; Run's error is for a run that could not be made: bad cfg, no
// servers, nodes it could not create or delete (then with the report).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	admin, err := dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	made, runPath, err := makeRunNode(ctx, admin, cfg)
	if err != nil {
		_ = removeRun(context.WithoutCancel(ctx), []*client.Client{admin}, cfg, "", made)
		return nil, err
	}
	r := newRunner(cfg, runPath)
	p, err := prepares[cfg.Workload](ctx, r)
	var rep *Report
	if err == nil {
		r.run(ctx, p)
		rep, err = r.report(ctx)
		if rep != nil && p.storm != nil {
			rep.Storm = p.storm.report(r)
		}
		if rep != nil && p.late != nil {
			rep.LateHandoffs = new(p.late.Load())
		}
		if rep != nil && len(cfg.ServerMetrics) > 0 {
			rep.ServerMemory = serverMemory(ctx, cfg.ServerMetrics, cfg.Timeout)
		}
	}
	if p != nil {
		closeAll(p.sessions)
		closeAllZK(p.zk)
		for _, m := range p.muxes {
			m.Close()
		}
	}
	if !cfg.Keep {
		pool := []*client.Client{admin}
		if p != nil {
			pool = append(pool, p.cleaners...)
		}
		if cerr := removeRun(context.WithoutCancel(ctx), pool, cfg, runPath, made); cerr != nil && err == nil {
			err = fmt.Errorf("cleaning up %s: %w", runPath, cerr)
		}
	}
	if p != nil {
		closeAll(p.cleaners)
	}
	return rep, err
}

// dial starts one session within cfg.Timeout, with cfg.ClientOptions and
// then extra.
func dial(ctx context.Context, cfg Config, extra ...client.Option) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c, err := client.Dial(ctx, cfg.Servers, append(slices.Clip(cfg.ClientOptions), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w", strings.Join(cfg.Servers, ","), err)
	}
	return c, nil
}

// dialN starts n sessions, maxDialing at a time.
func dialN(ctx context.Context, cfg Config, n int) ([]*client.Client, error) {
	return dialEach(ctx, cfg, n, nil)
}

// maxDialing bounds the sessions dialN and dialEach start at once. A
// member closes at once the connections past its handshake cap (arbord
// --max-handshaking, 256 by default), and their clients try another
// member: thousands of dials at once would pile the sessions on the
// members that answer first, where each should land on a member picked at
// random.
const maxDialing = 128

// dialEach starts n sessions, maxDialing at a time, session i with the
// options extra(i) as well (extra may be nil).
func dialEach(ctx context.Context, cfg Config, n int, extra func(i int) []client.Option) ([]*client.Client, error) {
	cs := make([]*client.Client, n)
	ctx, cancel := context.WithCancelCause(ctx) // the first dial that fails ends the others
	defer cancel(nil)
	var wg sync.WaitGroup
	dialing := make(chan struct{}, maxDialing)
	for i := range cs {
		var opts []client.Option
		if extra != nil {
			opts = extra(i)
		}
		select {
		case dialing <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-dialing }()
			c, err := dial(ctx, cfg, opts...)
			if err != nil {
				cancel(err)
				return
			}
			cs[i] = c
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		closeAll(cs)
		return nil, err
	}
	return cs, nil
}

// closeAll closes the sessions of cs (nil ones skipped) at once.
func closeAll(cs []*client.Client) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Go(func() { c.Close() })
		}
	}
	wg.Wait()
}

// plan is a workload made ready to run.
type plan struct {
	loops    []func(*recorder) // the load, each on a goroutine of its own
	primary  []opKind          // the ops the workload counts
	sessions []*client.Client  // closed after the run
	muxes    []*client.Mux     // the sessions' shared connections (Config.Mux), closed after them
	zk       []*zkConn         // Protocol "zk": the load's sessions, closed after the run
	cleaners []*client.Client  // help delete the run's nodes, then closed
	storm    *storm            // Config.Storm's, run beside the loops; nil: none
	// late counts the measured handoffs whose next holder held more than
	// handoffBound after the release was sent (locks); nil: not counted.
	late *atomic.Int64
}

// prepares makes each workload's sessions and nodes under r.path.
var prepares = map[string]func(ctx context.Context, r *runner) (*plan, error){
	"set": prepareKV, "get": prepareKV, "create": prepareKV, "mixed": prepareKV,
	"lock": prepareLock, "locks": prepareLocks, "watch": prepareWatch, "session": prepareSession,
}

// The phases of a run.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// runner runs the loops of a plan through the phases and collects what
// they record. The loops call begin before each op and done after it.
type runner struct {
	cfg  Config
	path string // the run's node

	start     time.Time
	phase     atomic.Int32
	measureAt atomic.Int64  // time since start when the measured phase began; -1 before
	measuring chan struct{} // closed when the measured phase begins

	stopped    context.Context // ends with the measured phase: for waits that do not end alone (Lock)
	stopCancel context.CancelFunc
	hard       context.Context // bounds every request: the end of the phase, plus cfg.Timeout
	hardCancel context.CancelFunc

	claimed atomic.Int64 // ops begun in the measured phase, against cfg.Ops
	warmed  atomic.Int64 // primary ops done in the warmup
	counted atomic.Int64 // primary ops done in the measured phase

	primary [numOps]bool
	end     time.Time

	mu   sync.Mutex
	recs []*recorder // mu guards recs
}

func newRunner(cfg Config, path string) *runner {
	r := &runner{cfg: cfg, path: path}
	r.measureAt.Store(-1)
	r.measuring = make(chan struct{})
	return r
}

// run runs p's loops through the warmup and the measured phase, which ends
// early when ctx does.
func (r *runner) run(ctx context.Context, p *plan) {
	for _, op := range p.primary {
		r.primary[op] = true
	}
	r.start = time.Now()
	r.stopped, r.stopCancel = context.WithCancel(context.Background())
	r.hard, r.hardCancel = context.WithDeadline(context.Background(),
		r.start.Add(r.cfg.Warmup+r.cfg.Duration+r.cfg.Timeout))
	defer r.hardCancel()
	defer context.AfterFunc(ctx, r.stop)()
	if r.cfg.Warmup == 0 {
		r.measure()
	}
	var aside sync.WaitGroup
	aside.Go(r.clock)
	finished := make(chan struct{})
	if r.cfg.Progress != nil {
		aside.Go(func() { r.progress(finished) })
	}
	if p.storm != nil {
		aside.Go(func() { p.storm.run(r) })
	}
	var wg sync.WaitGroup
	for _, loop := range p.loops {
		rec := r.recorder()
		wg.Go(func() { loop(rec) })
	}
	wg.Wait()
	r.end = time.Now()
	r.stop() // if every loop ended early
	close(finished)
	aside.Wait()
}

// clock moves the run from warmup to the measured phase, and ends it.
func (r *runner) clock() {
	if r.cfg.Warmup > 0 {
		t := time.NewTimer(r.cfg.Warmup)
		defer t.Stop()
		select {
		case <-t.C:
			r.measure()
		case <-r.stopped.Done():
			return
		}
	}
	t := time.NewTimer(r.cfg.Duration)
	defer t.Stop()
	select {
	case <-t.C:
		r.stop()
	case <-r.stopped.Done():
	}
}

// measure begins the measured phase.
func (r *runner) measure() {
	r.measureAt.Store(int64(time.Since(r.start)))
	close(r.measuring)
	r.phase.CompareAndSwap(phaseWarmup, phaseMeasure)
}

// stop ends the measured phase (or the warmup): no op begins after it.
func (r *runner) stop() {
	r.phase.Store(phaseDone)
	r.stopCancel()
}

// progress calls cfg.Progress every second until finished is closed.
func (r *runner) progress(finished <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last int64
	lastPhase := phaseWarmup
	lastTime := time.Now()
	for {
		select {
		case <-finished:
			return
		case now := <-tick.C:
			phase, ops := r.phase.Load(), r.warmed.Load()
			since := r.start
			if phase != phaseWarmup {
				phase, ops = phaseMeasure, r.counted.Load()
				since = r.start.Add(time.Duration(r.measureAt.Load()))
			}
			if phase != lastPhase {
				last, lastPhase = 0, phase
				lastTime = since
			}
			p := Progress{Phase: "warmup", Elapsed: now.Sub(since), Ops: ops,
				Rate: float64(ops-last) / now.Sub(lastTime).Seconds()}
			if phase == phaseMeasure {
				p.Phase = "measure"
			}
			last, lastTime = ops, now
			r.cfg.Progress(p)
		}
	}
}

// begin is called before an op that counts as n ops: it says whether the op
// may begin (not once the run has ended, or the measured phase has begun
// cfg.Ops ops) and whether it is measured.
func (r *runner) begin(n int64) (measured, ok bool) {
	switch r.phase.Load() {
	case phaseWarmup:
		return false, true
	case phaseMeasure:
		if r.cfg.Ops > 0 && r.claimed.Add(n)-n >= r.cfg.Ops {
			r.stop()
			return false, false
		}
		return true, true
	}
	return false, false
}

// done records an op that began at t0 and ended with err. It reports
// whether the loop may go on: not when the run cut the op short, or the
// session is over.
func (r *runner) done(rec *recorder, op opKind, measured bool, t0 time.Time, err error) bool {
	if err != nil {
		if r.stopped.Err() != nil && errors.Is(err, context.Canceled) {
			return false // a wait that the end of the run cut short
		}
		if measured {
			rec.fail(err)
		}
		return !errors.Is(err, client.ErrSessionExpired) && !errors.Is(err, client.ErrClosed)
	}
	r.count(rec, op, measured, time.Since(t0))
	return true
}

// count records an op of latency d that succeeded.
func (r *runner) count(rec *recorder, op opKind, measured bool, d time.Duration) {
	switch {
	case measured:
		rec.observe(op, d)
		if r.primary[op] {
			r.counted.Add(1)
		}
	case r.primary[op]:
		r.warmed.Add(1)
	}
}

// recorder returns a new recorder for one loop.
func (r *runner) recorder() *recorder {
	rec := &recorder{errs: map[string]int64{}}
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return rec
}

// opKind is a kind of op that is timed on its own.
type opKind int

const (
	opGet opKind = iota
	opSet
	opCreate
	opAcquire
	opRelease
	opNotify
	opSession
	opConnect
	opClose
	opHandoff
	opRenew
	numOps
)

var opNames = [numOps]string{"get", "set", "create", "acquire", "release", "notify", "session", "connect", "close", "handoff", "renew"}

// recorder is what one loop measured. Only its loop touches it until the
// run ends.
type recorder struct {
	hists [numOps]*histogram // made when first needed
	errs  map[string]int64   // by kind
	first error
}

func (rec *recorder) observe(op opKind, d time.Duration) {
	h := rec.hists[op]
	if h == nil {
		h = new(histogram)
		rec.hists[op] = h
	}
	h.record(d)
}

func (rec *recorder) fail(err error) {
	rec.errs[errorKind(err)]++
	if rec.first == nil {
		rec.first = err
	}
}

// errorKinds name the errors a report counts, by the first that matches.
var errorKinds = []error{
	client.ErrConnectionLoss, client.ErrSessionExpired, client.ErrClosed, client.ErrNoQuorum,
	client.ErrRequestTimeout, client.ErrOperationTimeout, client.ErrThrottled,
	client.ErrTooManyConnections, client.ErrShuttingDown, client.ErrNotCaughtUp,
	client.ErrDataTooLarge, client.ErrNoNode, client.ErrNodeExists, client.ErrBadVersion,
	client.ErrNotEmpty, client.ErrEventsLost, client.ErrNoAuth, client.ErrAuthFailed, client.ErrQuotaExceeded,
	recipes.ErrDeadlinePassed, recipes.ErrNodeDeleted,
}

// errorKind names err's kind in a report: the text of its sentinel
// ("connection lost"), "timeout" for a request that ran out of time, else
// "other".
func errorKind(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	for _, k := range errorKinds {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	return "other"
}
