package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// The locks workload is a lock service's load: Locks locks, each with
// Contenders holders that take it in turn (1: uncontended), spread over
// Conns sessions (carried by Mux shared connections to each member, if
// set). Each hold lasts Hold, bound to a lease of Lease if
// given (which the recipes renew at a third of its TTL, so that the
// renewals come at about 3 × Locks × Contenders / Lease per second), and
// the cycles of all the holders together come at Rate per second at most
// (0: as fast as they go); with RenewRate, each holder renews its lease
// explicitly as well while it holds. It times each acquire and release and, for a
// lock that passes from one holder to a waiter, the handoff: from the
// release's send to the next holder's grant. With Config.Storm, it kills a
// member during the run and watches the sessions and the holds (storm.go).

// prepareLocks makes the sessions and holders of locks.
func prepareLocks(ctx context.Context, r *runner) (*plan, error) {
	var st *storm
	if r.cfg.Storm != nil {
		st = newStorm(r.cfg, r.path+"/locks")
	}
	muxes := make([]*client.Mux, r.cfg.Mux)
	for i := range muxes {
		muxes[i] = client.NewMux(r.cfg.ClientOptions...)
	}
	var onMux func(int) []client.Option
	if len(muxes) > 0 {
		onMux = func(i int) []client.Option { return []client.Option{client.WithMux(muxes[i%len(muxes)])} }
	}
	cs, err := dialEach(ctx, r.cfg, r.cfg.Conns, onMux)
	if err != nil {
		for _, m := range muxes {
			m.Close()
		}
		if len(muxes) > 0 {
			err = fmt.Errorf("%w (--mux 0 gives each session a connection of its own)", err)
		}
		return nil, err
	}
	p := &plan{sessions: cs, muxes: muxes, primary: []opKind{opAcquire}, late: new(atomic.Int64)}
	if st != nil {
		st.follow(cs)
		p.storm = st
	}
	holders := r.cfg.Locks * r.cfg.Contenders
	var pace time.Duration // between one holder's cycles, for Rate
	if r.cfg.Rate > 0 {
		pace = time.Duration(float64(holders) / r.cfg.Rate * float64(time.Second))
	}
	var renewEvery time.Duration // between one holder's renewals, for RenewRate
	if r.cfg.RenewRate > 0 {
		renewEvery = time.Duration(float64(holders) / r.cfg.RenewRate * float64(time.Second))
	}
	released := make([]atomic.Int64, r.cfg.Locks) // per lock: the send time of its last release, ns since start
	for h := range holders {
		lock, owner := h%r.cfg.Locks, fmt.Sprintf("bench-%d", h)
		opts := []recipes.Option{recipes.WithOwner(owner)}
		if r.cfg.Lease > 0 {
			opts = append(opts, recipes.WithLease(r.cfg.Lease))
		}
		lockPath := fmt.Sprintf("%s/locks/%d", r.path, lock)
		m := recipes.NewMutex(cs[h%len(cs)], lockPath, opts...)
		hd := st.holder(lockPath, owner, h%len(cs))
		p.loops = append(p.loops, func(rec *recorder) {
			next := time.Now()
			var retry backoff
			for {
				if pace > 0 {
					next = next.Add(pace)
					if !sleepUntil(r.stopped, next) {
						return
					}
				}
				measured, ok := r.begin(1)
				if !ok {
					return
				}
				t0 := time.Now()
				last := released[lock].Load()
				err := m.Lock(r.stopped) // a waiter leaves the queue when the run ends
				if !r.done(rec, opAcquire, measured, t0, err) {
					return
				}
				if err != nil {
					if !retry.wait(r.stopped) {
						return
					}
					continue
				}
				retry = 0
				st.held(hd, m.Token())
				// A grant after a release that came while it waited is a
				// handoff.
				if rel := released[lock].Load(); rel != last && rel > t0.Sub(r.start).Nanoseconds() {
					d := time.Since(r.start.Add(time.Duration(rel)))
					r.count(rec, opHandoff, measured, d)
					if measured && d > handoffBound {
						p.late.Add(1)
					}
				}
				if !r.hold(rec, m, renewEvery) {
					lost := st.releasing(hd, m)
					st.released(lost, m.Unlock(r.hard))
					return
				}
				lost := st.releasing(hd, m)
				t1 := time.Now()
				released[lock].Store(t1.Sub(r.start).Nanoseconds())
				err = m.Unlock(r.hard)
				st.released(lost, err)
				if !r.done(rec, opRelease, measured, t1, err) {
					return
				}
				if err != nil && !retry.wait(r.stopped) { // its hold was lost, or the release failed
					return
				}
			}
		})
	}
	return p, nil
}

// handoffBound is how soon after a release its next holder must hold: a
// lock service's waiter told of a release within a second, every time.
// A run counts the handoffs that take longer (Report.LateHandoffs).
const handoffBound = time.Second

// hold keeps m for the run's Hold, renewing its lease every every (0:
// never), each renewal timed, the first at a random point of the first
// interval so that the holders' renewals spread out. A hold that a
// renewal finds lost ends there. It reports false if the run ended first.
func (r *runner) hold(rec *recorder, m *recipes.Mutex, every time.Duration) bool {
	end := time.Now().Add(r.cfg.Hold)
	if every <= 0 {
		return sleepUntil(r.stopped, end)
	}
	for next := time.Now().Add(rand.N(every)); next.Before(end); next = next.Add(every) {
		if !sleepUntil(r.stopped, next) {
			return false
		}
		measured, ok := r.begin(0)
		if !ok {
			return false
		}
		t0 := time.Now()
		_, err := m.Renew(r.stopped)
		if !r.done(rec, opRenew, measured, t0, err) {
			return false
		}
		if err != nil && m.LostReason() != nil {
			return true // its release says so too, and it waits again
		}
	}
	return sleepUntil(r.stopped, end)
}

// backoff is how long a holder waits before it tries again after a failed
// acquire or release, as a client would: a random time up to a bound that
// starts at minBackoff and doubles with each failure in a row, to
// maxBackoff. Without it, holders that fail under overload try again at
// once and add to the load that made them fail.
type backoff time.Duration

const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// next raises the bound and returns a random time below it.
func (b *backoff) next() time.Duration {
	*b = backoff(min(max(2*time.Duration(*b), minBackoff), maxBackoff))
	return rand.N(time.Duration(*b))
}

// wait waits the next time; it reports false if ctx ended first.
func (b *backoff) wait(ctx context.Context) bool {
	return sleepUntil(ctx, time.Now().Add(b.next()))
}

// sleepUntil waits until t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
