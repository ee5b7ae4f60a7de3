package lockq

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Priorities.
//
// A waiter may carry a priority, 1 to MaxPriority (0, the default, is
// none): it is served before the waiters of lower priority that are still
// waiting, never before a holder. Where it goes is decided once, when it
// joins, by Place, against an exact list of the queue (package recipes
// creates it in a multi with a check that the lock node's cversion is
// still the one listed), and written into its name as a sort key, so that
// every client, the server and the CLI order the queue the same way from
// the names alone. The order could not be worked out from priorities
// later: after a release, a queue of two nodes looks the same whether the
// first of them held before the second came (and must keep the lock) or
// both waited.
//
// The id of an acquisition with a priority, or a key, carries them:
//
//	_c_<base>.p<priority>.k<key>-<kind>-<sequence>
//
// where base is the acquisition's own unique id, and either part may be
// missing. A key is ten digits, the sequence number of a node that was in
// the queue when the node joined, then more digits, not ending with 0: a
// decimal fraction that puts it after that node. A node without a key
// sorts by its sequence number, as its key: the queue is ordered by key,
// so names without either part order as they always did. Every client of
// a lock that uses priorities must know this order, though: an older one
// reads a node placed ahead by its sequence number, at the end.
//
// Aging: a newcomer goes before a waiter only if its own sequence number
// is at most AgingWindow above the waiter's. Sequence numbers strictly
// increase (the lock node's cversion, counting every join and every
// leave), so at most AgingWindow acquisitions that came after a waiter
// are ever placed before it, whatever their priority: a waiter waits for
// those ahead of it when it came and at most AgingWindow more.
//
// No herd: a newcomer placed before waiters must not let one of them wake
// at the release of the node it watches and take a turn that is no longer
// its (a waiter may go on without listing the queue again, see package
// recipes). When the newcomer changes whom some waiter waits for, it
// rewrites, in the multi that creates it, the data of the node those
// waiters watch with the data it has (Placement.Touch), so that exactly
// the waiters watching that node look again. A waiter wakes at most once
// more for each newcomer placed before it.

// MaxPriority is the highest priority.
const MaxPriority = 999

// PlaceTries is how many times a waiter with a priority tries to join the
// queue where Place puts it, against a queue that changes under it each
// time (the cversion check of its create fails), before it joins at the
// end.
const PlaceTries = 8

// AgingWindow is how far above a waiter's sequence number a newcomer's
// may be for the newcomer to be placed before it: no waiter has more than
// AgingWindow later acquisitions placed before it.
const AgingWindow = 64

// ID returns the id of an acquisition of the unique id base (with neither
// "-" nor "." in it), priority (0: none) and key ("": none).
func ID(base string, priority int, key string) string {
	id := base
	if priority > 0 {
		id += ".p" + strconv.Itoa(priority)
	}
	if key != "" {
		id += ".k" + key
	}
	return id
}

// attrs reads the priority and key in id: 0 and "" when it has none, or
// they are not well formed.
func attrs(id string) (priority int, key string) {
	if i := strings.LastIndex(id, ".k"); i >= 0 && validKey(id[i+2:]) {
		id, key = id[:i], id[i+2:]
	}
	if i := strings.LastIndex(id, ".p"); i >= 0 {
		p := id[i+2:]
		if n, err := strconv.Atoi(p); err == nil && n >= 1 && n <= MaxPriority && strconv.Itoa(n) == p {
			priority = n
		}
	}
	return priority, key
}

// validKey reports whether k is a key as Place makes them: ten digits,
// then digits that do not end with 0.
func validKey(k string) bool {
	return len(k) > SeqDigits && strings.Trim(k, "0123456789") == "" && k[len(k)-1] != '0'
}

// Priority returns the priority of e's acquisition (0: none).
func (e Entry) Priority() int {
	p, _ := attrs(e.ID)
	return p
}

// Key returns e's place in the queue: its key, or else its sequence
// number in ten digits. A key that does not come before e's own sequence
// number is not taken: no node is placed before one that came after it.
// A lock-delay's key is empty: it goes before every other node.
func (e Entry) Key() string {
	if e.Kind == Delay {
		return ""
	}
	seq := padSeq(e.Seq)
	if _, k := attrs(e.ID); k != "" && k[:SeqDigits] < seq {
		return k
	}
	return seq
}

// padSeq writes a sequence number as the server does, zero-padded to
// SeqDigits (fmt's "%010d", without its cost: the lock index asks for keys
// on every change).
func padSeq(n int64) string {
	s := strconv.FormatInt(n, 10)
	switch {
	case n < 0:
		return fmt.Sprintf("%0*d", SeqDigits, n)
	case len(s) < SeqDigits:
		return strings.Repeat("0", SeqDigits-len(s)) + s
	}
	return s
}

