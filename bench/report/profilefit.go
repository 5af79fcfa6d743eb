package report

import (
	"math"
	"slices"
	"time"
)

// ProfileFit is how a live run's batches kept to the latency profile the
// scheduler plans with: for each batch, its real run time (finish minus
// start, on the backend) over the profile's ℓ(b) for its size. Symphony's
// grants are only as good as ℓ(b): a backend that runs slower than its
// profile finishes batches late, and the scheduler's deadlines with them,
// so a live run's bad rate means little without this figure beside it.
//
// It keeps every ratio (a float per batch, batches being tens of requests),
// so that its quantiles are exact. The zero ProfileFit is empty and ready.
type ProfileFit struct {
	ratios []float64
	sorted bool
}

// Add counts one batch of size b that ran for real, against the profile
// latency, where latency[b-1] is ℓ(b) (wire.ModelSpec.Latency's layout).
// A batch the profile does not cover (b past its largest batch, or a
// non-positive ℓ(b)) is not counted: there is nothing to compare it with.
func (p *ProfileFit) Add(b int, real time.Duration, latency []time.Duration) {
	if b < 1 || b > len(latency) || latency[b-1] <= 0 {
		return
	}
	p.ratios = append(p.ratios, float64(real)/float64(latency[b-1]))
	p.sorted = false
}

// Merge adds o's batches to p.
func (p *ProfileFit) Merge(o *ProfileFit) {
	if len(o.ratios) == 0 {
		return
	}
	p.ratios = append(p.ratios, o.ratios...)
	p.sorted = false
}

// Batches is the number of batches counted.
func (p *ProfileFit) Batches() int { return len(p.ratios) }

// Quantile is the q-quantile of real/ℓ(b) over the batches counted, by
// nearest rank (the smallest ratio with at least q of the batches at or
// below it), or 0 when none was counted.
func (p *ProfileFit) Quantile(q float64) float64 {
	n := len(p.ratios)
	if n == 0 {
		return 0
	}
	if !p.sorted {
		slices.Sort(p.ratios)
		p.sorted = true
	}
	i := int(math.Ceil(q*float64(n))) - 1
	return p.ratios[min(max(i, 0), n-1)]
}
