package client

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/internal/clock"
	"github.com/arbor-coord/arbor/wire"
)

// run owns the life of the session after Dial: it waits for the connection
// to break, reconnects, restores the watches and publishes the new
// connection, until the session expires (and is not renewed) or Close is
// called. It is the only goroutine that moves the state between connected,
// disconnected and expired.
func (c *Client) run(cn *conn) {
	defer c.wg.Done()
	for cn != nil {
		select {
		case <-cn.done:
		case <-c.runCtx.Done():
			cn.fail(ErrClosed)
		}
		// Wait for the reader, so that every reply it took has registered
		// its watch and raised lastZxid before they are used below.
		cn.wait()
		if c.runCtx.Err() != nil || c.isClosing() {
			return
		}
		if cause := cn.cause(); isFatal(cause) {
			c.expire(cause)
			cn = c.renew()
			continue
		}
		c.log.Info("arbor: connection lost; reconnecting", zap.String("server", cn.addr),
			zap.String("session", c.sessionHex()), zap.Error(cn.cause()))
		c.setState(StateDisconnected, nil)
		next, err := c.reconnect()
		if errors.Is(err, ErrClosed) {
			return
		}
		if isRefusedAuth(err) {
			c.authFailed(err)
			return
		}
		if err != nil {
			c.expire(err)
			cn = c.renew()
			continue
		}
		c.restoreWatches(next)
		c.setState(StateConnected, next)
		c.log.Info("arbor: reconnected", zap.String("server", next.addr), zap.String("session", c.sessionHex()))
		cn = next
	}
}

// reconnect redials the servers in random order, with exponential backoff
// between rounds, until one reattaches the session. It fails with
// ErrSessionExpired once a full session timeout has passed without a word
// from any server, or when a server says the session is gone, and with
// ErrClosed when Close is called.
func (c *Client) reconnect() (*conn, error) {
	var b backoff
	for {
		delay := min(b.next(), max(c.sessionLeft(), 0))
		if clock.Sleep(c.runCtx, c.clock, delay) != nil {
			return nil, ErrClosed
		}
		for _, addr := range c.shuffled() {
			left := c.sessionLeft()
			if left <= 0 {
				return nil, fmt.Errorf("%w: no server heard from for the session timeout (%v)",
					ErrSessionExpired, c.SessionTimeout())
			}
			if c.runCtx.Err() != nil {
				return nil, ErrClosed
			}
			cn, err := c.open(c.runCtx, addr, min(c.attemptLimit(), left))
			if err == nil {
				return cn, nil
			}
			if isFatal(err) || isRefusedAuth(err) {
				return nil, err
			}
			c.log.Info("arbor: reconnect failed", zap.String("server", addr), zap.Error(err))
		}
	}
}

// renew starts a new session after an expiry, for a client dialed with
// WithSessionRenewal, and returns its connection; nil without renewal or
// when Close is called.
func (c *Client) renew() *conn {
	if !c.opts.renew {
		return nil
	}
	c.mu.Lock()
	old := c.sessionID
	c.sessionID, c.password = 0, nil
	c.mu.Unlock()
	cn, err := c.dialFirst(c.runCtx)
	if isRefusedAuth(err) {
		c.authFailed(err)
		return nil
	}
	if err != nil {
		return nil // Close was called
	}
	c.watches.reopen()
	c.mu.Lock()
	c.ended = make(chan struct{})
	c.expiredErr = nil
	c.setStateLocked(StateConnected, cn)
	c.mu.Unlock()
	c.log.Info("arbor: new session after an expiry", zap.String("expired", fmt.Sprintf("%#x", old)),
		zap.String("session", c.sessionHex()), zap.String("server", cn.addr))
	return cn
}

