package recipes

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/arbor-coord/arbor/lockq"
)

// TestTheWaitProtocolKeepsMutualExclusionWithPriorities plays random
// histories of a lock queue against a model of queue.wait's steps (list,
// watch the blocker, wake, dropped, list again) and of the joins with a
// priority (createPlaced: lockq.Place, the rewrite of Touch) and the
// joins again of requeue, with the watch notifications delivered late and
// in any order between waiters. Some joins are lossy: the create's answer
// was lost and its retry made a second node, after the first one, which
// the waiter deletes when it lists (list, sibling) and when it leaves. It checks that a waiter only ever takes
// its turn when lockq.Holds says it holds in the real queue, and that once
// everything is delivered every acquisition that holds knows it.
func TestTheWaitProtocolKeepsMutualExclusionWithPriorities(t *testing.T) {
	t.Parallel()
	for run := range 150 {
		m := newModel(rand.New(rand.NewPCG(uint64(run), 11)))
		for step := range 200 {
			m.step()
			if err := m.check(); err != nil {
				t.Fatalf("run %d step %d: %v\n%s", run, step, err, m.log.String())
			}
		}
		m.drain()
		if err := m.check(); err != nil {
			t.Fatalf("run %d, drained: %v\n%s", run, err, m.log.String())
		}
		for _, w := range m.waiters {
			if !w.holds && lockq.Holds(lockq.Sort(m.names), w.me.ID) {
				t.Fatalf("run %d: %s holds but does not know it\n%s", run, w.me.Name, m.log.String())
			}
		}
	}
}

type modelWaiter struct {
	me       lockq.Entry
	stale    []lockq.Entry // its list
	listedAt int           // when it listed (a step: the pzxid)
	watching string        // the node it watches, "" none
	watchGen int           // a watch left behind (requeue) is not heard
	holds    bool
	needList bool // it will list again
	needGetW bool // it will read its blocker and leave its watch
	lossy    bool // a node of its acquisition other than me may be in the queue
}

type modelEvent struct {
	w       *modelWaiter
	gen     int
	deleted bool
}

type model struct {
	r        *rand.Rand
	names    []string
	seq      int64
	now      int
	modified map[string]int // node -> when it was last rewritten
	waiters  []*modelWaiter
	events   []modelEvent
	next     int
	log      strings.Builder
}

func newModel(r *rand.Rand) *model { return &model{r: r, modified: map[string]int{}} }

func (m *model) logf(format string, args ...any) {
	fmt.Fprintf(&m.log, format, args...)
	m.log.WriteByte('\n')
}

// touch rewrites node: its watchers hear of it.
func (m *model) touch(node string) {
	m.modified[node] = m.now
	m.notify(node, false)
}

func (m *model) notify(node string, deleted bool) {
	for _, w := range m.waiters {
		if w.watching == node {
			m.events = append(m.events, modelEvent{w, w.watchGen, deleted})
			w.watching = ""
		}
	}
}

func (m *model) remove(name string) {
	m.names = slices.DeleteFunc(m.names, func(n string) bool { return n == name })
	m.seq++
	m.notify(name, true)
}

// join adds a node of kind and priority placed by lockq.Place, as
// createPlaced does, and returns it.
func (m *model) join(kind lockq.Kind, prio int, base string, without string) lockq.Entry {
	es := lockq.Sort(slices.DeleteFunc(slices.Clone(m.names), func(n string) bool { return n == without }))
	at := lockq.Place(es, kind, prio, m.seq)
	if at.Touch >= 0 {
		m.touch(es[at.Touch].Name)
	}
	name := fmt.Sprintf("%s%0*d", lockq.Prefix(lockq.ID(base, prio, at.Key), kind), lockq.SeqDigits, m.seq)
	m.names = append(m.names, name)
	m.seq++
	e, _ := lockq.Parse(name)
	return e
}

