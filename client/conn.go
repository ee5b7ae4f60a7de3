package client

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/internal/clock"
	"github.com/arbor-coord/arbor/wire"
)

const (
	bufSize = 64 << 10 // of the reader's and the writer's buffers
	// muxBufSize is theirs on a channel of a Mux: its reads come from
	// memory and its writes go to memory, and a process with thousands of
	// sessions must not hold 128 KiB for each.
	muxBufSize  = 512
	keepBufSize = 1 << 20 // a frame buffer larger than this is not kept for reuse
)

// pingFrame is the keepalive the writer sends when it has been idle.
var pingFrame = wire.AppendRequest(nil, &wire.Request{Xid: wire.XidPing, Op: wire.OpPing})

// request is a frame for the writer. A numbered request (a caller's) also
// has done, which is buffered and receives exactly one result: from the
// reader when the reply comes, or from conn.fail when the connection breaks
// first. A frame with a reserved xid (setWatches) has no done.
type request struct {
	req       wire.Request
	sent      time.Duration // Client.since() when it was queued
	watch     *watchReg     // the watch a successful reply registers, or nil
	done      chan result   // capacity 1
	abandoned atomic.Bool   // the caller stopped waiting: no one wants the watch
}

type result struct {
	reply *wire.Reply
	err   error
}

func newRequest(req wire.Request, w *watchReg) *request {
	return &request{req: req, watch: w, done: make(chan result, 1)}
}

// wait returns the reply to r, or ctx's error if ctx ends first (unless the
// reply is already there and leaves no watch behind: a write that was
// applied is then reported as applied).
func (r *request) wait(ctx context.Context) (*wire.Reply, error) {
	select {
	case res := <-r.done:
		return res.reply, res.err
	case <-ctx.Done():
		r.abandoned.Store(true)
	}
	if r.watch != nil {
		return nil, ctx.Err() // the reader may have seen abandoned: no watch is left
	}
	select { // a reply that is already here wins: its effect (a write's) is not lost
	case res := <-r.done:
		return res.reply, res.err
	default:
		return nil, ctx.Err()
	}
}

// conn is one connection to a server, after a successful handshake. Its
// writer goroutine writes queued frames in order, batching them into one
// flush, and pings when idle; its reader goroutine matches replies to the
// pending requests (replies come in request order) and dispatches
// notifications. Either one, the reader's timer for a silent server, or the
// client breaks the connection with fail.
type conn struct {
	c           *Client
	nc          net.Conn
	addr        string
	version     int32 // the protocol version the server speaks on it
	bufSize     int   // of its reader's and writer's buffers
	log         *zap.Logger
	pingEvery   time.Duration // a third of the negotiated session timeout
	readTimeout time.Duration // two thirds: with no frame for this long, the server is gone

	mu       sync.Mutex      // guards queue, pending, awaiting, pings and err
	queue    []*request      // frames for the writer, in send order
	pending  []*request      // numbered requests awaiting replies, in xid order
	awaiting int             // how many of pending ask for a live lasting watch
	pings    []time.Duration // since() of each ping awaiting its answer, oldest first
	err      error           // why the connection broke; nil while it is up

	restoring atomic.Int32 // setWatches frames of a restore over several frames not yet answered
	held      []wire.Reply // notifications held while restoring (the reader's only)

	wake chan struct{}  // capacity 1: the queue is not empty
	done chan struct{}  // closed by fail
	wg   sync.WaitGroup // the reader and the writer
}

