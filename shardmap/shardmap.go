// Package shardmap is the partition map of a sharded cluster
// (docs/scale-out.md): which raft group serves each part of the tree. It
// routes a path to its shard by the path alone, and changes a map (a
// parent partitioned, a shard split) into the next one, checking that
// every key still has exactly one shard. It is pure: the meta group
// stores the map, members and clients cache it.
package shardmap

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/arbor-coord/arbor/quotas"
	"github.com/arbor-coord/arbor/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// MetaGroup is the group of the meta group: it holds the map, the
// sessions, and the nodes of no shard ("/" and the partitioned parents).
// Until the first split it is also the one shard, owning every key.
const MetaGroup uint64 = 0

// MaxGroup is the largest group a shard may have: the largest a position
// can name (wire.Position), as clients are told where they are in each
// shard.
const MaxGroup = wire.MaxPositionGroup

// ErrCrossShard refuses what spans shards (a multi whose ops route to
// different shards): nothing of it is done.
var ErrCrossShard = errors.New("shardmap: the paths are in different shards")

// Key is where a path routes: in Space "" (the top-level roots) the
// path's first name; in the space of a partitioned parent, the big-endian
// FNV-1a hash of the name of the parent's child the path is in or under.
// Keys of a space are ordered as bytes.
type Key struct {
	Space string `msgpack:"space,omitempty"`
	Key   string `msgpack:"key,omitempty"`
}

// Range is a shard's part of a space: the keys from Start up to, not
// including, End; an End of "" has no end.
type Range struct {
	Space string `msgpack:"space,omitempty"`
	Start string `msgpack:"start,omitempty"`
	End   string `msgpack:"end,omitempty"`
}

// Contains reports whether k is in r.
func (r Range) Contains(k Key) bool {
	return k.Space == r.Space && k.Key >= r.Start && (r.End == "" || k.Key < r.End)
}

// Epoch is a shard's pair of counters: Range moves when its keys change
// (a split, a merge), Replicas when its replica set does. A request routed
// by an older epoch is routed again.
type Epoch struct {
	Range    uint64 `msgpack:"range"`
	Replicas uint64 `msgpack:"replicas"`
}

// Shard is a group and the keys it serves.
type Shard struct {
	Group  uint64  `msgpack:"group"`
	Ranges []Range `msgpack:"ranges"`
	// Replicas are the members that carry the shard, sorted; none for
	// every member of the cluster (a cluster of up to five members).
	Replicas []uint64 `msgpack:"replicas,omitempty"`
	Epoch    Epoch    `msgpack:"epoch"`
	// Leader is the member that should lead the group (raftnode's
	// PreferredLeader); 0 for wherever elections put it.
	Leader uint64 `msgpack:"leader,omitempty"`
	// SplitFrom is, while the shard is being split off another shard than
	// the meta group (SplitOff), that shard's group, which serves the
	// keys until its own split applies and the new group runs; 0 after.
	SplitFrom uint64 `msgpack:"split_from,omitempty"`
}

// Server is the group that serves s's keys now: its own, or while it is
// being split off another shard, that shard's.
func (s *Shard) Server() uint64 {
	if s.SplitFrom != 0 {
		return s.SplitFrom
	}
	return s.Group
}

// Holds reports whether one of s's ranges holds k.
func (s *Shard) Holds(k Key) bool {
	return slices.ContainsFunc(s.Ranges, func(r Range) bool { return r.Contains(k) })
}

// Map is a partition map. Version is the zxid of the meta group's txn that
// made it (0 for the map of a cluster never sharded).
type Map struct {
	Version uint64 `msgpack:"version"`
	// Partitioned are the parents whose children route by the hash of
	// their names, sorted.
	Partitioned []string `msgpack:"partitioned,omitempty"`
	Shards      []Shard  `msgpack:"shards"` // by group
}

// New is the map of a cluster that was never sharded: the meta group is
// the one shard, with every key, on every member.
func New() *Map {
	return &Map{Shards: []Shard{{Group: MetaGroup, Ranges: []Range{{}}}}}
}

// Hash is the hash that places a child of a partitioned parent: 64-bit
// FNV-1a of its name.
func Hash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// HashKey is the key of hash h in a partitioned parent's space.
func HashKey(h uint64) string {
	return string(binary.BigEndian.AppendUint64(nil, h))
}

