package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
)

// watchWorkload checks that a watch fires for every change a later read
// reveals: a watcher leaves an exists watch on a register key, then reads
// the key again and again; once a read shows a change (the node appeared,
// went, or has a new mzxid), the watch's event must already be in its
// channel, since the server sends a notification before the reply of any
// read that sees the change, across reconnects too.
type watchWorkload struct {
	fleet *fleet
	keys  func() string // a register key in use now
	max   int

	mu              sync.Mutex // guards the counters
	checks, changes int
	sessionEvents   int
	missed          []string
}

func (w *watchWorkload) run(ctx context.Context, wg *sync.WaitGroup, seed int64) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.watch(ctx, rand.New(rand.NewPCG(uint64(seed), 2000)))
	}()
}

func (w *watchWorkload) watch(ctx context.Context, rng *rand.Rand) {
	var c *tracked
	for n := 0; n < w.max && ctx.Err() == nil; n++ {
		if c == nil || c.Err() != nil {
			var err error
			if c, err = w.fleet.dial(ctx, "watcher"); err != nil {
				return
			}
		}
		key := w.keys()
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		ok, st, ch, err := c.ExistsW(octx, key)
		cancel()
		if err != nil {
			continue
		}
		// Read until a change shows, for as long as the key is in use.
		for i := 0; i < 200 && ctx.Err() == nil && w.keys() == key; i++ {
			sleep(ctx, time.Duration(5+rng.IntN(40))*time.Millisecond)
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			ok2, st2, err := c.Exists(octx, key)
			cancel()
			if err != nil {
				break
			}
			w.mu.Lock()
			w.checks++
			w.mu.Unlock()
			if ok == ok2 && st.Mzxid == st2.Mzxid {
				continue
			}
			w.changed(key, ok, st, ok2, st2, ch)
			break
		}
	}
}

// changed checks that the watch fired for a change that a read revealed.
func (w *watchWorkload) changed(key string, ok bool, st client.Stat, ok2 bool, st2 client.Stat, ch <-chan client.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changes++
	select {
	case ev := <-ch:
		switch {
		case ev.Type == client.EventSession:
			w.sessionEvents++
		case !ok && ev.Type != client.EventNodeCreated,
			ok && ev.Type != client.EventNodeDataChanged && ev.Type != client.EventNodeDeleted:
			w.missed = append(w.missed, fmt.Sprintf("%s: exists %v (mzxid %d) then %v (mzxid %d), but the event was %v",
				key, ok, st.Mzxid, ok2, st2.Mzxid, ev))
		}
	default:
		w.missed = append(w.missed, fmt.Sprintf("%s: exists %v (mzxid %d) then %v (mzxid %d), and no event came before the read",
			key, ok, st.Mzxid, ok2, st2.Mzxid))
	}
}

func (w *watchWorkload) check(violate func(format string, args ...any)) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.missed {
		violate("watches: %s", m)
	}
	return fmt.Sprintf("%d reads, %d changes revealed, every one after its event (%d session events)", w.checks, w.changes, w.sessionEvents)
}
