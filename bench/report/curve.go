package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"strconv"
	"strings"
)

// Curve is a throughput curve: one policy's runs of a workload at several
// loads. It is how §4.4's "flat top" is judged: past the peak goodput p,
// goodput should stay at p while the bad rate follows (o−p)/o, and below
// it the GPUs should idle (p−o)/p of the time. `symphony sim --sweep`
// builds one per policy; the live sweeps of `symphony demo` and `symphony
// bench` build one from the cluster and one from the simulator, through the
// same Sweep.
type Curve struct {
	Policy string `json:"policy"`
	// PeakGoodputRPS is the goodput the multipliers are relative to, when
	// the run searched for it; 0 otherwise.
	PeakGoodputRPS float64      `json:"peak_goodput_rps,omitempty"`
	Points         []CurvePoint `json:"points"`
}

// CurvePoint is one run of a Curve.
type CurvePoint struct {
	Multiplier      float64 `json:"multiplier"`
	OfferedRPS      float64 `json:"offered_rps"`
	GoodputRPS      float64 `json:"goodput_rps"`
	BadRate         float64 `json:"bad_rate"`
	GPUIdleFraction float64 `json:"gpu_idle_fraction"`
	MeanBatchSize   float64 `json:"mean_batch_size"`
	// IdealBadRate is (o−p)/o above the peak p, and IdealIdleFraction
	// (p−o)/p below it: the flat-top targets of §4.4.
	IdealBadRate      float64 `json:"ideal_bad_rate"`
	IdealIdleFraction float64 `json:"ideal_idle_fraction"`
	// Partial marks a point whose run was stopped part-way (a signal): its
	// figures cover only the part of the window that ran.
	Partial bool `json:"partial,omitempty"`
	// Outcomes is how the point's requests ended, when the sweep asked
	// for it (SweepOptions.Outcomes): a live flat top must hold by
	// dropping the excess with a reason, not by answering it late, and
	// only the counts tell those apart.
	Outcomes *Outcomes `json:"outcomes,omitempty"`
}

// Outcomes counts how the requests of a run's window ended.
type Outcomes struct {
	Offered uint64 `json:"offered"`
	Good    uint64 `json:"good"`
	// Late were answered after their SLO; Dropped were refused with a
	// reason (deadline, overload, ...); Failed ended with an error.
	Late    uint64 `json:"late"`
	Dropped uint64 `json:"dropped"`
	Failed  uint64 `json:"failed"`
	// DropReasons counts the drops by reason, and the failures by kind
	// ("failed: ..."), as the run's report does.
	DropReasons map[string]uint64 `json:"drop_reasons"`
}

// Bad is the number of requests that were not good.
func (o *Outcomes) Bad() uint64 { return o.Late + o.Dropped + o.Failed }

// BadShares splits the bad requests into the fractions answered late,
// dropped with a reason and failed, which sum to 1; ok is false when no
// request was bad and the shares mean nothing.
func (o *Outcomes) BadShares() (late, dropped, failed float64, ok bool) {
	bad := o.Bad()
	if bad == 0 {
		return 0, 0, 0, false
	}
	b := float64(bad)
	return float64(o.Late) / b, float64(o.Dropped) / b, float64(o.Failed) / b, true
}

// IdealBadRate is the bad rate of a perfect flat top at offered load o
// with peak goodput p: (o−p)/o above the peak, 0 at or below it or when
// either is unknown (0).
func IdealBadRate(offered, peak float64) float64 {
	if peak > 0 && offered > peak {
		return (offered - peak) / offered
	}
	return 0
}

// IdealIdleFraction is the GPU idle fraction of a perfect flat top at
// offered load o with peak goodput p: (p−o)/p below the peak, 0 at or above
// it or when either is unknown (0).
func IdealIdleFraction(offered, peak float64) float64 {
	if peak > 0 && offered > 0 && offered <= peak {
		return (peak - offered) / peak
	}
	return 0
}

// IdealGoodput is the goodput of a perfect flat top: the offered load up
// to the peak, then the peak.
func IdealGoodput(offered, peak float64) float64 { return min(offered, peak) }

// Ratio is num/den, or false when den is not positive and the ratio is
// undefined (a run with no goodput to compare with).
func Ratio(num, den float64) (float64, bool) {
	if !(den > 0) {
		return 0, false
	}
	return num / den, true
}

// NewCurvePoint turns the report of the run at multiplier into a point,
// with its flat-top targets for peak goodput peak (none when 0), and its
// outcome counts if outcomes is true.
func NewCurvePoint(multiplier float64, r *Report, peak float64, outcomes bool) CurvePoint {
	pt := CurvePoint{Multiplier: multiplier, OfferedRPS: r.OfferedRPS, GoodputRPS: r.GoodputRPS, BadRate: r.BadRate,
		GPUIdleFraction: r.GPUIdleFraction, MeanBatchSize: r.MeanBatchSize,
		IdealBadRate: IdealBadRate(r.OfferedRPS, peak), IdealIdleFraction: IdealIdleFraction(r.OfferedRPS, peak)}
	if outcomes {
		pt.Outcomes = &Outcomes{Offered: r.Offered, Good: r.Good, Late: r.Late, Dropped: r.Dropped, Failed: r.Failed,
			DropReasons: maps.Clone(r.DropReasons)}
		if pt.Outcomes.DropReasons == nil {
			pt.Outcomes.DropReasons = map[string]uint64{}
		}
	}
	return pt
}

