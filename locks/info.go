package locks

import (
	"fmt"
	"slices"

	"github.com/arbor-coord/arbor/lockq"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// Info returns the lock at p, read with t (for the leases), and false if
// there is no lock there: its holders and waiters in queue order, each one
// acquisition shown by its first node, and the wait a new waiter could
// expect (the mean of the recent hold times of every lock for each turn
// ahead of it; 0 when nobody holds, or no hold time is known yet).
func (x *Index) Info(t *tree.Tree, p string) (wire.LockInfo, bool) {
	l := x.locks[p]
	if l == nil {
		return wire.LockInfo{}, false
	}
	info := wire.LockInfo{Path: p}
	es := entries(l.nodes)
	for _, a := range lockq.Acquisitions(es) {
		n := l.nodes[slices.IndexFunc(l.nodes, func(n Node) bool { return n.Entry.Name == a.First.Name })]
		party := wire.LockParty{Node: n.Entry.Name, Mode: string(a.Kind), Owner: n.Record.Owner, Holder: n.Record.Holder,
			Session: n.Session, Since: n.Created}
		for _, m := range l.nodes {
			if m.Entry.ID == a.First.ID {
				party.Token = m.Token // its latest node's, as the recipes' Token: a change of mode takes a higher one
			}
		}
		if l, ok := t.Lease(n.Session); ok {
			party.Lease, party.Session, party.Expires = n.Session, l.Parent, l.Expires
		}
		if h, ok := l.holds.get(a.First.ID); ok {
			party.Since = h.timeMs
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
func vertex(p wire.LockParty) string {
	if p.Holder != "" {
		return p.Owner + "/" + p.Holder
	}
	return fmt.Sprintf("%s/session %#x", p.Owner, p.Session)
}
