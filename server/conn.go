package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbor-coord/arbor/internal/mux"
	"github.com/arbor-coord/arbor/wire"
	"go.uber.org/zap"
)

// conn is one client connection. Four goroutines serve it:
//
//   - serve (the reader) decodes frames, with the connection's codec
//     (Arbor's protocol or ZooKeeper's, see codec), and queues them, in
//     order, on pending;
//   - execute takes pending in order: it proposes a write at once and
//     passes it on to replies, so consecutive writes pipeline; any other
//     request it passes on and waits until it was answered, so a read sees
//     every earlier write of the connection and no later one;
//   - respond takes replies in order: it waits for a write's outcome, or
//     runs the read, and appends the reply to out;
//   - flush writes out to the socket.
//
// Watch notifications are appended to out by the apply path, under the
// fsm's write lock, and a read's reply is appended under its read lock, so
// a notification always precedes the reply to any read or write that
// reveals its change, and follows the reply of the read that set its watch.
type conn struct {
	srv     *Server
	nc      net.Conn
	log     *zap.Logger
	codec   codec // Arbor's protocol or ZooKeeper's
	session int64
	// positions: the client takes an event's zxid as a position
	// (wire.Position), set by the handshake before any request: an Arbor
	// client of protocol version 4, or a ZooKeeper client, which keeps
	// one zxid and gives it back (zk.go).
	positions bool
	// carried: the connection is a channel of a multiplexed connection
	// (mux.go), which counts toward the client IP's limit in its stead.
	carried bool
	// readOnly: served read-only by a member that cannot reach a quorum
	// (readOnlySession); set in the handshake, read by the expiry loop too.
	readOnly atomic.Bool
	ctx      context.Context // cancelled when the connection closes
	cancel   context.CancelFunc

	ids atomic.Pointer[[]wire.Identity] // see identities; replaced, never changed in place

	pending        chan *request // read -> execute
	replies        chan *request // execute -> respond
	closingSession atomic.Bool   // the client asked to close its session
	flushing       bool          // flush runs (set before it starts)

	// The connection's limits (limits.go): budget bounds the requests
	// between read and reply; ephemeralsInFlight counts the ephemeral
	// creates proposed and not yet answered.
	budget             *budget
	ephemeralsInFlight atomic.Int64

	outMu   sync.Mutex
	out     []byte        // outMu guards out and closed
	closed  bool          // no more output is accepted
	wake    chan struct{} // tells flush that out has bytes
	drained chan struct{} // flush tells waitForRoom that it took out

	stats connStats // for the stat, cons and mntr four-letter words

	// renewed: a lease renewal went to the member's batches (renewals.go)
	// since the connection's last other write. Only execute touches it.
	renewed bool

	// restoring gathers the setWatches2 frames of a restore that say
	// MoreWatches, until its last frame (setWatches). Only respond
	// touches it.
	restoring *wire.Request
	// restoreRefused refuses the rest of a restore one of whose frames
	// was refused, up to its last frame. Only respond touches it.
	restoreRefused error
	// replayed is how far preReplay sent the replay of the request respond
	// is answering, before the fsm's lock: the locked part replays what
	// came after. Only respond touches it.
	replayed replayedPart
	// sasl is the connection's SASL login (sasl.go). Only respond
	// touches it.
	sasl saslLogin
}

// replayedPart is what preReplay did: the zxid up to which it sent the
// events (0: nothing), or why it stopped.
type replayedPart struct {
	to   int64
	toIn map[watchIn]int64 // a sharded restore's: how far it got for each watch in each group
	err  error
}

// request is one decoded request on its way through the pipeline.
type request struct {
	req      wire.Request
	err      error        // refused before execution
	proposal pendingWrite // for writes
	// group is the group a write went to, or whose tree answered a read:
	// the reply's zxid is its (nil: the meta group's).
	group *group
	// mixedZxid marks a reply whose zxid is the largest of several
	// groups' (a batch of reads on a sharded cluster).
	mixedZxid bool
	answered  chan struct{} // for the others: closed once the reply is queued
	outcome   error         // a write's raftnode outcome error
	start     time.Time
	size      int // the frame's length, held against the connection's budget until the reply
	pooled    int // the frame's length, held in the member's request memory until the reply
	// ephemerals is the number of ephemeral creates of a write, counted
	// against its session's limit until the reply.
	ephemerals int

	// linearized has the outcome of a linearizable read's raft read
	// index, asked for as the request arrives (see linearize).
	linearized chan error

	lease  int64    // leaseCreate, leaseRenew: the lease's id, for the reply
	broken []string // lockBreak: the nodes it deletes, for the reply

	// zk is what ZooKeeper's codec keeps of the request to shape its
	// reply; Arbor's leaves it zero, and the pipeline never looks at it. A
	// field and not an interface: boxing it would allocate per request.
	zk zkShape
	// endConn closes the connection once the reply is queued.
	endConn bool
	// refuseConn marks a request that gets no reply (one with a reserved
	// xid): once the requests before it are answered, the connection ends
	// with a closing frame that carries err's code.
	refuseConn bool

	// Two reads of ZooKeeper's have no op in wire; the pipeline runs them
	// in these forms (see answerRead). batch, with req.Op zero, runs the
	// reads in req.Ops (getData, getChildren) one after the other under
	// one read lock, each answered on its own in batchReplies (multiRead).
	// keepWatches makes a removeWatches check that there is such a watch
	// without removing it (checkWatches).
	batch        bool
	batchReplies []wire.Reply
	keepWatches  bool
	// sasl marks ZooKeeper's sasl op, which the pipeline runs as an auth
	// carrying a token (answered by saslStep, not authenticate).
	sasl bool
}

