package recipes

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// ErrDeadlinePassed is the reason a hold is lost when its stop-by deadline
// (Mutex.Deadline) passed before word came that the hold lasts longer:
// from then on another contender may be granted the lock, though nothing
// says one has been yet.
var ErrDeadlinePassed = errors.New("the hold's stop-by deadline passed")

// Defaults of WithClockDrift and WithSafetyMargin.
const (
	// DefaultClockDrift bounds how much slower than the cluster's clocks
	// the holder's clock may run: 1%. A computer's quartz is off by tens of
	// parts per million, and NTP slews a clock by at most 500 ppm (0.05%);
	// 1% is twenty times that, and costs 1% of the TTL or session timeout.
	DefaultClockDrift = 0.01
	// DefaultSafetyMargin is taken off every deadline: 100 ms. It covers
	// how far apart the members' wall clocks may be (a lease's expiry is
	// the wall time of the member that took its renewal plus the TTL, and
	// the leader reads it on its own), which NTP keeps within a few
	// milliseconds, and the time between the deadline and the holder
	// noticing Lost.
	DefaultSafetyMargin = 100 * time.Millisecond
)

// maxClockDrift is the highest drift WithClockDrift takes.
const maxClockDrift = 0.5

// WithClockDrift sets how much slower than the cluster's clocks the
// holder's monotonic clock may run, as a rate (default
// DefaultClockDrift, 0.01: 1%; taken within 0 to 0.5): a hold's stop-by
// deadline (Mutex.Deadline) is that much of its TTL, or session timeout,
// early.
func WithClockDrift(rate float64) Option {
	return func(o *options) { o.drift, o.driftSet = min(max(rate, 0), maxClockDrift), true }
}

// WithSafetyMargin sets how much earlier than the drift alone allows a
// hold's stop-by deadline (Mutex.Deadline) comes (default
// DefaultSafetyMargin, 100 ms): raise it if the members' wall clocks may
// be further apart, or if the holder needs time to stop what it does
// before the deadline (arbor lock takes its --kill-after off it).
func WithSafetyMargin(d time.Duration) Option {
	return func(o *options) { o.margin, o.marginSet = max(d, 0), true }
}

// stopBy is the stop-by deadline of one acquisition: the last moment, on
// the holder's monotonic clock, at which nothing granted the lock to
// anyone else yet, whatever happened meanwhile that the holder did not
// hear of. It is computed from the send of requests the cluster answered,
// never from their answers (the cluster acted after the send), less the
// clock drift and the safety margin:
//
//   - a hold bound to a lease: from the send of the lease's creation or
//     latest successful renewal, the lease's TTL or the session's
//     timeout, whichever is shorter (the lease ends with its session, and
//     applying a renewal counts as hearing from the session, see
//     server's fsm), and no later than the maximum hold after the
//     creation's send. A renewal is a write a quorum took, so this holds
//     whichever member answered and whatever the partition;
//   - a hold of the session alone: from client.Client.LastHeard, the
//     session's timeout less a third of it. A member cut off from the
//     quorum may answer pings until it notices, within an election
//     timeout, and its answers then reach no leader: the third assumes it
//     notices within a third of the session timeout (see docs/locks.md,
//     "The stop-by deadline").
type stopBy struct {
	c      *client.Client
	drift  float64
	margin time.Duration

	mu      sync.Mutex // guards the fields below
	leased  bool
	renewed time.Time     // the send of the lease's creation or latest successful renewal
	ttl     time.Duration // the lease's TTL, as the server granted it
	until   time.Time     // the creation's send plus the maximum hold, less the drift; zero: none
}

func (h *hold) newStopBy() *stopBy {
	return &stopBy{c: h.q.c, drift: h.drift, margin: h.margin}
}

// less returns d less the drift.
func (s *stopBy) less(d time.Duration) time.Duration {
	return d - time.Duration(float64(d)*s.drift)
}

// created records the lease of ttl created by a request sent at sent,
// ending at most maxHold after it (0: no maximum).
func (s *stopBy) created(sent time.Time, ttl, maxHold time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leased, s.renewed, s.ttl = true, sent, ttl
	if maxHold > 0 {
		s.until = sent.Add(s.less(maxHold))
	}
}

// renewedAt records a renewal, sent at sent, that kept the lease for ttl.
// Renewals that complete out of order keep the latest send.
func (s *stopBy) renewedAt(sent time.Time, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sent.After(s.renewed) {
		s.renewed, s.ttl = sent, ttl
	}
}

// at returns the deadline.
func (s *stopBy) at() time.Time {
	timeout := s.c.SessionTimeout()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leased {
		return s.c.LastHeard().Add(s.less(timeout) - timeout/3 - s.margin)
	}
	at := s.renewed.Add(s.less(min(s.ttl, timeout)))
	if !s.until.IsZero() && s.until.Before(at) {
		at = s.until
	}
	return at.Add(-s.margin)
}

// passed is the reason of a hold whose deadline passed.
func (s *stopBy) passed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.leased:
		return fmt.Errorf("%w: no word from the cluster in time", ErrDeadlinePassed)
	case !s.until.IsZero() && !time.Now().Before(s.until.Add(-s.margin)):
		return fmt.Errorf("%w: its maximum hold is over", ErrDeadlinePassed)
	}
	return fmt.Errorf("%w: no renewal of its lease got through in time", ErrDeadlinePassed)
}

// enforce ends l with ErrDeadlinePassed once the deadline passes, unless
// freed is closed or l ends first. The deadline only moves forward (a
// renewal, a ping answered), so it sleeps until the deadline it knows and
// looks again then.
func (s *stopBy) enforce(l *loss, freed <-chan struct{}) {
	timer := time.NewTimer(time.Until(s.at()))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-freed:
			return
		case <-l.done:
			return
		}
		left := time.Until(s.at())
		if left <= 0 {
			l.end(s.passed())
			return
		}
		timer.Reset(left)
	}
}