// connect dials addr and performs the handshake within limit (and ctx),
// attaching the client's session (a new one when it has none yet).
func (c *Client) connect(ctx context.Context, addr string, limit time.Duration) (*conn, error) {
	ctx, cancel := clock.WithTimeout(ctx, c.clock, limit)
	defer cancel()
	start := c.since()
	nc, err := c.opts.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	resp, err := c.handshake(ctx, nc)
	if err == nil {
		err = c.attach(resp, start)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("server %s: %w", addr, err)
	}
	c.mu.Lock()
	timeout := c.timeout
	c.mu.Unlock()
	cn := &conn{
		c: c, nc: nc, addr: addr, version: resp.ProtocolVersion, bufSize: bufSize,
		log:         c.log.With(zap.String("server", addr)),
		pingEvery:   timeout / 3,
		readTimeout: timeout * 2 / 3,
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	if c.opts.mux != nil {
		cn.bufSize = muxBufSize
	}
	cn.wg.Add(2)
	go cn.readLoop()
	go cn.writeLoop()
	return cn, nil
}

// handshake sends the ConnectRequest and reads the ConnectResponse. A
// refusal is returned as the error of its code.
func (c *Client) handshake(ctx context.Context, nc net.Conn) (*wire.ConnectResponse, error) {
	c.mu.Lock()
	req := wire.ConnectRequest{
		ProtocolVersion: wire.ProtocolVersion,
		LastZxidSeen:    c.lastZxid.Load(),
		TimeoutMs:       int32(min(c.opts.timeout.Milliseconds(), 1<<31-1)),
		SessionID:       c.sessionID,
		Password:        c.password,
	}
	c.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	_, err := nc.Write(wire.AppendConnectRequest(nil, &req))
	var body []byte
	if err == nil {
		body, err = wire.ReadFrame(nc, nil, c.opts.maxFrame)
	}
	if !stop() && err == nil {
		err = ctx.Err() // the deadline was cut short: the connection is spoilt
	}
	if err != nil {
		return nil, err
	}
	var resp wire.ConnectResponse
	if err := wire.DecodeConnectResponse(body, &resp); err != nil {
		return nil, err
	}
	if resp.Err != wire.CodeOK {
		return nil, fmt.Errorf("handshake refused: %w", resp.Err.Err())
	}
	if resp.SessionID == 0 || resp.TimeoutMs <= 0 {
		return nil, fmt.Errorf("%w: handshake gave session %#x, timeout %d ms",
			ErrMalformed, resp.SessionID, resp.TimeoutMs)
	}
	return &resp, nc.SetDeadline(time.Time{})
}

// attach adopts the session the server granted, or refuses a different
// session than the one the client asked to reattach; the handshake began at
// start.
func (c *Client) attach(resp *wire.ConnectResponse, start time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessionID != 0 && resp.SessionID != c.sessionID {
		return fmt.Errorf("%w: asked to reattach session %#x, got %#x",
			ErrSessionExpired, c.sessionID, resp.SessionID)
	}
	c.sessionID = resp.SessionID
	c.password = resp.Password
	c.timeout = time.Duration(resp.TimeoutMs) * time.Millisecond
	c.alive(start)
	return nil
}

// send hands a numbered request to the connection. It fails with errNotSent,
// and does nothing, if the connection has already broken.
func (cn *conn) send(r *request) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil {
		return errNotSent
	}
	r.req.Xid = cn.c.nextXid() // under mu: xid order is send order
	r.sent = cn.c.since()
	cn.pending = append(cn.pending, r)
	if r.liveLasting() {
		cn.awaiting++
	}
	cn.enqueueLocked(r)
	return nil
}

// liveLasting reports whether r asks for a live persistent or recursive
// watch (an addWatch without FromZxid).
func (r *request) liveLasting() bool {
	return r.watch != nil && r.req.Op == wire.OpAddWatch && r.req.FromZxid == 0
}

// sendFrame queues a frame with a reserved xid; no reply is awaited.
func (cn *conn) sendFrame(req wire.Request) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err == nil {
		cn.enqueueLocked(&request{req: req})
	}
}

