package recipes

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// ErrNotHeld is returned by a release of what the value does not hold.
var ErrNotHeld = errors.New("not held")

// ErrHeldInOtherMode is returned when an RWMutex value that holds one mode
// is asked for the other.
var ErrHeldInOtherMode = errors.New("held in the other mode")

// ErrUpgradeInProgress is returned at once by an Upgrade while another
// holder of the lock is upgrading: the two would wait for each other's
// read hold forever. The caller keeps its read hold.
var ErrUpgradeInProgress = errors.New("another holder is upgrading the lock")

// hold is what a Mutex, RWMutex or Election value holds: one node of its
// queue, a hold count, the node's czxid as the fencing token and the
// channel closed if the session ends during the hold.
type hold struct {
	q         *queue
	reentrant bool          // a second acquire counts (locks) or is a no-op (an election)
	turnstile chan struct{} // capacity 1: one acquire or release at a time

	lease   time.Duration // a hold bound to a lease: its TTL (WithLease); 0: none
	every   time.Duration // how often the lease is renewed: a third of its TTL
	maxHold time.Duration // no renewal keeps the lease past this (WithMaxHold); 0: none
	owner   string        // who holds, for the lease
	drift   float64       // WithClockDrift, for the stop-by deadline
	margin  time.Duration // WithSafetyMargin, for the stop-by deadline

	mu   sync.Mutex // guards the fields below
	t    ticket     // the held node; t.Name is "" when nothing is held
	mode lockq.Kind // what is held: t's kind, or what the hold changed to
	// holder is the holder id of a lock's hold (its record's): its waits
	// inherit priorities from the other locks its holder holds.
	holder string
	count  int
	loss   *loss         // why the hold ended, if it did
	lost   chan struct{} // closed if the hold ends by itself: loss.done
	stop   *stopBy       // the held acquisition's stop-by deadline; nil before the first
	freed  chan struct{} // closed at release: stops watching for the session's end
}

func newHold(q *queue, reentrant bool, o options) *hold {
	l := newLoss()
	h := &hold{q: q, reentrant: reentrant, turnstile: make(chan struct{}, 1), loss: l, lost: l.done,
		drift: DefaultClockDrift, margin: DefaultSafetyMargin}
	if o.driftSet {
		h.drift = o.drift
	}
	if o.marginSet {
		h.margin = o.margin
	}
	return h
}

// loss is how a hold ended by itself: done is closed, and err says why,
// once.
type loss struct {
	done chan struct{}
	once sync.Once
	err  error // set before done is closed
}

func newLoss() *loss { return &loss{done: make(chan struct{})} }

// end records why the hold ended, if nothing did before.
func (l *loss) end(err error) {
	l.once.Do(func() {
		l.err = err
		close(l.done)
	})
}

// reason is why the hold ended, or nil while it has not.
func (l *loss) reason() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

func (h *hold) enter(ctx context.Context) error {
	select {
	case h.turnstile <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hold) leave() { <-h.turnstile }

// acquire takes a node of kind with data and waits its turn by the queue's
// rules (or, with wait false, gives up at once when it would have to wait,
// returning false). A cancelled or failed wait removes the node.
func (h *hold) acquire(ctx context.Context, kind lockq.Kind, data []byte, wait bool) (bool, error) {
	if err := h.enter(ctx); err != nil {
		return false, err
	}
	defer h.leave()
	p, held, err := h.begin(ctx, kind, data)
	if p == nil {
		return held, err
	}
	inh := inherit(p.waitCtx, h, p.holder) // nil unless the holder holds other locks
	defer inh.stop()
	t, err := h.q.enqueueAt(p.waitCtx, kind, data, p.lease, max(h.q.prio, inh.priority()))
	if err != nil {
		return false, p.fail(ctx, nil, err)
	}
	if p.lease != 0 {
		t.owner = p.session // its node's owner is the lease, which is the session's
	}
	err = h.q.wait(p.waitCtx, &t, wait, inh)
	inh.stop()
	if err != nil {
		return false, p.fail(ctx, &t, err)
	}
	if err := p.install(t); err != nil {
		return false, err
	}
	return true, nil
}

// uncount takes back the count a begin of a held hold added.
func (h *hold) uncount() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reentrant && h.count > 1 {
		h.count--
	}
}

