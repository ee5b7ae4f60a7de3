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
// queue's order. Nodes with other names are not part of the queue.
package lockq

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
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
)

// IsLock reports whether k is a lock mode: Exclusive, Read or Write.
func (k Kind) IsLock() bool { return k == Exclusive || k == Read || k == Write }

// Ordered reports whether the queue rules (Blocker, Holds) decide who of
// kind k holds and who waits: lock modes, and candidates, which queue as
// exclusive locks do. Leases and members follow their recipe's own rule
// (a semaphore counts, a barrier waits for all).
func (k Kind) Ordered() bool { return k.IsLock() || k == Candidate }

// Conflicts reports whether a holder of mode a and a holder of mode b
// cannot hold one lock at once: only two reads can. Exclusive and Write
// are the same mode, so a Mutex and the write side of an RWMutex on one
// path exclude each other and every reader.
func Conflicts(a, b Kind) bool { return !(a == Read && b == Read) }

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

// Sort parses names (a lock path's children) into the queue, in sequence
// order, leaving out the names that are not queue nodes.
func Sort(names []string) []Entry {
	es := make([]Entry, 0, len(names))
	for _, n := range names {
		if e, ok := Parse(n); ok {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	return es
}

// Blocker returns the index of the entry that entry i of the queue es
// waits for, and watches, or -1 when i goes ahead: a read waits for the
// nearest node ahead of it that is not a read, every other
// lock mode and a candidate for the node just ahead of it. A release thus
// wakes only the waiters it lets through: the next writer, or the readers
// up to the next writer, each of which watches a different node.
//
// Blocker is for lock modes and candidates; for a lease or a member it
// returns -1 (their recipes count instead).
func Blocker(es []Entry, i int) int {
	switch es[i].Kind {
	case Read:
		for j := i - 1; j >= 0; j-- {
			if Conflicts(Read, es[j].Kind) {
				return j
			}
		}
		return -1
	case Exclusive, Write, Candidate:
		return i - 1
	}
	return -1
}

// Holds reports whether entry i holds the lock (or leads the election)
// queued as es. It is false for waiters, and for leases and members, whose
// holders the queue alone does not tell.
func Holds(es []Entry, i int) bool {
	return es[i].Kind.Ordered() && Blocker(es, i) < 0
}
