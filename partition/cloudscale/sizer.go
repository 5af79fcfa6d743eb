package cloudscale

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/symphony-serving/symphony/partition"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// Sizer turns a total request rate into GPUs and back, for one mix of
// models: the policies forecast and measure one total rate, and plan GPUs.
type Sizer interface {
	// Need is the GPUs (a fraction) that rate keeps busy within the SLOs.
	Need(rate float64) float64
	// Capacity is the largest total rate that gpus serve within the SLOs:
	// the inverse of Need.
	Capacity(gpus float64) float64
}

// MixSizer sizes a fixed mix of models with partition.SizePart (Eqs. 2-3:
// each model runs the largest batch b with b/λ + ℓ(b) within its SLO and
// keeps λ·ℓ(b)/b GPUs busy): a total rate R gives each model its share of
// R. It is what the epoch job sizes a part by, so the cloud policies and the
// scheduler agree on what a GPU serves.
type MixSizer struct {
	models []serving.Demand // Rate is the model's share of the total
	delays scheduler.Delays
	// capCache holds Capacity of whole GPU counts, by count.
	capCache map[int]float64
}

// NewMixSizer builds a sizer for models whose rates give the mix (only
// their ratios count) under the network delays.
func NewMixSizer(models []serving.Demand, delays scheduler.Delays) (*MixSizer, error) {
	total := 0.0
	for _, m := range models {
		if m.Rate < 0 || math.IsNaN(m.Rate) || math.IsInf(m.Rate, 0) {
			return nil, fmt.Errorf("cloudscale: model %q: rate %v is not a non-negative number", m.Name, m.Rate)
		}
		total += m.Rate
	}
	if !(total > 0) {
		return nil, errors.New("cloudscale: the mix has no rate: give each model a rate (only the ratios count)")
	}
	s := &MixSizer{delays: delays, capCache: map[int]float64{}}
	for _, m := range models {
		m.Rate /= total
		s.models = append(s.models, m)
	}
	// One sizing up front reports a model that no GPU count can serve.
	if _, err := partition.SizePart(s.scaled(1), delays, 0); err != nil {
		return nil, fmt.Errorf("cloudscale: %w", err)
	}
	return s, nil
}

func (s *MixSizer) scaled(rate float64) []serving.Demand {
	out := make([]serving.Demand, len(s.models))
	for i, m := range s.models {
		m.Rate *= rate
		out[i] = m
	}
	return out
}

// Need implements Sizer.
func (s *MixSizer) Need(rate float64) float64 {
	if !(rate > 0) {
		return 0
	}
	ps, err := partition.SizePart(s.scaled(rate), s.delays, 0)
	if err != nil { // checked in NewMixSizer; a rate cannot make it fail
		return math.Inf(1)
	}
	return ps.Need
}

// Capacity implements Sizer, by bisection on Need (which grows with the
// rate). Whole GPU counts are cached: the policies ask about them often.
func (s *MixSizer) Capacity(gpus float64) float64 {
	if !(gpus > 0) {
		return 0
	}
	whole := gpus == math.Trunc(gpus) && gpus < 1<<20
	if whole {
		if c, ok := s.capCache[int(gpus)]; ok {
			return c
		}
	}
	lo, hi := 0.0, 1.0
	for s.Need(hi) <= gpus && hi < 1e12 {
		lo, hi = hi, hi*2
	}
	for range 60 {
		mid := (lo + hi) / 2
		if s.Need(mid) <= gpus {
			lo = mid
		} else {
			hi = mid
		}
	}
	if whole {
		s.capCache[int(gpus)] = lo
	}
	return lo
}

// MeasuredSizer sizes a mix by capacities measured on whole GPU counts, as
// MArk profiles each instance type's throughput within the SLO offline
// (§4.1) instead of trusting a model of it. MixSizer's Eqs. 2-3 assume
// each model keeps its own GPUs busy at its best batch; with a few GPUs
// shared by several models the scheduler serves less than that (the mix of
// the cloud experiment: 3 GPUs serve 191 req/s within a 1% bad rate where
// Eqs. 2-3 promise 291), and a policy planning on the promise runs short
// exactly when it has no headroom.
//
// Between whole counts the capacity is interpolated linearly; beyond the
// last it grows by the last count's capacity per GPU.
type MeasuredSizer struct {
	// capacity[g-1] is what g GPUs serve, non-decreasing in g.
	capacity []float64
}

// NewMeasuredSizer builds a sizer from capacity[g-1], the largest total
// rate g GPUs serve within the SLOs. The capacities must be non-negative,
// non-decreasing numbers, the last one positive.
func NewMeasuredSizer(capacity []float64) (*MeasuredSizer, error) {
	if len(capacity) == 0 {
		return nil, errors.New("cloudscale: a measured sizer needs the capacity of at least one GPU count")
	}
	for g, c := range capacity {
		switch {
		case !(c >= 0) || math.IsInf(c, 0):
			return nil, fmt.Errorf("cloudscale: measured capacity of %d GPUs is %v, not a non-negative number", g+1, c)
		case g > 0 && c < capacity[g-1]:
			return nil, fmt.Errorf("cloudscale: measured capacity of %d GPUs (%v) is below that of %d (%v): more GPUs never serve less", g+1, c, g, capacity[g-1])
		}
	}
	if !(capacity[len(capacity)-1] > 0) {
		return nil, errors.New("cloudscale: the measured capacities are all 0: no GPU count serves the mix")
	}
	return &MeasuredSizer{capacity: slices.Clone(capacity)}, nil
}

// Capacities are the measured capacities, by GPU count less one.
func (s *MeasuredSizer) Capacities() []float64 { return slices.Clone(s.capacity) }

// Capacity implements Sizer.
func (s *MeasuredSizer) Capacity(gpus float64) float64 {
	if !(gpus > 0) {
		return 0
	}
	n := len(s.capacity)
	at := func(g int) float64 { // whole g in 0..n
		if g == 0 {
			return 0
		}
		return s.capacity[g-1]
	}
	if gpus >= float64(n) {
		return s.capacity[n-1] * gpus / float64(n)
	}
	g := int(gpus)
	return at(g) + (gpus-float64(g))*(at(g+1)-at(g))
}

// Need implements Sizer: the fewest GPUs, a fraction, whose interpolated
// capacity reaches rate.
func (s *MeasuredSizer) Need(rate float64) float64 {
	if !(rate > 0) {
		return 0
	}
	n := len(s.capacity)
	if last := s.capacity[n-1]; rate > last {
		return float64(n) * rate / last
	}
	// The first whole count that serves rate, then back along its segment.
	g := sort.SearchFloat64s(s.capacity, rate) + 1
	lo := 0.0
	if g > 1 {
		lo = s.capacity[g-2]
	}
	hi := s.capacity[g-1]
	if hi <= lo { // a flat segment: rate == hi, served by g-1 already
		return float64(g - 1)
	}
	return float64(g-1) + (rate-lo)/(hi-lo)
}
