package cloudscale

import (
	"math"
	"time"
)

// Admission splits arrivals between the GPUs and the burst pool: a token
// bucket that refills at the rate the serving GPUs take (a Decision's
// SpillAbove) and holds Depth of it, so that a burst shorter than the
// scheduler's slack still goes to the GPUs, and only a rate above the
// capacity spills. It is deterministic: the same arrivals and rates spill
// the same requests.
type Admission struct {
	// Depth is the bucket's size in time at the refill rate.
	Depth  time.Duration
	rate   float64
	tokens float64
	last   time.Duration
}

// SetRate changes the refill rate from now on (+Inf admits everything).
// A bucket that admitted everything starts full: spill-over turned on
// lets a burst within the depth through, as it would have before.
func (a *Admission) SetRate(now time.Duration, rate float64) {
	a.refill(now)
	if math.IsInf(a.rate, 1) && !math.IsInf(rate, 1) {
		a.tokens = rate*a.Depth.Seconds() + 1
	}
	a.rate = rate
}

func (a *Admission) refill(now time.Duration) {
	if now > a.last {
		if !math.IsInf(a.rate, 1) {
			a.tokens = min(a.tokens+a.rate*(now-a.last).Seconds(), a.rate*a.Depth.Seconds()+1)
		}
		a.last = now
	}
}

// Admit reports whether an arrival at now goes to the GPUs; false spills
// it. Calls come in time order.
func (a *Admission) Admit(now time.Duration) bool {
	if math.IsInf(a.rate, 1) {
		return true
	}
	a.refill(now)
	if a.tokens >= 1 {
		a.tokens--
		return true
	}
	return false
}
