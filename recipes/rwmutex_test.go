package recipes

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
)

func TestReadersShareAndWritersExclude(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	cs := []*client.Client{s.dial(t), s.dial(t), s.dial(t), s.dial(t)}
	var readers, writers, maxReaders atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := NewRWMutex(cs[g%len(cs)], "/locks/rw")
			for i := range 8 {
				ctx := ctxWait(t)
				if (g+i)%4 == 0 { // a writer a quarter of the time
					if err := rw.Lock(ctx); err != nil {
						errs <- err
						return
					}
					if w, r := writers.Add(1), readers.Load(); w != 1 || r != 0 {
						errs <- fmt.Errorf("a writer with %d writers and %d readers", w, r)
					}
					time.Sleep(time.Millisecond)
					writers.Add(-1)
					if err := rw.Unlock(ctx); err != nil {
						errs <- err
					}
					continue
				}
				if err := rw.RLock(ctx); err != nil {
					errs <- err
					return
				}
				r := readers.Add(1)
				if w := writers.Load(); w != 0 {
					errs <- fmt.Errorf("a reader with %d writers", w)
				}
				for m := maxReaders.Load(); r > m && !maxReaders.CompareAndSwap(m, r); m = maxReaders.Load() {
				}
				time.Sleep(time.Millisecond)
				readers.Add(-1)
				if err := rw.RUnlock(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if maxReaders.Load() < 2 {
		t.Errorf("at most %d readers held at once: readers must share", maxReaders.Load())
	}
}

func TestAWaitingWriterIsNotStarvedByLaterReaders(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dial(t)
	ctx := ctxWait(t)
	r1, w, r2 := NewRWMutex(c, "/locks/fair"), NewRWMutex(c, "/locks/fair"), NewRWMutex(c, "/locks/fair")
	must(t, r1.RLock(ctx))
	readToken := r1.Token()
	wrote := make(chan error, 1)
	go func() { wrote <- w.Lock(ctx) }()
	waitFor(t, "the writer to queue", func() bool { return len(children(t, c, "/locks/fair")) == 2 })

	// A reader that comes after the waiting writer must wait for it,
	// though only a reader holds now.
	if ok, err := r2.TryRLock(ctx); ok || err != nil {
		t.Fatalf("TryRLock behind a waiting writer = %v, %v; want false", ok, err)
	}
	read := make(chan error, 1)
	go func() { read <- r2.RLock(ctx) }()
	waitFor(t, "the second reader to queue", func() bool { return len(children(t, c, "/locks/fair")) == 3 })
	must(t, r1.RUnlock(ctx))
	must(t, <-wrote)
	select {
	case <-read:
		t.Fatal("a later reader got in while the writer held the lock")
	case <-time.After(50 * time.Millisecond):
	}
	if w.Token() <= readToken {
		t.Errorf("writer token %d after the reader's %d", w.Token(), readToken)
	}
	must(t, w.Unlock(ctx))
	must(t, <-read)
	if err := r2.Lock(ctx); !errors.Is(err, ErrHeldInOtherMode) {
		t.Errorf("Lock on a value holding a read lock: %v, want ErrHeldInOtherMode", err)
	}
	must(t, r2.RLock(ctx)) // reentrant within a mode
	must(t, r2.RUnlock(ctx))
	must(t, r2.RUnlock(ctx))
	if n := len(children(t, c, "/locks/fair")); n != 0 {
		t.Errorf("%d nodes left", n)
	}
}

// On one path a Mutex is the write side of an RWMutex: it excludes readers,
// and readers exclude it.
func TestAMutexAndAReaderOnOnePathExcludeEachOther(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := ctxWait(t)
	c := s.dial(t)
	m := NewMutex(c, "/locks/mixed")
	rw := NewRWMutex(s.dial(t), "/locks/mixed")
	must(t, m.Lock(ctx))
	if ok, err := rw.TryRLock(ctx); err != nil || ok {
		t.Fatalf("TryRLock while a Mutex holds the path = %v, %v; want false", ok, err)
	}
	read := make(chan error, 1)
	go func() { read <- rw.RLock(ctx) }()
	waitFor(t, "the reader to queue", func() bool { return len(children(t, c, "/locks/mixed")) == 2 })
	select {
	case err := <-read:
		t.Fatalf("a reader took the path a Mutex holds: %v", err)
	default:
	}
	must(t, m.Unlock(ctx))
	must(t, <-read)
	if ok, err := m.TryLock(ctx); err != nil || ok {
		t.Fatalf("Mutex.TryLock while a reader holds the path = %v, %v; want false", ok, err)
	}
	must(t, rw.RUnlock(ctx))
	if ok, err := m.TryLock(ctx); err != nil || !ok {
		t.Fatalf("Mutex.TryLock of a free path = %v, %v", ok, err)
	}
	must(t, m.Unlock(ctx))
}
