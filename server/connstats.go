package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// latencyStats keeps the last, least, greatest and mean of request
// latencies, as ZooKeeper reports them.
type latencyStats struct {
	last, min, max, sum time.Duration
	n                   int64
}

func (l *latencyStats) add(d time.Duration) {
	if l.n == 0 || d < l.min {
		l.min = d
	}
	l.max = max(l.max, d)
	l.last = d
	l.sum += d
	l.n++
}

func (l *latencyStats) avg() time.Duration {
	if l.n == 0 {
		return 0
	}
	return l.sum / time.Duration(l.n)
}

// connStats is what the stat, cons and mntr four-letter words report of a
// connection (ZooKeeper's ServerCnxn statistics), for either protocol.
type connStats struct {
	established time.Time // set before the connection is shared
	nRecv       atomic.Int64
	nSent       atomic.Int64

	mu        sync.Mutex // guards the fields below
	timeoutMs int32      // the session's negotiated timeout
	lastOp    string     // the latest request's op, as the codec names it
	lastXid   int32
	lastZxid  int64
	lastResp  time.Time
	latency   latencyStats
}

func (s *connStats) init() {
	s.established = time.Now()
	s.lastOp, s.lastXid = "NA", -1
}

// received counts a frame read from the connection.
func (s *connStats) received(srv *Server) {
	s.nRecv.Add(1)
	srv.stats.nRecv.Add(1)
}

// sent counts a frame queued to the connection.
func (s *connStats) sent(srv *Server) {
	s.nSent.Add(1)
	srv.stats.nSent.Add(1)
}

// attached records the session's negotiated timeout.
func (s *connStats) attached(timeoutMs int32) {
	s.mu.Lock()
	s.timeoutMs, s.lastOp, s.lastResp = timeoutMs, "session", time.Now()
	s.mu.Unlock()
}

// answered records a request answered after took.
func (s *connStats) answered(srv *Server, op string, xid int32, zxid int64, took time.Duration) {
	now := time.Now()
	s.mu.Lock()
	s.lastOp, s.lastResp, s.lastZxid = op, now, zxid
	if xid >= 0 {
		s.lastXid = xid
	}
	s.latency.add(took)
	s.mu.Unlock()
	srv.stats.latency.add(took)
}

// serverStats are the server's totals over every connection it had. They
// are atomics: every responder goroutine updates them.
type serverStats struct {
	nRecv   atomic.Int64
	nSent   atomic.Int64
	reads   atomic.Int64 // reads answered (wire.ClassRead), for the overview's rates
	latency atomicLatency
}

// atomicLatency is latencyStats without the last value, updated without a
// lock.
type atomicLatency struct {
	n, sum   atomic.Int64
	min, max atomic.Int64 // nanoseconds; min is 0 until the first value
}

func (l *atomicLatency) add(d time.Duration) {
	v := int64(d)
	l.sum.Add(v)
	for cur := l.max.Load(); v > cur && !l.max.CompareAndSwap(cur, v); cur = l.max.Load() {
	}
	for cur := l.min.Load(); (cur == 0 || v < cur) && v > 0 && !l.min.CompareAndSwap(cur, v); cur = l.min.Load() {
	}
	l.n.Add(1)
}

// load returns the least, mean and greatest latency so far.
func (l *atomicLatency) load() (lo, avg, hi time.Duration) {
	n := l.n.Load()
	if n > 0 {
		avg = time.Duration(l.sum.Load() / n)
	}
	return time.Duration(l.min.Load()), avg, time.Duration(l.max.Load())
}
