package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/arbor-coord/arbor/internal/clock"
	"github.com/arbor-coord/arbor/wire"
)

// Defaults of the options.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultMaxFrame       = 64 << 20 // replies can be large: a getChildren of a big directory
)

const (
	stateBuffer    = 16 // capacity of the StateChanges channel
	minBackoff     = 50 * time.Millisecond
	maxBackoff     = time.Second
	minAttempt     = 250 * time.Millisecond // floor of one connection attempt's time limit
	closeWait      = time.Second            // how long Close waits for the server's answer
	watchBatchSize = 128 << 10              // bytes of paths per setWatches frame
)

// State is the client's view of its session.
type State int32

// Session states. Connected and Disconnected alternate while the session
// lives; Expired, AuthFailed and Closed are final, except that with
// WithSessionRenewal a new session (Connected) follows an expiry.
const (
	StateDisconnected State = iota // the connection broke; the client is reconnecting
	StateConnected                 // connected to a server, with a live session
	StateExpired                   // the session is lost, with its ephemerals and watches
	StateClosed                    // Close was called
	StateAuthFailed                // a credential was refused on a new connection: the session is given up (see AddAuth)
)

// ended reports whether s is a state in which the session is over but
// Close was not called: StateExpired or StateAuthFailed.
func (s State) ended() bool { return s == StateExpired || s == StateAuthFailed }

func (s State) String() string {
	switch s {
	case StateDisconnected:
		return "disconnected"
	case StateConnected:
		return "connected"
	case StateExpired:
		return "expired"
	case StateClosed:
		return "closed"
	case StateAuthFailed:
		return "auth failed"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Stat is a znode's metadata, with ZooKeeper's fields and meanings.
type Stat = wire.Stat

// CreateMode says what kind of znode Create makes.
type CreateMode = wire.CreateMode

// Create modes. The TTL modes make a node that the server deletes once it
// has had no children and no change for its time to live; create them with
// CreateTTL (or CreateTTLOp), which takes the TTL.
const (
	Persistent              = wire.ModePersistent
	Ephemeral               = wire.ModeEphemeral
	PersistentSequential    = wire.ModePersistentSequential
	EphemeralSequential     = wire.ModeEphemeralSequential
	Container               = wire.ModeContainer
	PersistentTTL           = wire.ModePersistentWithTTL
	PersistentSequentialTTL = wire.ModePersistentSequentialWithTTL
)

// Option configures Dial.
type Option func(*options)

type options struct {
	renew    bool
	timeout  time.Duration
	log      *zap.Logger
	dial     func(ctx context.Context, addr string) (net.Conn, error)
	tls      *tls.Config // nil: plaintext
	maxFrame int
	auths    []authInfo
	clock    clock.Clock // nil: the real clock; tests set a manual one
	mux      *Mux        // nil: a connection of the client's own
}

// dialer is how the options make a connection to a server: dial, with
// TLS when tls is set.
func (o *options) dialer() func(ctx context.Context, addr string) (net.Conn, error) {
	dial := o.dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if o.tls != nil {
		dial = tlsDialer(dial, o.tls)
	}
	return dial
}

// WithSessionTimeout sets the session timeout asked of the server (default
// 10s). The server may negotiate another; the client keeps the one it grants.
func WithSessionTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.log = l } }

// WithDialer sets how connections to servers are made (default: TCP).
func WithDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dial = dial }
}

// WithSessionRenewal makes the client start a new session when its session
// expires, as Curator does, instead of failing every call from then on.
// The expiry is still reported (StateExpired, ErrSessionExpired for the
// calls in flight and for every watch, Done closed), and the new session
// begins with no ephemeral nodes and no watches; then the state is
// StateConnected again, with a new SessionID. Code that holds something
// tied to a session (an ephemeral node, a lock) must notice the expiry
// and make it again: the recipes that keep a registration or a cache do.
func WithSessionRenewal() Option { return func(o *options) { o.renew = true } }

// WithMaxFrame sets the limit on the length of a frame from the server
// (default 64 MiB). A longer reply breaks the connection.
func WithMaxFrame(n int) Option { return func(o *options) { o.maxFrame = n } }