func (cn *conn) enqueueLocked(r *request) {
	cn.queue = append(cn.queue, r)
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// take returns the queued frames, leaving spare (emptied) as the new queue.
func (cn *conn) take(spare []*request) []*request {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	q := cn.queue
	cn.queue = spare[:0]
	return q
}

// pop removes and returns the oldest pending request if its xid is xid.
func (cn *conn) pop(xid int32) (*request, error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if len(cn.pending) == 0 {
		return nil, fmt.Errorf("%w: reply with xid %d, but no request is in flight", ErrMalformed, xid)
	}
	r := cn.pending[0]
	if r.req.Xid != xid {
		return nil, fmt.Errorf("%w: reply with xid %d, want %d (replies must come in request order)",
			ErrMalformed, xid, r.req.Xid)
	}
	cn.pending[0] = nil
	cn.pending = cn.pending[1:]
	if r.liveLasting() {
		cn.awaiting--
	}
	return r, nil
}

// fail breaks the connection for err (the first reason wins): it closes the
// socket, which stops the reader and the writer, and fails every pending
// request with err at once.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.err = err
	pending := cn.pending
	cn.pending, cn.queue, cn.awaiting = nil, nil, 0
	close(cn.done)
	cn.mu.Unlock()
	cn.nc.Close()
	for _, r := range pending {
		r.done <- result{err: err}
	}
}

// cause returns why the connection broke.
func (cn *conn) cause() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err
}

// wait waits for the reader and the writer to exit.
func (cn *conn) wait() { cn.wg.Wait() }

// writeLoop writes queued frames, flushing when the queue is empty, and
// pings when nothing was written for pingEvery.
func (cn *conn) writeLoop() {
	defer cn.wg.Done()
	bw := bufio.NewWriterSize(cn.nc, cn.bufSize)
	idle := cn.c.clock.NewTimer(cn.pingEvery)
	defer idle.Stop()
	var batch []*request
	var buf []byte
	for {
		ping := false
		select {
		case <-cn.done:
			return
		case <-cn.wake:
		case <-idle.C():
			ping = true
		}
		if ping {
			cn.mu.Lock()
			cn.pings = append(cn.pings, cn.c.since())
			cn.mu.Unlock()
			bw.Write(pingFrame)
		}
		for {
			batch = cn.take(batch)
			if len(batch) == 0 {
				break
			}
			for i, r := range batch {
				buf = wire.AppendRequest(buf[:0], &r.req)
				bw.Write(buf)
				batch[i] = nil
			}
			if cap(buf) > keepBufSize {
				buf = nil
			}
		}
		if err := bw.Flush(); err != nil {
			cn.fail(connLoss(err))
			return
		}
		idle.Reset(cn.pingEvery)
	}
}

// readLoop reads and handles frames until the connection breaks. With no
// frame for readTimeout (pings are answered, so a live server always sends
// something), it gives the server up: a timer on the client's clock, and
// not a deadline on the socket, so that a test can drive it.
func (cn *conn) readLoop() {
	defer cn.wg.Done()
	silent := cn.c.clock.AfterFunc(cn.readTimeout, func() {
		cn.fail(connLoss(fmt.Errorf("no frame from the server for %v", cn.readTimeout)))
	})
	defer silent.Stop()
	br := bufio.NewReaderSize(cn.nc, cn.bufSize)
	var buf []byte
	for {
		body, err := wire.ReadFrame(br, buf, cn.c.opts.maxFrame)
		if err != nil {
			cn.fail(connLoss(err))
			return
		}
		silent.Reset(cn.readTimeout)
		if err := cn.handle(body); err != nil {
			cn.fail(err)
			return
		}
		if cap(body) <= keepBufSize {
			buf = body // decoding copied everything it kept
		}
	}
}

