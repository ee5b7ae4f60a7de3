package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsCoverEveryValueOnceInOrder(t *testing.T) {
	next := int64(0)
	for i := range numBuckets {
		lo, hi := bucketRange(i)
		if lo != next || hi < lo {
			t.Fatalf("bucket %d is [%d, %d], want it to start at %d", i, lo, hi, next)
		}
		for _, v := range []int64{lo, hi, lo + (hi-lo)/2} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		if lo >= 2*subBuckets && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its values", i, lo, hi, subBuckets)
		}
		next = hi + 1
	}
	if next != 1<<maxBits {
		t.Fatalf("the buckets end at %d, want %d", next, int64(1)<<maxBits)
	}
}

func TestQuantilesAreWithinABucketOfTheExactOnes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 10, 999, 100_000} {
		var h histogram
		vals := make([]int64, n)
		for i := range vals {
			// log-uniform from 1 µs to about 100 ms, like latencies
			vals[i] = int64(1000 * math.Exp2(r.Float64()*17))
			h.record(time.Duration(vals[i]))
		}
		slices.Sort(vals)
		prev := time.Duration(0)
		for _, q := range []float64{0.001, 0.5, 0.9, 0.99, 0.999, 1} {
			exact := vals[max(int(float64(n)*q+0.999999)-1, 0)]
			got := h.quantile(q)
			if got < time.Duration(exact) || float64(got-time.Duration(exact)) > float64(exact)/subBuckets {
				t.Errorf("n=%d: quantile(%v) = %d, exact %d", n, q, got, exact)
			}
			if got < prev {
				t.Errorf("n=%d: quantile(%v) = %v < the one before, %v", n, q, got, prev)
			}
			prev = got
		}
		if h.quantile(1) != time.Duration(vals[n-1]) || h.min != vals[0] {
			t.Errorf("n=%d: max %v min %v, want %v and %v", n, h.quantile(1), h.min, vals[n-1], vals[0])
		}
	}
}

func TestMergeIsTheSameAsRecordingIntoOne(t *testing.T) {
	var a, b, all histogram
	for i := range 1000 {
		d := time.Duration(i*i) * time.Microsecond
		all.record(d)
		if i%3 == 0 {
			a.record(d)
		} else {
			b.record(d)
		}
	}
	var m histogram
	m.merge(&a)
	m.merge(&b)
	m.merge(nil)
	if m != all {
		t.Fatalf("merged: n %d min %d max %d sum %d; recorded: n %d min %d max %d sum %d",
			m.n, m.min, m.max, m.sum, all.n, all.min, all.max, all.sum)
	}
}

func TestEmptyAndOutOfRangeValues(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.mean() != 0 {
		t.Fatal("an empty histogram has non-zero quantiles")
	}
	h.record(-time.Second)
	h.record(time.Hour)
	if h.min != 0 || h.max != 1<<maxBits-1 {
		t.Fatalf("min %d max %d, want 0 and 2^%d-1", h.min, h.max, maxBits)
	}
}
