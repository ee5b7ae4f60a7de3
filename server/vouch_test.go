package server

import (
	"testing"
	"time"
)

func TestVouchingForSessions(t *testing.T) {
	t.Parallel()
	const timeout, grace = time.Second, 250 * time.Millisecond
	fresh, stale := 100*time.Millisecond, 2*time.Second
	touches := func(d time.Duration) func(uint64) time.Duration {
		return func(uint64) time.Duration { return d }
	}
	contact := func(d time.Duration) func() time.Duration { return func() time.Duration { return d } }
	for _, c := range []struct {
		name  string
		w     witness
		vouch bool
	}{
		{"a follower its leader answers", witness{self: 2, leader: 1, last: 1, unanswered: touches(fresh)}, true},
		{"a follower its leader stopped answering", witness{self: 2, leader: 1, last: 1, unanswered: touches(stale)}, false},
		{"a follower in an election its last leader answered lately", witness{self: 2, last: 1, leaderless: grace / 2, unanswered: touches(fresh)}, true},
		{"a follower in an election its last leader stopped answering", witness{self: 2, last: 1, leaderless: grace / 2, unanswered: touches(stale)}, false},
		{"a follower in an election past the grace (a partition)", witness{self: 2, last: 1, leaderless: 2 * grace, unanswered: touches(fresh)}, false},
		{"a member that never knew a leader", witness{self: 2, unanswered: touches(fresh)}, false},
		{"a leader a quorum hears", witness{self: 1, leader: 1, last: 1, quorumContact: contact(fresh)}, true},
		{"a leader no quorum heard lately", witness{self: 1, leader: 1, last: 1, quorumContact: contact(stale)}, false},
		{"a leader that stepped down", witness{self: 1, last: 1, quorumContact: contact(0), unanswered: touches(fresh)}, false},
		{"a member alone", witness{self: 1, leader: 1, last: 1, alone: true}, true},
		{"a member alone before it leads", witness{self: 1, alone: true}, false},
	} {
		c.w.timeout, c.w.grace = timeout, grace
		if err := c.w.vouch(); (err == nil) != c.vouch {
			t.Errorf("%s: vouch() = %v, want vouching %v", c.name, err, c.vouch)
		}
	}
}
