// Package lockq holds the rules of a lock queue, the one place they are
// written: how a queue node is named and parsed, which kinds of node there
// are, which modes conflict, who holds and whom each waiter watches. It is
// pure (no I/O, no clock), so the client recipes, the server's lock service
// and the CLI all decide the same way from the same list of names.
//
// A lock on a path is the queue of ephemeral-sequential nodes under it,
// each named
//
//	_c_<id>-<kind>-<sequence>
//
// where id is unique to one acquisition (it lets a client find its node
// again after a create whose answer was lost), kind says what the node
// asks for, and sequence, ten digits appended by the server, is the
// queue's order, unless the id carries a priority and a key that placed
// the node before others (see Place). Nodes with other names are not part
// of the queue.
package lockq

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Mark starts every queue node's name.
const Mark = "_c_"

// SeqDigits is the length of the sequence number the server appends to a
// sequential node's name.
const SeqDigits = 10

// Kind is what a queue node asks for: a lock mode, or its place in an
// election, a semaphore or a barrier.
type Kind string

// The kinds of queue node.
const (
	Exclusive Kind = "lock"   // a Mutex, or an exclusive lock taken over HTTP
	Read      Kind = "read"   // the read side of a read/write lock: shared with other reads
	Write     Kind = "write"  // the write side: the same as Exclusive
	Candidate Kind = "n"      // a candidate in an election
	Lease     Kind = "lease"  // a semaphore's lease
	Member    Kind = "member" // a barrier's member
	// IntentShared and IntentExclusive are the intention modes of
	// hierarchical locks, as a database's: a holder of a lock below a
	// path (a reader, or a writer) holds the path's lock in IntentShared
	// (or IntentExclusive) as well, so that a holder of the path's lock
	// itself, which covers its subtree, excludes it, while holders of
	// different locks below do not exclude each other there (Conflicts).
	IntentShared    Kind = "is"
	IntentExclusive Kind = "ix"
	// Delay is a lock-delay (Chubby's): after a holder that asked for one
	// is lost without releasing (its session or lease expired, or the lock
	// was broken), the server puts a node of this kind at the head of the
	// queue, a TTL node that is reaped once the delay has passed, so that
	// nobody holds the lock until then. It sorts before every other node
	// and excludes every mode.
	Delay Kind = "delay"
)

// MaxLockDelay bounds the lock-delay a holder may ask for (Record.DelayMs).
const MaxLockDelay = time.Minute

// IsLock reports whether k is a lock mode (Exclusive, Read, Write or an
// intention mode) or a lock-delay, which holds the lock as an exclusive
// hold would.
func (k Kind) IsLock() bool {
	switch k {
	case Exclusive, Read, Write, IntentShared, IntentExclusive, Delay:
		return true
	}
	return false
}

// Ordered reports whether the queue rules (Blocker, Holds) decide who of
// kind k holds and who waits: lock modes, and candidates, which queue as
// exclusive locks do. Leases and members follow their recipe's own rule
// (a semaphore counts, a barrier waits for all).
func (k Kind) Ordered() bool { return k.IsLock() || k == Candidate }

// Conflicts reports whether a holder of mode a and a holder of mode b
// cannot hold one lock at once. Two reads can; the intention modes can
// with each other, and IntentShared with a read:
//
//	     is   ix   read  write
//	is   ok   ok   ok    -
//	ix   ok   ok   -     -
//	read ok   -    ok    -
//
// Exclusive and Write are the same mode, so a Mutex and the write side of
// an RWMutex on one path exclude each other and every other mode; so do
// a lock-delay and every other kind.
func Conflicts(a, b Kind) bool { return !compatible[[2]Kind{a, b}] }

// compatible lists the pairs of modes that may hold one lock at once.
var compatible = map[[2]Kind]bool{
	{Read, Read}: true, {Read, IntentShared}: true, {IntentShared, Read}: true,
	{IntentShared, IntentShared}: true, {IntentShared, IntentExclusive}: true,
	{IntentExclusive, IntentShared}: true, {IntentExclusive, IntentExclusive}: true,
}

// shares reports whether k can hold a lock with some other mode: a
// waiter of such a mode waits for the nearest acquisition ahead of it that
// it conflicts with, rather than for the one just ahead.
func (k Kind) shares() bool { return k == Read || k == IntentShared || k == IntentExclusive }