// pipelineDepth caps the capacity of a connection's pipeline channels: the
// budget (Config.MaxOutstanding) bounds what is in them, and a larger limit
// is bounded by the channels instead. A session carried by a multiplexed
// connection has shallower ones (carriedPipelineDepth): such sessions come
// by the thousand, and each channel's capacity is allocated up front.
const (
	pipelineDepth        = 1024
	carriedPipelineDepth = 64
)

// newConn makes a connection that speaks the protocol newCodec makes.
func newConn(srv *Server, nc net.Conn, newCodec func(*conn) codec) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	// Closing the connection unblocks its reader at once.
	context.AfterFunc(ctx, func() { _ = nc.SetReadDeadline(time.Now()) })
	_, carried := nc.(*mux.Channel)
	depth := pipelineDepth
	if carried {
		depth = carriedPipelineDepth
	}
	c := &conn{
		srv: srv, nc: nc, ctx: ctx, cancel: cancel, carried: carried,
		log:     srv.log.WithLazy(zap.String("remote", nc.RemoteAddr().String())), // a clone of the encoder only if it logs
		pending: make(chan *request, min(srv.cfg.MaxOutstanding, depth)),
		replies: make(chan *request, min(srv.cfg.MaxOutstanding, depth)),
		budget:  newBudget(srv.cfg.MaxOutstanding, srv.cfg.MaxOutstandingBytes),
		wake:    make(chan struct{}, 1),
		drained: make(chan struct{}, 1),
	}
	c.codec = newCodec(c)
	c.stats.init()
	return c
}

// serve runs the connection until it closes.
func (c *conn) serve() {
	defer c.close()
	if !c.tlsHandshake() {
		return
	}
	ids := c.initialIdentities() // after the TLS handshake: it may name the client
	c.ids.Store(&ids)
	// A channel's reads come from memory: a buffer that holds a small
	// request does (a larger one is read straight into its frame), and
	// thousands of channels take little.
	br := bufio.NewReaderSize(c.nc, 64<<10)
	if c.carried {
		br = bufio.NewReaderSize(c.nc, 512)
	}
	if !c.handshake(br) {
		return
	}
	c.flushing = true
	go c.flush()
	done := make(chan struct{})
	go c.execute()
	go func() {
		defer close(done)
		c.respond()
	}()
	c.read(br)
	close(c.pending)
	<-done
}

// execute proposes writes in request order, never ahead of an earlier
// read (see conn).
func (c *conn) execute() {
	defer close(c.replies)
	for r := range c.pending {
		if r.err == nil && r.req.Op.IsWrite() {
			c.propose(r)
			c.replies <- r
			continue
		}
		r.answered = make(chan struct{})
		c.replies <- r
		<-r.answered
		if r.endConn || r.refuseConn {
			return // the connection ends: nothing after r runs
		}
	}
}

// read decodes requests until the connection fails, a frame is bad, or the
// client closes its session.
func (c *conn) read(br *bufio.Reader) {
	var buf []byte
	for {
		body, err := wire.ReadFrame(br, buf, c.srv.cfg.MaxFrame)
		if err != nil {
			c.readFailed(err)
			return
		}
		if cap(body) <= maxKeptReadBuffer {
			buf = body[:0]
		} else {
			buf = nil // a large frame's buffer is not kept for the connection's life
		}
		c.srv.heardFrom(c.session)
		c.stats.received(c.srv)
		r := &request{start: time.Now()}
		if err := c.codec.decode(body, r); err != nil {
			c.log.Info("closing connection: malformed frame", zap.Error(err))
			c.goodbye(wire.CodeMalformed)
			return
		}
		if c.readOnly.Load() && r.err == nil && !r.batch && changesState(r.req.Op) {
			r.err = wire.ErrNotReadOnly
		}
		if r.err == nil && !r.batch && !r.req.Op.Counts(wire.LimitOutstanding) {
			// A ping (the op that waits behind nothing) is answered at
			// once, ahead of the requests before it: its answer tells the
			// client that its session lives, and must not wait behind a
			// write that can take the whole request timeout (a proposal
			// lost on its way to the leader). Clients tell a ping's answer
			// by its reserved xid, not by its order. (A batch of reads,
			// ZooKeeper's multiRead, has no op of its own.)
			reply := wire.Reply{Xid: r.req.Xid}
			c.answer(r, &reply)
			c.reply(r, &reply)
			continue
		}
		if !c.admitRequest(r, len(body)) {
			return
		}
		if r.err == nil {
			c.admitMemory(r, len(body))
			c.linearize(r)
		}
		select {
		case c.pending <- r:
		case <-c.ctx.Done():
			return
		}
		if r.req.Op == wire.OpClose || r.refuseConn {
			return
		}
	}
}

