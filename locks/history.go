package locks

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// DefaultHistory is how many events the lock history keeps unless
// SetHistoryLimit says otherwise.
const DefaultHistory = 1000

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

// historyFormat versions EncodeHistory's bytes.
const historyFormat = 1

type savedHistory struct {
	Format int              `json:"format"`
	Events []wire.LockEvent `json:"events"`
}

// EncodeHistory returns the history as bytes for a snapshot (nil when it
// is empty), so that a member that restores it tells the history its
// peers tell.
func (x *Index) EncodeHistory() []byte {
	if len(x.history.events) == 0 {
		return nil
	}
	saved := savedHistory{Format: historyFormat}
	x.history.all(func(ev *wire.LockEvent) bool {
		saved.Events = append(saved.Events, *ev)
		return true
	})
	b, _ := json.Marshal(saved) // strings and integers: never fails
	return b
}

// RestoreHistory replaces the history with one EncodeHistory wrote (empty
// for nil), keeping its newest events up to the limit. Call it before
// Rebuild, which takes the holders' acquisitions from it.
func (x *Index) RestoreHistory(b []byte) error {
	x.history = history{limit: x.history.limit}
	if len(b) == 0 {
		return nil
	}
	var saved savedHistory
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("locks: lock history: %w", err)
	}
	if saved.Format != historyFormat {
		return fmt.Errorf("locks: lock history of format %d, want %d", saved.Format, historyFormat)
	}
	for _, ev := range saved.Events[max(len(saved.Events)-x.history.limit, 0):] {
		x.history.add(ev)
	}
	return nil
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
