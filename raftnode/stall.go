package raftnode

import (
	"os"
	"time"
)

// A stall of the raft goroutine, for fault tests (Config.StallFile): the
// process runs, its other goroutines too, but raft takes nothing in and
// sends nothing out, as under a disk that does not answer or a starved
// CPU. Nothing outside the process can do that to one goroutine.

// stallPoll is how often the stall file is looked for.
const stallPoll = 20 * time.Millisecond

// watchStall sets n.stalled while the stall file exists, until the node
// stops.
func (n *Node) watchStall() {
	tick := time.NewTicker(stallPoll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			_, err := os.Stat(n.cfg.StallFile)
			n.stalled.Store(err == nil)
		case <-n.donec:
			return
		}
	}
}

// holdWhileStalled holds the raft goroutine still while the stall file
// exists (see watchStall); it returns at once otherwise, or when the node
// stops.
func (n *Node) holdWhileStalled() {
	for n.stalled.Load() {
		select {
		case <-time.After(stallPoll):
		case <-n.stopc:
			return
		}
	}
}