// pending is a new acquisition of a hold under way, between its start
// (begin) and its node's turn: install makes it the hold, fail ends it.
type pending struct {
	h       *hold
	kind    lockq.Kind
	holder  string
	session int64
	lease   int64 // its lease, if the hold is bound to one
	l       *loss
	freed   chan struct{}
	stop    *stopBy
	waitCtx context.Context // ends with the lease
}

// begin starts an acquire of kind with data, the caller in the
// turnstile. A hold that holds already counts it, if it is reentrant, and
// returns no pending acquisition: held says whether it holds. Else it
// makes the new hold's lease, if it is bound to one.
func (h *hold) begin(ctx context.Context, kind lockq.Kind, data []byte) (p *pending, held bool, err error) {
	h.mu.Lock()
	if h.t.Name != "" {
		defer h.mu.Unlock()
		if err := h.loss.reason(); err != nil {
			return nil, false, err // the hold ended by itself
		}
		if h.mode != kind {
			return nil, false, ErrHeldInOtherMode
		}
		if h.reentrant {
			h.count++
		}
		return nil, true, nil
	}
	h.mu.Unlock()
	p = &pending{h: h, kind: kind, session: h.q.c.SessionID(), l: newLoss(), freed: make(chan struct{}), stop: h.newStopBy()}
	if kind.IsLock() {
		p.holder = lockq.DecodeRecord(data).Holder
	}
	if p.lease, p.waitCtx, err = h.startLease(ctx, p.l, p.freed, p.stop); err != nil {
		return nil, false, err
	}
	return p, false, nil
}

// fail ends the acquisition p with err: its lease, and its node t if it
// was queued, go. It returns the error to report, or nil when the
// acquisition only would have had to wait (errWouldBlock).
func (p *pending) fail(ctx context.Context, t *ticket, err error) error {
	close(p.freed)
	err = reason(p.l, err)
	switch {
	case t != nil:
		if rerr := p.h.q.giveUp(ctx, *t); rerr != nil && ctx.Err() == nil {
			err = errors.Join(err, rerr)
		}
	case p.lease != 0:
		go p.h.q.closeLease(context.WithoutCancel(ctx), p.lease)
	}
	if errors.Is(err, errWouldBlock) {
		return nil
	}
	return err
}

// install makes p, whose node t has its turn, the hold; if its lease ended
// while it waited (its node is gone), it fails instead.
func (p *pending) install(t ticket) error {
	if err := p.l.reason(); err != nil {
		return p.fail(context.Background(), &t, err)
	}
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	h.t, h.mode, h.count, h.holder = t, p.kind, 1, p.holder
	h.loss, h.freed, h.lost, h.stop = p.l, p.freed, p.l.done, p.stop
	h.watch(t, p.l, p.freed, p.stop)
	registerHeld(p.holder, h)
	return nil
}

// startLease makes the lease of a new hold bound to one (WithLease), and
// renews it from then on, while it waits too, until freed is closed; the
// hold ends when stop's deadline passes, while it waits too. The context
// it returns ends with the lease (its cause the reason). Without a lease
// it returns ctx as it is.
func (h *hold) startLease(ctx context.Context, l *loss, freed chan struct{}, stop *stopBy) (int64, context.Context, error) {
	if h.lease == 0 {
		return 0, ctx, nil
	}
	var opts []client.LeaseOption
	if h.maxHold > 0 {
		opts = append(opts, client.MaxHold(h.maxHold))
	}
	sent := time.Now()
	lease, err := h.q.c.CreateLease(ctx, h.lease, h.owner, opts...)
	if err != nil {
		return 0, ctx, err
	}
	stop.created(sent, lease.TTL, h.maxHold)
	every := h.every
	if every == 0 {
		// A third of the TTL the server granted, or of the session's
		// timeout if that is shorter: the lease ends with the session,
		// and a renewal is what tells the holder, for its deadline, that
		// the session lives.
		every = min(lease.TTL, h.q.c.SessionTimeout()) / 3
	}
	go h.renew(lease.ID, every, freed, l, stop)
	go stop.enforce(l, freed)
	waitCtx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.done:
			cancel(l.reason())
		case <-freed:
			cancel(nil)
		}
	}()
	return lease.ID, waitCtx, nil
}

// reason is err, or the reason of the loss l if the wait ended because l
// did.
func reason(l *loss, err error) error {
	if why := l.reason(); why != nil && errors.Is(err, context.Canceled) {
		return why
	}
	return err
}