// KeyOf is where path, a valid absolute path, routes; meta reports that it
// belongs to no shard: "/", the system nodes (/zookeeper and below, where
// the map itself is) and the partitioned parents, which the meta group
// holds. A quota's nodes (/zookeeper/quota/P and below) go with the P
// they count, so that the shard that holds P's nodes counts and limits
// them; a partitioned parent's quota directory (/zookeeper/quota/locks)
// is the meta group's, as the parent is. (A string that is not absolute
// routes to the meta group too, which refuses it as it refuses any bad
// path.)
func (m *Map) KeyOf(path string) (k Key, meta bool) {
	if rest, ok := strings.CutPrefix(path, wire.QuotaPath+"/"); ok {
		if counted, _, ok := quotas.Split(path); ok {
			rest = counted[1:]
		}
		return m.KeyOf("/" + rest)
	}
	if !strings.HasPrefix(path, "/") || path == "/" || path == wire.ZooKeeperPath || strings.HasPrefix(path, wire.ZooKeeperPath+"/") {
		return Key{}, true
	}
	for _, p := range m.Partitioned {
		if path == p {
			return Key{}, true
		}
		if rest, ok := strings.CutPrefix(path, p+"/"); ok {
			child, _, _ := strings.Cut(rest, "/")
			return Key{Space: p, Key: HashKey(Hash(child))}, false
		}
	}
	first, _, _ := strings.Cut(path[1:], "/")
	return Key{Key: first}, false
}

// Shard is the shard that serves path: the meta group for the paths of no
// shard. Every path has one in a valid map.
func (m *Map) Shard(path string) *Shard {
	k, meta := m.KeyOf(path)
	if meta {
		return m.Group(MetaGroup)
	}
	for i := range m.Shards {
		if m.Shards[i].Holds(k) {
			return &m.Shards[i]
		}
	}
	return nil
}

// Serves reports whether shard group serves path in m: the meta group the
// paths of no shard, and every shard the keys of its ranges. A sequential
// create's path (its prefix) directly under a partitioned parent (or its
// quota directory) is served by none: the name it gets, and so its hash,
// is not known before the create.
func (m *Map) Serves(group uint64, path string, sequential bool) bool {
	k, meta := m.KeyOf(path)
	if meta {
		return group == MetaGroup
	}
	if parent := path[:strings.LastIndexByte(path, '/')]; sequential && k.Space != "" && (parent == k.Space || parent == wire.QuotaPath+k.Space) {
		return false
	}
	if s := m.Group(group); s != nil && s.Holds(k) {
		return s.SplitFrom == 0
	}
	for i := range m.Shards { // a shard being split off group: group's still
		if s := &m.Shards[i]; s.SplitFrom != 0 && s.SplitFrom == group && s.Holds(k) {
			return true
		}
	}
	return false
}

// SplitGroup is the group a split at key k splits: the shard whose ranges
// hold k, or, for an empty key (the middle of a partitioned parent's
// hashes), the meta group.
func (m *Map) SplitGroup(k Key) uint64 {
	if k.Key != "" {
		for _, s := range m.Shards {
			if s.Holds(k) {
				return s.Group
			}
		}
	}
	return MetaGroup
}

// Route is the group of the shard every one of paths is in (at least
// one), or ErrCrossShard.
func (m *Map) Route(paths ...string) (uint64, error) {
	var group uint64
	for i, p := range paths {
		s := m.Shard(p)
		if s == nil {
			return 0, fmt.Errorf("shardmap: no shard serves %s", p) // an invalid map
		}
		if i > 0 && s.Server() != group {
			return 0, ErrCrossShard
		}
		group = s.Server()
	}
	return group, nil
}

// ByShard groups the indexes of paths by the group of the shard that
// serves each (the meta group for a path no shard serves), in the order
// of the groups, each group's indexes in order: the txns, one a shard, of
// what touches paths in several shards. A nil map (a cluster of one
// shard) has them all in one.
func (m *Map) ByShard(paths []string) [][]int {
	byGroup := map[uint64][]int{}
	for i, p := range paths {
		var s *Shard
		if m != nil {
			s = m.Shard(p)
		}
		g := MetaGroup
		if s != nil {
			g = s.Server()
		}
		byGroup[g] = append(byGroup[g], i)
	}
	var out [][]int
	for _, g := range slices.Sorted(maps.Keys(byGroup)) {
		out = append(out, byGroup[g])
	}
	return out
}

