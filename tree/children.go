package tree

import (
	"hash/maphash"
	"slices"
)

// childSet is a node's children, found by name: an open-addressing hash
// table of the child nodes themselves, with linear probing, a one-byte tag
// per slot (so that a probe reads another node only when 7 bits of the
// hash match) and at most 7 of 8 slots in use. That is 9 bytes a slot,
// 10 to 21 bytes a child, where a map[string]*node holds about 35: a
// tenth of a million-znode tree's heap.
//
// Its order is the table's, not the names': callers sort where order
// matters, as they did with a map.
type childSet struct {
	slots []*node // a power of two long
	tags  []uint8 // tags[i] is 0 when slots[i] is empty, else tagOf(hash of its name)
	n     int
}

// childSeed seeds the tables' hash. Only the order of iteration depends on
// it, and nothing depends on that order.
var childSeed = maphash.MakeSeed()

// minChildSlots is the smallest table: two slots, so that the one child
// of a lock's container (most of a lock service's nodes with children)
// costs 18 bytes of table, not 72.
const minChildSlots = 2

func childHash(name string) uint64 { return maphash.String(childSeed, name) }

// tagOf is the tag of a hash: its top 7 bits, with the high bit set so
// that it is never 0.
func tagOf(h uint64) uint8 { return uint8(h>>57) | 0x80 }

// len is the number of children; a nil set has none.
func (s *childSet) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// get returns the child called name, or nil.
func (s *childSet) get(name string) *node {
	if s == nil {
		return nil
	}
	h := childHash(name)
	tag, mask := tagOf(h), uint64(len(s.slots)-1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.tags[i] {
		case 0:
			return nil
		case tag:
			if c := s.slots[i]; c.name == name {
				return c
			}
		}
	}
}

// add adds c, which must not be in the set under its name.
func (s *childSet) add(c *node) {
	if (s.n+1)*8 > len(s.slots)*7 {
		s.resize(max(minChildSlots, 2*len(s.slots)))
	}
	s.insert(c, childHash(c.name))
	s.n++
}

// insert puts c in the first free slot of its probe sequence.
func (s *childSet) insert(c *node, h uint64) {
	mask := uint64(len(s.slots) - 1)
	i := h & mask
	for s.tags[i] != 0 {
		i = (i + 1) & mask
	}
	s.slots[i], s.tags[i] = c, tagOf(h)
}

// remove removes the child called name, if there is one. It shifts back
// the children probed past its slot, so that no tombstone is left, and
// shrinks the table when it is mostly empty.
func (s *childSet) remove(name string) {
	h := childHash(name)
	tag, mask := tagOf(h), uint64(len(s.slots)-1)
	i := h & mask
	for ; ; i = (i + 1) & mask {
		if s.tags[i] == 0 {
			return
		}
		if s.tags[i] == tag && s.slots[i].name == name {
			break
		}
	}
	for j := (i + 1) & mask; s.tags[j] != 0; j = (j + 1) & mask {
		// The child at j moves to the hole at i unless its home lies
		// cyclically in (i, j]: it would then be found before the hole.
		home := childHash(s.slots[j].name) & mask
		if (j-home)&mask >= (j-i)&mask {
			s.slots[i], s.tags[i] = s.slots[j], s.tags[j]
			i = j
		}
	}
	s.slots[i], s.tags[i] = nil, 0
	s.n--
	size := len(s.slots)
	for size > minChildSlots && s.n*8 < size {
		size /= 2
	}
	if size < len(s.slots) {
		s.resize(size)
	}
}

func (s *childSet) resize(size int) {
	slots := s.slots
	s.slots, s.tags = make([]*node, size), make([]uint8, size)
	for _, c := range slots {
		if c != nil {
			s.insert(c, childHash(c.name))
		}
	}
}

// all yields every child, in no particular order.
func (s *childSet) all(yield func(*node) bool) {
	if s == nil {
		return
	}
	for _, c := range s.slots {
		if c != nil && !yield(c) {
			return
		}
	}
}

// clone returns a copy of the set that shares the children; nil for nil.
func (s *childSet) clone() *childSet {
	if s == nil {
		return nil
	}
	return &childSet{slots: slices.Clone(s.slots), tags: slices.Clone(s.tags), n: s.n}
}

// replace puts c in the slot of the child of the same name, which the set
// must hold.
func (s *childSet) replace(c *node) {
	h := childHash(c.name)
	tag, mask := tagOf(h), uint64(len(s.slots)-1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch {
		case s.tags[i] == 0:
			panic("tree: replace of a child the set does not hold: " + c.name)
		case s.tags[i] == tag && s.slots[i].name == c.name:
			s.slots[i] = c
			return
		}
	}
}
