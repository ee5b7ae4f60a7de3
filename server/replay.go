package server

import (
	"github.com/arbor-coord/arbor/shardmap"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// A replay from the watch history (an addWatch from a zxid, a restore of
// lasting watches after a reconnect) can be long: up to the whole
// history. Read under the fsm's lock, it would hold up the member's
// applies meanwhile. So the bulk is sent first, without the lock: the
// events up to the zxid applied when the replay begins. The locked part
// (addLastingWatch, setWatches) then replays only what was applied since
// and registers the watches, as one step with respect to apply: no event
// falls between the two parts, and none comes twice. No other watch of
// the connection can see the unlocked part's events out of order: the
// addWatch's replay goes to its own watch alone (XidReplay), and a
// restore comes before any other request of the new connection.

// answerReadAfterReplay is answerRead, with the bulk of r's replay sent
// first (preReplay).
func (c *conn) answerReadAfterReplay(r *request, reply *wire.Reply) bool {
	c.preReplay(r)
	defer func() { c.replayed = replayedPart{} }()
	return c.answerRead(r, reply)
}

// preReplay sends, without the fsm's lock, the events up to the zxid
// applied now that r's replay brings, and notes in c.replayed how far it
// got. It sends nothing for any other request, for a replay the history
// no longer holds (the locked part says so), or for a restore frame that
// is not the last.
func (c *conn) preReplay(r *request) {
	req := &r.req
	if r.err != nil {
		return
	}
	lasting := map[watchKey]bool{}
	var from int64
	var send func(zxid int64, ev tree.Event)
	switch {
	case req.Op == wire.OpAddWatch && req.FromZxid > 0 && req.AddWatchMode == wire.AddWatchPersistent:
		lasting[watchKey{req.Path, watchPersistent}] = true
		from = req.FromZxid
	case req.Op == wire.OpAddWatch && req.FromZxid > 0 && req.AddWatchMode == wire.AddWatchPersistentRecursive:
		lasting[watchKey{req.Path, watchRecursive}] = true
		from = req.FromZxid
	case req.Op == wire.OpSetWatches2 && !req.MoreWatches && c.restoreRefused == nil && c.srv.routingMap() != nil:
		c.preReplaySharded(c.restoreSoFar(req)) // each watch from its own place, shard by shard
		return
	case req.Op == wire.OpSetWatches2 && !req.MoreWatches && c.restoreRefused == nil:
		all := c.restoreSoFar(req) // with the frames gathered before this last one
		from = all.RelativeZxid
		for _, p := range all.PersistentWatches {
			lasting[watchKey{p, watchPersistent}] = true
		}
		for _, p := range all.RecursiveWatches {
			lasting[watchKey{p, watchRecursive}] = true
		}
		send = func(zxid int64, ev tree.Event) { c.srv.notify(c, shardmap.MetaGroup, zxid, ev, nil) }
	default:
		return
	}
	g, history := c.srv.historyOf(req.Path, req.AddWatchMode == wire.AddWatchPersistentRecursive)
	if g == nil {
		return
	}
	if send == nil {
		send = replaySender(c, req, g.id)
	}
	to := g.fsm.lastZxid()
	if len(lasting) == 0 || history == nil || from < 0 || from >= to || from < history.oldestZxid() {
		return
	}
	err := history.between(from, to, func(zxid int64, ev tree.Event) {
		if sees(lasting, ev) && mayRead(c, ev) {
			send(zxid, ev)
		}
	})
	c.replayed = replayedPart{to: to, err: err}
	if hook := c.srv.afterPreReplay; hook != nil {
		hook()
	}
}
