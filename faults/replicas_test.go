package faults

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// replicaWatch polls every live member's /status during a run: members
// that report the same zxid (read with the digest, under one lock) must
// report the same tree digest.
type replicaWatch struct {
	c *cluster

	mu      sync.Mutex // guards the fields below
	seen    map[int64]sample
	samples int
	bad     []string
}

type sample struct {
	digest string
	member uint64
}

func (r *replicaWatch) run(ctx context.Context, wg *sync.WaitGroup) {
	r.seen = map[int64]sample{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1<<20 && ctx.Err() == nil; i++ {
			sleep(ctx, 250*time.Millisecond)
			for _, id := range r.c.live() {
				if st, err := r.c.status(id); err == nil {
					r.note(id, st.Zxid, st.Digest)
				}
			}
		}
	}()
}

func (r *replicaWatch) note(id uint64, zxid int64, digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples++
	prev, ok := r.seen[zxid]
	switch {
	case !ok:
		r.seen[zxid] = sample{digest: digest, member: id}
	case prev.digest != digest:
		r.bad = append(r.bad, fmt.Sprintf("at zxid %d member %d has digest %s, member %d had %s", zxid, id, digest, prev.member, prev.digest))
	}
}

// check reports digests that differed, and that the members converge.
func (r *replicaWatch) check(violate func(format string, args ...any)) string {
	r.mu.Lock()
	for _, b := range r.bad {
		violate("replicas: %s", b)
	}
	samples, zxids := r.samples, len(r.seen)
	r.mu.Unlock()
	sts, ok := r.c.converged(30 * time.Second)
	if !ok {
		violate("replicas: the members did not converge in 30s: %+v", sts)
		return ""
	}
	return fmt.Sprintf("%d status samples at %d zxids agreed; converged at applied %d, digest %s", samples, zxids, sts[0].Applied, sts[0].Digest)
}
