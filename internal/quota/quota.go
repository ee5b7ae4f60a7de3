// Package quota bounds the bytes that many goroutines may hold at once in
// a buffer they share, such as the requests a member has read and not yet
// answered: a taker waits while the pool is spent.
package quota

import "sync"

// Pool is a number of bytes to lend. It is safe for concurrent use. It
// does not queue its takers: when bytes come back, every waiter tries
// again, and a large taker may wait behind small ones.
type Pool struct {
	limit int64

	mu    sync.Mutex // guards used and freed
	used  int64
	freed chan struct{} // closed and replaced whenever bytes come back
}

// New returns a pool of limit bytes.
func New(limit int64) *Pool {
	return &Pool{limit: limit, freed: make(chan struct{})}
}

// Take takes n bytes, waiting while they do not fit, until done is
// closed; it reports whether it took them. A pool with nothing lent lends
// whatever is asked, so a taker larger than the pool is slowed, not
// refused forever.
func (p *Pool) Take(n int64, done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		if p.used == 0 || p.used+n <= p.limit {
			p.used += n
			p.mu.Unlock()
			return true
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			return false
		}
	}
}

// Give returns n bytes taken before and wakes the waiters.
func (p *Pool) Give(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// Used is how many bytes are lent.
func (p *Pool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Limit is the pool's size.
func (p *Pool) Limit() int64 { return p.limit }
