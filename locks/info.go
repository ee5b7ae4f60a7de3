package locks

import (
	"fmt"
	"slices"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
)

// Party is a holder or a waiter of a lock: one acquisition, shown by its
// first node.
type Party struct {
	Node    string
	Mode    lockq.Kind // what it holds or asks for now
	Owner   string     // who (lockq.Record)
	Holder  string     // which holder of the owner
	Session int64      // its session (the lease's, for a node bound to a lease)
	Lease   int64      // the lease its node is bound to; 0 if none
	Token   int64      // its fencing token
	Since   int64      // ms since the Unix epoch: holding since, or waiting since
	Expires int64      // a lease's: when it ends unless renewed (ms); 0 without a lease
}

// Info is one lock: who holds it and who waits, in queue order.
type Info struct {
	Path    string
	Holders []Party
	Waiters []Party
	// EstimatedWaitMs is how long a new waiter could expect to wait: the
	// mean of the recent hold times (of every lock) for each turn ahead of
	// it. 0 when nobody holds, or no hold time is known yet.
	EstimatedWaitMs int64
}

// Info returns the lock at p, read with t (for the leases), and false if
// there is no lock there.
func (x *Index) Info(t *tree.Tree, p string) (Info, bool) {
	l := x.locks[p]
	if l == nil {
		return Info{}, false
	}
	info := Info{Path: p}
	es := entries(l.nodes)
	for _, a := range lockq.Acquisitions(es) {
		n := l.nodes[slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.Name == a.First.Name })]
		party := Party{Node: n.Entry.Name, Mode: a.Kind, Owner: n.Record.Owner, Holder: n.Record.Holder,
			Session: n.Session, Token: n.Token, Since: n.Created}
		if s, ok := t.Session(n.Session); ok && s.Lease != nil {
			party.Lease, party.Session, party.Expires = n.Session, s.Lease.Parent, s.Lease.Expires
		}
		if since, ok := l.since[a.First.ID]; ok {
			party.Since = since
			info.Holders = append(info.Holders, party)
		} else {
			info.Waiters = append(info.Waiters, party)
		}
	}
	if mean := x.meanHold(); mean > 0 && len(info.Holders) > 0 {
		info.EstimatedWaitMs = mean * int64(len(info.Waiters)+1)
	}
	return info, true
}

// meanHold is the mean of the recent hold times, 0 if none.
func (x *Index) meanHold() int64 {
	if len(x.recent) == 0 {
		return 0
	}
	var sum int64
	for _, ms := range x.recent {
		sum += ms
	}
	return sum / int64(len(x.recent))
}

// vertex names a holder in the wait-for graph: its holder id, or for a
// node without one (written by another client), its session.
func (p Party) vertex() string {
	if p.Holder != "" {
		return p.Owner + "/" + p.Holder
	}
	return fmt.Sprintf("%s/session %#x", p.Owner, p.Session)
}
