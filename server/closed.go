package server

import "sync"

// closeHow is how the meta group closed a session: how its holds ended (a
// wire.LockEvent kind: a lease expired or released, a session ended) and
// whether it expired (its holds were lost, and their lock-delays go ahead
// of them). A shard, which knows a session only as the owner of its
// ephemerals there, ends it after the meta group, and as it did.
type closeHow struct {
	end     string
	expired bool
}

// closedSessions is how the sessions the meta group closed lately ended,
// for the shards' sweeps (endSessionsIn): the last closedKept at least.
type closedSessions struct {
	mu    sync.Mutex
	how   map[int64]closeHow
	order []int64 // the ids in how, oldest first
}

const closedKept = 16384

// put records how the sessions ids end.
func (c *closedSessions) put(ids []int64, how closeHow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.how == nil {
		c.how = map[int64]closeHow{}
	}
	for _, id := range ids {
		if _, ok := c.how[id]; !ok {
			c.order = append(c.order, id)
		}
		c.how[id] = how
	}
	if len(c.order) >= 2*closedKept {
		for _, old := range c.order[:closedKept] {
			delete(c.how, old)
		}
		c.order = append([]int64(nil), c.order[closedKept:]...)
	}
}

func (c *closedSessions) get(id int64) (closeHow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	how, ok := c.how[id]
	return how, ok
}
