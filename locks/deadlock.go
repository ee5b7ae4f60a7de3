package locks

import (
	"maps"
	"slices"

	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// Deadlocks returns every cycle of the wait-for graph, read with t: a
// vertex is a holder (an owner and its holder id: a Mutex, an RWMutex or a
// MultiLock value, or an HTTP client), and an edge goes from a waiter to
// each holder of the lock it waits for. Each cycle is the waits around it,
// starting with the one whose waiter began to wait last (the youngest
// wait, the one to end to break it); cycles come in the order of their
// first lock.
func (x *Index) Deadlocks(t *tree.Tree) [][]wire.LockWait {
	return Cycles(x.Waits(t, nil))
}

// Waits are the edges of the wait-for graph of the locks keep takes (all
// of them for nil), read with t, by lock: each waiter of a lock waits for
// each of its holders. The graphs of several indexes (the shards of a
// sharded cluster) put together are one graph: Cycles finds a deadlock
// across them.
func (x *Index) Waits(t *tree.Tree, keep func(lock string) bool) []wire.LockWait {
	// Only a lock with two nodes or more can have a waiter: the others,
	// most locks of a lock service, cost a look at their length.
	var queued []string
	for p, l := range x.locks {
		if len(l.nodes) > 1 && (keep == nil || keep(p)) {
			queued = append(queued, p)
		}
	}
	slices.Sort(queued)
	var waits []wire.LockWait
	for _, p := range queued {
		info, _ := x.Info(t, p)
		for _, w := range info.Waiters {
			for _, h := range info.Holders {
				if vertex(h) != vertex(w) {
					waits = append(waits, wire.LockWait{Waiter: w, Lock: p, Holder: h})
				}
			}
		}
	}
	return waits
}

// Cycles returns every cycle of the wait-for graph whose edges are waits,
// as Deadlocks does.
func Cycles(waits []wire.LockWait) [][]wire.LockWait {
	edges := map[string][]wire.LockWait{} // by waiter vertex
	for _, w := range waits {
		edges[vertex(w.Waiter)] = append(edges[vertex(w.Waiter)], w)
	}
	var cycles [][]wire.LockWait
	seen := map[string]bool{} // vertices of a cycle found already
	for _, v := range slices.Sorted(maps.Keys(edges)) {
		if seen[v] {
			continue
		}
		if c := cycleFrom(v, edges); c != nil {
			for _, w := range c {
				seen[vertex(w.Waiter)] = true
			}
			cycles = append(cycles, youngestFirst(c))
		}
	}
	return cycles
}

// cycleFrom returns a cycle through start, following edges depth first,
// or nil.
func cycleFrom(start string, edges map[string][]wire.LockWait) []wire.LockWait {
	var path []wire.LockWait
	onPath := map[string]bool{start: true}
	var visit func(v string) bool
	visit = func(v string) bool {
		for _, e := range edges[v] {
			next := vertex(e.Holder)
			path = append(path, e)
			if next == start {
				return true
			}
			if !onPath[next] {
				onPath[next] = true
				if visit(next) {
					return true
				}
			}
			path = path[:len(path)-1]
		}
		return false
	}
	if visit(start) {
		return path
	}
	return nil
}

// youngestFirst rotates a cycle so that it starts at the wait that began
// last.
func youngestFirst(c []wire.LockWait) []wire.LockWait {
	i := 0
	for j, w := range c {
		if w.Waiter.Since > c[i].Waiter.Since {
			i = j
		}
	}
	return append(slices.Clone(c[i:]), c[:i]...)
}