// Entry is one node of a queue.
type Entry struct {
	Name string // the node's name under the lock's path
	ID   string // the acquisition's id
	Kind Kind
	Seq  int64 // the sequence number: the queue's order
}

// Prefix is the name a node of acquisition id and kind is created with;
// the server appends the sequence number.
func Prefix(id string, kind Kind) string { return IDPrefix(id) + string(kind) + "-" }

// IDPrefix starts the name of every node of acquisition id, whatever its
// kind.
func IDPrefix(id string) string { return Mark + id + "-" }

// Parse reads a queue node's name; ok is false for names that are not.
func Parse(name string) (e Entry, ok bool) {
	if !strings.HasPrefix(name, Mark) || len(name) < SeqDigits+2 {
		return Entry{}, false
	}
	digits := name[len(name)-SeqDigits:]
	if strings.Trim(digits, "0123456789") != "" {
		return Entry{}, false // a sign, or a negative sequence (after an overflow)
	}
	seq, _ := strconv.ParseInt(digits, 10, 64)
	rest, ok := strings.CutSuffix(name[len(Mark):len(name)-SeqDigits], "-")
	dash := strings.LastIndexByte(rest, '-')
	if !ok || dash < 0 || dash == len(rest)-1 {
		return Entry{}, false
	}
	return Entry{Name: name, ID: rest[:dash], Kind: Kind(rest[dash+1:]), Seq: seq}, true
}

// Sort parses names (a lock path's children) into the queue, in queue
// order (Compare: by key, which is the sequence number unless a priority
// placed the node before others), leaving out the names that are not
// queue nodes.
func Sort(names []string) []Entry {
	type keyed struct {
		e   Entry
		key string
	}
	ks := make([]keyed, 0, len(names))
	for _, n := range names {
		if e, ok := Parse(n); ok {
			ks = append(ks, keyed{e, e.Key()})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return Compare(a.e, b.e)
	})
	es := make([]Entry, len(ks))
	for i, k := range ks {
		es[i] = k.e
	}
	return es
}

// An acquisition usually has one node. A hold that changes mode without
// letting go (RWMutex's Upgrade and Downgrade) adds a node of its new kind
// with the same id: the acquisition keeps the place of its first node in
// the queue and asks for the kind of its latest. A downgrade (write, then
// read) is seen by every other node at once. An upgrade (read, then write)
// holds back only the nodes that came after it: the readers that came
// before may hold, and the upgrader waits for them to leave. Only the
// first upgrade under way on a lock counts; a later one is refused
// (UpgradeRefused) and counts as the read it was.
type group struct {
	first   int   // the index of its first node: its place in the queue
	nodes   int   // how many nodes it has
	kind    Kind  // what it asks for now: its latest node's kind
	upgrade int64 // the sequence number at which a read became a write; 0 if it did not
	refused bool  // it asked to upgrade after another one that is still under way
}

// seenBy is g's mode as a node with sequence number seq sees it: an
// upgrade holds back only the nodes that came after it.
func (g group) seenBy(seq int64) Kind {
	if g.upgrade > seq {
		return Read
	}
	return g.kind
}

// groups gathers the queue es (in queue order) into acquisitions, in
// queue order, and returns them with the index of the one with id (-1 if
// none).
func groups(es []Entry, id string) (gs []group, me int) {
	at := make(map[string]int, len(es))
	gs = make([]group, 0, len(es))
	me = -1
	for i, e := range es {
		j, seen := at[e.ID]
		if !seen {
			j = len(gs)
			at[e.ID] = j
			gs = append(gs, group{first: i})
			if e.ID == id {
				me = j
			}
		}
		g := &gs[j]
		g.nodes++
		switch {
		case e.Kind == Read:
			g.upgrade = 0
		case g.kind == Read && g.upgrade == 0 && e.Kind.IsLock():
			g.upgrade = e.Seq
		}
		g.kind = e.Kind
	}
	// Only the first upgrade under way counts.
	var first int64
	for _, g := range gs {
		if g.upgrade > 0 && (first == 0 || g.upgrade < first) {
			first = g.upgrade
		}
	}
	for j := range gs {
		if gs[j].upgrade > first {
			gs[j].kind, gs[j].upgrade, gs[j].refused = Read, 0, true
		}
	}
	return gs, me
}

