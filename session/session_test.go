package session

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNegotiateClampsToTheBounds(t *testing.T) {
	tab := NewTable(2*time.Second, 60*time.Second)
	for _, tc := range []struct{ ask, want time.Duration }{
		{0, 2 * time.Second},
		{time.Second, 2 * time.Second},
		{10 * time.Second, 10 * time.Second},
		{time.Hour, 60 * time.Second},
	} {
		if got := tab.Negotiate(tc.ask); got != tc.want {
			t.Errorf("Negotiate(%v) = %v, want %v", tc.ask, got, tc.want)
		}
	}
}

func TestASessionExpiresOnlyAfterAFullTimeoutOfSilence(t *testing.T) {
	tab := NewTable(time.Second, time.Minute)
	tab.Add(1, 3*time.Second, t0)
	tab.Add(2, 3*time.Second, t0)
	if got := tab.Expired(t0.Add(3 * time.Second)); len(got) != 0 {
		t.Fatalf("expired at exactly the deadline: %v", got)
	}
	if !tab.Touch(2, t0.Add(2*time.Second)) {
		t.Fatal("Touch of a tracked session reported false")
	}
	if got := tab.Expired(t0.Add(4 * time.Second)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("Expired = %v, want [1]: 2 was heard from", got)
	}
	if got := tab.Expired(t0.Add(6 * time.Second)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("Expired = %v, want [1 2]", got)
	}
	tab.Remove(1)
	if tab.Touch(1, t0) || tab.Len() != 1 {
		t.Fatal("a removed session is still tracked")
	}
}

func TestTouchNeverMovesADeadlineBack(t *testing.T) {
	tab := NewTable(time.Second, time.Minute)
	tab.Add(1, 5*time.Second, t0.Add(10*time.Second))
	tab.Touch(1, t0) // a late, out-of-order heartbeat
	if d, _ := tab.Deadline(1); !d.Equal(t0.Add(15 * time.Second)) {
		t.Fatalf("deadline %v moved back", d)
	}
}

func TestResetAllGivesEverySessionAFullTimeout(t *testing.T) {
	tab := NewTable(time.Second, time.Minute)
	tab.Add(1, 2*time.Second, t0)
	tab.Add(2, 4*time.Second, t0)
	later := t0.Add(time.Hour)
	tab.ResetAll(later)
	if got := tab.Expired(later.Add(3 * time.Second)); !slices.Equal(got, []int64{1}) {
		t.Fatalf("Expired = %v, want [1]", got)
	}
}

func TestIDsAreUniqueAndCarryTheServerID(t *testing.T) {
	a, b := NewIDs(1, t0), NewIDs(2, t0)
	seen := map[int64]bool{}
	for i := 0; i < 1000; i++ {
		for _, g := range []*IDs{a, b} {
			id := g.Next()
			if id == 0 || seen[id] {
				t.Fatalf("id %#x repeated or zero", id)
			}
			seen[id] = true
		}
	}
	if id := b.Next(); id>>56 != 2 {
		t.Fatalf("id %#x does not carry server id 2 in its top byte", id)
	}
	if NewIDs(1, t0.Add(time.Millisecond)).Next() == NewIDs(1, t0).Next() {
		t.Fatal("a restart a millisecond later reuses ids")
	}
}

func TestALeaseKeepsItsReplicatedDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := NewTable(time.Second, time.Minute)
	tb.SetLease(7, 2, now.Add(5*time.Second))
	if tb.Touch(7, now.Add(4*time.Second)); len(tb.Expired(now.Add(6*time.Second))) != 1 {
		t.Error("a client's heartbeat kept a lease")
	}
	tb.ResetAll(now.Add(4 * time.Second))
	if d, _ := tb.Deadline(7); !d.Equal(now.Add(5 * time.Second)) {
		t.Errorf("a new leader moved a lease's deadline to %v", d)
	}
	tb.SetLease(7, 1, now.Add(time.Hour)) // an older renewal, applied late
	if v, ok := tb.LeaseVersion(7); !ok || v != 2 {
		t.Errorf("LeaseVersion = %d, %v; want 2", v, ok)
	}
	tb.SetLease(7, 3, now.Add(20*time.Second))
	if ids := tb.Expired(now.Add(6 * time.Second)); len(ids) != 0 {
		t.Errorf("a renewed lease expired: %v", ids)
	}
	tb.Add(8, 10*time.Second, now)
	if _, ok := tb.LeaseVersion(8); ok {
		t.Error("a client's session has a lease version")
	}
	tb.Replace(map[int64]time.Duration{8: 10 * time.Second}, map[int64]Lease{9: {Version: 4, Expires: now}}, now)
	if v, ok := tb.LeaseVersion(9); !ok || v != 4 {
		t.Errorf("a lease after Replace: %d, %v", v, ok)
	}
}

func TestSinceIsWhenTheTableBeganToTrackASession(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := NewTable(time.Second, time.Minute)
	tb.Add(1, 10*time.Second, now)
	tb.Touch(1, now.Add(5*time.Second))
	if since, ok := tb.Since(1); !ok || !since.Equal(now) {
		t.Errorf("Since(1) = %v, %v; want %v: a touch is not a new session", since, ok, now)
	}
	if _, ok := tb.Since(2); ok {
		t.Error("Since of an unknown session")
	}
	tb.Replace(map[int64]time.Duration{1: time.Second}, nil, now.Add(time.Minute))
	if since, _ := tb.Since(1); !since.Equal(now.Add(time.Minute)) {
		t.Errorf("after a snapshot, Since(1) = %v; want the time of the snapshot", since)
	}
}
