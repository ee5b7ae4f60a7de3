package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The session workload: holders each keep an ephemeral node and keep
// talking to the cluster; an observer lists the nodes (after a sync)
// and notes when one disappears. An ephemeral may disappear only after
// its session expired; whether the session was allowed to expire at all
// is judged for every client of the run (fleet.checkExpiries).

// ephemeral is one holder session's node.
type ephemeral struct {
	path    string
	owner   *tracked
	created time.Duration
	gone    time.Duration // when it was first seen missing (0: never)
	goneBy  string        // who saw it missing
}

type sessionWorkload struct {
	fleet   *fleet
	clock   *clock
	holders int
	maxOps  int

	mu    sync.Mutex // guards nodes and counters
	nodes []*ephemeral
	polls int
}

func newSessionWorkload(f *fleet, holders int) *sessionWorkload {
	return &sessionWorkload{fleet: f, clock: f.clock, holders: holders, maxOps: 1 << 20}
}

func (w *sessionWorkload) run(ctx context.Context, wg *sync.WaitGroup) {
	for id := range w.holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.holder(ctx, id)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.observe(ctx)
	}()
}

// holder keeps one ephemeral per session and checks on it every 100 ms;
// when its session ends it starts another.
func (w *sessionWorkload) holder(ctx context.Context, id int) {
	var e *ephemeral
	for n := 0; n < w.maxOps && ctx.Err() == nil; n++ {
		if e == nil || e.owner.Err() != nil {
			c, err := w.fleet.dial(ctx, fmt.Sprintf("session-%d", id))
			if err != nil {
				return
			}
			path := fmt.Sprintf("/sess/h%d-%x", id, c.SessionID())
			if !createEphemeral(ctx, c, path) {
				c.close() // try again with a new session
				e = nil
				continue
			}
			e = &ephemeral{path: path, owner: c, created: w.clock.now()}
			w.mu.Lock()
			w.nodes = append(w.nodes, e)
			w.mu.Unlock()
		}
		sleep(ctx, 100*time.Millisecond)
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		ok, _, err := e.owner.Exists(octx, e.path)
		cancel()
		if err == nil && !ok {
			w.sawGone(e, "its owner")
		}
	}
}

func (w *sessionWorkload) sawGone(e *ephemeral, by string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.gone == 0 {
		e.gone, e.goneBy = w.clock.now(), by
	}
}

// observe lists /sess after a sync every 150 ms and notes the nodes that
// are gone.
func (w *sessionWorkload) observe(ctx context.Context) {
	var c *tracked
	for n := 0; n < w.maxOps && ctx.Err() == nil; n++ {
		sleep(ctx, 150*time.Millisecond)
		if c == nil || c.Err() != nil {
			var err error
			if c, err = w.fleet.dial(ctx, "session-observer"); err != nil {
				return
			}
		}
		w.mu.Lock()
		known := slices.Clone(w.nodes) // created before the sync below
		w.mu.Unlock()
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		names, err := syncChildren(octx, c, "/sess")
		cancel()
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.polls++
		w.mu.Unlock()
		for _, e := range known {
			if !slices.Contains(names, e.path[len("/sess/"):]) {
				w.sawGone(e, "the observer")
			}
		}
	}
}

// syncChildren lists path's children as of a moment within the call.
func syncChildren(ctx context.Context, c *tracked, path string) ([]string, error) {
	if err := c.Sync(ctx, path); err != nil {
		return nil, err
	}
	names, _, err := c.Children(ctx, path)
	return names, err
}

// check runs after the workload stopped, with the cluster healed and
// before the clients are closed: an ephemeral that disappeared must
// belong to a session that ended, and a live session's ephemeral must
// still be there.
func (w *sessionWorkload) check(ctx context.Context, violate func(format string, args ...any)) string {
	w.mu.Lock()
	nodes := slices.Clone(w.nodes)
	polls := w.polls
	w.mu.Unlock()
	checker, err := w.fleet.dial(ctx, "session-checker")
	if err != nil {
		violate("sessions: no session for the final check: %v", err)
		return ""
	}
	// The cluster is whole again, but after a stall of the machine it may
	// take a while to elect a leader: try until ctx ends.
	names, err := syncChildren(ctx, checker, "/sess")
	for err != nil && ctx.Err() == nil {
		sleep(ctx, 200*time.Millisecond)
		names, err = syncChildren(ctx, checker, "/sess")
	}
	if err != nil {
		violate("sessions: final listing of /sess: %v", err)
		return ""
	}
	var gone, expired int
	for _, e := range nodes {
		if e.owner.Err() != nil {
			expired++
		}
		if e.gone != 0 {
			gone++
		}
		present := slices.Contains(names, e.path[len("/sess/"):])
		// A session the cluster ended tells its client within a timeout.
		for deadline := time.Now().Add(2 * sessionTimeout); !present && e.owner.Err() == nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		switch {
		case e.owner.Err() != nil:
		case !present:
			violate("sessions: %s of live session %#x is gone (first seen gone by %s at %v)",
				e.path, e.owner.SessionID(), e.goneBy, e.gone.Round(time.Millisecond))
		case e.gone != 0:
			violate("sessions: %s of live session %#x was seen gone by %s at %v, and is back",
				e.path, e.owner.SessionID(), e.goneBy, e.gone.Round(time.Millisecond))
		}
	}
	return fmt.Sprintf("%d holder sessions, %d expired, %d ephemerals seen gone, %d observer listings", len(nodes), expired, gone, polls)
}
