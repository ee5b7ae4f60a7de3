package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/internal/quota"
	"github.com/arbor-coord/arbor/raftnode"
	"github.com/arbor-coord/arbor/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// The memory budget (Config.MemoryBudget, arbord --memory-budget) bounds
// what a member holds for its clients' traffic: every buffer that grows
// with the load rather than with the data stored. It is shared out so:
//
//	requests      1/4   request frames read and not yet answered, all connections
//	replies       1/4   replies and notifications queued for clients, all connections
//	uncommitted   1/8   proposals not yet committed (raft drops proposals past it)
//	apply queue   1/8   committed entries waiting to be applied
//	log cache     1/16  the newest raft log entries (older ones are read from disk)
//	in flight     1/32  entries sent to each follower and not yet acknowledged
//
// The tree itself, the znodes and their data, is not in the budget: it is
// what the clients chose to store, bounded by the data and request limits.
// docs/reliability.md says what each share does when it is spent.
const DefaultMemoryBudget = 512 << 20

// memoryWarnAt is the share of the budget held past which a member logs a
// warning; memoryCalmAt the share under which it says it is back.
const (
	memoryWarnAt = 0.8
	memoryCalmAt = 0.7
)

// throttleWait is how long a request waits for room in the member's
// request memory before it is refused: the reader stops reading the
// connection meanwhile (TCP slows the client), and a ping behind the
// request waits that long at most.
const throttleWait = time.Second

// replyHighWater is how much unsent output a connection may have before
// its responder waits for the client to read: a client that does not read
// is no longer answered, then no longer read, instead of having its
// replies pile up. A single reply may be larger.
const replyHighWater = 1 << 20

// alreadyDone is a done channel for a quota.Pool.Take that must not wait.
var alreadyDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// memory keeps the member's memory budget and what is held against it.
type memory struct {
	budget   int64
	requests *quota.Pool  // the frames of the requests read and not yet answered
	replies  atomic.Int64 // output queued for clients and not yet written
	node     *raftnode.Node
	warned   bool // the watch goroutine's: over memoryWarnAt when last looked
}

func newMemory(budget int64) *memory {
	return &memory{budget: budget, requests: quota.New(budget / 4)}
}

// raftConfig shares the budget out to the raft member.
func (m *memory) raftConfig(rc *raftnode.Config) {
	rc.UncommittedBytes = uint64(m.uncommitted())
	rc.ApplyQueueBytes = m.budget / 8
	rc.LogCacheBytes = int(m.budget / 16)
	rc.InflightBytes = uint64(m.budget / 32)
}

// uncommitted is the leader's share for proposals not yet committed.
func (m *memory) uncommitted() int64 { return m.budget / 8 }

// repliesFull reports whether the clients' queued output is over its share.
func (m *memory) repliesFull() bool { return m.replies.Load() > m.budget/4 }

// held is what is held against the budget, by part.
func (m *memory) held() map[string]int64 {
	h := map[string]int64{"requests": m.requests.Used(), "replies": m.replies.Load()}
	if m.node != nil {
		h["log_cache"], h["apply_queue"] = m.node.MemoryHeld()
	}
	return h
}

// register adds the budget's metrics to reg.
func (m *memory) register(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "arbor_memory_budget_bytes", Help: "The member's memory budget for its clients' traffic (--memory-budget).",
	}, func() float64 { return float64(m.budget) }))
	held := func(part string) func() float64 { return func() float64 { return float64(m.held()[part]) } }
	for _, part := range []string{"requests", "replies", "log_cache", "apply_queue"} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "arbor_memory_held_bytes", Help: "Bytes held against the memory budget, by part.",
			ConstLabels: prometheus.Labels{"part": part},
		}, held(part)))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "arbor_memory_budget_used_ratio", Help: "The share of the memory budget held, 0 to 1 (and past 1 while one large request or reply is let through).",
	}, func() float64 { return m.usedRatio(m.held()) }))
}

func (m *memory) usedRatio(held map[string]int64) float64 {
	var sum int64
	for _, v := range held {
		sum += v
	}
	return float64(sum) / float64(m.budget)
}

// check logs a warning when the member's held memory crosses memoryWarnAt
// of its budget, and a line when it is back under memoryCalmAt. The
// watch goroutine calls it.
func (m *memory) check(log *zap.Logger) {
	held := m.held()
	ratio := m.usedRatio(held)
	fields := []zap.Field{zap.Int64("budget", m.budget), zap.Float64("used", ratio), zap.Any("held", held)}
	switch {
	case !m.warned && ratio >= memoryWarnAt:
		m.warned = true
		log.Warn("memory held for clients' traffic is over 80% of the budget (--memory-budget): writers are slowed, then refused", fields...)
	case m.warned && ratio < memoryCalmAt:
		m.warned = false
		log.Info("memory held for clients' traffic is back under 70% of the budget", fields...)
	}
}

// watchMemory checks the member's memory once a second until it closes.
func (s *Server) watchMemory() {
	defer s.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.memory.check(s.log)
		case <-s.stopc:
			return
		}
	}
}

// admitMemory takes room for r's frame, size bytes, in the member's
// request memory, waiting up to throttleWait while it is full; a request
// still without room then is refused with ErrThrottled (its data dropped
// at once), so that a member out of room answers rather than holds.
func (c *conn) admitMemory(r *request, size int) {
	pool := c.srv.memory.requests
	if pool.Take(int64(size), alreadyDone) { // no wait: most requests fit
		r.pooled = size
		return
	}
	c.srv.limits.throttled.WithLabelValues(limitMemory).Inc()
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, throttleWait)
	defer cancel()
	ok := pool.Take(int64(size), ctx.Done())
	c.srv.limits.waited.WithLabelValues(limitMemory).Add(time.Since(start).Seconds())
	r.start = time.Now()
	if ok {
		r.pooled = size
		return
	}
	r.err = c.srv.limits.refuse(c.log, limitMemory, wire.CodeThrottled,
		"the member's memory for requests (a quarter of --memory-budget, %d bytes) stayed full for %v", pool.Limit(), throttleWait)
	r.req = wire.Request{Xid: r.req.Xid, Op: r.req.Op}
}