// Client is a session with an Arbor ensemble. All its methods are safe for
// concurrent use.
//
// Goroutines: run owns the connection's life (it notices a broken connection,
// reconnects, restores watches, expires the session and stops on Close);
// each connection has a reader and a writer (see conn). Callers hand requests
// to the current connection and wait for their replies.
type Client struct {
	servers []string
	opts    options
	log     *zap.Logger
	clock   clock.Clock // every time the client reads or waits for: session, pings, backoff, attempt and close limits
	born    time.Time   // base of lastAlive and request send times, for a monotonic clock

	lastZxid  atomic.Int64 // highest zxid in a reply or a notification: sent on reattach
	lastReply atomic.Int64 // highest zxid in a reply
	lastEvent atomic.Int64 // highest zxid in a notification
	lastAlive atomic.Int64 // since() of the latest send that a server then answered (see alive)
	xid       atomic.Int32 // last xid given to a request

	watches watchTable // has its own lock

	// mu guards the fields below. They change only on run's goroutine (and
	// in Dial and Close); callers read them through current and the getters.
	mu         sync.Mutex
	state      State
	cur        *conn         // the connection requests go to; nil unless connected
	changed    chan struct{} // closed and replaced whenever state or cur changes
	sessionID  int64
	password   []byte
	timeout    time.Duration // the negotiated session timeout
	closing    bool          // Close was called
	expiredErr error         // why the session expired, once it has
	states     chan State    // StateChanges; sent to under mu, closed by Close
	ended      chan struct{} // Done: closed on moving to StateExpired, StateAuthFailed or StateClosed; a new one per session
	auths      []authInfo    // the credentials every new connection sends; appended to by AddAuth, never changed in place
	authEpoch  int           // counts the connections that have taken auths (see AddAuth)

	runCtx context.Context // ends when Close is called
	stop   context.CancelFunc
	wg     sync.WaitGroup // run
}

// Dial connects to one of servers (tried in random order until one completes
// the handshake or ctx ends) and starts a new session. Once Dial returns, the
// client keeps the session alive and reconnects by itself; ctx only bounds
// Dial.
func Dial(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("dial: %w: no servers", ErrBadArguments)
	}
	o := options{timeout: DefaultSessionTimeout, maxFrame: DefaultMaxFrame}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.timeout <= 0 {
		o.timeout = DefaultSessionTimeout
	}
	if o.mux != nil {
		o.dial = o.mux.dial
	} else {
		o.dial = o.dialer()
	}
	if o.maxFrame <= 0 {
		o.maxFrame = DefaultMaxFrame
	}
	if o.clock == nil {
		o.clock = clock.Real
	}
	c := &Client{
		servers: slices.Clone(servers),
		opts:    o,
		log:     o.log,
		clock:   o.clock,
		born:    o.clock.Now(),
		changed: make(chan struct{}),
		timeout: o.timeout,
		states:  make(chan State, stateBuffer),
		ended:   make(chan struct{}),
		auths:   o.auths,
	}
	c.watches.init()
	c.runCtx, c.stop = context.WithCancel(context.Background())
	cn, err := c.dialFirst(ctx)
	if err != nil {
		c.stop()
		return nil, err
	}
	c.mu.Lock()
	c.setStateLocked(StateConnected, cn)
	c.mu.Unlock()
	c.wg.Add(1)
	go c.run(cn)
	return c, nil
}

// dialFirst makes the first connection, with a new session.
func (c *Client) dialFirst(ctx context.Context) (*conn, error) {
	var b backoff
	var last error
	for {
		for _, addr := range c.shuffled() {
			if ctx.Err() != nil {
				break
			}
			cn, err := c.open(ctx, addr, c.attemptLimit())
			if err == nil {
				return cn, nil
			}
			if isRefusedAuth(err) {
				return nil, fmt.Errorf("dial: %w", err)
			}
			if ctx.Err() != nil {
				break // cut short by ctx: keep the last server's own error
			}
			last = tellingerError(last, err)
			c.log.Info("arbor: connect failed", zap.String("server", addr), zap.Error(err))
		}
		if err := clock.Sleep(ctx, c.clock, b.next()); err != nil {
			if last == nil {
				return nil, fmt.Errorf("dial: %w", err)
			}
			return nil, fmt.Errorf("dial: %w (last error: %w)", err, last)
		}
	}
}