// Compare orders the nodes of a queue: by key, then by sequence number
// (the nodes of an acquisition that changed mode share its key).
func Compare(a, b Entry) int {
	if c := strings.Compare(a.Key(), b.Key()); c != 0 {
		return c
	}
	switch {
	case a.Seq < b.Seq:
		return -1
	case a.Seq > b.Seq:
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

// Placement is where a newcomer with a priority goes in a queue.
type Placement struct {
	// Key is the newcomer's key: "" for none, at the end of the queue.
	Key string
	// Touch is the index in the queue of the node whose data the
	// newcomer rewrites as it joins, -1 for none: the waiters watching
	// it would wait for the newcomer now.
	Touch int
}

// Place returns where a newcomer of kind and priority, whose sequence
// number will be seq, goes in the queue es: in queue order as Sort gives
// it, and exact (listed with the cversion that will be seq). It goes
// before the longest run of acquisitions at the end of the queue that
// all wait, each with a lower priority and a sequence number at most
// AgingWindow below seq; never before a holder (an upgrader holds), nor
// before a node of another kind than a lock's, nor before an acquisition
// of several nodes. With no such run, or priority 0, it goes at the end.
func Place(es []Entry, kind Kind, priority int, seq int64) Placement {
	end := Placement{Touch: -1}
	if priority <= 0 || !kind.IsLock() {
		return end
	}
	gs, _ := groups(es, "")
	i := len(gs)
	for i > 0 && overtakable(es, gs, i-1, priority, seq) {
		i--
	}
	if i == len(gs) || gs[i].first == 0 {
		return end
	}
	at := gs[i].first
	lo, hi := es[at-1].Key(), es[at].Key()
	if lo >= hi || lo == "" {
		return end // two nodes of one key, not made by Place; or right after a lock-delay
	}
	p := Placement{Key: between(lo, hi), Touch: -1}

	// Does the newcomer change whom a waiter of the run waits for? The
	// waiters it can change are the first of the run and, when that is a
	// read, the reads right after it: all watch the node the first waits
	// for, which is rewritten.
	me := Entry{ID: ID("\x00", priority, p.Key), Kind: kind, Seq: seq}
	me.Name = fmt.Sprintf("%s%0*d", Prefix(me.ID, kind), SeqDigits, seq)
	after := slices.Insert(slices.Clone(es), at, me)
	for _, g := range gs[i:] {
		id := es[g.first].ID
		if b := Blocker(after, id); b < 0 || after[b].Name != es[Blocker(es, id)].Name {
			p.Touch = blocker(es, gs, i)
			break
		}
	}
	return p
}

// overtakable reports whether a newcomer of priority, whose sequence
// number will be seq, may go before the acquisition gs[j] of es.
func overtakable(es []Entry, gs []group, j, priority int, seq int64) bool {
	g, e := gs[j], es[gs[j].first]
	b := blocker(es, gs, j)
	return g.nodes == 1 && e.Kind.IsLock() && e.Kind != Delay && e.Priority() < priority &&
		e.Seq < seq && seq-e.Seq <= AgingWindow && b >= 0 &&
		es[b].Kind != Delay // behind a lock-delay: the next to hold, or a holder it holds back
}

// between returns a key strictly between the keys lo < hi: lo's ten
// digits, and a fraction after lo's.
func between(lo, hi string) string {
	base, hf := lo[:SeqDigits], ""
	if hi[:SeqDigits] == base {
		hf = hi[SeqDigits:]
	}
	return base + midpoint(lo[SeqDigits:], hf)
}

// midpoint returns digits, not ending with 0, of a decimal fraction
// strictly between 0.lo < 0.hi (hi "" is 1), whose digits do not end
// with 0 either.
func midpoint(lo, hi string) string {
	digit := func(s string, i int) int {
		if i < len(s) {
			return int(s[i] - '0')
		}
		return 0
	}
	if hi != "" {
		n := 0
		for n < len(hi) && digit(lo, n) == digit(hi, n) {
			n++
		}
		if n > 0 {
			return hi[:n] + midpoint(lo[min(n, len(lo)):], hi[n:])
		}
	}
	dlo, dhi := digit(lo, 0), 10
	if hi != "" {
		dhi = digit(hi, 0)
	}
	switch {
	case dhi-dlo > 1:
		return strconv.Itoa((dlo + dhi) / 2)
	case len(hi) > 1:
		return hi[:1]
	}
	return strconv.Itoa(dlo) + midpoint(lo[min(1, len(lo)):], "")
}

// Base returns the unique part of an acquisition's id: the id without its
// priority and key. An acquisition that joins the queue again at a higher
// priority (package recipes: priority inheritance) keeps its base.
func Base(id string) string {
	base, _, _ := strings.Cut(id, ".")
	return base
}

// Inherited returns the priority the acquisition id inherits from the
// queue es: while it holds, the highest priority of the acquisitions that
// wait there (all of them wait for it, or for those that share the lock
// with it), or 0. Package recipes serves the acquisition's waits for other
// locks at that priority (priority inheritance), so that a holder of low
// priority does not keep a waiter of high priority waiting behind work of
// middle priority elsewhere. A waiter that inherited a priority carries it
// in its name, so the holders it waits for inherit it in turn.
func Inherited(es []Entry, id string) int {
	if !Holds(es, id) {
		return 0
	}
	p := 0
	for _, a := range Acquisitions(es) {
		if a.First.ID != id && !Holds(es, a.First.ID) {
			p = max(p, a.First.Priority())
		}
	}
	return p
}
