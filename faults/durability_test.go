package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// durabilityWorkload creates persistent nodes under /dur and remembers
// which creates were acknowledged: after every crash of the whole cluster,
// and at the end on every member, each of them must be there.
type durabilityWorkload struct {
	fleet *fleet
	max   int

	mu      sync.Mutex // guards acked, ackedAt and checks
	acked   []string
	ackedAt []time.Duration // when each create of acked was acknowledged
	checks  []string
}

func (w *durabilityWorkload) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		var c *tracked
		for n := 0; n < w.max && ctx.Err() == nil; n++ {
			if c == nil || c.Err() != nil {
				var err error
				if c, err = w.fleet.dial(ctx, "durability"); err != nil {
					return
				}
			}
			name := fmt.Sprintf("d%07d", n)
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			_, err := c.Create(octx, "/dur/"+name, []byte(name), client.Persistent)
			cancel()
			if err == nil {
				w.mu.Lock()
				w.acked = append(w.acked, name)
				w.ackedAt = append(w.ackedAt, w.fleet.clock.now())
				w.mu.Unlock()
			}
			sleep(ctx, thinkTime)
		}
	}()
}

// ackedNames returns the names of the creates acknowledged so far.
func (w *durabilityWorkload) ackedNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acked)
}

// ackTimes returns when each create acknowledged so far was.
func (w *durabilityWorkload) ackTimes() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ackedAt)
}

// afterCrash checks, through any member, that every write acknowledged
// before the check began survived the crash of every member.
func (w *durabilityWorkload) afterCrash(ctx context.Context, violate func(format string, args ...any)) {
	c, err := w.fleet.dial(ctx, "durability-check")
	if err != nil {
		return // the run ended
	}
	defer c.close()
	for range 10 {
		want := w.ackedNames() // fixed before the listing begins
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		names, err := syncChildren(octx, c, "/dur")
		cancel()
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if missing := missingFrom(want, names); len(missing) > 0 {
			violate("durability: %d of %d acknowledged creates are gone after every member was killed: %v", len(missing), len(want), head(missing))
		}
		w.mu.Lock()
		w.checks = append(w.checks, fmt.Sprint(len(want)))
		w.mu.Unlock()
		return
	}
}

// final checks every member's own tree (no sync: the members converged).
func (w *durabilityWorkload) final(ctx context.Context, c *cluster, violate func(format string, args ...any)) string {
	var acked int
	for _, id := range c.ids {
		cl, err := client.Dial(ctx, []string{c.members[id].addr}, client.WithSessionTimeout(sessionTimeout))
		if err != nil {
			violate("durability: cannot reach member %d for the final check: %v", id, err)
			continue
		}
		names, _, err := cl.Children(ctx, "/dur")
		cl.Close()
		if err != nil {
			violate("durability: listing /dur on member %d: %v", id, err)
			continue
		}
		want := w.ackedNames()
		acked = len(want)
		if missing := missingFrom(want, names); len(missing) > 0 {
			violate("durability: member %d lacks %d of %d acknowledged creates: %v", id, len(missing), acked, head(missing))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d acknowledged creates on every member; after each crash of every member, all there (of %v)", acked, w.checks)
}

// missingFrom returns want's names that are not in names.
func missingFrom(want, names []string) []string {
	slices.Sort(names)
	var out []string
	for _, n := range want {
		if _, found := slices.BinarySearch(names, n); !found {
			out = append(out, n)
		}
	}
	return out
}

func head(s []string) []string {
	return s[:min(len(s), 10)]
}