// ParseMultipliers parses a comma-separated list of load multipliers, as
// `sim --sweep`, `demo --sweep` and `sim lookahead --multipliers` take them:
// each a positive finite number, in the order given; "" is none. A zero or
// negative multiplier would offer no load, and an infinite one a run that
// never ends, so both are errors rather than points.
func ParseMultipliers(list string) ([]float64, error) {
	if list == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("%q is not a positive finite number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// SweepBase is what a sweep after run r measures against: the multipliers
// multiply scale (the found goodput's multiplier, so that 1x is the peak),
// and the flat-top targets use peak goodput peak; 1 and 0 (no peak known,
// no targets) when r did not search for its goodput.
func SweepBase(r *Report) (scale, peak float64) {
	if gs := r.GoodputSearch; gs != nil {
		return gs.Multiplier, gs.GoodputRPS
	}
	return 1, 0
}

// PointSummary is the progress line of a live sweep point: its goodput
// beside the simulator's at the same multiplier and their ratio, its bad
// rate with the shares answered late, dropped and failed (a flat top must
// hold by dropping), and its GPU idle fraction, so that a long sweep can be
// judged while it runs.
func PointSummary(live, sim CurvePoint) string {
	s := fmt.Sprintf("goodput %.1f req/s (simulator %.1f", live.GoodputRPS, sim.GoodputRPS)
	if r, ok := Ratio(live.GoodputRPS, sim.GoodputRPS); ok {
		s += fmt.Sprintf(", live/sim %.3f", r)
	}
	s += fmt.Sprintf(")  bad %.2f%%", 100*live.BadRate)
	if o := live.Outcomes; o != nil {
		if late, dropped, failed, ok := o.BadShares(); ok {
			s += fmt.Sprintf(" (late %.0f%%, dropped %.0f%%, failed %.0f%%)", 100*late, 100*dropped, 100*failed)
		}
	}
	s += fmt.Sprintf("  GPU idle %.1f%%", 100*live.GPUIdleFraction)
	if live.Partial {
		s += "  (stopped part-way)"
	}
	return s
}

// SweepOptions tune Sweep.
type SweepOptions struct {
	// Outcomes records each point's outcome counts (CurvePoint.Outcomes).
	Outcomes bool
	// Point, if set, is called with each point as it is added, for
	// progress.
	Point func(CurvePoint)
}

// Sweep runs the workload at each multiplier through run and appends a
// point per run to c, with flat-top targets when c.PeakGoodputRPS is known.
// It is the one sweep of the simulator (`sim --sweep`) and of the live
// cluster (`demo --sweep`, `bench --sweep`): only run differs. A run that
// fails ends the sweep with its error; one stopped part-way that still
// returns a report adds it as a Partial point first, so that what was
// measured is kept.
func (c *Curve) Sweep(multipliers []float64, o SweepOptions, run func(multiplier float64) (*Report, error)) error {
	for _, m := range multipliers {
		rep, err := run(m)
		if rep != nil {
			pt := NewCurvePoint(m, rep, c.PeakGoodputRPS, o.Outcomes)
			pt.Partial = err != nil
			c.Points = append(c.Points, pt)
			if o.Point != nil {
				o.Point(pt)
			}
		}
		if err != nil {
			return fmt.Errorf("sweep at %g: %w", m, err)
		}
	}
	return nil
}

// WriteCurveTable writes c as the human table of `sim --sweep`: per
// multiplier the offered load, goodput, bad rate and GPU idle next to
// their flat-top targets, and the mean batch size.
func WriteCurveTable(w io.Writer, c Curve) error {
	ew := &errWriter{w: w}
	ew.printf("\nthroughput curve, %s", c.Policy)
	if c.PeakGoodputRPS > 0 {
		ew.printf(" (peak goodput p = %.0f req/s)", c.PeakGoodputRPS)
	}
	ew.printf("\n%10s %12s %12s %9s %13s %9s %9s %10s\n", "x", "offered", "goodput", "bad", "ideal bad", "idle", "ideal idle", "mean bs")
	for _, p := range c.Points {
		ew.printf("%10.2f %12.0f %12.0f %8.2f%% %12.2f%% %8.2f%% %9.2f%% %10.1f\n", p.Multiplier, p.OfferedRPS, p.GoodputRPS,
			100*p.BadRate, 100*p.IdealBadRate, 100*p.GPUIdleFraction, 100*p.IdealIdleFraction, p.MeanBatchSize)
	}
	if ew.err != nil {
		return fmt.Errorf("report: WriteCurveTable: %w", ew.err)
	}
	return nil
}

// WriteCurvePlots writes the charts of `sim --sweep` into dir: goodput
// against offered load per curve (throughput_curve), and bad rate and GPU
// idle against offered load (signals_curve), each as SVG and PNG. It
// returns the paths written; with no points it writes nothing.
func WriteCurvePlots(dir string, curves []Curve) ([]string, error) {
	goodput := map[string][][2]float64{}
	signals := map[string][][2]float64{}
	for _, c := range curves {
		for _, p := range c.Points {
			goodput[c.Policy] = append(goodput[c.Policy], [2]float64{p.OfferedRPS, p.GoodputRPS})
			signals[c.Policy+" bad rate"] = append(signals[c.Policy+" bad rate"], [2]float64{p.OfferedRPS, p.BadRate})
			signals[c.Policy+" GPU idle"] = append(signals[c.Policy+" GPU idle"], [2]float64{p.OfferedRPS, p.GPUIdleFraction})
		}
	}
	paths, err := WriteCurvePlot(dir, "throughput_curve", "offered (req/s)", "goodput (req/s)", goodput)
	if err != nil {
		return paths, err
	}
	more, err := WriteCurvePlot(dir, "signals_curve", "offered (req/s)", "fraction", signals)
	return append(paths, more...), err
}
