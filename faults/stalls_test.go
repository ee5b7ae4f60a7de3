package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// stallMonitor notices when the test process itself was not scheduled for
// a while. The proxies on the peer links live in this process, so such a
// stall stops all raft traffic as surely as a partition of every member,
// and the clients stop too: it is a fault of the machine, not of Arbor,
// and a session may end because of it. On a quiet machine there is none.
type stallMonitor struct {
	clock *clock

	mu     sync.Mutex // guards stalls and worst
	stalls []window   // kind is unused; members empty
	worst  time.Duration
}

// stallThreshold is the lateness that counts as a stall: half an election
// timeout of the clusters under test.
const stallThreshold = 250 * time.Millisecond

func (s *stallMonitor) run(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		const every = 5 * time.Millisecond
		last := s.clock.now()
		for i := 0; i < 1<<30 && ctx.Err() == nil; i++ {
			time.Sleep(every)
			now := s.clock.now()
			if late := now - last - every; late > 0 {
				s.note(last, now, late)
			}
			last = now
		}
	}()
}

func (s *stallMonitor) note(from, to, late time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worst = max(s.worst, late)
	if late >= stallThreshold {
		s.stalls = append(s.stalls, window{start: from, end: to})
	}
}

// windows returns the stalls seen.
func (s *stallMonitor) windows() []window {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stalls)
}

func (s *stallMonitor) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total time.Duration
	for _, w := range s.stalls {
		total += w.end - w.start
	}
	return fmt.Sprintf("%d stalls of the test process over %v (%v in all); the worst lateness %v",
		len(s.stalls), stallThreshold, total.Round(time.Millisecond), s.worst.Round(time.Millisecond))
}