// Group is the shard of group g, nil if there is none.
func (m *Map) Group(g uint64) *Shard {
	i, ok := slices.BinarySearchFunc(m.Shards, g, func(s Shard, g uint64) int { return cmp.Compare(s.Group, g) })
	if !ok {
		return nil
	}
	return &m.Shards[i]
}

// IsPartitioned reports whether path is a partitioned parent.
func (m *Map) IsPartitioned(path string) bool {
	_, ok := slices.BinarySearch(m.Partitioned, path)
	return ok
}

// IsPartitionedQuota reports whether path is the quota directory of a
// partitioned parent (/zookeeper/quota/locks for /locks), whose children,
// the quotas of the parent's children, are spread over the shards as
// those are.
func (m *Map) IsPartitionedQuota(path string) bool {
	p, ok := strings.CutPrefix(path, wire.QuotaPath)
	return ok && strings.HasPrefix(p, "/") && m.IsPartitioned(p)
}

// Spreads reports whether the subtree of path may have nodes in several
// shards: it is a partitioned parent whose children's hashes are in more
// than one shard, or holds one below it (which the meta group holds,
// whichever shard holds path).
func (m *Map) Spreads(path string) bool {
	if len(m.Shards) < 2 {
		return false
	}
	return slices.ContainsFunc(m.Partitioned, func(p string) bool {
		if p != path {
			return path == "/" || strings.HasPrefix(p, path+"/")
		}
		in := 0
		for _, s := range m.Shards {
			if slices.ContainsFunc(s.Ranges, func(r Range) bool { return r.Space == p }) {
				in++
			}
		}
		return in > 1
	})
}

// For is m as the tree of group, a shard other than the meta group, keeps
// it: group's shard as it is, and every other key in the meta group's.
// What a shard's replicas decide by their map (which writes they take,
// what a prune drops) depends on their own keys alone, and a member of a
// thousand shards would otherwise keep in its trees a thousand copies of
// a map of a thousand shards. It is m itself for the meta group, whose
// tree keeps the whole map, and for a shard being split off another.
func (m *Map) For(group uint64) *Map {
	own, meta := m.Group(group), m.Group(MetaGroup)
	if group == MetaGroup || own == nil || meta == nil || own.SplitFrom != 0 || len(m.Shards) <= 2 {
		return m
	}
	rest := *meta
	rest.Ranges, rest.SplitFrom = nil, 0
	mine := *own
	mine.Ranges = slices.Clone(own.Ranges)
	sortRanges(mine.Ranges)
	for _, space := range append([]string{""}, m.Partitioned...) {
		from, whole := "", true // the start of the next key not group's; whole: none of the space is
		for _, r := range mine.Ranges {
			if r.Space != space {
				continue
			}
			whole = false
			if r.Start != from {
				rest.Ranges = append(rest.Ranges, Range{Space: space, Start: from, End: r.Start})
			}
			from = r.End
		}
		if whole || from != "" {
			rest.Ranges = append(rest.Ranges, Range{Space: space, Start: from})
		}
	}
	return &Map{Version: m.Version, Partitioned: slices.Clone(m.Partitioned), Shards: []Shard{rest, mine}}
}

// CheckSequential refuses (BadArguments) a sequential create of path
// directly under a partitioned parent or its quota directory: the name it
// gets, and so its shard, is known only once it is made.
func (m *Map) CheckSequential(path string) error {
	if parent := path[:max(0, strings.LastIndexByte(path, '/'))]; m.IsPartitioned(parent) || m.IsPartitionedQuota(parent) {
		return wire.Errorf(wire.CodeBadArguments, "%s is partitioned: the name of a sequential node, and so its shard, is known only once it is made; make the sequential nodes one level down", parent)
	}
	return nil
}

// Clone is a deep copy of m.
func (m *Map) Clone() *Map {
	c := &Map{Version: m.Version, Partitioned: slices.Clone(m.Partitioned), Shards: slices.Clone(m.Shards)}
	for i := range c.Shards {
		c.Shards[i].Ranges = slices.Clone(c.Shards[i].Ranges)
		c.Shards[i].Replicas = slices.Clone(c.Shards[i].Replicas)
	}
	return c
}