// watch watches a new hold of t, which ends with l: if, before freed is
// closed, its session ends, its stop-by deadline passes (a lease's,
// enforced since the lease began, or the session's, from now), or, for a
// hold bound to a lease, its node is deleted (the lease's renewals,
// started with it, end it too).
func (h *hold) watch(t ticket, l *loss, freed chan struct{}, stop *stopBy) {
	c := h.q.c
	id, done := c.Session()
	if id != t.owner {
		l.end(c.Err()) // a renewed client: the node's session is over already
		return
	}
	go func() {
		select {
		case <-done:
			l.end(c.Err())
		case <-freed:
		}
	}()
	if t.lease == 0 {
		go stop.enforce(l, freed) // a lease's is enforced since the lease began
		return
	}
	// Watching the node costs a read and a notification a hold, so only a
	// hold bound to a lease, whose loss the holder must learn of at once,
	// watches it.
	go h.watchNode(t, freed, l)
}

// ErrNodeDeleted is the reason a hold is lost when its node was deleted by
// someone else while its session and lease lived; ErrBroken, which matches
// it, when that was an admin breaking the lock.
var ErrNodeDeleted = errors.New("the hold's node was deleted")

// watchNode ends the hold with ErrNodeDeleted (ErrBroken for a break) if
// its node goes, or with client.ErrLeaseExpired if it went because its
// lease ended.
func (h *hold) watchNode(t ticket, freed chan struct{}, l *loss) {
	c := h.q.c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-freed:
		case <-l.done:
		}
		cancel()
	}()
	for {
		ok, _, ev, err := c.ExistsW(ctx, h.q.path(t.Entry))
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if c.Err() != nil {
				return // the session's end: the other watcher says so
			}
			pause(ctx) // a connection loss, a refusal: look again in a while
			continue
		case ok:
			select {
			case e := <-ev:
				if e.Type != client.EventNodeDeleted {
					continue // a change of mode rewrote it, or a reconnect
				}
			case <-ctx.Done():
				return
			}
		}
		if isClosed(freed) {
			return // its own release deleted it
		}
		if t.lease != 0 {
			if _, err := c.RenewLease(ctx, t.lease, 0); errors.Is(err, client.ErrLeaseExpired) {
				l.end(client.ErrLeaseExpired)
				return
			}
		}
		l.end(h.q.whyDeleted(ctx, t))
		return
	}
}

// renew renews lease every so often until freed is closed or the hold is
// lost; a renewal the lease has not outlived ends the hold, and one that
// succeeds moves stop's deadline on.
func (h *hold) renew(lease int64, every time.Duration, freed chan struct{}, l *loss, stop *stopBy) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-freed:
			return
		case <-l.done:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		sent := time.Now()
		renewed, err := h.q.c.RenewLease(ctx, lease, 0)
		cancel()
		if err == nil {
			stop.renewedAt(sent, renewed.TTL)
		}
		if errors.Is(err, client.ErrLeaseExpired) {
			l.end(client.ErrLeaseExpired)
			return
		}
		// Another error (a connection loss, a timeout) is tried again at
		// the next tick: if they go on, the lease ends on the server, and
		// the next renewal says so.
	}
}

// renewNow renews the held lease at once and returns its new expiry.
func (h *hold) renewNow(ctx context.Context) (time.Time, error) {
	h.mu.Lock()
	t, l, stop := h.t, h.loss, h.stop
	h.mu.Unlock()
	switch {
	case t.Name == "":
		return time.Time{}, ErrNotHeld
	case t.lease == 0:
		return time.Time{}, ErrNoLease
	case l.reason() != nil:
		return time.Time{}, l.reason()
	}
	sent := time.Now()
	node := h.q.path(t.Entry)
	lease, err := h.q.c.RenewLease(ctx, t.lease, 0, client.LookAt(node))
	if err == nil {
		stop.renewedAt(sent, lease.TTL)
	}
	if errors.Is(err, client.ErrLeaseExpired) {
		l.end(client.ErrLeaseExpired)
	}
	if err != nil {
		return lease.Expires, err
	}
	// The lease lives, but its node may not: a lock broken while its
	// lease lived has moved on, and a renewal must not say it holds. The
	// renewal looked; a server too old to look leaves it to a read.
	ok := lease.Node == client.NodeHeld
	if lease.Node == client.NodeNotLooked {
		ok, _, err = h.q.c.Exists(ctx, node)
	}
	switch {
	case err != nil:
		return time.Time{}, err
	case !ok:
		why := h.q.whyDeleted(ctx, t)
		l.end(why)
		return time.Time{}, why
	}
	return lease.Expires, nil
}