// tellingerError is the error to report of a dial that failed with last
// and then err: err, unless err is a try that timed out and last says
// more (a server's refusal of a certificate, say), which a loaded
// machine's slow last try must not hide.
func tellingerError(last, err error) error {
	var ne net.Error
	timeout := func(err error) bool { return errors.As(err, &ne) && ne.Timeout() }
	if last != nil && timeout(err) && !timeout(last) {
		return last
	}
	return err
}

// SessionID returns the id of the session.
func (c *Client) SessionID() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// Server returns the address of the server the client is connected to, or
// "" while it is not connected.
func (c *Client) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ""
	}
	return c.cur.addr
}

// SessionTimeout returns the session timeout the server granted.
func (c *Client) SessionTimeout() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeout
}

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// StateChanges returns a channel of state changes (the same channel on every
// call). It is buffered: when the reader falls behind, the oldest states are
// dropped, so a slow reader may miss intermediate states but always receives
// the latest one. The channel is closed after StateClosed is sent by Close.
func (c *Client) StateChanges() <-chan State { return c.states }

// Done returns a channel that is closed when the current session ends: when
// it expires or when Close returns. Code that holds something only while
// the session lives (a lock, a leadership) watches it; Err then says why.
// With WithSessionRenewal, a later session has a channel of its own.
func (c *Client) Done() <-chan struct{} {
	_, done := c.Session()
	return done
}

// Session returns the current session's id and the channel Done returns
// for it, read together: with WithSessionRenewal they change at each new
// session.
func (c *Client) Session() (id int64, done <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID, c.ended
}

// RenewsSessions reports whether the client was dialed WithSessionRenewal.
func (c *Client) RenewsSessions() bool { return c.opts.renew }

// Err returns nil while the session lives, then an error matching
// ErrSessionExpired (and, after StateAuthFailed, ErrAuthFailed) or
// ErrClosed (until a renewed session begins).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.state.ended():
		return c.expiredErr
	case c.state == StateClosed:
		return ErrClosed
	}
	return nil
}

// Close ends the session: it asks the server to close it, which deletes the
// session's ephemeral nodes at once, waiting for the answer at most a third
// of the session timeout and at most 1s (if the server cannot be told, the
// session expires after its timeout). Then it closes the connection and
// stops the client's goroutines. Requests still in flight fail with
// ErrClosed, and every pending watch receives a session event (StateClosed,
// ErrClosed). Close returns nil; later calls return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closing = true
	cn := c.cur
	wait := min(closeWait, c.timeout/3)
	c.mu.Unlock()

	if cn != nil {
		c.closeSession(cn, wait)
	}
	c.stop()
	c.wg.Wait()
	c.watches.closeAll(Event{Type: EventSession, State: StateClosed, Err: ErrClosed})
	c.mu.Lock()
	c.setStateLocked(StateClosed, nil)
	close(c.states)
	c.mu.Unlock()
	return nil
}

// closeSession sends OpClose on cn and waits up to wait for the answer.
func (c *Client) closeSession(cn *conn, wait time.Duration) error {
	ctx, cancel := clock.WithTimeout(context.Background(), c.clock, wait)
	defer cancel()
	r := newRequest(wire.Request{Op: wire.OpClose}, nil)
	if err := cn.send(r); err != nil {
		return err
	}
	rep, err := r.wait(ctx)
	if err == nil {
		err = rep.Err.Err()
	}
	if err != nil {
		c.log.Info("arbor: close session", zap.String("session", c.sessionHex()), zap.Error(err))
	}
	return err
}

// current returns the connection to send on (nil while disconnected) and a
// channel closed at the next change of state, or the error that every call
// gets from now on.
func (c *Client) current() (*conn, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing || c.state == StateClosed:
		return nil, nil, ErrClosed
	case c.state.ended():
		return nil, nil, c.expiredErr
	}
	return c.cur, c.changed, nil
}

// setStateLocked moves to state s with cur as the connection to use, wakes
// the callers waiting for a change and reports s on StateChanges.
func (c *Client) setStateLocked(s State, cur *conn) {
	if c.state == StateClosed {
		return
	}
	c.cur = cur
	close(c.changed)
	c.changed = make(chan struct{})
	if s == c.state {
		return
	}
	if (s.ended() || s == StateClosed) && !c.state.ended() {
		close(c.ended)
	}
	c.state = s
	for {
		select {
		case c.states <- s:
			return
		default:
		}
		select { // full: drop the oldest, so the latest state is never lost
		case <-c.states:
		default:
		}
	}
}