// handle dispatches one frame by its xid. An error breaks the connection.
func (cn *conn) handle(body []byte) error {
	xid, err := wire.PeekXid(body)
	if err != nil {
		return connLoss(err)
	}
	switch xid {
	case wire.XidNotification:
		return cn.handleNotification(body)
	case wire.XidPing:
		return cn.handlePing(body)
	case wire.XidClosing:
		return cn.handleClosing(body)
	case wire.XidReplay:
		return cn.handleReplay(body)
	case wire.XidSetWatches:
		var rep wire.Reply
		if err := wire.DecodeReply(body, wire.OpSetWatches2, &rep); err != nil {
			return connLoss(err)
		}
		if rep.Err == wire.CodeSessionExpired {
			return ErrSessionExpired
		}
		if rep.Err != wire.CodeOK {
			// The one-shot watches may not fire; the lasting ones end, so
			// that their readers know to read and watch again.
			cn.log.Warn("arbor: setWatches refused; restored watches may not fire", zap.Stringer("code", rep.Err))
			cn.c.watches.endLasting(rep.Zxid, fmt.Errorf("the server refused to restore the watch: %w", rep.Err.Err()))
		}
		cn.restored()
		return nil
	}
	if xid < 0 {
		cn.log.Debug("arbor: ignoring a frame with an unknown reserved xid", zap.Int32("xid", xid))
		return nil
	}
	return cn.handleReply(xid, body)
}

// handlePing takes the answer to the oldest ping in flight. A server that
// cannot keep the session alive (it has lost its leader) says so, and the
// client moves to another.
func (cn *conn) handlePing(body []byte) error {
	var rep wire.Reply
	if err := wire.DecodeReply(body, wire.OpPing, &rep); err != nil {
		return connLoss(err)
	}
	cn.mu.Lock()
	if len(cn.pings) == 0 {
		cn.mu.Unlock()
		return connLoss(fmt.Errorf("%w: a ping answer, but no ping is in flight", ErrMalformed))
	}
	sent := cn.pings[0]
	cn.pings = cn.pings[1:]
	cn.mu.Unlock()
	if rep.Err != wire.CodeOK {
		return connLoss(fmt.Errorf("server answered a ping with: %w", rep.Err.Err()))
	}
	cn.c.alive(sent)
	return nil
}

// handleReply completes the request that reply xid answers, after
// registering its watch: the reader handles frames in order, so a
// notification that follows the reply finds the watch in place.
func (cn *conn) handleReply(xid int32, body []byte) error {
	r, err := cn.pop(xid)
	if err != nil {
		return connLoss(err)
	}
	rep := new(wire.Reply)
	if err := wire.DecodeReply(body, r.req.Op, rep); err != nil {
		err = connLoss(err)
		r.done <- result{err: err}
		return err
	}
	cn.c.noteZxid(rep.Zxid, true)
	if rep.Err != wire.CodeNoQuorum && rep.Err != wire.CodeShuttingDown {
		cn.c.alive(r.sent)
	}
	if rep.Err == wire.CodeSessionExpired {
		r.done <- result{err: ErrSessionExpired}
		return ErrSessionExpired
	}
	if r.watch != nil && !r.abandoned.Load() {
		if rep.Err == wire.CodeOK {
			r.watch.setAt(rep.Positions)
			r.watch.takeReplayed()
		}
		cn.c.watches.register(r.watch, r.req.Op, rep.Err, rep.Zxid)
	}
	r.done <- result{reply: rep}
	return nil
}

func (cn *conn) handleNotification(body []byte) error {
	var rep wire.Reply
	if err := wire.DecodeReply(body, 0, &rep); err != nil {
		return connLoss(err)
	}
	if rep.EventType == wire.EventNone {
		if rep.State == wire.StateExpired {
			return ErrSessionExpired
		}
		return nil
	}
	if cn.restoring.Load() > 0 {
		cn.held = append(cn.held, rep)
		return nil
	}
	cn.fire(&rep)
	return nil
}

// handleReplay takes a past event replayed for an addWatch with FromZxid:
// it comes just before that request's reply, which is next in order, and
// is that watch's alone. It does not raise the last zxid seen: the reply
// does, once the watch holds every event up to it.
func (cn *conn) handleReplay(body []byte) error {
	var rep wire.Reply
	if err := wire.DecodeReply(body, 0, &rep); err != nil {
		return connLoss(err)
	}
	cn.mu.Lock()
	var r *request
	if len(cn.pending) > 0 {
		r = cn.pending[0]
	}
	cn.mu.Unlock()
	if r == nil || r.req.Xid != rep.ReplayOf || r.req.Op != wire.OpAddWatch || r.req.FromZxid == 0 || r.watch == nil {
		return connLoss(fmt.Errorf("%w: a replayed event for xid %d, which is not the next addWatch from a zxid", ErrMalformed, rep.ReplayOf))
	}
	group, zxid := cn.eventShard(rep.Zxid)
	r.watch.replayed = append(r.watch.replayed, shardEvent{Event{Type: EventType(rep.EventType), Path: rep.Path,
		State: StateConnected, Zxid: zxid, Data: rep.Data, Stat: rep.Stat}, group})
	return nil
}

