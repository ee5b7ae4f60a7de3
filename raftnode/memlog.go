package raftnode

import (
	"slices"
	"sort"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// memLog is what Storage keeps of the log in memory: the HardState, the
// last snapshot's metadata, the term and size of every entry since the
// last compaction (16 bytes an entry), and the newest entries themselves up
// to cacheLimit bytes. Raft reads older entries from pebble. Before it,
// Storage mirrored the whole log in a raft.MemoryStorage: 1 MiB writes
// held 10 GiB between two snapshots of the default 10,000 entries.
//
// memLog does no I/O and has no lock: Storage guards it.
type memLog struct {
	hs   raftpb.HardState
	snap raftpb.SnapshotMetadata // the last snapshot's

	// offset is the index of the last compacted entry (or of the
	// snapshot the log starts from); the log holds offset+1 to last().
	offset uint64
	terms  []uint64 // terms[i] is the term of entry offset+i; terms[0] the offset's
	ends   []uint64 // ends[i] is the bytes of the entries up to offset+i, counted from an arbitrary start

	// cache holds the newest entries, ending at last(), within cacheLimit
	// bytes (as raft counts an entry's size); it may be empty.
	cache      []raftpb.Entry
	cacheBytes int
	cacheLimit int
	evicted    int // entries dropped off cache's front since its array was last copied
}

func newMemLog(cacheLimit int) *memLog {
	return &memLog{terms: []uint64{0}, ends: []uint64{0}, cacheLimit: cacheLimit}
}

func (m *memLog) firstIndex() uint64 { return m.offset + 1 }
func (m *memLog) lastIndex() uint64  { return m.offset + uint64(len(m.terms)) - 1 }

// cacheFirst is the index of the first cached entry; past lastIndex when
// the cache is empty.
func (m *memLog) cacheFirst() uint64 {
	if len(m.cache) == 0 {
		return m.lastIndex() + 1
	}
	return m.cache[0].Index
}

func (m *memLog) term(i uint64) (uint64, error) {
	switch {
	case i < m.offset:
		return 0, raft.ErrCompacted
	case i > m.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return m.terms[i-m.offset], nil
}

// bytesBetween is the size of the entries after index lo up to and
// including hi, of those in the log.
func (m *memLog) bytesBetween(lo, hi uint64) uint64 {
	lo, hi = max(lo, m.offset), min(hi, m.lastIndex())
	if lo >= hi {
		return 0
	}
	return m.ends[hi-m.offset] - m.ends[lo-m.offset]
}

// compactPoint is the last index to compact so that what stays after it, up
// to index upTo, is at most maxEntries entries and maxBytes bytes (the
// entry at upTo itself is always kept if it is in the log).
func (m *memLog) compactPoint(upTo, maxEntries, maxBytes uint64) uint64 {
	upTo = min(upTo, m.lastIndex())
	if upTo <= m.offset {
		return m.offset
	}
	lo := m.offset
	if upTo > maxEntries {
		lo = max(lo, upTo-maxEntries)
	}
	end := m.ends[upTo-m.offset]
	// The first k in [lo, upTo) whose kept bytes, (k, upTo], fit.
	n := int(upTo - lo)
	k := sort.Search(n, func(j int) bool { return end-m.ends[lo+uint64(j)-m.offset] <= maxBytes })
	return lo + uint64(k)
}

// append adds ents (contiguous, the first at most lastIndex()+1) to the
// log, replacing any tail from ents[0].Index on, and drops from the
// cache's front what no longer fits.
func (m *memLog) append(ents []raftpb.Entry) {
	if len(ents) == 0 {
		return
	}
	if first := m.firstIndex(); ents[0].Index < first {
		if lastIndex(ents) < first {
			return
		}
		ents = ents[first-ents[0].Index:]
	}
	at := ents[0].Index - m.offset // where ents[0] goes in terms
	m.terms, m.ends = m.terms[:at], m.ends[:at]
	end := m.ends[at-1]
	for i := range ents {
		end += uint64(ents[i].Size())
		m.terms = append(m.terms, ents[i].Term)
		m.ends = append(m.ends, end)
	}
	if cf := m.cacheFirst(); ents[0].Index < cf {
		m.dropCache()
	} else if k := int(ents[0].Index - cf); k < len(m.cache) {
		for i := k; i < len(m.cache); i++ {
			m.cacheBytes -= m.cache[i].Size()
		}
		// The full slice expression: entries raft still holds keep their
		// place; an append copies rather than overwrites them. (Past the
		// cache's end nothing is held: cached gives out no capacity, so
		// the usual append, after the last entry, goes on in place.)
		m.cache = m.cache[:k:k]
	}
	for i := range ents {
		m.cacheBytes += ents[i].Size()
	}
	m.cache = append(m.cache, ents...)
	m.evict()
}

// evict drops the oldest cached entries until the cache fits its limit.
// Dropped entries stay reachable through the cache's array until it is
// copied, so it is copied once as many have been dropped as it holds.
func (m *memLog) evict() {
	k := 0
	for k < len(m.cache) && m.cacheBytes > m.cacheLimit {
		m.cacheBytes -= m.cache[k].Size()
		k++
	}
	if k == 0 {
		return
	}
	m.cache = m.cache[k:]
	m.evicted += k
	if m.evicted > len(m.cache) {
		m.cache = slices.Clone(m.cache)
		m.evicted = 0
	}
}

func (m *memLog) dropCache() {
	m.cache, m.cacheBytes, m.evicted = nil, 0, 0
}

// cached returns the cached entries from lo (at least cacheFirst) to hi
// (exclusive), limited to maxSize bytes as raft limits them: at least one
// entry. The caller may not change them.
func (m *memLog) cached(lo, hi, maxSize uint64) []raftpb.Entry {
	cf := m.cacheFirst()
	ents := m.cache[lo-cf : hi-cf]
	var size uint64
	for i := range ents {
		size += uint64(ents[i].Size())
		if i > 0 && size > maxSize {
			ents = ents[:i]
			break
		}
	}
	return ents[:len(ents):len(ents)]
}

// compact drops the entries up to and including i, which must be applied.
func (m *memLog) compact(i uint64) {
	if i <= m.offset {
		return
	}
	i = min(i, m.lastIndex())
	k := i - m.offset
	m.terms = slices.Clone(m.terms[k:])
	m.ends = slices.Clone(m.ends[k:])
	m.offset = i
	if cf := m.cacheFirst(); cf <= i {
		n := min(int(i-cf)+1, len(m.cache))
		for j := range n {
			m.cacheBytes -= m.cache[j].Size()
		}
		m.cache = slices.Clone(m.cache[n:])
		m.evicted = 0
	}
}

// applySnapshot replaces the whole log with a snapshot's.
func (m *memLog) applySnapshot(meta raftpb.SnapshotMetadata) {
	m.snap = meta
	m.offset = meta.Index
	m.terms = []uint64{meta.Term}
	m.ends = []uint64{0}
	m.dropCache()
}

// setSnapshot records a snapshot taken here, of entries still in the log.
func (m *memLog) setSnapshot(meta raftpb.SnapshotMetadata) { m.snap = meta }
