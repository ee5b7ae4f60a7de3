package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/arbor-coord/arbor/client"
	"go.uber.org/zap"
)

// tracked is a client whose connections and session end the run records,
// to judge afterwards whether its session was allowed to expire.
type tracked struct {
	*client.Client
	name string

	mu      sync.Mutex // guards the fields below
	dials   []dialed   // every connection it made, in order
	ended   time.Duration
	endErr  error // why the session ended (nil while it lives)
	closing bool  // the test closed it
}

// dialed is one connection a client made: when, and to which member.
type dialed struct {
	at     time.Duration
	member uint64
}

// fleet makes tracked clients and remembers them all.
type fleet struct {
	c     *cluster
	clock *clock
	log   *zap.Logger // the clients' logs (one file per run)

	mu  sync.Mutex // guards all
	all []*tracked
	wg  sync.WaitGroup // the goroutines that record each session's end
}

// dial makes a new session, retrying until ctx ends (the cluster may be
// down for a while).
func (f *fleet) dial(ctx context.Context, name string) (*tracked, error) {
	tc := &tracked{name: name}
	var d net.Dialer
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			tc.mu.Lock()
			tc.dials = append(tc.dials, dialed{at: f.clock.now(), member: f.c.memberOf(addr)})
			tc.mu.Unlock()
		}
		return nc, err
	}
	for {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cl, err := client.Dial(dctx, f.c.addrs(), client.WithSessionTimeout(sessionTimeout), client.WithDialer(dialer),
			client.WithLogger(f.logger().Named(name)))
		cancel()
		if err == nil {
			tc.Client = cl
			break
		}
		if ctx.Err() != nil {
			return nil, err
		}
		sleep(ctx, 100*time.Millisecond)
	}
	f.mu.Lock()
	f.all = append(f.all, tc)
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		<-tc.Done()
		tc.mu.Lock()
		tc.ended, tc.endErr = f.clock.now(), tc.Err()
		tc.mu.Unlock()
	}()
	return tc, nil
}

func (f *fleet) logger() *zap.Logger {
	if f.log == nil {
		return zap.NewNop()
	}
	return f.log
}

// close closes the client's session, as the test's own doing.
func (tc *tracked) close() {
	tc.mu.Lock()
	tc.closing = true
	tc.mu.Unlock()
	tc.Close()
}

// expiry returns when the session expired and why, or a nil error if it
// did not (a Close by the test is not an expiry).
func (tc *tracked) expiry() (time.Duration, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if !errors.Is(tc.endErr, client.ErrSessionExpired) {
		return 0, nil
	}
	return tc.ended, tc.endErr
}

// wasOn reports whether the client was connected to, or connected to, one
// of members during [from, to]: its last connection before from, or any
// made within.
func (tc *tracked) wasOn(members []uint64, from, to time.Duration) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	last := uint64(0)
	for _, d := range tc.dials {
		if d.at <= from {
			last = d.member
			continue
		}
		if d.at <= to && slices.Contains(members, d.member) {
			return true
		}
	}
	return slices.Contains(members, last)
}

// expiryGrace is how long after a fault a session may still end because
// of it: the client learns of its session's end within a timeout of it,
// and the server ends it within a timeout of the fault's end.
const expiryGrace = 2 * sessionTimeout

// sessionMayExpire says whether a fault allows the session of tc to have
// ended at e, and names the kind of fault that does. For every client: a
// crash of the whole cluster; message loss (lost touches leave the leader
// without news of sessions, and a member whose probes are answered now and
// then still vouches for them); a stall of the test process (which
// carries all peer traffic); a spell without a leader. For the clients of
// one member: its pause or its stall (they need two thirds of a timeout to
// give it up, and may try it again while it is stopped; a stalled leader
// even answers their pings). Kills, partitions, one-way cuts (a member
// the leader no longer answers drops its clients: TestAOneWayCut...) and
// delay allow no expiry.
func sessionMayExpire(tc *tracked, e time.Duration, ws []window) (bool, string) {
	for _, w := range ws {
		if e < w.start || e > w.end+expiryGrace {
			continue
		}
		switch w.kind {
		case faultCrashAll, faultLoss, machineStall, leaderless:
			return true, w.kind.String()
		case faultPause, faultPauseLeader, memberStall:
			if tc.wasOn(w.members, w.start, w.end) {
				return true, w.kind.String() + " of its server"
			}
		}
	}
	return false, ""
}

