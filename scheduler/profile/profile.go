// Package profile holds model latency profiles: how long a GPU takes to run a
// batch of b requests, ℓ(b). Profiles are either the paper's linear fit
// ℓ(b) = αb + β (§3.1) or a measured table, and both are stored as a table so
// that the scheduler's hot path is a slice index.
package profile

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultMaxBatch is the largest batch a linear profile allows unless told
// otherwise. Larger batches rarely fit a latency SLO and cost table memory.
const DefaultMaxBatch = 512

// Profile is the batch latency of one model on one kind of GPU. The zero
// value is not usable; build one with Linear or Table.
type Profile struct {
	// latency[b-1] is ℓ(b).
	latency []time.Duration
	alpha   time.Duration
	beta    time.Duration
}

// Linear builds ℓ(b) = alpha*b + beta for b in 1..maxBatch. A maxBatch of 0
// means DefaultMaxBatch.
func Linear(alpha, beta time.Duration, maxBatch int) (Profile, error) {
	if maxBatch == 0 {
		maxBatch = DefaultMaxBatch
	}
	switch {
	case alpha < 0:
		return Profile{}, fmt.Errorf("profile: alpha %v is negative", alpha)
	case beta < 0:
		return Profile{}, fmt.Errorf("profile: beta %v is negative", beta)
	case alpha == 0 && beta == 0:
		return Profile{}, errors.New("profile: alpha and beta are both zero")
	case maxBatch < 1 || maxBatch > 1<<16:
		return Profile{}, fmt.Errorf("profile: max batch %d is outside 1..65536", maxBatch)
	}
	lat := make([]time.Duration, maxBatch)
	for b := range lat {
		lat[b] = alpha*time.Duration(b+1) + beta
	}
	return Profile{latency: lat, alpha: alpha, beta: beta}, nil
}

// MustLinear is Linear for constants known to be valid, such as the bundled
// zoos; it panics on invalid input.
func MustLinear(alpha, beta time.Duration, maxBatch int) Profile {
	p, err := Linear(alpha, beta, maxBatch)
	if err != nil {
		panic(err)
	}
	return p
}

// Table builds a profile from measured latencies: latencies[b-1] is ℓ(b).
// Latencies must be positive and must not decrease with the batch size,
// because the scheduler relies on ℓ being monotone. α and β are fitted by
// least squares, for reports and for the βλ rule.
func Table(latencies []time.Duration) (Profile, error) {
	if len(latencies) == 0 {
		return Profile{}, errors.New("profile: empty latency table")
	}
	if len(latencies) > 1<<16 {
		return Profile{}, fmt.Errorf("profile: latency table has %d entries, more than 65536", len(latencies))
	}
	for i, l := range latencies {
		if l <= 0 {
			return Profile{}, fmt.Errorf("profile: latency of batch %d is %v, not positive", i+1, l)
		}
		if i > 0 && l < latencies[i-1] {
			return Profile{}, fmt.Errorf("profile: latency of batch %d (%v) is below that of batch %d (%v)", i+1, l, i, latencies[i-1])
		}
	}
	lat := append([]time.Duration(nil), latencies...)
	alpha, beta := fit(lat)
	return Profile{latency: lat, alpha: alpha, beta: beta}, nil
}

// fit returns the least-squares α and β of ℓ(b) = αb + β over the table.
func fit(lat []time.Duration) (alpha, beta time.Duration) {
	if len(lat) == 1 {
		return 0, lat[0]
	}
	n := float64(len(lat))
	var sx, sy, sxx, sxy float64
	for i, l := range lat {
		x, y := float64(i+1), float64(l)
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	a := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	b := (sy - a*sx) / n
	return time.Duration(math.Round(a)), time.Duration(math.Round(b))
}

// Latency returns ℓ(b). Beyond MaxBatch it returns an effectively infinite
// duration, so that "one more request would still fit" is always false for a
// full batch. b must be at least 1.
func (p Profile) Latency(b int) time.Duration {
	if b > len(p.latency) {
		return time.Duration(math.MaxInt64 / 4)
	}
	return p.latency[b-1]
}

// MaxBatch is the largest batch size the profile covers.
func (p Profile) MaxBatch() int { return len(p.latency) }

// Alpha is the per-request cost α (fitted for a table profile).
func (p Profile) Alpha() time.Duration { return p.alpha }

// Beta is the fixed per-batch cost β (fitted for a table profile).
func (p Profile) Beta() time.Duration { return p.beta }

// Valid reports whether the profile was built by Linear or Table.
func (p Profile) Valid() bool { return len(p.latency) > 0 }

// Throughput is the requests per second one GPU sustains at batch size b.
func (p Profile) Throughput(b int) float64 {
	return float64(b) / p.Latency(b).Seconds()
}

// LargestBatchWithin returns the largest b with ℓ(b) <= budget, or 0 if not
// even a batch of one fits.
func (p Profile) LargestBatchWithin(budget time.Duration) int {
	lo, hi := 0, len(p.latency) // invariant: ℓ(lo) fits (or lo == 0), ℓ(hi+1) does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if p.latency[mid-1] <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