func (m *model) step() {
	m.now++
	var idle []*modelWaiter // waiters with a step to take
	for _, w := range m.waiters {
		if w.needList || w.needGetW {
			idle = append(idle, w)
		}
	}
	switch n := m.r.IntN(10); {
	case n < 3 || len(m.waiters) == 0:
		kinds := []lockq.Kind{lockq.Read, lockq.Write, lockq.Exclusive}
		kind, prio := kinds[m.r.IntN(3)], m.r.IntN(3)*m.r.IntN(4)
		m.next++
		base := fmt.Sprintf("w%d", m.next)
		lossy := prio == 0 && m.r.IntN(4) == 0
		if lossy {
			m.logf("%s joins, its answer lost", m.join(kind, 0, base, "").Name)
		}
		e := m.join(kind, prio, base, "")
		m.waiters = append(m.waiters, &modelWaiter{me: e, needList: true, lossy: lossy})
		m.logf("%s joins", e.Name)
	case n < 6 && len(m.events) > 0:
		i := m.r.IntN(len(m.events))
		ev := m.events[i]
		m.events = slices.Delete(m.events, i, i+1)
		m.hear(ev)
	case n < 8 && len(idle) > 0:
		m.act(idle[m.r.IntN(len(idle))])
	case n < 9:
		w := m.waiters[m.r.IntN(len(m.waiters))]
		if w.holds || m.r.IntN(3) == 0 { // a release, or a waiter that gives up
			m.logf("%s leaves (held %v)", w.me.Name, w.holds)
			m.waiters = slices.DeleteFunc(m.waiters, func(o *modelWaiter) bool { return o == w })
			m.remove(w.me.Name)
			m.removeSiblings(w)
		}
	default:
		// A waiter joins again at a higher priority, as requeue does.
		w := m.waiters[m.r.IntN(len(m.waiters))]
		if w.holds || w.lossy {
			return
		}
		all := lockq.Sort(m.names)
		es := slices.DeleteFunc(slices.Clone(all), func(e lockq.Entry) bool { return e.ID == w.me.ID })
		prio := w.me.Priority() + 1 + m.r.IntN(3)
		at := lockq.Place(es, w.me.Kind, prio, m.seq)
		base := fmt.Sprintf("r%d", m.now)
		name := fmt.Sprintf("%s%0*d", lockq.Prefix(lockq.ID(base, prio, at.Key), w.me.Kind), lockq.SeqDigits, m.seq)
		if ahead(lockq.Sort(append(namesOf(es), name)), lockq.ID(base, prio, at.Key)) > ahead(all, w.me.ID) {
			return
		}
		old := w.me.Name
		w.me = m.join(w.me.Kind, prio, base, old)
		m.seq-- // one multi: the create and the delete
		m.remove(old)
		w.watchGen++ // its watch is let go
		w.watching, w.needList, w.needGetW = "", true, false
		m.logf("%s joins again as %s", old, w.me.Name)
	}
}

// act takes a waiter's next step: list, or read its blocker and watch it.
func (m *model) act(w *modelWaiter) {
	if w.needList {
		w.needList = false
		m.removeSiblings(w)
		w.stale, w.listedAt = lockq.Sort(m.names), m.now
		m.logf("%s lists %v", w.me.Name, w.stale)
		m.decide(w, w.stale)
		return
	}
	w.needGetW = false
	b := lockq.Blocker(w.stale, w.me.ID)
	node := w.stale[b].Name
	switch {
	case !slices.Contains(m.names, node):
		w.needList = true // as wait: gone, rewritten or not
	case m.modified[node] > w.listedAt:
		w.needList = true
	default:
		w.watching = node
	}
}

// decide goes on from a list (nil: list again).
func (m *model) decide(w *modelWaiter, es []lockq.Entry) {
	if es == nil {
		w.needList = true
		return
	}
	w.stale = es
	if lockq.Blocker(es, w.me.ID) < 0 {
		w.holds = true
		m.logf("%s takes its turn", w.me.Name)
		return
	}
	w.needGetW = true
}

func (m *model) hear(ev modelEvent) {
	w := ev.w
	if ev.gen != w.watchGen || !slices.Contains(m.waiters, w) {
		return
	}
	b := lockq.Blocker(w.stale, w.me.ID)
	if !ev.deleted {
		w.needList = true
		return
	}
	m.decide(w, dropped(w.stale, w.stale[b].Name, ticket{Entry: w.me}))
}

// drain delivers every event and takes every step left.
func (m *model) drain() {
	for range 100000 {
		switch {
		case len(m.events) > 0:
			ev := m.events[0]
			m.events = m.events[1:]
			m.hear(ev)
			continue
		}
		i := slices.IndexFunc(m.waiters, func(w *modelWaiter) bool { return w.needList || w.needGetW })
		if i < 0 {
			return
		}
		m.act(m.waiters[i])
	}
}

// removeSiblings deletes the other nodes of w's acquisition, as list and
// leave do.
func (m *model) removeSiblings(w *modelWaiter) {
	if !w.lossy {
		return
	}
	for _, n := range slices.Clone(m.names) {
		if e, _ := lockq.Parse(n); e.ID == w.me.ID && n != w.me.Name {
			m.logf("%s deletes %s", w.me.Name, n)
			m.remove(n)
		}
	}
	w.lossy = false
}

func (m *model) check() error {
	es := lockq.Sort(m.names)
	for _, w := range m.waiters {
		if w.holds && !lockq.Holds(es, w.me.ID) {
			return fmt.Errorf("%s took its turn, but does not hold in %v", w.me.Name, es)
		}
	}
	return nil
}
