package locks

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// DefaultHistory is how many events the lock history keeps unless
// SetHistoryLimit says otherwise, and MaxHistory the most a server lets
// it keep: an event is at most a few KiB (a lock path of up to 4 KiB, a
// node name of up to 1 KiB, owner, holder and reason of up to 256 bytes,
// and who broke the lock), so the history stays within a few MiB at the
// default and tens of MiB at the most.
const (
	DefaultHistory = 1000
	MaxHistory     = 10_000
)

// history is the lock history: the last events of every lock, oldest
// first, in a ring of at most limit. Each event's strings are bounded
// (owners and holders by lockq.MaxOwner, reasons too, node names by the
// server's name limit), so the ring is bounded in bytes as in count.
type history struct {
	limit  int
	events []wire.LockEvent
	next   int // where the next event goes once the ring is full
}

func (h *history) add(ev wire.LockEvent) {
	ev.Reason = lockq.TrimOwner(ev.Reason)
	if h.limit <= 0 {
		return
	}
	if len(h.events) < h.limit {
		h.events = append(h.events, ev)
		return
	}
	h.events[h.next] = ev
	h.next = (h.next + 1) % h.limit
}

// all calls fn with each event, oldest first, until it returns false.
func (h *history) all(fn func(ev *wire.LockEvent) bool) {
	for i := range h.events {
		if !fn(&h.events[(h.next+i)%len(h.events)]) {
			return
		}
	}
}

// acquired returns the latest acquired event of the node named node of
// the lock at dir, if the history still has it.
func (h *history) acquired(dir, node string) (wire.LockEvent, bool) {
	var found wire.LockEvent
	var ok bool
	h.all(func(ev *wire.LockEvent) bool {
		if ev.Kind == wire.LockAcquired && ev.Lock == dir && ev.Node == node {
			found, ok = *ev, true
		}
		return true
	})
	return found, ok
}

// SetHistoryLimit bounds the lock history to n events (0 keeps none),
// dropping the oldest beyond it. Every member should keep the same number,
// so that they tell the same history.
func (x *Index) SetHistoryLimit(n int) {
	var kept []wire.LockEvent
	x.history.all(func(ev *wire.LockEvent) bool {
		kept = append(kept, *ev)
		return true
	})
	x.history = history{limit: max(n, 0)}
	for _, ev := range kept[max(len(kept)-x.history.limit, 0):] {
		x.history.add(ev)
	}
}

// History returns the events of the locks at or under prefix, oldest
// first: each acquisition that began to hold, each hold that ended (and
// how), each wait ended for a deadlock.
func (x *Index) History(prefix string) []wire.LockEvent {
	var out []wire.LockEvent
	x.history.all(func(ev *wire.LockEvent) bool {
		if under(ev.Lock, prefix) {
			out = append(out, *ev)
		}
		return true
	})
	return out
}

// saveFormat versions Save's bytes.
const saveFormat = 1

// saved is what Save writes: what of the index the tree cannot tell.
type saved struct {
	Format int              `json:"format"`
	Events []wire.LockEvent `json:"events"` // the history, oldest first
	Holds  []wire.LockEvent `json:"holds"`  // the acquired event of every current hold
	Recent []int64          `json:"recent"` // the recent hold times, oldest first
}

// Save returns what of the index the tree cannot tell, for a snapshot (nil
// when there is nothing): the history, when each current hold began, and
// the recent hold times. A member that restores it with Load and then
// Rebuilds from the snapshot's tree reports what its peers report.
func (x *Index) Save() []byte {
	var out saved
	x.history.all(func(ev *wire.LockEvent) bool {
		out.Events = append(out.Events, *ev)
		return true
	})
	for _, p := range slices.Sorted(maps.Keys(x.locks)) {
		l := x.locks[p]
		for _, h := range l.holds {
			out.Holds = append(out.Holds, h.event(p))
		}
	}
	for i := range x.recent {
		out.Recent = append(out.Recent, x.recent[(x.next+i)%len(x.recent)])
	}
	if len(out.Events)+len(out.Holds)+len(out.Recent) == 0 {
		return nil
	}
	out.Format = saveFormat
	b, _ := json.Marshal(out) // strings and integers: never fails
	return b
}

// Load replaces the history and the recent hold times with those Save
// wrote (none for nil), keeping the newest events up to the history's
// limit, and keeps the holds' beginnings for the Rebuild that must follow.
func (x *Index) Load(b []byte) error {
	x.history = history{limit: x.history.limit}
	x.recent, x.next, x.restored = nil, 0, nil
	if len(b) == 0 {
		return nil
	}
	var in saved
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("locks: saved state: %w", err)
	}
	if in.Format != saveFormat {
		return fmt.Errorf("locks: saved state of format %d, want %d", in.Format, saveFormat)
	}
	for _, ev := range in.Events[max(len(in.Events)-x.history.limit, 0):] {
		x.history.add(ev)
	}
	for _, ms := range in.Recent {
		x.held(ms)
	}
	x.restored = map[holdKey]wire.LockEvent{}
	for _, ev := range in.Holds {
		x.restored[holdKey{ev.Lock, ev.Node}] = ev
	}
	return nil
}

// holdKey names a hold: its lock and its acquisition's first node.
type holdKey struct{ lock, node string }

// began returns the acquired event of the hold of the first node named
// node of the lock at dir, as Load or the history knows it.
func (x *Index) began(dir, node string) (wire.LockEvent, bool) {
	if ev, ok := x.restored[holdKey{dir, node}]; ok {
		return ev, true
	}
	return x.history.acquired(dir, node)
}

// CauseOf is how the holds that txn ends, end, told from txn and from t as
// it is before txn applies: a break or a deadlock's end as txn says, a
// lease's close by expiry (it carries the version its proposer saw) or by
// its holder, a client session's close, or else a holder's own delete.
func CauseOf(t *tree.Tree, txn *tree.Txn) Cause {
	switch {
	case txn.Cause == tree.CauseBreak:
		return Cause{End: wire.LockBroken, By: who(txn.Identities), Reason: txn.Reason}
	case txn.Cause == tree.CauseDeadlock:
		return Cause{End: wire.LockDeadlock, By: who(txn.Identities)}
	case txn.Type == tree.TxnReap: // a lock-delay's time is up
		return Cause{End: wire.LockExpired}
	case txn.Cause == tree.CauseShardEnd:
		return Cause{End: txn.Reason}
	case txn.Cause == tree.CauseLockDelay:
		// The holds end here, where the delays go ahead of them, as the
		// close that comes next will say: a lease expired, or a session.
		// (In a shard, which does not know the session as a lease, the
		// delays' txn says it: Reason.)
		if txn.Reason != "" {
			return Cause{End: txn.Reason}
		}
		if _, ok := t.Lease(txn.Session); ok {
			return Cause{End: wire.LockExpired}
		}
		return Cause{End: wire.LockSessionEnded}
	case txn.Type != tree.TxnCloseSession:
		return Cause{End: wire.LockReleased}
	}
	s, ok := t.Session(txn.Session)
	switch {
	case !ok || s.Lease == nil:
		return Cause{End: wire.LockSessionEnded}
	case txn.LeaseVersion != 0:
		return Cause{End: wire.LockExpired}
	}
	return Cause{End: wire.LockReleased}
}

// who names identities as the history shows them: "scheme:id", comma
// separated.
func who(ids []wire.Identity) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id.Scheme + ":" + id.ID)
	}
	return b.String()
}
