package recipes

import (
	"context"
	"errors"
	"sync"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// Priority inheritance.
//
// A holder (a holder id: one Mutex, RWMutex or MultiLock value, or the
// values that share one WithHolder id) that waits for a lock while it
// holds others is served there at the highest priority of the waiters of
// the locks it holds (lockq.Inherited), if that is higher than its own:
// so a holder of low priority, whose waiters include one of high
// priority, is not kept waiting behind waiters of middle priority, which
// would keep the high one waiting behind them too (a priority inversion).
//
// While such a wait lasts, it follows the queues of the locks its holder
// holds in this process (a child watch on each, which fires when a waiter
// joins or leaves); when the priority it inherits rises above the one it
// was placed with, it joins its queue again at the new priority
// (queue.requeue: a new node where lockq.Place puts it, and its old node
// deleted, in one multi), unless that puts it behind where it is. Its new node carries the
// priority in its name, so the holders it waits for inherit it in turn.
// A priority once inherited lasts until the wait ends.

// holding is the locks each holder id holds in this process: mu guards
// byHolder.
var holding = struct {
	mu       sync.Mutex
	byHolder map[string]map[*hold]struct{}
}{byHolder: map[string]map[*hold]struct{}{}}

// registerHeld records that h holds a lock for holder.
func registerHeld(holder string, h *hold) {
	if holder == "" {
		return
	}
	holding.mu.Lock()
	defer holding.mu.Unlock()
	if holding.byHolder[holder] == nil {
		holding.byHolder[holder] = map[*hold]struct{}{}
	}
	holding.byHolder[holder][h] = struct{}{}
}

// unregisterHeld records that h no longer holds a lock for holder.
func unregisterHeld(holder string, h *hold) {
	holding.mu.Lock()
	defer holding.mu.Unlock()
	delete(holding.byHolder[holder], h)
	if len(holding.byHolder[holder]) == 0 {
		delete(holding.byHolder, holder)
	}
}

// inheritance is what a wait inherits from the locks its holder holds.
// Its methods may be called on nil: a wait that inherits nothing.
type inheritance struct {
	cancel  context.CancelFunc
	changed chan struct{} // capacity 1: the priority rose

	mu    sync.Mutex // guards prios
	prios []int      // what each held lock passes on
}

// inherit starts following the locks that holder holds, other than
// self's, for a wait of self; nil when there are none. The first
// priority is known when it returns. stop ends it.
func inherit(ctx context.Context, self *hold, holder string) *inheritance {
	if holder == "" {
		return nil
	}
	holding.mu.Lock()
	var holds []*hold
	for h := range holding.byHolder[holder] {
		if h != self {
			holds = append(holds, h)
		}
	}
	holding.mu.Unlock()
	if len(holds) == 0 {
		return nil
	}
	in := &inheritance{changed: make(chan struct{}, 1), prios: make([]int, len(holds))}
	ctx, in.cancel = context.WithCancel(ctx)
	for i, h := range holds {
		h.mu.Lock()
		t := h.t
		h.mu.Unlock()
		if t.Name == "" {
			continue
		}
		if ev := in.look(ctx, i, h.q, t); ev != nil {
			go in.follow(ctx, i, h.q, t, ev)
		}
	}
	return in
}

// look lists the queue of the held lock t and records what it passes on,
// leaving a child watch: it returns the watch's channel, or nil if the
// queue could not be listed (the inheritance from it stops).
func (in *inheritance) look(ctx context.Context, i int, q *queue, t ticket) <-chan client.Event {
	for {
		names, _, ev, err := q.c.ChildrenW(ctx, q.dir)
		switch {
		case err == nil:
			in.set(i, lockq.Inherited(lockq.Sort(names), t.ID))
			return ev
		case ctx.Err() != nil, !errors.Is(err, client.ErrConnectionLoss):
			return nil
		}
		if !pause(ctx) {
			return nil
		}
	}
}

// follow looks again at each change of the held lock's queue until ctx
// ends.
func (in *inheritance) follow(ctx context.Context, i int, q *queue, t ticket, ev <-chan client.Event) {
	for ev != nil {
		select {
		case <-ev:
		case <-ctx.Done():
			return
		}
		ev = in.look(ctx, i, q, t)
	}
}

// set records what held lock i passes on, and says so if the priority
// rose.
func (in *inheritance) set(i, p int) {
	in.mu.Lock()
	before := highest(in.prios)
	in.prios[i] = p
	rose := p > before
	in.mu.Unlock()
	if rose {
		select {
		case in.changed <- struct{}{}:
		default:
		}
	}
}

func highest(ps []int) int {
	m := 0
	for _, p := range ps {
		m = max(m, p)
	}
	return m
}

// priority is the priority the wait inherits now.
func (in *inheritance) priority() int {
	if in == nil {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return highest(in.prios)
}

// rose is a channel that receives when the inherited priority rises (nil,
// which never does, for a wait that inherits nothing).
func (in *inheritance) rose() <-chan struct{} {
	if in == nil {
		return nil
	}
	return in.changed
}

// stop stops following the held locks.
func (in *inheritance) stop() {
	if in != nil {
		in.cancel()
	}
}
