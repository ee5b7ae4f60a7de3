package server

import (
	"github.com/arbor-coord/arbor/locks"
	"github.com/arbor-coord/arbor/tree"
	"github.com/arbor-coord/arbor/wire"
)

// lockInfos is the locks at or under prefix that ids may read (READ on a
// lock's path, as a getChildren of it needs), as the index shows them.
// The caller holds the fsm's read lock.
func lockInfos(t *tree.Tree, x *locks.Index, prefix string, ids []wire.Identity) []wire.LockInfo {
	var out []wire.LockInfo
	for _, p := range x.Paths(prefix) {
		if t.Check(p, ids, wire.PermRead) != nil {
			continue
		}
		info, _ := x.Info(t, p)
		out = append(out, wire.LockInfo{Path: p, Holders: lockParties(info.Holders), Waiters: lockParties(info.Waiters), EstimatedWaitMs: info.EstimatedWaitMs})
	}
	return out
}

// deadlocks is the cycles of the wait-for graph whose every lock ids may
// read. The caller holds the fsm's read lock.
func deadlocks(t *tree.Tree, x *locks.Index, ids []wire.Identity) [][]wire.LockWait {
	var out [][]wire.LockWait
cycles:
	for _, c := range x.Deadlocks(t) {
		waits := make([]wire.LockWait, len(c))
		for i, w := range c {
			if t.Check(w.Lock, ids, wire.PermRead) != nil {
				continue cycles
			}
			waits[i] = wire.LockWait{Waiter: lockParty(w.Waiter), Lock: w.Lock, Holder: lockParty(w.Holder)}
		}
		out = append(out, waits)
	}
	return out
}

func lockParties(ps []locks.Party) []wire.LockParty {
	var out []wire.LockParty
	for _, p := range ps {
		out = append(out, lockParty(p))
	}
	return out
}

func lockParty(p locks.Party) wire.LockParty {
	return wire.LockParty{Node: p.Node, Mode: string(p.Mode), Owner: p.Owner, Holder: p.Holder,
		Session: p.Session, Lease: p.Lease, Token: p.Token, Since: p.Since, Expires: p.Expires}
}
