package backend

import (
	"sync/atomic"
	"time"
)

// LagHistogram counts how late a backend's batches start against their
// plans' ExecAt, the lateness the scheduler corrects for (a GPU that runs
// behind its plans is what makes a live cluster collapse under load if
// nothing corrects it). It is lock-free: the GPU workers record, metrics
// and reports read a Snapshot at any time.
type LagHistogram struct {
	// counts[i] holds lags under LagBound(i); the last bucket the rest.
	counts [LagBuckets]atomic.Uint64
	sum    atomic.Int64 // nanoseconds
}

// LagBuckets is the number of buckets: bounds double from 1µs, so the
// last bounded one ends past a second.
const LagBuckets = 22

// LagBound is the upper bound of bucket i (the last has none).
func LagBound(i int) time.Duration { return time.Microsecond << i }

// Record counts one batch that started d behind its plan (0 if on time).
func (h *LagHistogram) Record(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < LagBuckets-1 && d >= LagBound(i) {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// LagSnapshot is a LagHistogram read at one moment.
type LagSnapshot struct {
	Counts [LagBuckets]uint64
	Sum    time.Duration
}

// Snapshot reads the histogram.
func (h *LagHistogram) Snapshot() LagSnapshot {
	var s LagSnapshot
	for i := range s.Counts {
		s.Counts[i] = h.counts[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	return s
}

// Merge adds o's counts to s: the lag of several backends together.
func (s *LagSnapshot) Merge(o LagSnapshot) {
	for i := range s.Counts {
		s.Counts[i] += o.Counts[i]
	}
	s.Sum += o.Sum
}

// Total is the number of batches counted.
func (s LagSnapshot) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Quantile is an upper bound of the q-quantile lag: the bound of the
// bucket it falls in (a bucket's width is its lower bound), or 0 if no
// batch was counted.
func (s LagSnapshot) Quantile(q float64) time.Duration {
	total := s.Total()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i, c := range s.Counts {
		seen += c
		if seen > rank {
			return LagBound(i)
		}
	}
	return LagBound(LagBuckets - 1)
}
