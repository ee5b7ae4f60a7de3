package server

import "sync"

// lockWatch wakes what waits for a lock's queue to change: the HTTP lock
// API's waiters (an acquire waiting its turn, a long poll, an event
// stream). A waiter takes a channel for a path with next, closed at the
// next change of that lock (or of every lock, when a snapshot replaces the
// tree), and gives it back with done when it stops waiting: a path is
// forgotten when nobody waits on it, so that waits on paths that never
// change (any name an HTTP client sends) hold nothing once they end.
type lockWatch struct {
	mu      sync.Mutex
	waiters map[string]*lockWaiters
}

// lockWaiters are the waiters of one lock: one channel shared by them, and
// how many they are.
type lockWaiters struct {
	ch chan struct{}
	n  int
}

func newLockWatch() *lockWatch { return &lockWatch{waiters: map[string]*lockWaiters{}} }

// next returns a channel closed at the next change of the lock at path,
// and done, which the waiter calls once it stops waiting on it.
func (w *lockWatch) next(path string) (ch <-chan struct{}, done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lw := w.waiters[path]
	if lw == nil {
		lw = &lockWaiters{ch: make(chan struct{})}
		w.waiters[path] = lw
	}
	lw.n++
	return lw.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if lw.n--; lw.n == 0 && w.waiters[path] == lw {
			delete(w.waiters, path)
		}
	}
}

// changed wakes the waiters of the locks at paths; nil wakes them all.
func (w *lockWatch) changed(paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
