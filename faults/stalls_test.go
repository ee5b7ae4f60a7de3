package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// stallMonitor notices the stalls of the machine that are no fault the
// nemesis injected:
//
//   - the test process not scheduled for a while: the proxies on the peer
//     links live in it, so such a stall stops all raft traffic as surely
//     as a partition of every member, and the clients stop too;
//
//   - a member that makes no progress (its applied index stands still
//     while another member's moves on) although it runs, is not paused and
//     its links pass everything: on a loaded machine a member can stand
//     still for seconds (a slow fsync, no CPU). A leader in that state
//     keeps answering its clients' pings while the others elect a new
//     leader, which expires those sessions: the clients were never heard
//     by the majority, as with a paused member.
//
//   - a spell of more than leaderlessMin with no leader that a majority
//     agrees on. A fault of one minority leaves a majority that elects a
//     leader within an election timeout (250 to 500 ms here); on a loaded
//     machine members have stood still for seconds before campaigning.
//     Crashes of the whole cluster make such spells too.
//
// A session may end because of any of them. On a quiet machine there are
// none but the crashes; the summary lists them all.
type stallMonitor struct {
	clock *clock
	c     *cluster

	mu         sync.Mutex // guards the fields below
	stalls     []window   // of the test process (kind machineStall, no members)
	members    []window   // of members (kind memberStall)
	leaderless []window   // (kind leaderless)
	worst      time.Duration
}

// leaderlessMin is how long the cluster may go without a leader before the
// spell counts: three times the longest election timeout.
const leaderlessMin = 1500 * time.Millisecond

// memberStallMin is how long a member must stand still, while another
// moves on, to count as stalled: longer than a redial of the transport
// after a partition heals (up to a second).
const memberStallMin = 1500 * time.Millisecond

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
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watchMembers(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watchLeader(ctx)
	}()
}

// watchLeader records the spells without an agreed leader.
func (s *stallMonitor) watchLeader(ctx context.Context) {
	var since time.Duration = -1 // start of the current spell, -1 if there is a leader
	end := func(now time.Duration) {
		if since >= 0 && now-since >= leaderlessMin {
			s.mu.Lock()
			s.leaderless = append(s.leaderless, window{kind: leaderless, start: since, end: now})
			s.mu.Unlock()
		}
		since = -1
	}
	for i := 0; i < 1<<30 && ctx.Err() == nil; i++ {
		sleep(ctx, 200*time.Millisecond)
		_, ok := s.c.leader()
		now := s.clock.now()
		switch {
		case ok:
			end(now)
		case since < 0:
			since = now
		}
	}
	end(s.clock.now())
}

// watchMembers polls every member's applied index and records the spells
// in which a member that should progress stood still.
func (s *stallMonitor) watchMembers(ctx context.Context) {
	type progress struct {
		applied uint64
		at      time.Duration // when applied last moved (or the member came up)
		stalled int           // 1 + the index of its open window in s.members, or 0
	}
	prog := map[uint64]*progress{}
	for i := 0; i < 1<<30 && ctx.Err() == nil; i++ {
		sleep(ctx, 200*time.Millisecond)
		now := s.clock.now()
		var top uint64
		seen := map[uint64]bool{}
		for _, id := range s.c.ids {
			running, paused := s.c.state(id)
			if !running || paused || !s.c.linksPass(id) {
				delete(prog, id) // not expected to progress: start afresh
				continue
			}
			st, err := s.c.status(id)
			if err != nil {
				continue
			}
			seen[id] = true
			top = max(top, st.Applied)
			p := prog[id]
			switch {
			case p == nil:
				prog[id] = &progress{applied: st.Applied, at: now}
			case st.Applied > p.applied:
				*p = progress{applied: st.Applied, at: now, stalled: p.stalled}
			}
		}
		s.mu.Lock()
		for id, p := range prog {
			switch {
			case p.stalled > 0:
				s.members[p.stalled-1].end = now // still standing, or just moved
				if p.at == now {
					p.stalled = 0
				}
			case seen[id] && p.applied < top && now-p.at >= memberStallMin:
				s.members = append(s.members, window{kind: memberStall, members: []uint64{id}, start: p.at, end: now})
				p.stalled = len(s.members)
			}
		}
		s.mu.Unlock()
	}
}

func (s *stallMonitor) note(from, to, late time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worst = max(s.worst, late)
	if late >= stallThreshold {
		s.stalls = append(s.stalls, window{kind: machineStall, start: from, end: to})
	}
}

// windows returns the stalls seen.
func (s *stallMonitor) windows() []window {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(append(slices.Clone(s.stalls), s.members...), s.leaderless...)
}

func (s *stallMonitor) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total time.Duration
	for _, w := range s.stalls {
		total += w.end - w.start
	}
	var members []string
	for _, w := range s.members {
		members = append(members, fmt.Sprintf("%d at %v for %v", w.members[0], w.start.Round(time.Millisecond), (w.end-w.start).Round(time.Millisecond)))
	}
	var spells []string
	for _, w := range s.leaderless {
		spells = append(spells, fmt.Sprintf("at %v for %v", w.start.Round(time.Millisecond), (w.end-w.start).Round(time.Millisecond)))
	}
	return fmt.Sprintf("%d stalls of the test process over %v (%v in all; the worst lateness %v); %d stalled members %v; %d spells without a leader %v",
		len(s.stalls), stallThreshold, total.Round(time.Millisecond), s.worst.Round(time.Millisecond), len(members), members, len(spells), spells)
}
