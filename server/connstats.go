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
	srv.stats.mu.Lock()
	srv.stats.latency.add(took)
	srv.stats.mu.Unlock()
}

// serverStats are the server's totals over every connection it had.
type serverStats struct {
	nRecv atomic.Int64
	nSent atomic.Int64

	mu      sync.Mutex // guards latency
	latency latencyStats
}
