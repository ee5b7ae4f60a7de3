package server

import (
	"sync"
	"sync/atomic"

	"github.com/arbor-coord/arbor/tree"
)

// pathWatch wakes the HTTP handlers that wait for something at a path to
// change. The server has two: one for locks, whose paths change with their
// queues (an acquire waiting its turn, a long poll, a lock's event
// stream), and one for nodes, whose paths change with their events (the
// tree's event stream). A waiter takes a channel for a path with next,
// closed at the next change there (or everywhere, when a snapshot replaces
// the tree), and gives it back with done when it stops waiting: a path is
// forgotten when nobody waits on it, so that waits on paths that never
// change (any name an HTTP client sends) hold nothing once they end.
type pathWatch struct {
	mu      sync.Mutex
	waiters map[string]*pathWaiters
	n       atomic.Int64 // len(waiters), read without mu
}

// pathWaiters are the waiters of one path: one channel shared by them, and
// how many they are.
type pathWaiters struct {
	ch chan struct{}
	n  int
}

func newPathWatch() *pathWatch { return &pathWatch{waiters: map[string]*pathWaiters{}} }

// next returns a channel closed at the next change at path, and done,
// which the waiter calls once it stops waiting on it.
func (w *pathWatch) next(path string) (ch <-chan struct{}, done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lw := w.waiters[path]
	if lw == nil {
		lw = &pathWaiters{ch: make(chan struct{})}
		w.waiters[path] = lw
		w.n.Store(int64(len(w.waiters)))
	}
	lw.n++
	return lw.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if lw.n--; lw.n == 0 && w.waiters[path] == lw {
			delete(w.waiters, path)
			w.n.Store(int64(len(w.waiters)))
		}
	}
}

// changed wakes the waiters at paths; nil wakes them all.
func (w *pathWatch) changed(paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { w.n.Store(int64(len(w.waiters))) }()
	if paths == nil {
		for p, lw := range w.waiters {
			close(lw.ch)
			delete(w.waiters, p)
		}
		return
	}
	for _, p := range paths {
		if lw := w.waiters[p]; lw != nil {
			close(lw.ch)
			delete(w.waiters, p)
		}
	}
}

// changedBy wakes the waiters at the paths of events. It costs one atomic
// load while nobody waits, as on a member nobody looks at.
func (w *pathWatch) changedBy(events []tree.Event) {
	if w.n.Load() == 0 || len(events) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range events {
		if lw := w.waiters[ev.Path]; lw != nil {
			close(lw.ch)
			delete(w.waiters, ev.Path)
		}
	}
	w.n.Store(int64(len(w.waiters)))
}
