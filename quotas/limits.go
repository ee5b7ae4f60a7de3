package quotas

import "fmt"

// Limit names one of a quota's four limits. Soft ones are reported when
// a write passes them; hard ones refuse the write that would.
type Limit int

// The limits, in zkCli's order (its flags -n, -b, -N, -B).
const (
	Count     Limit = iota // soft: nodes in the subtree, its root included
	Bytes                  // soft: bytes of data in the subtree
	CountHard              // hard: nodes
	BytesHard              // hard: bytes
)

// AllLimits lists the limits, in order.
var AllLimits = [...]Limit{Count, Bytes, CountHard, BytesHard}

// limitKeys are the StatsTrack keys of the limits, by Limit.
var limitKeys = [...]string{countKey, bytesKey, countHardLimitKey, byteHardLimitKey}

// Valid reports whether l is one of the four limits.
func (l Limit) Valid() bool { return l >= Count && l <= BytesHard }

// String is l's StatsTrack key: count, bytes, countHardLimit or
// byteHardLimit.
func (l Limit) String() string {
	if !l.Valid() {
		return fmt.Sprintf("Limit(%d)", int(l))
	}
	return limitKeys[l]
}

// Hard reports whether l is a hard limit.
func (l Limit) Hard() bool { return l == CountHard || l == BytesHard }

// OnBytes reports whether l limits the bytes of data, not the nodes.
func (l Limit) OnBytes() bool { return l == Bytes || l == BytesHard }

// Limits are a quota's four limits, by Limit; -1 is none.
type Limits [len(AllLimits)]int64

// NoLimits is every limit -1: zkCli's new quota.
var NoLimits = Limits{-1, -1, -1, -1}

// Over lists the limits that a subtree of count nodes and bytes bytes
// of data is over.
func (ls Limits) Over(count, bytes int64) []Limit {
	var out []Limit
	for _, l := range AllLimits {
		use := count
		if l.OnBytes() {
			use = bytes
		}
		if ls[l] >= 0 && use > ls[l] {
			out = append(out, l)
		}
	}
	return out
}

// Limit is limit l of st, -1 if it is not set.
func (st StatsTrack) Limit(l Limit) int64 { return st.get(l.String()) }

// SetLimit sets limit l of st to v (-1: none).
func (st *StatsTrack) SetLimit(l Limit, v int64) { st.set(l.String(), v) }

// Limits are st's four limits.
func (st StatsTrack) Limits() Limits {
	var ls Limits
	for _, l := range AllLimits {
		ls[l] = st.Limit(l)
	}
	return ls
}

// SetLimits sets st's four limits to ls, the other keys it has kept.
func (st *StatsTrack) SetLimits(ls Limits) {
	for _, l := range AllLimits {
		st.SetLimit(l, ls[l])
	}
}