// Lead is m with member the preferred leader of shard group: the member
// its leadership goes to while it can (0: back to where the cluster
// spreads leaderships). Whether member is a voter is the caller's to
// check; the map does not list the cluster's members.
func (m *Map) Lead(group, member uint64) (*Map, error) {
	if m.Group(group) == nil {
		return nil, fmt.Errorf("shardmap: there is no shard %d", group)
	}
	next := m.Clone()
	next.Group(group).Leader = member
	return next, next.Validate()
}

// Partition is m with parent partitioned: its children then route by the
// hash of their names, and its whole hash space starts with the shard
// that serves parent's subtree now, so that nothing moves. parent must be
// a path the meta group serves, no system node, neither partitioned nor
// above or below a partitioned parent.
func (m *Map) Partition(parent string) (*Map, error) {
	if err := wire.ValidatePath(parent, false); err != nil {
		return nil, err
	}
	if _, meta := m.KeyOf(parent); meta && !m.IsPartitioned(parent) {
		return nil, fmt.Errorf("shardmap: %s is a system node; partition a parent of the tree's own", parent)
	}
	for _, p := range m.Partitioned {
		switch {
		case p == parent:
			return nil, fmt.Errorf("shardmap: %s is partitioned already", parent)
		case strings.HasPrefix(parent, p+"/"):
			return nil, fmt.Errorf("shardmap: %s is below %s, which is partitioned", parent, p)
		case strings.HasPrefix(p, parent+"/"):
			return nil, fmt.Errorf("shardmap: %s is above %s, which is partitioned", parent, p)
		}
	}
	owner := m.Shard(parent)
	if owner == nil {
		return nil, fmt.Errorf("shardmap: no shard serves %s", parent)
	}
	if owner.Group != MetaGroup {
		// The parent itself moves to the meta group, which holds every
		// partitioned parent: a move between groups is not one txn.
		return nil, fmt.Errorf("shardmap: %s is served by shard %d; partition a parent while the meta group serves it, before the split that moves it", parent, owner.Group)
	}
	next := m.Clone()
	next.Partitioned = append(next.Partitioned, parent)
	slices.Sort(next.Partitioned)
	s := next.Group(owner.Group)
	s.Ranges = append(s.Ranges, Range{Space: parent})
	sortRanges(s.Ranges)
	s.Epoch.Range++
	return next, next.Validate()
}

// Split is m with the range of shard group that holds at cut in two: the
// keys from at on go to a new shard, group next, with the same replicas
// and preferred leader. Both shards' range epochs move past the old one,
// so that a request routed by the old map is routed again.
func (m *Map) Split(group uint64, at Key, next uint64) (*Map, error) {
	if m.Group(next) != nil || next == MetaGroup {
		return nil, fmt.Errorf("shardmap: group %d exists", next)
	}
	if next > MaxGroup {
		return nil, fmt.Errorf("shardmap: group %d is past the last a cluster may have, %d", next, MaxGroup)
	}
	s := m.Group(group)
	if s == nil {
		return nil, fmt.Errorf("shardmap: no shard of group %d", group)
	}
	i := slices.IndexFunc(s.Ranges, func(r Range) bool { return r.Contains(at) })
	if i < 0 {
		return nil, fmt.Errorf("shardmap: shard %d does not hold %s", group, at)
	}
	if at.Key == s.Ranges[i].Start || at.Space != "" && at.Key == zeroHash {
		return nil, fmt.Errorf("shardmap: %s starts a range of shard %d already; split inside it", at, group)
	}
	n := m.Clone()
	s = n.Group(group)
	moved := Range{Space: at.Space, Start: at.Key, End: s.Ranges[i].End}
	s.Ranges[i].End = at.Key
	s.Epoch.Range++
	n.Shards = append(n.Shards, Shard{Group: next, Ranges: []Range{moved}, Replicas: slices.Clone(s.Replicas),
		Epoch: Epoch{Range: s.Epoch.Range}, Leader: s.Leader})
	slices.SortFunc(n.Shards, func(a, b Shard) int { return cmp.Compare(a.Group, b.Group) })
	return n, n.Validate()
}

