package scheduler

import "time"

const rateBuckets = 10

// rateEstimator counts arrivals in a sliding window of rateBuckets buckets.
// It is allocation-free and reads no clock: callers pass the time.
type rateEstimator struct {
	bucketWidth time.Duration
	counts      [rateBuckets]uint64
	// bucketStart is the start of the newest bucket, counts[cur].
	bucketStart Time
	cur         int
	sum         uint64 // sum of counts
	first       Time   // first arrival seen, Past if none
}

func newRateEstimator(window time.Duration) rateEstimator {
	if window <= 0 {
		window = DefaultRateWindow
	}
	w := window / rateBuckets
	if w <= 0 {
		w = 1
	}
	return rateEstimator{bucketWidth: w, first: Past, bucketStart: Past}
}

// advance rotates buckets so that the newest one covers now.
func (r *rateEstimator) advance(now Time) {
	if r.bucketStart == Past {
		r.bucketStart = now
		r.first = now
		return
	}
	steps := int64(now.Sub(r.bucketStart) / r.bucketWidth)
	if steps <= 0 {
		return
	}
	if steps >= rateBuckets {
		r.counts = [rateBuckets]uint64{}
		r.sum = 0
		r.bucketStart = r.bucketStart.Add(time.Duration(steps) * r.bucketWidth)
		return
	}
	for ; steps > 0; steps-- {
		r.cur = (r.cur + 1) % rateBuckets
		r.sum -= r.counts[r.cur]
		r.counts[r.cur] = 0
		r.bucketStart = r.bucketStart.Add(r.bucketWidth)
	}
}

// observe records n arrivals at now.
func (r *rateEstimator) observe(now Time, n int) {
	r.advance(now)
	r.counts[r.cur] += uint64(n)
	r.sum += uint64(n)
}

// perSecond is the estimated arrival rate at now: arrivals in the window
// divided by the time the window covers (less while it is still filling).
func (r *rateEstimator) perSecond(now Time) float64 {
	if r.bucketStart == Past {
		return 0
	}
	r.advance(now)
	covered := time.Duration(rateBuckets-1)*r.bucketWidth + now.Sub(r.bucketStart)
	if since := now.Sub(r.first); since < covered {
		covered = since
	}
	if covered < r.bucketWidth {
		covered = r.bucketWidth
	}
	return float64(r.sum) / covered.Seconds()
}
