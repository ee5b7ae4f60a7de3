package raftnode

import (
	"sync"
	"time"
)

// liveness is a member's judgement of which peers are alive, from the
// frames it takes from each (docs/scale-out.md, "Member liveness"): a
// quiescent group hears nothing from its leader, so it is the member, not
// the group, that must notice the leader's death. A peer is alive while a
// frame of it came within timeout. The transport keeps that true of a
// live member by sending an alive frame to every peer it sent nothing to
// for an interval (keepAlive), and tells its nodes whenever a peer it
// heard from stops being heard (sweep).
type liveness struct {
	once    sync.Once
	timeout time.Duration // zero until started

	mu    sync.Mutex
	heard map[uint64]time.Time // peer -> its last frame taken
	down  map[uint64]bool      // peers judged dead since their last frame
}

// start makes l judge peers dead after timeout without a frame, and
// reports whether this call started it (the first does).
func (l *liveness) start(timeout time.Duration) (started bool) {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.timeout, started = timeout, true
		l.heard, l.down = map[uint64]time.Time{}, map[uint64]bool{}
	})
	return started
}

// heardFrom notes a frame of peer id taken at now.
func (l *liveness) heardFrom(id uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heard != nil {
		l.heard[id] = now
		delete(l.down, id)
	}
}

// alive reports whether a frame of peer id came within the timeout: never
// before l is started, so that nothing relies on a judgement nobody makes.
func (l *liveness) alive(id uint64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.heard[id]
	return ok && now.Sub(at) < l.timeout
}

// sweep judges the peers heard from at now, and returns those it judged
// dead since the last sweep: each once, until it is heard from again. (A
// peer never heard from is never judged: nothing went quiet on it.)
func (l *liveness) sweep(now time.Time) (died []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, at := range l.heard {
		if !l.down[id] && now.Sub(at) >= l.timeout {
			l.down[id] = true
			died = append(died, id)
		}
	}
	return died
}

// livenessTransport is a Transport whose member judges its peers' lives:
// a group can go quiescent over it (Config.Quiesce).
type livenessTransport interface {
	peerAlive(id uint64) bool
	// watchLiveness starts the judgement, with n's tick for the interval
	// of the alive frames and its election timeout for the judgement's;
	// the first node to ask sets them for the member.
	watchLiveness(n *Node)
}