// fire delivers a notification to the watches. Events come in zxid order:
// having seen this one, the client has seen every earlier event of its
// watches, so a reconnect need not replay them.
func (cn *conn) fire(rep *wire.Reply) {
	group, zxid := cn.eventShard(rep.Zxid)
	cn.c.noteZxid(zxid, false)
	if rep.EventType == wire.EventPersistentWatchRemoved && rep.Err == wire.CodeHistoryCompacted {
		cn.c.watches.lost(rep.Path, zxid, &HistoryCompactedError{Oldest: rep.OldestZxid})
		return
	}
	cn.offerEarly(group, Event{Type: EventType(rep.EventType), Path: rep.Path, State: StateConnected, Zxid: zxid,
		Data: rep.Data, Stat: rep.Stat, Turns: rep.Turns})
	cn.c.watches.fire(EventType(rep.EventType), rep.Path, group, zxid, rep.Data, rep.Stat, rep.Turns)
}

// eventShard is the group and zxid of an event's zxid: a position on a
// connection that speaks them (wire.ShardedWatches), else a zxid of the
// one group there is or of one the client cannot tell.
func (cn *conn) eventShard(z int64) (uint64, int64) {
	if cn.version >= wire.ShardedWatches {
		return wire.PositionOf(z)
	}
	return 0, z
}

// offerEarly gives ev, of group's shard, to the live lasting watches asked
// for and not answered yet that see it. A watch over several shards is
// set in each shard in turn, and its reply sent after: the events of a
// shard it was set in first may come before the reply. The reply says
// where it was set in each, and the watch keeps the events after
// (watchReg.takeReplayed).
func (cn *conn) offerEarly(group uint64, ev Event) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.awaiting == 0 {
		return
	}
	for _, r := range cn.pending {
		if w := r.watch; r.liveLasting() && w.sees(ev) {
			w.early = append(w.early, shardEvent{ev, group})
		}
	}
}

// restoreIn is told how many setWatches frames a restore sends. Over more
// than one, notifications are held until all are answered: the server
// replays the missed events of each frame's persistent and recursive
// watches when it takes that frame, so the replay of a later frame is
// older than the events the earlier frames' watches got meanwhile.
func (cn *conn) restoreIn(frames int) {
	if frames > 1 {
		cn.restoring.Store(int32(frames))
	}
}

// restored takes the answer to a setWatches frame. After the last frame of
// a restore over several, it delivers the held notifications in zxid order
// (a stable sort: the events of one zxid keep the order they came in).
func (cn *conn) restored() {
	if cn.restoring.Load() > 0 && cn.restoring.Add(-1) > 0 {
		return
	}
	held := cn.held
	cn.held = nil
	slices.SortStableFunc(held, func(a, b wire.Reply) int { return cmp.Compare(a.Zxid, b.Zxid) })
	for i := range held {
		cn.fire(&held[i])
	}
}

// handleClosing reads the server's reason for closing the connection.
func (cn *conn) handleClosing(body []byte) error {
	var rep wire.Reply
	if err := wire.DecodeReply(body, 0, &rep); err != nil {
		return connLoss(err)
	}
	cn.log.Warn("arbor: server is closing the connection", zap.Stringer("reason", rep.Err))
	switch rep.Err {
	case wire.CodeSessionExpired:
		return ErrSessionExpired
	case wire.CodeOK:
		return connLoss(errors.New("server closed the connection"))
	}
	return connLoss(fmt.Errorf("server closed the connection: %w", rep.Err.Err()))
}
