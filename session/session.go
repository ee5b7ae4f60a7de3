// Package session tracks session deadlines: which sessions must be expired,
// and when. The time is always passed in; the package never reads the clock,
// so its behaviour is a function of its inputs and tests need no sleeps.
//
// What a session is (its id, password, timeout and ephemerals) is replicated
// state and lives in the tree; the Table here is the leader's local view of
// when each one was last heard from.
package session

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Default bounds of a negotiated session timeout.
const (
	DefaultMinTimeout = 2 * time.Second
	DefaultMaxTimeout = 60 * time.Second
)

// Table holds the deadline of every live session. It is safe for concurrent
// use: connections touch sessions while the expiry loop scans them.
type Table struct {
	min, max time.Duration

	mu       sync.Mutex
	sessions map[int64]*entry // mu guards sessions and the entries
}

type entry struct {
	timeout  time.Duration
	deadline time.Time
	lease    int64     // a lease's version; 0 for a client's session
	since    time.Time // when the table began to track it
}

// NewTable returns an empty table that negotiates timeouts within [min, max].
func NewTable(min, max time.Duration) *Table {
	if max < min {
		max = min
	}
	return &Table{min: min, max: max, sessions: map[int64]*entry{}}
}

// Negotiate clamps a requested timeout to the table's bounds.
func (t *Table) Negotiate(requested time.Duration) time.Duration {
	return min(max(requested, t.min), t.max)
}

// Add starts tracking a session with a full timeout from now. Adding a
// session already tracked resets it.
func (t *Table) Add(id int64, timeout time.Duration, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sessions[id] = &entry{timeout: timeout, deadline: now.Add(timeout), since: now}
}

// SetLease tracks a lease at version, with its deadline: a lease is not
// kept by being heard from but by renewals, which are replicated, so its
// deadline is the one its last renewal set (the proposer's clock), on
// every member and under every leader.
func (t *Table) SetLease(id, version int64, expires time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var since time.Time // unknown: a lease has no now here
	if e, ok := t.sessions[id]; ok {
		if e.lease > version {
			return // a later renewal was tracked already
		}
		since = e.since
	}
	t.sessions[id] = &entry{deadline: expires, lease: version, since: since}
}

// LeaseVersion returns the version of a lease the table tracks; ok is
// false for a client's session or an unknown id.
func (t *Table) LeaseVersion(id int64) (version int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.sessions[id]
	if !ok || e.lease == 0 {
		return 0, false
	}
	return e.lease, true
}

// Touch records that a session was heard from at now: its deadline moves to
// now plus its timeout. It reports false for a session the table does not
// track (unknown or already removed), and does nothing to a lease.
func (t *Table) Touch(id int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.sessions[id]
	if ok && e.lease == 0 {
		if d := now.Add(e.timeout); d.After(e.deadline) {
			e.deadline = d
		}
	}
	return ok
}

// Remove stops tracking a session.
func (t *Table) Remove(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.sessions, id)
}

// Expired returns the sessions whose deadline is before now, sorted by id.
// They stay in the table until Removed (when their close is applied), so a
// caller that fails to close one finds it again on its next scan.
func (t *Table) Expired(now time.Time) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int64
	for id, e := range t.sessions {
		if e.deadline.Before(now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// ResetAll gives every session a full timeout from now. A new leader and a
// restarted server call it so that no session expires for time it could
// not have been heard from. Leases keep their deadlines: those are
// replicated.
func (t *Table) ResetAll(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.sessions {
		if e.lease == 0 {
			e.deadline = now.Add(e.timeout)
		}
	}
}

// Lease is a lease's version and deadline, for Replace.
type Lease struct {
	Version int64
	Expires time.Time
}

// Replace makes the table track exactly the given sessions (id ->
// timeout), each with a full timeout from now, and leases: what a member
// does when it takes a snapshot in place of its state.
func (t *Table) Replace(sessions map[int64]time.Duration, leases map[int64]Lease, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sessions = make(map[int64]*entry, len(sessions)+len(leases))
	for id, timeout := range sessions {
		t.sessions[id] = &entry{timeout: timeout, deadline: now.Add(timeout), since: now}
	}
	for id, l := range leases {
		t.sessions[id] = &entry{deadline: l.Expires, lease: l.Version}
	}
}

// Deadline returns a session's deadline.
func (t *Table) Deadline(id int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.sessions[id]
	if !ok {
		return time.Time{}, false
	}
	return e.deadline, true
}

// Since returns when the table began to track a session: when this
// member applied its creation, or took a snapshot that had it. It is the
// zero time for a lease tracked since its creation.
func (t *Table) Since(id int64) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.sessions[id]
	if !ok {
		return time.Time{}, false
	}
	return e.since, true
}

// Len returns the number of sessions tracked.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// IDs hands out session ids that are unique across a cluster and across
// restarts, as ZooKeeper does: the top byte is the server id, the next 40
// bits the time in ms when the generator started, and the rest a counter.
type IDs struct{ next atomic.Int64 }

// NewIDs returns a generator for server id serverID started at now.
func NewIDs(serverID uint8, now time.Time) *IDs {
	g := &IDs{}
	base := (now.UnixMilli() << 24) >> 8 // keep 40 bits of time, leave the low 16 for the counter
	g.next.Store(int64(serverID)<<56 | base&(1<<56-1))
	return g
}

// Next returns a new session id; never zero.
func (g *IDs) Next() int64 {
	for {
		if id := g.next.Add(1); id != 0 {
			return id
		}
	}
}
