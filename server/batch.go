package server

import (
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// readBatch runs reads (getData and getChildren) one after the other, each
// as the pipeline runs it alone (its paths checked, its watch left), and
// returns their replies in order. The caller holds the fsm's read lock over
// them all: no change comes between them. A read that fails has its error
// in its reply and the others carry on (ZooKeeper's multiRead).
func (c *conn) readBatch(t *tree.Tree, reads []wire.Request) []wire.Reply {
	replies := make([]wire.Reply, len(reads))
	for i := range reads {
		if err := c.checkPaths(&reads[i]); err != nil {
			replies[i].Err = wire.CodeOf(err) // this read fails, as a bad path does
			continue
		}
		c.srv.read(t, c, &reads[i], &replies[i])
	}
	return replies
}

// readRoutedBatch answers a batch of reads on a sharded cluster: each
// read from its own shard, under that shard's read lock. The batch is not
// one view across shards, as no read across shards is.
func (c *conn) readRoutedBatch(reads []wire.Request) []wire.Reply {
	replies := make([]wire.Reply, len(reads))
	for i := range reads {
		if err := c.checkPaths(&reads[i]); err != nil {
			replies[i].Err = wire.CodeOf(err)
			continue
		}
		g, err := c.srv.groupFor(&reads[i])
		if err != nil {
			replies[i].Err = wire.CodeOf(err)
			continue
		}
		g.fsm.read(func(t *tree.Tree) { c.srv.read(t, c, &reads[i], &replies[i]) })
	}
	return replies
}
