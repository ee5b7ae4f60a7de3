package wire

// A position is a zxid that names its shard: the group of the shard's raft
// group in bits 48 to 62, the zxid below. On a sharded cluster each shard
// numbers its zxids on its own (docs/scale-out.md, "Zxids across shards"),
// so that a zxid alone does not say what a client saw of which shard; a
// position does. The meta group is group 0, so that on a cluster of one
// shard a position is the zxid.

// PositionShift is where a position's group starts.
const PositionShift = 48

// MaxPositionGroup is the largest group a position can name.
const MaxPositionGroup uint64 = 1<<(63-PositionShift) - 1

// Position is the position of zxid in the shard of group.
func Position(group uint64, zxid int64) int64 { return int64(group)<<PositionShift | zxid }

// PositionOf is the group and zxid of position p.
func PositionOf(p int64) (group uint64, zxid int64) {
	return uint64(p) >> PositionShift, p & (1<<PositionShift - 1)
}
