package report

import (
	"math/bits"
	"time"
)

const subBucketBits = 7 // 128 sub-buckets per power of two: <0.8% relative error

// Histogram counts durations in log-linear buckets, like HdrHistogram with
// two significant digits: constant memory whatever the number of samples,
// deterministic, and mergeable. Values below zero count as zero.
type Histogram struct {
	counts []uint64
	total  uint64
	max    time.Duration
}

func bucketOf(v uint64) int {
	if v < 1<<subBucketBits {
		return int(v)
	}
	shift := bits.Len64(v) - subBucketBits - 1
	return (shift+1)<<subBucketBits + int(v>>uint(shift)) - 1<<subBucketBits
}

// bucketMid is a representative value of bucket i: its midpoint.
func bucketMid(i int) uint64 {
	if i < 1<<subBucketBits {
		return uint64(i)
	}
	shift := i>>subBucketBits - 1
	base := uint64(i&(1<<subBucketBits-1)+1<<subBucketBits) << uint(shift)
	return base + (uint64(1)<<uint(shift))/2
}

// Record adds one sample.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	b := bucketOf(uint64(d))
	if b >= len(h.counts) {
		n := b + 1 + 64
		nc := make([]uint64, n)
		copy(nc, h.counts)
		h.counts = nc
	}
	h.counts[b]++
	h.total++
	if d > h.max {
		h.max = d
	}
}

// Merge adds every sample of o.
func (h *Histogram) Merge(o *Histogram) {
	if len(o.counts) > len(h.counts) {
		nc := make([]uint64, len(o.counts))
		copy(nc, h.counts)
		h.counts = nc
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest sample.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the q-quantile (0 <= q <= 1), or 0 with no samples.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank > h.total {
		rank = h.total
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := time.Duration(bucketMid(i))
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}

// CDFPoint is one step of a cumulative distribution.
type CDFPoint struct {
	Value    time.Duration
	Fraction float64
}

// CDF returns the cumulative distribution at every non-empty bucket.
func (h *Histogram) CDF() []CDFPoint {
	var pts []CDFPoint
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		v := time.Duration(bucketMid(i))
		if v > h.max {
			v = h.max
		}
		pts = append(pts, CDFPoint{Value: v, Fraction: float64(seen) / float64(h.total)})
	}
	return pts
}