func (c *Client) setState(s State, cur *conn) {
	c.mu.Lock()
	c.setStateLocked(s, cur)
	c.mu.Unlock()
}

func (c *Client) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

func (c *Client) sessionHex() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%#x", c.sessionID)
}

// since is the client's monotonic clock.
func (c *Client) since() time.Duration { return c.clock.Now().Sub(c.born) }

// alive records that a server answered a request or ping sent at sent (a
// since() reading). The server heard from the session after sent, so the
// session's deadline, kept by the leader, is at least sent plus the
// timeout: counting from the send and not from the answer keeps the
// client's idea of its session's end never later than the server's.
func (c *Client) alive(sent time.Duration) {
	for {
		cur := c.lastAlive.Load()
		if int64(sent) <= cur || c.lastAlive.CompareAndSwap(cur, int64(sent)) {
			return
		}
	}
}

// LastHeard returns the send time, on the client's monotonic clock, of
// the latest request, ping or handshake that a server answered without
// refusing it for want of a quorum: the server heard from the session
// after it. The client gives its session up a full timeout after it (see
// Done). It says nothing of whether the member that answered was still in
// touch with the leader, which keeps the session's deadline: a member cut
// off from the quorum answers until it notices, within an election
// timeout, that it has no leader (docs/locks.md, "The stop-by
// deadline").
func (c *Client) LastHeard() time.Time {
	return c.born.Add(time.Duration(c.lastAlive.Load()))
}

// sessionLeft returns how long the session may still live without an
// answer from a server.
func (c *Client) sessionLeft() time.Duration {
	c.mu.Lock()
	timeout := c.timeout
	c.mu.Unlock()
	return timeout - (c.since() - time.Duration(c.lastAlive.Load()))
}

// noteZxid raises lastZxid to z, the zxid of a reply (reply) or of a
// notification.
func (c *Client) noteZxid(z int64, reply bool) {
	raise(&c.lastZxid, z)
	if reply {
		raise(&c.lastReply, z)
	} else {
		raise(&c.lastEvent, z)
	}
}

// raise raises a to z.
func raise(a *atomic.Int64, z int64) {
	for {
		cur := a.Load()
		if z <= cur || a.CompareAndSwap(cur, z) {
			return
		}
	}
}

// resumeZxid is the zxid a restore of watches resumes after: lastZxid,
// unless the latest notification is newer than every reply. A txn may
// fire several events for this client (a create seen by a watch of the
// node and by one of its parent), and a connection that broke between
// them lost the rest; a reply at that zxid or later comes after all of
// them. So the restore resumes from the txn before, and the lasting
// watches skip what they had of it (watchReg.fresh).
func (c *Client) resumeZxid() int64 {
	if ev := c.lastEvent.Load(); ev > c.lastReply.Load() {
		return ev - 1
	}
	return c.lastZxid.Load()
}

// nextXid returns the next request xid: positive, increasing, wrapping to 1.
func (c *Client) nextXid() int32 {
	for {
		cur := c.xid.Load()
		next := cur + 1
		if next <= 0 {
			next = 1
		}
		if c.xid.CompareAndSwap(cur, next) {
			return next
		}
	}
}

func (c *Client) shuffled() []string {
	s := slices.Clone(c.servers)
	rand.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// attemptLimit bounds one connection attempt, so that a server that does not
// answer leaves time to try the others (ZooKeeper's timeout / servers).
func (c *Client) attemptLimit() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.timeout/time.Duration(len(c.servers)), minAttempt)
}

// backoff is an exponential delay with jitter, from minBackoff to maxBackoff.
type backoff struct{ d time.Duration }

// next returns a delay in [d/2, d] and doubles d.
func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = minBackoff
	}
	d := b.d
	b.d = min(2*b.d, maxBackoff)
	return d/2 + rand.N(d/2+1)
}

// isFatal reports whether a refused handshake means the session is lost.
func isFatal(err error) bool {
	return errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrBadPassword)
}