// Acquisition is one acquisition of a queue, as operators see it: its
// first node, which is its place in the queue, and the kind it asks for
// now.
type Acquisition struct {
	First Entry
	Kind  Kind
}

// Acquisitions returns the acquisitions of the queue es, in queue order.
func Acquisitions(es []Entry) []Acquisition {
	gs, _ := groups(es, "")
	out := make([]Acquisition, len(gs))
	for i, g := range gs {
		out[i] = Acquisition{First: es[g.first], Kind: g.kind}
	}
	return out
}

// Blocker returns the index in es, the queue in queue order, of the
// node that the acquisition id waits for, and watches: the first node of
// the acquisition that must go first. It returns -1 when id goes ahead, or
// is not in the queue.
//
// A read waits for the nearest acquisition ahead of it that is not a read
// (an intention mode, for the nearest one it conflicts with); an
// exclusive lock, a write and a candidate wait for the acquisition just
// ahead of them. A release thus wakes only the waiters it lets through:
// the next writer, or the readers up to the next writer, each of which
// watches a different node. An upgrade waits for each reader that may
// hold, ahead of it or after it, one at a time. Leases and members
// (their recipes count instead) never wait here.
func Blocker(es []Entry, id string) int {
	gs, me := groups(es, id)
	if me < 0 {
		return -1
	}
	return blocker(es, gs, me)
}

// Waits returns what Blocker returns for an acquisition that does not
// hold the lock (Holds false), and -1 for one that does: an upgrader
// waits for its write while it holds its read.
func Waits(es []Entry, id string) int {
	gs, me := groups(es, id)
	if me < 0 || holds(es, gs, me) {
		return -1
	}
	return blocker(es, gs, me)
}

func blocker(es []Entry, gs []group, me int) int {
	g := gs[me]
	switch {
	case g.upgrade > 0:
		// Its read first: a node ahead that a read waits for (a lock-delay
		// put before it) holds it back as it would hold back a read. Then
		// each holder that came before the upgrade and shares with a read
		// (reads, intent-shared), ahead of it or after it.
		if j := nearestConflict(es, gs, me, Read); j >= 0 {
			return j
		}
		for j, o := range gs {
			if j != me && es[o.first].Seq < g.upgrade && !Conflicts(Read, o.kind) && blocker(es, gs, j) < 0 {
				return o.first
			}
		}
		return -1
	case g.kind.shares():
		return nearestConflict(es, gs, me, g.kind)
	case g.kind.Ordered() && me > 0:
		return gs[me-1].first
	}
	return -1
}

// nearestConflict returns the index in es of the first node of the
// nearest acquisition ahead of gs[me] that a hold of kind conflicts with,
// as gs[me]'s first node sees it, or -1.
func nearestConflict(es []Entry, gs []group, me int, kind Kind) int {
	pos := es[gs[me].first].Seq
	for j := me - 1; j >= 0; j-- {
		if Conflicts(kind, gs[j].seenBy(pos)) {
			return gs[j].first
		}
	}
	return -1
}

// Holds reports whether the acquisition id holds the lock (or leads the
// election) queued as es: it goes ahead, or it is upgrading and its read
// holds (it holds its read while it waits for the write). It is false for
// waiters, and for leases and members, whose holders the queue alone does
// not tell.
func Holds(es []Entry, id string) bool {
	gs, me := groups(es, id)
	return me >= 0 && holds(es, gs, me)
}

// Holders returns the acquisitions of the queue es that hold the lock (as
// Holds tells), in queue order: what Acquisitions and Holds of each would
// give, with the queue gathered into acquisitions once and not once for
// each.
func Holders(es []Entry) []Acquisition {
	gs, _ := groups(es, "")
	var out []Acquisition
	for j, g := range gs {
		if holds(es, gs, j) {
			out = append(out, Acquisition{First: es[g.first], Kind: g.kind})
		}
	}
	return out
}

func holds(es []Entry, gs []group, me int) bool {
	switch {
	case !gs[me].kind.Ordered():
		return false
	case gs[me].upgrade > 0:
		return nearestConflict(es, gs, me, Read) < 0
	}
	return blocker(es, gs, me) < 0
}

// UpgradeRefused reports whether the acquisition id asked to upgrade after
// another one that is still under way: it must take back its write node
// and keep its read.
func UpgradeRefused(es []Entry, id string) bool {
	gs, me := groups(es, id)
	return me >= 0 && gs[me].refused
}