// expire moves to StateExpired (for good, unless renew follows): later calls fail with an error
// matching ErrSessionExpired (and cause), and every watch gets the session
// event.
func (c *Client) expire(cause error) {
	err := cause
	if !errors.Is(err, ErrSessionExpired) {
		err = fmt.Errorf("%w: %w", ErrSessionExpired, cause)
	}
	c.log.Warn("arbor: session expired", zap.String("session", c.sessionHex()), zap.Error(err))
	c.mu.Lock()
	c.expiredErr = err
	c.setStateLocked(StateExpired, nil)
	c.mu.Unlock()
	c.watches.closeAll(Event{Type: EventSession, State: StateExpired, Err: err})
}

// restoreWatches queues setWatches2 frames for every registered watch on a
// new connection, before it is published: they reach the server ahead of
// any new request. The server fires at once what changed since lastZxid
// and replays the events the persistent and recursive watches missed. The
// paths are split over several frames so that none is too large; a server
// of version 3 keeps every frame but the last (MoreWatches) and restores
// them all at once. An older server restores each frame as it comes, its
// replay starting again from lastZxid, so the connection holds the
// notifications until every frame is answered and then delivers them in
// zxid order (conn.restoreIn).
func (c *Client) restoreWatches(cn *conn) {
	data, exist, child, persistent, recursive, since, at := c.watches.paths()
	// The persistent and recursive watches go first: the server replays
	// their missed events, which are older than the catch-up events of the
	// one-shot watches, and events must arrive in zxid order.
	lists := [5][]string{persistent, recursive, data, exist, child}
	left := func() (n int) {
		for _, l := range lists {
			n += len(l)
		}
		return n
	}
	rel := c.resumeZxid()
	c.watches.rewind()
	var frames []wire.Request
	for left() > 0 {
		var batch [5][]string
		size := 0
		for i := range lists {
			for len(lists[i]) > 0 && size < watchBatchSize {
				size += len(lists[i][0]) + 8
				batch[i] = append(batch[i], lists[i][0])
				lists[i] = lists[i][1:]
			}
		}
		// Each watch with the zxid it has seen its path since, which is of
		// its path's shard on a sharded cluster.
		var zxids []int64
		for _, b := range []struct{ batch, list int }{{2, listData}, {3, listExist}, {4, listChild}, {0, listPersistent}, {1, listRecursive}} {
			for _, p := range batch[b.batch] {
				zxids = append(zxids, since[watchAt{b.list, p}])
			}
		}
		// And where each lasting watch resumes in each shard it has a
		// place in, to a server that takes positions.
		var positions [][]int64
		if cn.version >= wire.ShardedWatches {
			placed := false
			for _, b := range []struct{ batch, list int }{{0, listPersistent}, {1, listRecursive}} {
				for _, p := range batch[b.batch] {
					var ps []int64
					places := at[watchAt{b.list, p}]
					for _, g := range slices.Sorted(maps.Keys(places)) {
						ps = append(ps, wire.Position(g, places[g]))
					}
					placed = placed || len(ps) > 0
					positions = append(positions, ps)
				}
			}
			if !placed {
				positions = nil
			}
		}
		frames = append(frames, wire.Request{
			Xid:               wire.XidSetWatches,
			Op:                wire.OpSetWatches2,
			RelativeZxid:      rel,
			PersistentWatches: slices.Clip(batch[0]),
			RecursiveWatches:  slices.Clip(batch[1]),
			DataWatches:       slices.Clip(batch[2]),
			ExistWatches:      slices.Clip(batch[3]),
			ChildWatches:      slices.Clip(batch[4]),
			WatchZxids:        zxids,
			WatchPositions:    positions,
		})
	}
	if cn.version >= wire.ResumableWatches {
		// The server keeps every frame but the last and restores them
		// all at once: no event is seen live by one frame's watch and
		// replayed by another's.
		for i := range len(frames) - 1 {
			frames[i].MoreWatches = true
		}
	}
	cn.restoreIn(len(frames))
	for _, f := range frames {
		cn.sendFrame(f)
	}
}
