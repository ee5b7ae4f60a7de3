package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/recipes"
)

// fence is the resource the lock protects, in the test process: it keeps
// the highest fencing token it accepted and refuses lower ones, as
// docs/recipes.md tells a resource to.
type fence struct {
	mu       sync.Mutex // guards the fields below
	highest  int64
	accepted []fenceWrite
	rejected []fenceWrite
}

type fenceWrite struct {
	token  int64
	holder string
}

// write accepts a write with token unless a higher token was accepted.
func (f *fence) write(token int64, holder string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := fenceWrite{token: token, holder: holder}
	if token < f.highest {
		f.rejected = append(f.rejected, w)
		return false
	}
	f.highest = token
	f.accepted = append(f.accepted, w)
	return true
}

// acquisition is one Lock call and what became of it.
type acquisition struct {
	holder    string
	err       error // Lock's error; the rest is set only without one
	token     int64
	locked    time.Duration // Lock returned
	unlocking time.Duration // Unlock called
	unlocked  time.Duration // Unlock returned
	unlockErr error
	verified  bool // the session was seen alive after Unlock returned: the hold was never lost
	writes    int
	rejected  int
	lost      bool // Lost was closed before the holder was done
}

// lockWorkload runs contenders on one recipes.Mutex that write to a fence.
type lockWorkload struct {
	fleet       *fleet
	clock       *clock
	contenders  int
	path        string
	maxAttempts int // per contender
	fence       fence

	mu   sync.Mutex // guards acqs
	acqs []acquisition
}

func newLockWorkload(f *fleet, contenders int) *lockWorkload {
	return &lockWorkload{fleet: f, clock: f.clock, contenders: contenders, path: "/lock/fenced", maxAttempts: 1 << 20}
}

func (w *lockWorkload) run(ctx context.Context, wg *sync.WaitGroup, seed int64) {
	for id := range w.contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.contender(ctx, id, rand.New(rand.NewPCG(uint64(seed), 1000+uint64(id))))
		}()
	}
}

// contender takes the lock again and again. Each session also holds an
// ephemeral marker: seeing it after an Unlock (through sync) proves the
// session lived through the whole hold.
func (w *lockWorkload) contender(ctx context.Context, id int, rng *rand.Rand) {
	var c *tracked
	var m *recipes.Mutex
	var marker string
	for n := 0; n < w.maxAttempts && ctx.Err() == nil; n++ {
		if c == nil || c.Err() != nil {
			var err error
			if c, err = w.fleet.dial(ctx, fmt.Sprintf("lock-%d", id)); err != nil {
				return
			}
			m = recipes.NewMutex(c.Client, w.path)
			marker = fmt.Sprintf("/lockers/c%d-%x", id, c.SessionID())
			if !createEphemeral(ctx, c, marker) {
				continue
			}
		}
		a := acquisition{holder: fmt.Sprintf("%s/%x", c.name, c.SessionID())}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		a.err = m.Lock(lctx)
		cancel()
		a.locked = w.clock.now()
		if a.err != nil {
			if ctx.Err() == nil {
				w.record(a)
			}
			continue
		}
		w.hold(ctx, c, m, marker, &a, rng)
		w.record(a)
	}
}

// hold writes to the fence as the holder, releases, and checks that the
// session lived through it.
func (w *lockWorkload) hold(ctx context.Context, c *tracked, m *recipes.Mutex, marker string, a *acquisition, rng *rand.Rand) {
	a.token = m.Token()
	for i := 1 + rng.IntN(3); i > 0; i-- {
		select {
		case <-m.Lost():
			a.lost = true
		default:
		}
		if a.lost {
			break
		}
		a.writes++
		if !w.fence.write(a.token, a.holder) {
			a.rejected++
		}
		sleep(ctx, time.Duration(rng.IntN(30))*time.Millisecond)
	}
	a.unlocking = w.clock.now()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	a.unlockErr = m.Unlock(uctx)
	a.unlocked = w.clock.now()
	if a.unlockErr != nil {
		return
	}
	if c.Sync(uctx, marker) == nil {
		ok, _, err := c.Exists(uctx, marker)
		a.verified = ok && err == nil
	}
}

