package clock

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Manual is a clock for tests: its time stands still until Advance moves
// it, and a timer fires when the time reaches its deadline, in deadline
// order (timers due at the same time in the order they were set).
// AfterFunc's functions run on the goroutine that calls Advance, one after
// another. WaitForTimers lets a test wait until the code under test is
// waiting on the clock before it advances it.
type Manual struct {
	mu      sync.Mutex // guards everything below
	now     time.Time
	seq     uint64         // orders timers set for the same time
	pending []*manualTimer // the timers not yet fired or stopped
	changed chan struct{}  // closed and replaced whenever a timer is set
}

// NewManual returns a manual clock that reads start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer whose channel receives the clock's time when
// it reaches now plus d; at once if d <= 0.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc returns a timer that calls f when the clock reaches now plus
// d (on the next Advance, even if d <= 0).
func (m *Manual) AfterFunc(d time.Duration, f func()) Timer {
	t := &manualTimer{m: m, f: f}
	t.Reset(d)
	return t
}

// Advance moves the clock d forward, firing on the way every timer that
// comes due, each at its own deadline (so that a timer set by a fired
// function is fired too if it is due by the end).
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	end := m.now.Add(d)
	m.mu.Unlock()
	for m.fireNext(end) {
	}
	m.mu.Lock()
	if end.After(m.now) {
		m.now = end
	}
	m.mu.Unlock()
}

// AdvanceToNext moves the clock to the deadline of the earliest pending
// timer and fires it (and any due with it); it reports false, and does
// nothing, when no timer is pending.
func (m *Manual) AdvanceToNext() bool {
	d, ok := m.Next()
	if ok {
		m.Advance(d)
	}
	return ok
}

// Next returns how long until the earliest pending timer is due, or false
// if none is pending.
func (m *Manual) Next() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) == 0 {
		return 0, false
	}
	return max(m.pending[0].when.Sub(m.now), 0), true
}

// Timers returns how long until each pending timer is due, earliest
// first: what the code under test is waiting for.
func (m *Manual) Timers() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	ds := make([]time.Duration, len(m.pending))
	for i, t := range m.pending {
		ds[i] = max(t.when.Sub(m.now), 0)
	}
	return ds
}

// Pending returns the number of timers set and not yet fired or stopped.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// WaitForTimers waits until at least n timers are pending, or ctx is done.
func (m *Manual) WaitForTimers(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		got, changed := len(m.pending), m.changed
		m.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fireNext fires the earliest timer due by end, if there is one.
func (m *Manual) fireNext(end time.Time) bool {
	m.mu.Lock()
	if len(m.pending) == 0 || m.pending[0].when.After(end) {
		m.mu.Unlock()
		return false
	}
	t := m.pending[0]
	m.pending = m.pending[1:]
	if t.when.After(m.now) {
		m.now = t.when
	}
	now := m.now
	if t.c != nil {
		select {
		case t.c <- now:
		default: // not read since it last fired: a time.Timer drops it too
		}
	}
	m.mu.Unlock()
	if t.f != nil {
		t.f()
	}
	return true
}

// removeLocked takes t off the pending list, reporting whether it was on it.
func (m *Manual) removeLocked(t *manualTimer) bool {
	i := slices.Index(m.pending, t)
	if i < 0 {
		return false
	}
	m.pending = slices.Delete(m.pending, i, i+1)
	return true
}

// addLocked puts t on the pending list in deadline order and wakes
// WaitForTimers.
func (m *Manual) addLocked(t *manualTimer) {
	m.seq++
	t.seq = m.seq
	i, _ := slices.BinarySearchFunc(m.pending, t, func(a, b *manualTimer) int {
		if c := a.when.Compare(b.when); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	m.pending = slices.Insert(m.pending, i, t)
	close(m.changed)
	m.changed = make(chan struct{})
}

type manualTimer struct {
	m    *Manual
	c    chan time.Time // nil for AfterFunc
	f    func()         // nil for NewTimer
	when time.Time      // guarded by m.mu, as seq
	seq  uint64
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	t.drainLocked()
	return t.m.removeLocked(t)
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	t.drainLocked()
	was := t.m.removeLocked(t)
	t.when = t.m.now.Add(d)
	if t.c != nil && d <= 0 {
		t.c <- t.m.now // due already: fired at once, as a time.Timer would be
		return was
	}
	t.m.addLocked(t)
	return was
}

// drainLocked empties the channel, so that no time from before a Stop or
// Reset is received after it.
func (t *manualTimer) drainLocked() {
	if t.c == nil {
		return
	}
	select {
	case <-t.c:
	default:
	}
}
