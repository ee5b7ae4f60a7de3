package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// testWait bounds how long a test waits for something that must happen.
const testWait = 10 * time.Second

// fired reports whether t's channel holds a time, and which.
func fired(t Timer) (time.Time, bool) {
	select {
	case at := <-t.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestAManualTimerFiresWhenTheClockReachesItsDeadline(t *testing.T) {
	m := NewManual(t0)
	tm := m.NewTimer(time.Second)
	m.Advance(999 * time.Millisecond)
	if _, ok := fired(tm); ok {
		t.Fatal("fired before its deadline")
	}
	m.Advance(time.Millisecond)
	if at, ok := fired(tm); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("fired %v at %v, want at t0+1s", ok, at)
	}
	if got := m.Now(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("now %v, want t0+1s", got)
	}
}

func TestManualTimersFireInDeadlineOrderEachAtItsOwnTime(t *testing.T) {
	m := NewManual(t0)
	var order []string
	var at []time.Duration
	for _, tt := range []struct {
		name string
		d    time.Duration
	}{{"c", 3 * time.Second}, {"a", time.Second}, {"b1", 2 * time.Second}, {"b2", 2 * time.Second}} {
		m.AfterFunc(tt.d, func() {
			order = append(order, tt.name)
			at = append(at, m.Now().Sub(t0))
		})
	}
	m.Advance(time.Hour)
	if want := []string{"a", "b1", "b2", "c"}; !slices.Equal(order, want) {
		t.Errorf("fired %v, want %v (same deadline: in the order set)", order, want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(at, want) {
		t.Errorf("fired at %v, want %v", at, want)
	}
	if got := m.Now(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("now %v after advancing an hour", got)
	}
}

func TestATimerSetByAFiredFunctionFiresInTheSameAdvanceIfDue(t *testing.T) {
	m := NewManual(t0)
	second := make(chan time.Duration, 1)
	m.AfterFunc(time.Second, func() {
		m.AfterFunc(time.Second, func() { second <- m.Now().Sub(t0) })
	})
	m.Advance(3 * time.Second)
	select {
	case d := <-second:
		if d != 2*time.Second {
			t.Errorf("the second timer fired at %v, want 2s", d)
		}
	default:
		t.Fatal("the second timer did not fire")
	}
}

func TestStopAndResetOfAManualTimer(t *testing.T) {
	for _, tt := range []struct {
		name      string
		do        func(m *Manual, tm Timer) bool
		advance   time.Duration
		wantWas   bool
		wantFired bool
	}{
		{"stop before the deadline cancels it", func(m *Manual, tm Timer) bool { return tm.Stop() }, time.Hour, true, false},
		{"stop after it fired reports it was not pending and drains it", func(m *Manual, tm Timer) bool {
			m.Advance(time.Second)
			return tm.Stop()
		}, 0, false, false},
		{"reset moves the deadline later", func(m *Manual, tm Timer) bool { return tm.Reset(5 * time.Second) }, 4 * time.Second, true, false},
		{"reset fires at the new deadline", func(m *Manual, tm Timer) bool { return tm.Reset(5 * time.Second) }, 5 * time.Second, true, true},
		{"reset after it fired drops the stale time", func(m *Manual, tm Timer) bool {
			m.Advance(time.Second)
			return tm.Reset(time.Second)
		}, 999 * time.Millisecond, false, false},
		{"reset to zero fires at once", func(m *Manual, tm Timer) bool { return tm.Reset(0) }, 0, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewManual(t0)
			tm := m.NewTimer(time.Second)
			if was := tt.do(m, tm); was != tt.wantWas {
				t.Errorf("reported pending %v, want %v", was, tt.wantWas)
			}
			m.Advance(tt.advance)
			if _, ok := fired(tm); ok != tt.wantFired {
				t.Errorf("fired %v, want %v", ok, tt.wantFired)
			}
		})
	}
}

func TestAManualTimerOfNoDurationFiresAtOnce(t *testing.T) {
	m := NewManual(t0)
	if _, ok := fired(m.NewTimer(0)); !ok {
		t.Error("NewTimer(0) did not fire at once")
	}
	if m.Pending() != 0 {
		t.Errorf("%d timers pending, want 0", m.Pending())
	}
}

func TestNextAndAdvanceToNextFollowTheEarliestTimer(t *testing.T) {
	m := NewManual(t0)
	if _, ok := m.Next(); ok || m.AdvanceToNext() {
		t.Fatal("a clock with no timers has a next one")
	}
	late, early := m.NewTimer(3*time.Second), m.NewTimer(2*time.Second)
	if d, ok := m.Next(); !ok || d != 2*time.Second {
		t.Fatalf("next in %v, %v; want 2s", d, ok)
	}
	if !m.AdvanceToNext() {
		t.Fatal("AdvanceToNext found no timer")
	}
	if _, ok := fired(early); !ok {
		t.Error("the earliest timer did not fire")
	}
	if _, ok := fired(late); ok {
		t.Error("a later timer fired")
	}
	if got := m.Now(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("now %v, want t0+2s", got)
	}
}

func TestTimersListsThePendingTimersEarliestFirst(t *testing.T) {
	m := NewManual(t0)
	m.NewTimer(3 * time.Second)
	stopped := m.AfterFunc(time.Second, func() {})
	m.NewTimer(2 * time.Second)
	stopped.Stop()
	m.Advance(500 * time.Millisecond)
	if got, want := m.Timers(), []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("timers due in %v, want %v", got, want)
	}
}

func TestWaitForTimersReturnsOnceEnoughAreSet(t *testing.T) {
	m := NewManual(t0)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		done <- m.WaitForTimers(ctx, 2)
	}()
	m.NewTimer(time.Second)
	m.AfterFunc(time.Second, func() {})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testWait):
		t.Fatal("WaitForTimers did not return with 2 timers set")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.WaitForTimers(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForTimers for a third: %v, want the context's error", err)
	}
}

