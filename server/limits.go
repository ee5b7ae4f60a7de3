package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/arbor-coord/arbor/locks"
	"math"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Resource limits keep one noisy client from hurting the others: each caps
// what a single client IP, connection or session can hold on this server,
// and a client over one is refused with a clear error, or, for the
// outstanding requests of a connection, made to wait (back-pressure through
// TCP: the reader stops reading). Every limit is a Config field and an
// arbord flag (the frame limit follows the data limit), is shown in
// /metrics as arbor_limit{limit=...}, and its
// refusals are counted in arbor_limit_refusals_total{limit=...};
// docs/security.md lists them. Which ops count against the per-request
// limits (outstanding, watches, ephemerals, data size, listings) is a
// column of wire's table of ops (wire.Op.Counts), and the checks here
// follow it.

// NoLimit, as a Config limit, turns that limit off (any negative value
// does). MaxOutstanding and MaxOutstandingBytes take no NoLimit.
const NoLimit = -1

// The limits' names, as /metrics labels them.
const (
	limitConns            = "connections"
	limitConnsPerIP       = "connections_per_ip"
	limitSessionsPerConn  = "sessions_per_connection"
	limitCarriedSessions  = "carried_sessions"
	limitOutstanding      = "outstanding_requests"
	limitOutstandingBytes = "outstanding_bytes"
	limitWatches          = "watches_per_connection"
	limitEphemerals       = "ephemerals_per_session"
	limitDataSize         = "data_size"
	limitFrameSize        = "frame_size"
	limitListNames        = "listing_names"
	limitListBytes        = "listing_bytes"
	limitMemory           = "memory_requests"    // the member's request memory, a share of Config.MemoryBudget
	limitUncommitted      = "memory_uncommitted" // the leader's proposals not yet committed, a share of Config.MemoryBudget
	limitPathLength       = "path_length"
	limitNameLength       = "name_length"
	limitHandshaking      = "handshaking_connections"
	limitHTTPConns        = "http_connections"
)

// The limits' defaults.
const (
	DefaultMaxConnsPerIP       = 60 // ZooKeeper's maxClientCnxns
	DefaultMaxSessionsPerConn  = 1024
	DefaultMaxCarriedSessions  = 16384
	DefaultMaxOutstanding      = 1000
	DefaultMaxOutstandingBytes = 16 << 20
	DefaultMaxWatches          = 100_000
	DefaultMaxEphemerals       = 10_000
	DefaultMaxListNames        = 1_000_000
	DefaultMaxListBytes        = 16 << 20
	DefaultMaxPath             = 4096 // Linux's PATH_MAX
	DefaultMaxName             = 1024
	DefaultMaxHandshaking      = 256
	DefaultHTTPMaxConns        = 1024
	DefaultHTTPIdleTimeout     = time.Minute
)

// MaxHTTPIdleTimeout bounds Config.HTTPIdleTimeout: an idle connection
// holds a descriptor, and clients that open many and leave them idle must
// not hold them for long.
const MaxHTTPIdleTimeout = time.Minute

func (c *Config) setLimitDefaults() {
	for _, l := range []struct {
		v   *int
		def int
	}{
		{&c.MaxConnsPerIP, DefaultMaxConnsPerIP},
		{&c.MaxSessionsPerConn, DefaultMaxSessionsPerConn},
		{&c.MaxCarriedSessions, DefaultMaxCarriedSessions},
		{&c.MaxOutstanding, DefaultMaxOutstanding},
		{&c.MaxOutstandingBytes, DefaultMaxOutstandingBytes},
		{&c.MaxWatches, DefaultMaxWatches},
		{&c.MaxEphemerals, DefaultMaxEphemerals},
		{&c.MaxListNames, DefaultMaxListNames},
		{&c.MaxListBytes, DefaultMaxListBytes},
		{&c.MaxPath, DefaultMaxPath},
		{&c.MaxName, DefaultMaxName},
		{&c.MaxHandshaking, DefaultMaxHandshaking},
		{&c.HTTPMaxConns, DefaultHTTPMaxConns},
	} {
		if *l.v == 0 {
			*l.v = l.def
		}
	}
}