func (w *lockWorkload) record(a acquisition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.acqs = append(w.acqs, a)
}

// createEphemeral creates path as an ephemeral node of c's session,
// finding it again if the reply to the create was lost.
func createEphemeral(ctx context.Context, c *tracked, path string) bool {
	for range 20 {
		if ctx.Err() != nil || c.Err() != nil {
			return false
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := c.Create(octx, path, nil, client.Ephemeral)
		if errors.Is(err, client.ErrNodeExists) {
			var st client.Stat
			_, st, err = c.Get(octx, path)
			if err == nil && st.EphemeralOwner != c.SessionID() {
				err = fmt.Errorf("%s belongs to session %#x", path, st.EphemeralOwner)
			}
		}
		cancel()
		if err == nil {
			return true
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return false
}

// check judges the acquisitions:
//   - fencing tokens are unique to one acquisition;
//   - holds that were never lost (verified) do not overlap in time, and
//     the fence accepted every write they made;
//   - an acquisition that began after a verified hold ended has a higher
//     token;
//   - every attempt and every write is accounted for.
func (w *lockWorkload) check(violate func(format string, args ...any)) string {
	w.mu.Lock()
	acqs := append([]acquisition(nil), w.acqs...)
	w.mu.Unlock()
	w.fence.mu.Lock()
	accepted, rejected := len(w.fence.accepted), len(w.fence.rejected)
	for i := 1; i < len(w.fence.accepted); i++ {
		if w.fence.accepted[i].token < w.fence.accepted[i-1].token {
			violate("lock: the fence accepted token %d after %d", w.fence.accepted[i].token, w.fence.accepted[i-1].token)
		}
	}
	w.fence.mu.Unlock()

	var held, failed, verified, lost, unlockFailed, writes, rejectedByHolders int
	byToken := map[int64]string{}
	var good []acquisition
	for _, a := range acqs {
		if a.err != nil {
			failed++
			continue
		}
		held++
		writes += a.writes
		rejectedByHolders += a.rejected
		if a.lost {
			lost++
		}
		if a.unlockErr != nil {
			unlockFailed++
		}
		if prev, dup := byToken[a.token]; dup {
			violate("lock: token %d was handed to two acquisitions (%s and %s)", a.token, prev, a.holder)
		}
		byToken[a.token] = a.holder
		if a.verified {
			verified++
			good = append(good, a)
			if a.rejected > 0 {
				violate("lock: the fence refused %d writes of %s (token %d), whose hold was never lost", a.rejected, a.holder, a.token)
			}
		}
	}
	sort.Slice(good, func(i, j int) bool { return good[i].locked < good[j].locked })
	for i := 1; i < len(good); i++ {
		if p, a := good[i-1], good[i]; a.locked < p.unlocking {
			violate("lock: %s held the lock from %v (token %d) while %s held it until %v (token %d)",
				a.holder, a.locked, a.token, p.holder, p.unlocking, p.token)
		}
	}
	for _, p := range good {
		for _, a := range acqs {
			if a.err == nil && a.locked > p.unlocked && a.token <= p.token {
				violate("lock: %s took the lock at %v with token %d, not above the %d of %s released at %v",
					a.holder, a.locked, a.token, p.token, p.holder, p.unlocked)
			}
		}
	}
	if held+failed != len(acqs) || verified > held {
		violate("lock: %d attempts but %d held and %d failed", len(acqs), held, failed)
	}
	if writes != accepted+rejected || rejectedByHolders != rejected {
		violate("lock: holders made %d writes (%d refused), the fence saw %d accepted and %d refused",
			writes, rejectedByHolders, accepted, rejected)
	}
	return fmt.Sprintf("%d attempts: %d held (%d verified, %d lost, %d unlock errors), %d failed; fence: %d writes accepted, %d refused",
		len(acqs), held, verified, lost, unlockFailed, failed, accepted, rejected)
}