func TestWithTimeoutOnAManualClockEndsWithTheDeadline(t *testing.T) {
	m := NewManual(t0)
	ctx, cancel := WithTimeout(context.Background(), m, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Error("a manual clock's context has a deadline in the system's time")
	}
	m.Advance(999 * time.Millisecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("ended before the deadline: %v", err)
	}
	m.Advance(time.Millisecond)
	<-ctx.Done()
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ended with %v, want context.DeadlineExceeded", err)
	}

	ctx, cancel = WithTimeout(context.Background(), m, time.Second)
	cancel()
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if m.Pending() != 0 {
		t.Errorf("cancel left %d timers pending", m.Pending())
	}
}

func TestWithTimeoutOnTheRealClockIsContextWithTimeout(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), Real, time.Hour)
	defer cancel()
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) <= 0 {
		t.Errorf("deadline %v, %v; want one an hour from now", dl, ok)
	}
}

func TestSleepWaitsForTheClockOrTheContext(t *testing.T) {
	m := NewManual(t0)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), m, time.Second) }()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := m.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	m.Advance(time.Second)
	if err := <-done; err != nil {
		t.Errorf("Sleep: %v", err)
	}
	stop, cancelStop := context.WithCancel(context.Background())
	cancelStop()
	if err := Sleep(stop, m, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep with a cancelled context: %v", err)
	}
}

func TestTheRealClockFiresItsTimers(t *testing.T) {
	tm := Real.NewTimer(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(testWait):
		t.Fatal("a real 1ms timer did not fire")
	}
	called := make(chan struct{})
	f := Real.AfterFunc(time.Millisecond, func() { close(called) })
	select {
	case <-called:
	case <-time.After(testWait):
		t.Fatal("a real AfterFunc did not run")
	}
	if f.C() != nil {
		t.Error("an AfterFunc timer has a channel")
	}
}
