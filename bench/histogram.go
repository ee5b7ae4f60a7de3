package bench

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts durations in log-linear buckets, as HdrHistogram does:
// below 256 ns every nanosecond has its own bucket, and above that each
// power of two is split into 128 equal buckets, so a recorded value is
// known to within 1/128 (0.8%) of itself. Its size is fixed (34 KiB),
// whatever the number of values. A histogram belongs to one goroutine.
type histogram struct {
	counts        [numBuckets]uint64
	n             uint64
	min, max, sum int64 // ns; min and max are exact
}

const (
	subBits    = 7
	subBuckets = 1 << subBits // per power of two
	maxBits    = 40           // values up to 2^40 ns (18 minutes); longer ones count as that
	numBuckets = (maxBits-subBits)*subBuckets + subBuckets
)

// bucketOf returns the bucket of v ns (0 <= v < 2^maxBits).
func bucketOf(v int64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	return shift*subBuckets + int(v>>shift)
}

// bucketRange returns the lowest and highest values of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 2*subBuckets {
		return int64(i), int64(i)
	}
	shift := i/subBuckets - 1
	lo = int64(i-shift*subBuckets) << shift
	return lo, lo + 1<<shift - 1
}

// record counts one duration; a negative one counts as 0.
func (h *histogram) record(d time.Duration) {
	v := min(max(int64(d), 0), 1<<maxBits-1)
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// merge adds the counts of o.
func (h *histogram) merge(o *histogram) {
	if o == nil || o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the smallest recorded value that at least q (0 < q <= 1)
// of the values are at or below, as the highest value of its bucket (never
// more than the largest value recorded): so quantiles never decrease as q
// grows. It is 0 when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(max(hi, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// mean returns the mean of the recorded values.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / int64(h.n))
}