// checkLimits refuses limits that cannot be turned off: without a bound on
// a connection's outstanding requests, a client that never reads its
// replies could make the server hold any amount of memory, and without an
// HTTP idle timeout, clients could hold descriptors with idle connections.
func (c *Config) checkLimits() error {
	if c.HTTPIdleTimeout <= 0 || c.HTTPIdleTimeout > MaxHTTPIdleTimeout {
		return fmt.Errorf("the HTTP idle timeout must be more than 0 and at most %v, not %v", MaxHTTPIdleTimeout, c.HTTPIdleTimeout)
	}
	if c.MaxOutstanding < 1 {
		return fmt.Errorf("the outstanding requests limit must be at least 1, not %d", c.MaxOutstanding)
	}
	if c.MemoryBudget < 1<<20 {
		return fmt.Errorf("the memory budget must be at least 1 MiB, not %d bytes", c.MemoryBudget)
	}
	if c.MaxOutstandingBytes < 1 {
		return fmt.Errorf("the outstanding bytes limit must be at least 1, not %d", c.MaxOutstandingBytes)
	}
	if c.WatchHistoryEvents < 0 && c.WatchHistoryAge < 0 && c.WatchHistoryBytes < 0 {
		return errors.New("the watch history needs at least one limit: events, age or bytes")
	}
	if c.LockHistory > locks.MaxHistory {
		return fmt.Errorf("the lock history keeps at most %d events, not %d", locks.MaxHistory, c.LockHistory)
	}
	return nil
}

// over reports whether n is over limit, a Config limit where a negative
// value means none.
func over(n, limit int) bool { return limit >= 0 && n > limit }

// limiter keeps the server-wide state of the limits: the connections of
// each client IP, the metrics, and the rate of refusal log lines.
type limiter struct {
	cfg *Config

	values    *prometheus.GaugeVec   // the configured limits
	refusals  *prometheus.CounterVec // requests and connections refused, by limit
	throttled *prometheus.CounterVec // times a connection's reader waited, by limit
	waited    *prometheus.CounterVec // seconds it waited, by limit

	handshakes *handshakes // the connections in their handshake

	logThrottle // refusals logged, a line a second per limit

	mu    sync.Mutex // guards perIP
	perIP map[string]int
}

func newLimiter(cfg *Config, reg prometheus.Registerer) *limiter {
	l := &limiter{
		cfg: cfg,
		values: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "arbor_limit", Help: "A configured limit, by name; +Inf when it is off.",
		}, []string{"limit"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbor_limit_refusals_total", Help: "Connections and requests refused for being over a limit, by limit.",
		}, []string{"limit"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbor_throttled_total", Help: "Times a connection stopped reading requests until earlier ones were answered, by limit.",
		}, []string{"limit"}),
		waited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "arbor_throttled_seconds_total", Help: "Time connections spent not reading requests until earlier ones were answered, by limit.",
		}, []string{"limit"}),
		perIP: map[string]int{},
	}
	for name, v := range map[string]int{
		limitConns: cfg.MaxConns, limitConnsPerIP: cfg.MaxConnsPerIP,
		limitSessionsPerConn: cfg.MaxSessionsPerConn, limitCarriedSessions: cfg.MaxCarriedSessions,
		limitOutstanding: cfg.MaxOutstanding, limitOutstandingBytes: cfg.MaxOutstandingBytes,
		limitWatches: cfg.MaxWatches, limitEphemerals: cfg.MaxEphemerals,
		limitDataSize: cfg.MaxDataSize, limitFrameSize: cfg.MaxFrame,
		limitListNames: cfg.MaxListNames, limitListBytes: cfg.MaxListBytes,
		limitPathLength: cfg.MaxPath, limitNameLength: cfg.MaxName,
		limitHandshaking: cfg.MaxHandshaking,
		limitHTTPConns:   cfg.HTTPMaxConns,
	} {
		value := float64(v)
		if v < 0 {
			value = math.Inf(1)
		}
		l.values.WithLabelValues(name).Set(value)
		l.refusals.WithLabelValues(name) // shown as 0 until the first refusal
	}
	l.values.WithLabelValues(limitMemory).Set(float64(cfg.MemoryBudget / 4))
	l.refusals.WithLabelValues(limitMemory)
	for _, name := range []string{limitOutstanding, limitOutstandingBytes, limitMemory} {
		l.throttled.WithLabelValues(name)
		l.waited.WithLabelValues(name)
	}
	l.handshakes = newHandshakes(cfg)
	reg.MustRegister(l.values, l.refusals, l.throttled, l.waited,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "arbor_handshaking_connections", Help: "Client connections accepted that have not finished their handshake.",
		}, func() float64 { return float64(l.handshakes.count()) }))
	return l
}