// SplitOff is Split of a shard other than the meta group, as the meta
// group's map records it first: the new shard is marked as being split
// off group (SplitFrom), which serves its keys until the split applies in
// group's own log and the new group runs; SplitDone then ends the mark.
func (m *Map) SplitOff(group uint64, at Key, next uint64) (*Map, error) {
	if group == MetaGroup {
		return nil, errors.New("shardmap: the meta group splits in one txn of its own (Split)")
	}
	if s := m.Group(group); s != nil && s.SplitFrom != 0 {
		return nil, fmt.Errorf("shardmap: shard %d is being split off shard %d still", group, s.SplitFrom)
	}
	n, err := m.Split(group, at, next)
	if err != nil {
		return nil, err
	}
	n.Group(next).SplitFrom = group
	return n, n.Validate()
}

// SplitDone is m with shard group's split done: its group serves its keys.
func (m *Map) SplitDone(group uint64) (*Map, error) {
	if s := m.Group(group); s == nil || s.SplitFrom == 0 {
		return nil, fmt.Errorf("shardmap: shard %d is not being split off", group)
	}
	n := m.Clone()
	n.Group(group).SplitFrom = 0
	return n, n.Validate()
}

// SplitSpec is a split as a shard's txn carries it: the keys of shard
// Group from At on, in the range that holds At, go to the new shard Into
// (Map.Split), whose group starts with Voters, decided by the proposer so
// that every replica seeds the new group alike.
type SplitSpec struct {
	Group  uint64   `msgpack:"group"`
	At     Key      `msgpack:"at"`
	Into   uint64   `msgpack:"into"`
	Voters []uint64 `msgpack:"voters"`
}

// Encode is sp's bytes.
func (sp SplitSpec) Encode() ([]byte, error) { return msgpack.Marshal(sp) }

// DecodeSplit reads a split that Encode wrote.
func DecodeSplit(b []byte) (SplitSpec, error) {
	var sp SplitSpec
	if err := msgpack.Unmarshal(b, &sp); err != nil {
		return SplitSpec{}, fmt.Errorf("shardmap: decode a split: %w", err)
	}
	return sp, nil
}

// SplitKey is the key a split of shard group's keys in space ("" for the
// top-level names, else a partitioned parent) starts the new shard at: at,
// a name or 8 bytes of a hash; or, for a parent's hashes with at empty,
// the middle of the first of the shard's ranges there.
func (m *Map) SplitKey(group uint64, space, at string) (Key, error) {
	s := m.Group(group)
	switch {
	case s == nil:
		return Key{}, fmt.Errorf("shardmap: no shard of group %d", group)
	case space == "" && at == "":
		return Key{}, errors.New("shardmap: a split of top-level names needs the name to split at")
	case space == "":
		return Key{Key: at}, nil
	case !m.IsPartitioned(space):
		return Key{}, fmt.Errorf("shardmap: %s is not partitioned (arbor shards partition)", space)
	case at != "" && len(at) != 8:
		return Key{}, fmt.Errorf("shardmap: a key of %s's hashes is 8 bytes, not %d", space, len(at))
	case at != "":
		return Key{Space: space, Key: at}, nil
	}
	i := slices.IndexFunc(s.Ranges, func(r Range) bool { return r.Space == space })
	if i < 0 {
		return Key{}, fmt.Errorf("shardmap: shard %d holds none of %s's hashes", group, space)
	}
	return Middle(s.Ranges[i])
}

// Middle is the key that halves r, a range of a partitioned parent's
// space, by hash: the default point of a split. Ranges of top-level
// names have no middle without the names themselves.
func Middle(r Range) (Key, error) {
	if r.Space == "" {
		return Key{}, errors.New("shardmap: a range of top-level names is split at a name")
	}
	lo, hi := uint64(0), uint64(1<<64-1)
	if r.Start != "" {
		lo = binary.BigEndian.Uint64([]byte(r.Start))
	}
	if r.End != "" {
		hi = binary.BigEndian.Uint64([]byte(r.End)) - 1
	}
	if hi-lo < 1 {
		return Key{}, errors.New("shardmap: the range holds one hash")
	}
	return Key{Space: r.Space, Key: HashKey(lo + (hi-lo)/2 + 1)}, nil
}