// checkExpiries reports every session that expired with no fault to
// allow it, and sums up the expiries by the fault that allowed them.
func (f *fleet) checkExpiries(ws []window, violate func(format string, args ...any)) string {
	f.mu.Lock()
	all := slices.Clone(f.all)
	f.mu.Unlock()
	by := map[string]int{}
	for _, tc := range all {
		e, err := tc.expiry()
		if err == nil {
			continue
		}
		allowed, why := sessionMayExpire(tc, e, ws)
		by[why]++
		if !allowed {
			tc.mu.Lock()
			dials := slices.Clone(tc.dials)
			tc.mu.Unlock()
			violate("sessions: %s (session %#x) expired at %v with no fault that allows it: %v; its connections %v",
				tc.name, tc.SessionID(), e.Round(time.Millisecond), err, dials)
		}
	}
	return fmt.Sprintf("%d sessions, %d expired: %v", len(all), sum(by), by)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// closeAll closes every client still open.
func (f *fleet) closeAll() {
	f.mu.Lock()
	all := slices.Clone(f.all)
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, tc := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc.close()
		}()
	}
	wg.Wait()
	f.wg.Wait()
}

func TestASessionMayExpireOnlyUnderAFaultThatAllowsIt(t *testing.T) {
	s := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	tc := &tracked{name: "c", dials: []dialed{{at: s(0), member: 1}, {at: s(20), member: 2}}}
	for _, c := range []struct {
		name string
		at   time.Duration
		ws   []window
		want bool
	}{
		{"no fault at all", s(5), nil, false},
		{"a kill -9 of its server", s(5), []window{{kind: faultKill, members: []uint64{1}, start: s(4), end: s(4.5)}}, false},
		{"a crash of the whole cluster", s(5), []window{{kind: faultCrashAll, members: []uint64{1, 2, 3}, start: s(4), end: s(4.5)}}, true},
		{"long after a crash of the whole cluster", s(30), []window{{kind: faultCrashAll, start: s(4), end: s(4.5)}}, false},
		{"a pause of its server", s(5), []window{{kind: faultPause, members: []uint64{1}, start: s(2), end: s(6)}}, true},
		{"a pause of another member", s(5), []window{{kind: faultPause, members: []uint64{3}, start: s(2), end: s(6)}}, false},
		{"a pause of a member it connected to during the pause", s(23), []window{{kind: faultPauseLeader, members: []uint64{2}, start: s(19), end: s(22)}}, true},
		{"a one-way cut", s(5), []window{{kind: faultOneWay, members: []uint64{3}, start: s(2), end: s(4)}}, false},
		{"a partition", s(5), []window{{kind: faultIsolate, members: []uint64{1}, start: s(2), end: s(4)}}, false},
		{"a delay", s(5), []window{{kind: faultDelay, members: []uint64{1, 2, 3}, start: s(2), end: s(4)}}, false},
		{"a stall of the test process", s(5), []window{{kind: machineStall, start: s(3), end: s(3.5)}}, true},
		{"a stall of its server", s(5), []window{{kind: memberStall, members: []uint64{1}, start: s(2), end: s(4)}}, true},
		{"a stall of another member", s(5), []window{{kind: memberStall, members: []uint64{3}, start: s(2), end: s(4)}}, false},
		{"a long spell without a leader", s(5), []window{{kind: leaderless, start: s(1), end: s(3)}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := sessionMayExpire(tc, c.at, c.ws); got != c.want {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
