// Package clock is the time that code waits on, so that a test can drive
// it: Real is the system's clock, and a Manual clock moves only when the
// test advances it, firing the timers that come due on the way. Code that
// reads the time or waits for it takes a Clock; production passes Real.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. Its methods are safe for
// concurrent use.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a timer that calls f, on a goroutine of the
	// clock's choosing, once d has passed; its C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single event, as time.Timer: Stop and Reset report whether
// the timer was pending, and after either, C holds no stale time (Go 1.23's
// semantics).
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the system's clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer            { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// Sleep waits for d on c, or until ctx is done (and returns its error).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithTimeout is context.WithTimeout on c: the context ends with
// context.DeadlineExceeded once d has passed on c. On Real it is
// context.WithTimeout itself; on another clock the context has no
// Deadline (its time is not the system's), only the parent's.
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := c.(realClock); ok {
		return context.WithTimeout(parent, d)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := c.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return timeoutCtx{ctx}, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// timeoutCtx reports the cause it was cancelled with as its Err, so that
// a deadline on a manual clock reads as context.DeadlineExceeded, as one
// on the real clock does.
type timeoutCtx struct{ context.Context }

func (c timeoutCtx) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}
