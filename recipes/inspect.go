package recipes

import (
	"context"
	"errors"
	"time"

	"github.com/arbor-coord/arbor/client"
	"github.com/arbor-coord/arbor/lockq"
)

// Contender is one node in a recipe's queue, as Contenders reports it.
type Contender struct {
	Node     string    // the node's name under the recipe's path
	Kind     string    // lock, read, write, n (a candidate), lease or member
	Seq      int64     // its sequence number: the queue's order, unless a priority placed it ahead
	Priority int       // a lock waiter's priority (WithPriority); 0: none
	Session  int64     // the session that created it
	Created  time.Time // when it was created
	Data     []byte    // what the contender stored (a lock's record, a candidate's value)
	Owner    string    // a lock's: who holds or waits (WithOwner)
	Holder   string    // a lock's: the id of the value that holds or waits, unique to it
	// Holds says that the contender holds the lock (read or write) or
	// leads the election. It is false for waiters, and for the kinds whose
	// holders a queue alone cannot tell (lease, member).
	Holds bool
}

// Contenders lists the queue of the Mutex, RWMutex or Election at path, in
// order: who holds and who waits, one contender per acquisition (a hold
// that changed mode shows with the mode it holds now). It reads the queue as one member sees it
// at one moment; nodes that vanish while it reads are left out. A missing
// path is an empty queue.
func Contenders(ctx context.Context, c *client.Client, path string) ([]Contender, error) {
	q := newQueue(c, path, options{})
	es, err := q.entries(ctx)
	if err != nil {
		return nil, opError("contenders", path, err)
	}
	out := make([]Contender, 0, len(es))
	for _, a := range lockq.Acquisitions(es) {
		e := a.First
		data, st, err := c.Get(ctx, q.path(e))
		if errors.Is(err, client.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, opError("contenders", path, err)
		}
		ct := Contender{
			Node: e.Name, Kind: string(a.Kind), Seq: e.Seq, Priority: e.Priority(), Session: st.EphemeralOwner,
			Created: time.UnixMilli(st.Ctime), Data: data, Holds: lockq.Holds(es, e.ID),
		}
		if a.Kind.IsLock() {
			r := lockq.DecodeRecord(data)
			ct.Owner, ct.Holder = r.Owner, r.Holder
		}
		out = append(out, ct)
	}
	return out, nil
}