// refuse counts a refusal for limit, logs it on log at most once a second
// per limit (a flood of refusals must not flood the log), and returns the
// error the client is answered with: code, and a message naming the limit.
func (l *limiter) refuse(log *zap.Logger, limit string, code wire.Code, format string, args ...any) error {
	err := wire.Errorf(code, "%s (the %s limit)", fmt.Sprintf(format, args...), limit)
	l.refused(log, limit, err)
	return err
}

// refused counts a refusal for limit and logs err on log, at most once a
// second per limit, as refuse does; it is for refusals with no client
// error to answer, such as a connection closed at once.
func (l *limiter) refused(log *zap.Logger, limit string, err error) {
	l.refusals.WithLabelValues(limit).Inc()
	if suppressed, ok := l.mayLog(limit, time.Now()); ok {
		log.Warn("refused: over a limit", zap.String("limit", limit), zap.Error(err),
			zap.Int("refusals_not_logged", suppressed))
	}
}

// logThrottle lets a line of each key be logged once a second at most,
// so that clients cannot flood the log, and counts the lines it held
// back. Its zero value is ready.
type logThrottle struct {
	mu         sync.Mutex
	lastLog    map[string]time.Time // mu guards lastLog and suppressed
	suppressed map[string]int
}

// mayLog reports whether a line of key may be logged at now, and how
// many were not logged since the last one that was.
func (l *logThrottle) mayLog(key string, now time.Time) (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastLog == nil {
		l.lastLog, l.suppressed = map[string]time.Time{}, map[string]int{}
	}
	if last, seen := l.lastLog[key]; seen && now.Sub(last) < time.Second {
		l.suppressed[key]++
		return 0, false
	}
	suppressed = l.suppressed[key]
	l.lastLog[key], l.suppressed[key] = now, 0
	return suppressed, true
}

// addConn counts a new connection from ip, unless ip is at its limit.
func (l *limiter) addConn(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if over(l.perIP[ip]+1, l.cfg.MaxConnsPerIP) {
		return false
	}
	l.perIP[ip]++
	return true
}