// Validate checks that every key of every space has exactly one shard,
// and that the meta group is one of the shards:
// the partitioned parents are valid paths, sorted, none "/" nor above or
// below another; each space's ranges tile it from "" to no end; a hashed
// space's bounds are hashes; the shards are sorted by group, each group
// once, and each shard's replicas are sorted member ids, each once.
func (m *Map) Validate() error {
	for i, p := range m.Partitioned {
		if err := wire.ValidatePath(p, false); err != nil || p == "/" {
			return fmt.Errorf("shardmap: partitioned parent %q is not a path below /", p)
		}
		if i > 0 && (p <= m.Partitioned[i-1] || strings.HasPrefix(p, m.Partitioned[i-1]+"/")) {
			return fmt.Errorf("shardmap: partitioned parents %s and %s out of order, repeated or nested", m.Partitioned[i-1], p)
		}
	}
	spaces := map[string][]Range{"": nil}
	for _, p := range m.Partitioned {
		spaces[p] = nil
	}
	for i, s := range m.Shards {
		if i > 0 && s.Group <= m.Shards[i-1].Group {
			return fmt.Errorf("shardmap: shards of groups %d and %d out of order or repeated", m.Shards[i-1].Group, s.Group)
		}
		if slices.Contains(s.Replicas, 0) || !isSortedSet(s.Replicas) {
			return fmt.Errorf("shardmap: shard %d's replicas %v are not a sorted set of member ids", s.Group, s.Replicas)
		}
		if from := m.Group(s.SplitFrom); s.SplitFrom != 0 && (from == nil || from.SplitFrom != 0 || s.SplitFrom == MetaGroup) {
			return fmt.Errorf("shardmap: shard %d is split off shard %d, which is no shard of its own", s.Group, s.SplitFrom)
		}
		for _, r := range s.Ranges {
			rs, ok := spaces[r.Space]
			if !ok {
				return fmt.Errorf("shardmap: shard %d has a range of %s, which is not partitioned", s.Group, r.Space)
			}
			if r.Space != "" && (!isHashKey(r.Start) || !isHashKey(r.End) || r.Start == zeroHash || r.End == zeroHash) {
				// (hash 0 starts the space: it is "")
				return fmt.Errorf("shardmap: shard %d's range of %s is not bounded by hashes above 0", s.Group, r.Space)
			}
			if r.End != "" && r.End <= r.Start {
				return fmt.Errorf("shardmap: shard %d has an empty range of %q", s.Group, r.Space)
			}
			spaces[r.Space] = append(rs, r)
		}
	}
	if m.Group(MetaGroup) == nil {
		return errors.New("shardmap: no meta group")
	}
	for space, rs := range spaces {
		sortRanges(rs)
		at := ""
		for i, r := range rs {
			if r.Start != at || (r.End == "" && i < len(rs)-1) {
				return fmt.Errorf("shardmap: the ranges of space %q leave a gap or overlap at %q", space, r.Start)
			}
			at = r.End
		}
		if len(rs) == 0 || at != "" {
			return fmt.Errorf("shardmap: the ranges of space %q do not reach its end", space)
		}
	}
	return nil
}

// Encode is m's bytes, as the meta group stores them and clients get them.
func (m *Map) Encode() ([]byte, error) {
	return msgpack.Marshal(m)
}

// Decode reads a map that Encode wrote, and validates it.
func Decode(b []byte) (*Map, error) {
	var m Map
	if err := msgpack.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("shardmap: decode: %w", err)
	}
	for i := range m.Shards {
		sortRanges(m.Shards[i].Ranges)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (k Key) String() string {
	if k.Space == "" {
		return fmt.Sprintf("name %q", k.Key)
	}
	if isHashKey(k.Key) && k.Key != "" {
		return fmt.Sprintf("%s hash %#016x", k.Space, binary.BigEndian.Uint64([]byte(k.Key)))
	}
	return fmt.Sprintf("%s key %q", k.Space, k.Key)
}

func sortRanges(rs []Range) {
	slices.SortFunc(rs, func(a, b Range) int {
		return cmp.Or(strings.Compare(a.Space, b.Space), strings.Compare(a.Start, b.Start))
	})
}

var zeroHash = HashKey(0)

func isHashKey(k string) bool { return k == "" || len(k) == 8 }

func isSortedSet(ids []uint64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}
