package raftnode

import (
	"encoding/binary"

	"github.com/cockroachdb/pebble"
)

// A member's pebble store can hold the logs of several raft groups side by
// side (docs/scale-out.md, "Many groups on one member"). A group's keys are
// those of a store of one group behind a prefix of its own: group 0's
// prefix is empty, so that a store written before groups is group 0's as
// it is, and group g's is "G" + be64(g). The keys of one kind of one group
// sort together, and no group's span of a kind holds another group's keys
// ("G" is no kind of group 0).
type keyspace struct{ prefix []byte }

// The kinds of keys. Each is its group's prefix, the kind, then, for some,
// big-endian numbers:
//
//	'h'               the HardState
//	'm'               the metadata of the last snapshot
//	'g'               the generation of the last snapshot's data
//	's' gen, i        chunk i of a snapshot's data (snapstore.go)
//	'd' i             a chunk of a store written before generations
//	'e' index         a log entry
//	'a' id            a member's peer address (members.go)
//	'r' id            a member removed from the group (learners.go)
const (
	kindHardState  = 'h'
	kindSnapMeta   = 'm'
	kindSnapGen    = 'g'
	kindSnapChunk  = 's'
	kindSnapData   = 'd'
	kindEntry      = 'e'
	kindPeer       = 'a'
	kindRemoved    = 'r'
	prefixOfGroups = 'G'
)

// groupKeys is the keyspace of group.
func groupKeys(group uint64) keyspace {
	if group == 0 {
		return keyspace{}
	}
	return keyspace{prefix: binary.BigEndian.AppendUint64([]byte{prefixOfGroups}, group)}
}

// key is the key of kind followed by nums.
func (k keyspace) key(kind byte, nums ...uint64) []byte {
	b := make([]byte, 0, len(k.prefix)+1+8*len(nums))
	b = append(append(b, k.prefix...), kind)
	for _, n := range nums {
		b = binary.BigEndian.AppendUint64(b, n)
	}
	return b
}

// all is the iterator over every key of kind.
func (k keyspace) all(kind byte) *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: k.key(kind), UpperBound: k.key(kind + 1)}
}

// between is the iterator over the keys of kind from number lo up to, not
// including, hi.
func (k keyspace) between(kind byte, lo, hi uint64) *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: k.key(kind, lo), UpperBound: k.key(kind, hi)}
}

// number is the first number of key, one of kind's.
func (k keyspace) number(key []byte) uint64 {
	return binary.BigEndian.Uint64(key[len(k.prefix)+1:])
}

// entryKeyLen is the length of a log entry's key.
func (k keyspace) entryKeyLen() int { return len(k.prefix) + 9 }

// putEntryKey writes the key of the entry at index into dst, entryKeyLen
// bytes (pebble's deferred set gives the room).
func (k keyspace) putEntryKey(dst []byte, index uint64) {
	n := copy(dst, k.prefix)
	dst[n] = kindEntry
	binary.BigEndian.PutUint64(dst[n+1:], index)
}