// dropConn forgets a connection addConn counted.
func (l *limiter) dropConn(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// budget bounds a connection's outstanding requests: those read and not yet
// answered, by count and by the bytes of their frames. The reader takes
// from it before it queues a request, and waits while the budget is spent;
// the responder gives back once the reply is queued. So a client that
// pipelines faster than the server answers is slowed to the server's pace
// (TCP pushes back once the reader stops), and a connection holds at most
// maxBytes of requests however large each is: one request always fits, so
// a single frame of the largest size is never stuck.
type budget struct {
	maxCount, maxBytes int

	mu    sync.Mutex // guards count and bytes
	count int
	bytes int
	freed chan struct{} // a token after each give, for the one reader that may wait
}

func newBudget(maxCount, maxBytes int) *budget {
	return &budget{maxCount: maxCount, maxBytes: maxBytes, freed: make(chan struct{}, 1)}
}

// take waits until a request of n bytes fits, or ctx is done (ok false). It
// reports the limit it waited for ("" if it did not wait) and how long.
func (b *budget) take(ctx context.Context, n int) (limit string, waited time.Duration, ok bool) {
	var start time.Time
	for {
		b.mu.Lock()
		full := b.fullLocked(n)
		if full == "" {
			b.count++
			b.bytes += n
		}
		b.mu.Unlock()
		if full == "" {
			if limit != "" {
				waited = time.Since(start)
			}
			return limit, waited, true
		}
		if limit == "" {
			limit, start = full, time.Now()
		}
		select {
		case <-b.freed:
		case <-ctx.Done():
			return limit, time.Since(start), false
		}
	}
}

// fullLocked names the limit a request of n bytes would go over, or is "".
func (b *budget) fullLocked(n int) string {
	switch {
	case b.count >= b.maxCount:
		return limitOutstanding
	case b.count > 0 && b.bytes+n > b.maxBytes:
		return limitOutstandingBytes
	}
	return ""
}

// give returns what take took for a request of n bytes.
func (b *budget) give(n int) {
	b.mu.Lock()
	b.count--
	b.bytes -= n
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}

// admitRequest takes r's place in the connection's budget, waiting while it
// is spent; size is r's frame length. It reports false if the connection
// closed meanwhile. A request that waited starts its clock (its latency, a
// write's timeout) when it is let through.
func (c *conn) admitRequest(r *request, size int) bool {
	limit, waited, ok := c.budget.take(c.ctx, size)
	if limit != "" {
		c.srv.limits.throttled.WithLabelValues(limit).Inc()
		c.srv.limits.waited.WithLabelValues(limit).Add(waited.Seconds())
		r.start = time.Now()
	}
	if ok {
		r.size = size
	}
	return ok
}

// applied stops counting r's ephemeral creates in flight once its outcome
// is known, before its reply is queued: they are in the local tree now if
// they succeeded, and a create the client sends on seeing the reply must
// not find them counted in both.
func (c *conn) applied(r *request) {
	if r.ephemerals > 0 {
		c.ephemeralsInFlight.Add(-int64(r.ephemerals))
		r.ephemerals = 0
	}
}

// finished gives back what r held against the connection's limits, once
// its reply is queued: its place in the budget, and its ephemeral creates
// if applied did not.
func (c *conn) finished(r *request) {
	c.applied(r)
	if r.size > 0 {
		c.budget.give(r.size)
	}
	if r.pooled > 0 {
		c.srv.memory.requests.Give(int64(r.pooled))
		r.pooled = 0
	}
}

// admitWrite checks a write before it is proposed: the server's checks of
// paths and data sizes (Server.admit), then the session's ephemeral limit.
func (c *conn) admitWrite(r *request) error {
	err := c.srv.admit(&r.req)
	if errors.Is(err, wire.ErrDataTooLarge) {
		c.srv.limits.refusals.WithLabelValues(limitDataSize).Inc()
	}
	if err != nil {
		return err
	}
	return c.admitEphemerals(r)
}

// admitEphemerals refuses a write whose ephemeral creates would take the
// session over its ephemeral limit, counting the session's ephemerals in
// this member's tree and the ephemeral creates this connection has
// proposed and not yet seen answered. A session lives on one connection,
// so the count is exact but for two cases, where it errs on the side of
// refusing: a create applied an instant ago whose outcome its connection
// has not yet taken (applied) is counted twice (in the tree and in
// flight), which a client that waits for its replies never sees, and a
// create that will fail (the node exists) is counted until it does. It is
// not exact across a move of the session: the creates still in flight on
// the connection it left are not counted.
func (c *conn) admitEphemerals(r *request) error {
	limit := c.srv.cfg.MaxEphemerals
	if limit < 0 || !r.req.Op.Counts(wire.LimitEphemerals) {
		return nil
	}
	n := ephemeralCreates(&r.req)
	if n == 0 {
		return nil
	}
	// In flight first, then the tree: a create leaves the in-flight count
	// only after it is in the tree, so read in this order it is counted
	// once or twice, never missed (the other order missed a create that
	// moved between the two reads, and let a session past its limit).
	held := int(c.ephemeralsInFlight.Load())
	c.srv.fsm.read(func(t *tree.Tree) { held += t.SessionEphemeralCount(c.session) })
	if over(held+n, limit) {
		return c.srv.limits.refuse(c.log, limitEphemerals, wire.CodeQuotaExceeded,
			"session %#x owns %d ephemeral nodes, or is creating them, and may own %d", c.session, held, limit)
	}
	c.ephemeralsInFlight.Add(int64(n))
	r.ephemerals = n
	return nil
}

// ephemeralCreates counts the ephemeral nodes a write creates.
func ephemeralCreates(req *wire.Request) int {
	ops := []wire.Request{*req}
	if req.Op == wire.OpMulti {
		ops = req.Ops
	}
	n := 0
	for i := range ops {
		if ops[i].Op == wire.OpCreate && ops[i].Mode.IsEphemeral() || ops[i].Op == wire.OpLeaseCreate {
			n++ // a lease counts as one of the session's ephemerals, and its nodes too
		}
	}
	return n
}

// addWatch leaves a watch of kind on path for c, unless c holds as many
// watches as it may.
func (s *Server) addWatch(kind watchKind, path string, c *conn) error {
	if s.watches.add(kind, path, c) {
		return nil
	}
	return s.refuseWatch(c)
}

// addDataWatch leaves the data watch of req, a getData or an exists, for
// c: for req's lock waiter too, if it names one (wire.Request.Waiter).
func (s *Server) addDataWatch(req *wire.Request, c *conn) error {
	if req.Waiter == "" {
		return s.addWatch(watchData, req.Path, c)
	}
	if s.watches.addWaiter(req.Path, c, req.Waiter) {
		return nil
	}
	return s.refuseWatch(c)
}

func (s *Server) refuseWatch(c *conn) error {
	return s.limits.refuse(c.log, limitWatches, wire.CodeQuotaExceeded,
		"the connection holds %d watches, as many as it may", s.cfg.MaxWatches)
}

// roomForWatches refuses a setWatches that asks for n watches when c could
// not hold them all besides those it holds. Watches the client holds
// already, or that fire at once, are counted too: the request is refused
// whole or taken whole.
func (s *Server) roomForWatches(c *conn, n int) error {
	held := s.watches.held(c)
	if !over(held+n, s.cfg.MaxWatches) {
		return nil
	}
	return s.limits.refuse(c.log, limitWatches, wire.CodeQuotaExceeded,
		"setWatches asks for %d watches on a connection that holds %d and may hold %d", n, held, s.cfg.MaxWatches)
}

// children returns the names of a node's children, sorted, and its Stat,
// as t.Children does, unless the listing is over the limits. A node with
// too many children is refused before its names are gathered and sorted.
func (s *Server) children(t *tree.Tree, c *conn, path string) ([]string, wire.Stat, error) {
	st, err := t.Exists(path)
	if err != nil {
		return nil, wire.Stat{}, err
	}
	if over(int(st.NumChildren), s.cfg.MaxListNames) {
		return nil, wire.Stat{}, s.listingTooLong(c, int(st.NumChildren))
	}
	var names []string
	if s.isMergedListing(path) {
		names, st, err = s.mergedChildren(t, path)
	} else {
		names, st, err = t.Children(path)
	}
	if err == nil {
		err = s.checkListing(c, names)
	}
	if err != nil {
		return nil, wire.Stat{}, err
	}
	return names, st, nil
}

func (s *Server) listingTooLong(c *conn, n int) error {
	return s.limits.refuse(c.log, limitListNames, wire.CodeQuotaExceeded,
		"a listing of %d names is over the limit of %d", n, s.cfg.MaxListNames)
}

// checkListing refuses a getChildren or getEphemerals reply of names over
// the listing limits, before it is encoded into a frame larger than a
// client would take.
func (s *Server) checkListing(c *conn, names []string) error {
	if over(len(names), s.cfg.MaxListNames) {
		return s.listingTooLong(c, len(names))
	}
	if s.cfg.MaxListBytes < 0 {
		return nil
	}
	size := 0
	for _, name := range names {
		size += len(name)
	}
	if over(size, s.cfg.MaxListBytes) {
		return s.limits.refuse(c.log, limitListBytes, wire.CodeQuotaExceeded,
			"a listing of %d bytes of names is over the limit of %d", size, s.cfg.MaxListBytes)
	}
	return nil
}
