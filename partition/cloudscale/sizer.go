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

// MeasuredSizer sizes a mix by capacities measured on GPU counts, as MArk
// profiles each instance type's throughput within the SLO offline (§4.1)
// instead of trusting a model of it. MixSizer's Eqs. 2-3 assume each model
// keeps its own GPUs busy at its best batch; with a few GPUs shared by
// several models the scheduler serves less than that (the mix of the cloud
// experiment: 3 GPUs serve 191 req/s within a 1% bad rate where Eqs. 2-3
// promise 291), and a policy planning on the promise runs short exactly
// when it has no headroom.
//
// Between measured counts, and between 0 GPUs (0 req/s) and the first,
// the capacity is interpolated linearly; beyond the last it grows by the
// last count's capacity per GPU.
type MeasuredSizer struct {
	points []MeasuredCapacity // by GPUs, rates non-decreasing
}

// MeasuredCapacity is one measurement: Rate, the largest total rate that
// GPUs serve within the SLOs.
type MeasuredCapacity struct {
	GPUs int
	Rate float64
}

// NewMeasuredSizer builds a sizer from measurements in increasing GPU
// counts (from 1), whose rates are non-negative, non-decreasing numbers,
// the last one positive.
func NewMeasuredSizer(points []MeasuredCapacity) (*MeasuredSizer, error) {
	if len(points) == 0 {
		return nil, errors.New("cloudscale: a measured sizer needs the capacity of at least one GPU count")
	}
	for i, p := range points {
		switch {
		case p.GPUs < 1 || i > 0 && p.GPUs <= points[i-1].GPUs:
			return nil, fmt.Errorf("cloudscale: measured capacities: GPU count %d at %d is not positive and above the one before", p.GPUs, i)
		case !(p.Rate >= 0) || math.IsInf(p.Rate, 0):
			return nil, fmt.Errorf("cloudscale: measured capacity of %d GPUs is %v, not a non-negative number", p.GPUs, p.Rate)
		case i > 0 && p.Rate < points[i-1].Rate:
			return nil, fmt.Errorf("cloudscale: measured capacity of %d GPUs (%v) is below that of %d (%v): more GPUs never serve less", p.GPUs, p.Rate, points[i-1].GPUs, points[i-1].Rate)
		}
	}
	if !(points[len(points)-1].Rate > 0) {
		return nil, errors.New("cloudscale: the measured capacities are all 0: no GPU count serves the mix")
	}
	return &MeasuredSizer{points: slices.Clone(points)}, nil
}

// Capacities are the measurements the sizer interpolates.
func (s *MeasuredSizer) Capacities() []MeasuredCapacity { return slices.Clone(s.points) }

// Capacity implements Sizer.
func (s *MeasuredSizer) Capacity(gpus float64) float64 {
	if !(gpus > 0) {
		return 0
	}
	last := s.points[len(s.points)-1]
	if gpus >= float64(last.GPUs) {
		return last.Rate * gpus / float64(last.GPUs)
	}
	// The first measured count at or above gpus, and the segment to it.
	i := sort.Search(len(s.points), func(i int) bool { return float64(s.points[i].GPUs) >= gpus })
	lo := MeasuredCapacity{}
	if i > 0 {
		lo = s.points[i-1]
	}
	hi := s.points[i]
	return lo.Rate + (gpus-float64(lo.GPUs))/float64(hi.GPUs-lo.GPUs)*(hi.Rate-lo.Rate)
}

// Need implements Sizer: the fewest GPUs, a fraction, whose interpolated
// capacity reaches rate.
func (s *MeasuredSizer) Need(rate float64) float64 {
	if !(rate > 0) {
		return 0
	}
	last := s.points[len(s.points)-1]
	if rate > last.Rate {
		return float64(last.GPUs) * rate / last.Rate
	}
	// The first measurement that serves rate; the one before serves less.
	i := sort.Search(len(s.points), func(i int) bool { return s.points[i].Rate >= rate })
	lo := MeasuredCapacity{}
	if i > 0 {
		lo = s.points[i-1]
	}
	hi := s.points[i]
	return float64(lo.GPUs) + (rate-lo.Rate)/(hi.Rate-lo.Rate)*float64(hi.GPUs-lo.GPUs)
}
