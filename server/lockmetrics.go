package server

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// longestQueues is how many locks arbor_lock_queue_length shows, by the
// length of their queues: a bounded label set, whatever the number of
// locks.
const longestQueues = 10

// deadlockInterval is how often every member looks for deadlocks: one is
// reported within this (and a commit) of forming.
const deadlockInterval = time.Second

// lockMetrics are the lock service's metrics.
type lockMetrics struct {
	acquire   prometheus.Histogram
	hold      prometheus.Histogram
	timeouts  prometheus.Counter
	expiries  prometheus.Counter
	deadlocks prometheus.Counter
	breaks    prometheus.Counter
	renewals  prometheus.Histogram
}

func newLockMetrics(s *Server, reg prometheus.Registerer) *lockMetrics {
	m := &lockMetrics{
		acquire: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "arbor_lock_acquire_seconds", Help: "Time from a lock node's creation to its hold, as the applied changes show it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20),
		}),
		hold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "arbor_lock_hold_seconds", Help: "How long holds lasted.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 24),
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_lock_wait_timeouts_total", Help: "Waits that ended without a hold: a timeout, a cancel, or the waiter's session or lease ending.",
		}),
		expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_lock_lease_expiries_total", Help: "Leases ended by their expiry (renewals did not come in time).",
		}),
		deadlocks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_lock_deadlocks_total", Help: "Cycles of the wait-for graph this member found.",
		}),
		breaks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "arbor_lock_breaks_total", Help: "Locks broken through this member (their holders' nodes deleted by an admin).",
		}),
		renewals: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "arbor_lock_renewal_seconds",
			Help:    "How late lease renewals commit after they are due (a third of the TTL after the renewal before; 0 for one on time or early).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
	}
	reg.MustRegister(m.acquire, m.hold, m.timeouts, m.expiries, m.deadlocks, m.breaks, m.renewals, queueCollector{s})
	return m
}

// renewed records how late (ms) a renewal committed after it was due.
func (m *lockMetrics) renewed(lateMs int64) {
	m.renewals.Observe(float64(max(lateMs, 0)) / 1000)
}

// observer feeds the metrics from the lock index.
func (m *lockMetrics) observer() locks.Observer {
	return locks.Observer{
		Acquired: func(ms int64) { m.acquire.Observe(float64(ms) / 1000) },
		Released: func(ms int64) { m.hold.Observe(float64(ms) / 1000) },
		GaveUp:   m.timeouts.Inc,
	}
}

// queueCollector shows the locks' queues: the longest few by lock, the
// longest of all, and how many locks there are.
type queueCollector struct{ s *Server }

var (
	queueLengthDesc = prometheus.NewDesc("arbor_lock_queue_length",
		"Waiters of the locks with the longest queues (the 10 longest).", []string{"lock"}, nil)
	maxQueueDesc = prometheus.NewDesc("arbor_lock_max_queue_length", "Waiters of the lock with the longest queue.", nil, nil)
	locksDesc    = prometheus.NewDesc("arbor_locks", "Locks: paths with lock nodes under them.", nil, nil)
	oldestDesc   = prometheus.NewDesc("arbor_lock_oldest_hold_seconds", "How long the oldest hold of any lock has lasted; 0 if nothing is held.", nil, nil)
)

func (queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueLengthDesc
	ch <- maxQueueDesc
	ch <- locksDesc
	ch <- oldestDesc
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	var qs []locks.Queue
	var n int
	var oldest int64
	var held bool
	c.s.fsm.read(func(t *tree.Tree) {
		c.s.eachShard(t, func(_ *tree.Tree, x *locks.Index, serves func(string) bool) {
			gqs, gn := x.Longest(longestQueues, serves)
			qs, n = append(qs, gqs...), n+gn
			if o, h := x.OldestHold(serves); h && (!held || o < oldest) {
				oldest, held = o, true
			}
		})
	})
	locks.SortQueues(qs)
	qs = qs[:min(longestQueues, len(qs))]
	var age float64
	if held {
		age = max(0, time.Since(time.UnixMilli(oldest)).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age)
	longest := 0
	for _, q := range qs {
		ch <- prometheus.MustNewConstMetric(queueLengthDesc, prometheus.GaugeValue, float64(q.Waiters), q.Path)
		longest = max(longest, q.Waiters)
	}
	ch <- prometheus.MustNewConstMetric(maxQueueDesc, prometheus.GaugeValue, float64(longest))
	ch <- prometheus.MustNewConstMetric(locksDesc, prometheus.GaugeValue, float64(n))
}

// watchDeadlocks looks for cycles of the wait-for graph every
// deadlockInterval, and logs and counts each new one; with EndDeadlocks,
// the leader ends the youngest wait of each (endWait).
func (s *Server) watchDeadlocks() {
	defer s.wg.Done()
	tick := time.NewTicker(deadlockInterval)
	defer tick.Stop()
	seen := map[string]bool{}
	for {
		select {
		case <-tick.C:
		case <-s.stopc:
			return
		}
		var waits []wire.LockWait
		s.fsm.read(func(t *tree.Tree) { waits, _ = s.waits(t, nil) })
		cycles := locks.Cycles(waits)
		now := map[string]bool{}
		for _, c := range cycles {
			key := cycleKey(c)
			now[key] = true
			if !seen[key] {
				s.lockMetrics.deadlocks.Inc()
				s.log.Warn("deadlock: holders wait for each other's locks", zap.String("cycle", key))
			}
			if s.cfg.EndDeadlocks && s.node.IsLeader() {
				s.endWait(c[0])
			}
		}
		seen = now
	}
}

// cycleKey names a cycle by its waits, the same whichever wait it starts
// at: "p1 (holder g1) waits for /a; p2 (holder g2) waits for /b".
func cycleKey(c []wire.LockWait) string {
	waits := make([]string, len(c))
	for i, w := range c {
		waits[i] = w.Waiter.Owner + " (holder " + w.Waiter.Holder + ") waits for " + w.Lock
	}
	slices.Sort(waits)
	return strings.Join(waits, "; ")
}
