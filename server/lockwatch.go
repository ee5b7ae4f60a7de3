package server

import "sync"

// lockWatch wakes what waits for a lock's queue to change: the HTTP lock
// API's waiters (an acquire waiting its turn, a long poll). Each waiter
// takes a channel for a path, closed at the next change of that lock (or of
// every lock, when a snapshot replaces the tree).
type lockWatch struct {
	mu      sync.Mutex
	waiters map[string]chan struct{} // by lock path; one channel shared by its waiters
}

func newLockWatch() *lockWatch { return &lockWatch{waiters: map[string]chan struct{}{}} }

// next returns a channel closed at the next change of the lock at path.
func (w *lockWatch) next(path string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.waiters[path]
	if ch == nil {
		ch = make(chan struct{})
		w.waiters[path] = ch
	}
	return ch
}

// changed wakes the waiters of the locks at paths; nil wakes them all.
func (w *lockWatch) changed(paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if paths == nil {
		for p, ch := range w.waiters {
			close(ch)
			delete(w.waiters, p)
		}
		return
	}
	for _, p := range paths {
		if ch := w.waiters[p]; ch != nil {
			close(ch)
			delete(w.waiters, p)
		}
	}
}