// ErrNoLease is returned by Renew of a hold not bound to a lease.
var ErrNoLease = errors.New("the hold is not bound to a lease (WithLease)")

// lostReason is why the current hold ended by itself, or nil.
func (h *hold) lostReason() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.loss.reason()
}

// change turns a hold of mode from into one of mode to without letting
// go, waiting (for an upgrade) until the hold may have the new mode. A
// wait that fails or ends takes the change back: the hold keeps mode from.
func (h *hold) change(ctx context.Context, from, to lockq.Kind, data []byte) error {
	if err := h.enter(ctx); err != nil {
		return err
	}
	defer h.leave()
	h.mu.Lock()
	t, mode, lost := h.t, h.mode, h.lost
	h.mu.Unlock()
	switch {
	case t.Name == "" || mode != from:
		return ErrNotHeld
	case isClosed(lost):
		return h.lostReason()
	}
	orig := t
	t, err := h.q.change(ctx, t, to, data)
	if err != nil {
		return err
	}
	if err := h.q.turn(ctx, t, true); err != nil {
		rerr := h.q.unchange(context.WithoutCancel(ctx), t, data)
		h.mu.Lock()
		if h.t = orig; rerr != nil {
			h.t = t // its release deletes the node of the change too
		}
		h.mu.Unlock()
		if errors.Is(err, errUpgradeRefused) {
			err = ErrUpgradeInProgress
		}
		return errors.Join(err, rerr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.t, h.mode = t, to
	return nil
}

// watchSession returns a lost channel, closed if the session that created
// a node (owner) ends before the returned freed channel is closed.
func watchSession(c *client.Client, owner int64) (lost, freed chan struct{}) {
	lost, freed = make(chan struct{}), make(chan struct{})
	id, done := c.Session()
	if id != owner {
		close(lost) // a renewed client: the node's session is over already
		return lost, freed
	}
	go func() {
		select {
		case <-done:
			close(lost)
		case <-freed:
		}
	}()
	return lost, freed
}

// release gives up one hold of kind (all of them with all), deleting the
// node when the count reaches zero. If the session ended during the hold it
// says so: what the hold protected may have been changed by another holder.
func (h *hold) release(ctx context.Context, kind lockq.Kind, all bool) error {
	if err := h.enter(ctx); err != nil {
		return err
	}
	defer h.leave()
	return h.releaseIn(ctx, kind, all)
}

// releaseIn is release for a caller in the turnstile already.
func (h *hold) releaseIn(ctx context.Context, kind lockq.Kind, all bool) error {
	h.mu.Lock()
	if h.t.Name == "" || h.mode != kind {
		h.mu.Unlock()
		return ErrNotHeld
	}
	if h.count--; h.count > 0 && !all {
		h.mu.Unlock()
		return nil
	}
	t, l := h.t, h.loss
	h.t, h.mode, h.count = ticket{}, "", 0
	close(h.freed)
	unregisterHeld(h.holder, h)
	h.mu.Unlock()

	if err := l.reason(); err != nil {
		if errors.Is(err, ErrDeadlinePassed) {
			// Nothing says the hold ended on the server: its nodes (and
			// lease) may be there still, in the next waiter's way.
			if lerr := h.q.leave(ctx, t); lerr != nil {
				return errors.Join(err, lerr)
			}
			return err
		}
		if t.lease != 0 {
			go h.q.closeLease(context.WithoutCancel(ctx), t.lease) // its node may be gone, not the lease
		}
		return err
	}
	return h.q.leave(ctx, t)
}

// held returns the kind held, or "".
func (h *hold) held() lockq.Kind {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.t.Name == "" {
		return ""
	}
	select {
	case <-h.lost:
		return ""
	default:
		return h.mode
	}
}

// deadline returns the current hold's stop-by deadline, or the zero time
// when nothing is held (or the hold was lost).
func (h *hold) deadline() time.Time {
	h.mu.Lock()
	t, l, stop := h.t, h.loss, h.stop
	h.mu.Unlock()
	if t.Name == "" || l.reason() != nil {
		return time.Time{}
	}
	return stop.at()
}

func (h *hold) fencingToken() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t.czxid
}

// freedChan is closed when the current hold is released (never, when
// nothing is held).
func (h *hold) freedChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.t.Name == "" {
		return nil
	}
	return h.freed
}

func (h *hold) lostChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