func (c *conn) readFailed(err error) {
	var tooLarge *wire.FrameTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		c.srv.limits.refusals.WithLabelValues(limitFrameSize).Inc()
		c.log.Info("closing connection: frame too large", zap.Error(err))
		c.goodbye(wire.CodeFrameTooLarge)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), c.ctx.Err() != nil:
	default:
		c.log.Debug("connection read failed", zap.Error(err))
	}
}

// goodbye queues the XidClosing frame that tells the client why the server
// closes the connection (a ZooKeeper client is told nothing: the connection
// just closes, as ZooKeeper's do).
func (c *conn) goodbye(code wire.Code) {
	c.send(nil, &wire.Reply{Xid: wire.XidClosing, Zxid: c.srv.fsm.lastZxid(), Err: code})
}

// send appends reply, the answer to r (nil for a notification or a closing
// frame), to the output buffer and wakes the flusher.
func (c *conn) send(r *request, reply *wire.Reply) {
	c.outMu.Lock()
	// A closing connection's responder no longer waits for room: what it
	// would queue past the high-water mark is dropped, since its client
	// is not reading.
	if c.closed || len(c.out) > replyHighWater && c.ctx.Err() != nil {
		c.outMu.Unlock()
		return
	}
	n := len(c.out)
	c.out = c.codec.appendReply(c.out, r, *reply)
	mem := c.srv.memory
	if len(c.out) > n {
		c.stats.sent(c.srv)
		mem.replies.Add(int64(len(c.out) - n))
	}
	// Replies wait for room (waitForRoom); notifications cannot, so a
	// client that lets them pile up is dropped: past maxOutBuffer, or past
	// the high-water mark while the member's replies are over their share.
	overflow := len(c.out) > maxOutBuffer || r == nil && len(c.out) > replyHighWater && mem.repliesFull()
	if overflow {
		mem.replies.Add(-int64(len(c.out)))
		c.out, c.closed = nil, true // drop it all: the client is not reading
	}
	c.outMu.Unlock()
	if overflow {
		c.notReading()
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// notReading closes a connection whose client does not read what it is
// sent.
func (c *conn) notReading() {
	c.log.Warn("closing connection: client is not reading its replies")
	c.cancel()
}

// waitForRoom waits while the connection's unsent output is over
// replyHighWater, or the connection closes: the responder calls it before
// each reply, outside any lock.
func (c *conn) waitForRoom() {
	for {
		c.outMu.Lock()
		full := len(c.out) > replyHighWater && !c.closed
		c.outMu.Unlock()
		if !full {
			return
		}
		select {
		case <-c.drained:
		case <-c.ctx.Done():
			return
		}
	}
}

// writeTimeout is how long a client may take to accept what is written to
// it before the server gives up on it (Config.writeTimeout's default).
const writeTimeout = 10 * time.Second

// flush writes queued output to the socket until the connection closes,
// then writes what is left (the last replies and a goodbye) and returns.
func (c *conn) flush() {
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			c.outMu.Lock()
			spare, c.out, c.closed = c.out, nil, true
			c.outMu.Unlock()
			_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.nc.Write(spare)
			c.srv.memory.replies.Add(-int64(len(spare)))
			c.nc.Close()
			return
		}
		c.outMu.Lock()
		b := c.out
		c.out = spare[:0]
		c.outMu.Unlock()
		select {
		case c.drained <- struct{}{}:
		default:
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.writeTimeout))
		_, err := c.nc.Write(b)
		c.srv.memory.replies.Add(-int64(len(b)))
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && c.ctx.Err() == nil { // not dropped already, as it overflowed
				c.notReading()
			}
			c.cancel()
			continue
		}
		spare = nil
		if cap(b) <= maxKeptWriteBuffer {
			spare = b // a large reply's buffer is not kept for the connection's life
		}
	}
}

// close tears the connection down: the flusher sends what is queued and
// closes the socket; the connection's watches go.
func (c *conn) close() {
	c.cancel()
	if !c.flushing {
		c.nc.Close()
	}
	c.srv.limits.handshakes.done(c.nc) // when the handshake did not get as far as the ConnectRequest
	c.srv.dropConn(c)
	c.srv.watches.removeConn(c)
}

// eventZxid is the zxid a notification of an event at zxid in group
// carries to c: a position (wire.Position) for a client that takes them,
// which may then resume its watches over several shards from where it
// was in each.
func (c *conn) eventZxid(group uint64, zxid int64) int64 {
	if c.positions {
		return wire.Position(group, zxid)
	}
	return zxid
}
