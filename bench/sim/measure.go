package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/cloudscale"
)

// SizerMeasurement sets how MeasureSizer measures a mix's capacity.
type SizerMeasurement struct {
	// MaxGPUs is the largest GPU count measured; the sizer extrapolates
	// beyond it at its capacity per GPU.
	MaxGPUs int
	// TargetBadRate is the largest bad rate any model may have at a
	// count's capacity (0: 1%).
	TargetBadRate float64
	// Duration and Warmup are each run's (0: 60 s and 10 s).
	Duration, Warmup time.Duration
	// Progress, when set, is called after each count is measured.
	Progress func(gpus int, capacity float64)
}

// MeasuredCounts are the GPU counts MeasureSizer measures up to max: every
// count up to 8, where sharing changes most from one GPU to the next, and
// beyond it counts an eighth apart, and max itself. The sizer interpolates
// between them, and a measurement costs about as much as its largest few
// counts instead of growing with the square of max.
func MeasuredCounts(maxGPUs int) []int {
	var out []int
	for g := 1; g < maxGPUs; {
		out = append(out, g)
		g += max(1, (g+7)/8)
	}
	if maxGPUs >= 1 {
		out = append(out, maxGPUs)
	}
	return out
}

// MeasureSizer measures what GPU counts up to MaxGPUs (MeasuredCounts)
// serve of w's mix, each model's share its mean rate over the run, as
// WorkloadSizer's, as MArk profiles its instance types (§4.1): for each
// count, a goodput search of steady load in the mix's shares with w's
// arrival processes finds the largest total rate at which every model's
// bad rate stays within the target. The runs are seeded simulations, so
// the sizer is deterministic. A count that serves less than the one below
// it (a search's noise) is given the one below's capacity.
func MeasureSizer(w *workload.Workload, m SizerMeasurement) (*cloudscale.MeasuredSizer, error) {
	if m.MaxGPUs < 1 || m.MaxGPUs > maxMeasuredGPUs {
		return nil, fmt.Errorf("sim: measuring a sizer: max GPUs %d is outside 1..%d", m.MaxGPUs, maxMeasuredGPUs)
	}
	m = m.withDefaults()
	analytic, err := WorkloadSizer(w)
	if err != nil {
		return nil, err
	}
	var points []cloudscale.MeasuredCapacity
	for _, g := range MeasuredCounts(m.MaxGPUs) {
		// Search from the analytic capacity, which is near.
		start := analytic.Capacity(float64(g))
		rep, err := FindGoodput(steadyMix(w, m, g).Scaled(start), GoodputOptions{TargetBadRate: m.TargetBadRate})
		if err != nil {
			return nil, fmt.Errorf("sim: measuring %d GPUs: %w", g, err)
		}
		c := rep.GoodputSearch.Multiplier * start
		if n := len(points); n > 0 {
			c = max(c, points[n-1].Rate)
		}
		points = append(points, cloudscale.MeasuredCapacity{GPUs: g, Rate: c})
		if m.Progress != nil {
			m.Progress(g, c)
		}
	}
	return cloudscale.NewMeasuredSizer(points)
}

func (m SizerMeasurement) withDefaults() SizerMeasurement {
	if m.Duration <= 0 {
		m.Duration = time.Minute
	}
	if m.Warmup <= 0 {
		m.Warmup = 10 * time.Second
	}
	return m
}

// steadyMix is w's mix at a total of 1 req/s, each model at its share of
// the mean rate, on gpus GPUs, for the measurement's duration: no faults,
// no epoch job, one kind of GPU.
func steadyMix(w *workload.Workload, m SizerMeasurement, gpus int) *workload.Workload {
	end := w.Warmup + w.Duration
	total := 0.0
	for i := range w.Models {
		total += w.Models[i].MeanRate(0, end)
	}
	steady := *w
	steady.Duration, steady.Warmup = m.Duration, m.Warmup
	steady.Cluster = workload.Cluster{GPUs: gpus}
	steady.Faults, steady.Epoch = nil, nil
	steady.Models = make([]workload.Model, len(w.Models))
	for i, md := range w.Models {
		md.Rates = []workload.RatePhase{{Rate: md.MeanRate(0, end) / total}}
		steady.Models[i] = md
	}
	return &steady
}

// maxMeasuredGPUs bounds a measurement: each count's search simulates its
// whole capacity for a minute.
const maxMeasuredGPUs = 256

// MeasurementFor is the measurement a cloud run of w sizes its fleet by:
// MeasuredCounts up to a quarter more than Eqs. 2-3 give w's peak rate,
// plus two, within w's pool of GPU slots (and maxMeasuredGPUs); at a 1%
// bad rate. It refuses a workload the policies that size one mix refuse
// (CheckCloudWorkload), so that nothing is measured for a run that cannot
// start.
func MeasurementFor(w *workload.Workload) (SizerMeasurement, error) {
	if err := CheckCloudWorkload(w); err != nil {
		return SizerMeasurement{}, err
	}
	analytic, err := WorkloadSizer(w)
	if err != nil {
		return SizerMeasurement{}, err
	}
	n := int(math.Ceil(1.25*analytic.Need(PeakRate(w)))) + 2
	return SizerMeasurement{MaxGPUs: max(1, min(n, w.Cluster.GPUs, maxMeasuredGPUs)), TargetBadRate: 0.01}, nil
}
