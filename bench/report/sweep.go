package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
)

// SweepComparison is a live throughput curve beside the simulator's for the
// same workload file, scale and multipliers: the report of `symphony demo
// --sweep` and `symphony bench --sweep`. A live cluster is judged by how
// close it comes to the simulator's curve on the same load (the simulator is
// the same scheduler cores without the machine's noise), so the two are
// never reported apart.
type SweepComparison struct {
	Workload        string  `json:"workload"`
	Seed            uint64  `json:"seed"`
	GPUs            int     `json:"gpus"`
	WarmupSeconds   float64 `json:"warmup_seconds"`
	DurationSeconds float64 `json:"duration_seconds"`
	// Scale is what the multipliers multiply: the file's rates times
	// Scale (the live goodput search's multiplier with --find-goodput,
	// else 1).
	Scale float64 `json:"scale"`
	// Notes say what a reader needs to read the curves right, such as
	// whose policy the live cluster ran.
	Notes []string `json:"notes,omitempty"`
	Live  Curve    `json:"live"`
	Sim   Curve    `json:"sim"`
	// Stopped says why the live sweep ended before its last point (a
	// signal, a cluster that failed to start); "" when it ran them all.
	Stopped string `json:"stopped,omitempty"`
}

// SweepRow is one multiplier of a SweepComparison with the figures derived
// from its two points: what the table, the CSV and the JSON's "comparison"
// show, computed once here. An undefined figure (no live point, no bad
// request, a zero denominator) is nil.
type SweepRow struct {
	Multiplier float64 `json:"multiplier"`
	// Live and Sim are the row's points; Live is nil past a stopped
	// sweep's last point.
	Live *CurvePoint `json:"-"`
	Sim  *CurvePoint `json:"-"`
	// GoodputVsSim is the live goodput over the simulator's, and
	// GoodputVsBase over the live goodput at the base point (BaseIndex).
	GoodputVsSim  *float64 `json:"goodput_vs_sim,omitempty"`
	GoodputVsBase *float64 `json:"goodput_vs_base,omitempty"`
	// LateShare, DroppedShare and FailedShare split the live bad requests
	// into late answers, drops with a reason and failures.
	LateShare    *float64 `json:"late_share,omitempty"`
	DroppedShare *float64 `json:"dropped_share,omitempty"`
	FailedShare  *float64 `json:"failed_share,omitempty"`
}

// BaseIndex is the index of the live point the others' goodput is compared
// with: the 1× point (the file's load, or the found goodput), else the
// first; -1 with no live point.
func (s *SweepComparison) BaseIndex() int {
	if len(s.Live.Points) == 0 {
		return -1
	}
	if i := slices.IndexFunc(s.Live.Points, func(p CurvePoint) bool { return p.Multiplier == 1 }); i >= 0 {
		return i
	}
	return 0
}

// Rows pairs the live and simulated points by position (both curves run
// the same multipliers in the same order) and derives the comparisons.
func (s *SweepComparison) Rows() []SweepRow {
	n := max(len(s.Live.Points), len(s.Sim.Points))
	base := s.BaseIndex()
	rows := make([]SweepRow, n)
	ptr := func(v float64, ok bool) *float64 {
		if !ok {
			return nil
		}
		v = finite(v)
		return &v
	}
	for i := range rows {
		r := &rows[i]
		if i < len(s.Sim.Points) {
			r.Sim = &s.Sim.Points[i]
			r.Multiplier = r.Sim.Multiplier
		}
		if i >= len(s.Live.Points) {
			continue
		}
		r.Live = &s.Live.Points[i]
		r.Multiplier = r.Live.Multiplier
		if r.Sim != nil {
			r.GoodputVsSim = ptr(Ratio(r.Live.GoodputRPS, r.Sim.GoodputRPS))
		}
		r.GoodputVsBase = ptr(Ratio(r.Live.GoodputRPS, s.Live.Points[base].GoodputRPS))
		if o := r.Live.Outcomes; o != nil {
			late, dropped, failed, ok := o.BadShares()
			r.LateShare, r.DroppedShare, r.FailedShare = ptr(late, ok), ptr(dropped, ok), ptr(failed, ok)
		}
	}
	return rows
}

// WriteText writes the comparison as a human table: per multiplier the
// offered load, the live goodput, bad rate, how the bad requests ended
// and GPU idle, the simulator's goodput, bad rate and GPU idle, and the
// live goodput relative to the simulator's and to the base point's.
func (s *SweepComparison) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("live sweep of %s: %d GPUs, seed %d, a %ss window after a %ss warmup per point\n",
		orDash(s.Workload), s.GPUs, s.Seed, fmtNum(s.DurationSeconds, 1), fmtNum(s.WarmupSeconds, 1))
	ew.printf("live: %s   simulator: %s   x: multiples of %s\n", orDash(s.Live.Policy), orDash(s.Sim.Policy), s.scaleText())
	rows := s.Rows()
	base := "vs first"
	if i := s.BaseIndex(); i >= 0 {
		base = "vs " + strconv.FormatFloat(s.Live.Points[i].Multiplier, 'g', 4, 64) + "x"
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "x\toffered rps\tlive goodput\tlive bad\tlate/drop/fail %%\tlive idle\tsim goodput\tsim bad\tsim idle\tlive/sim\t%s\t\n", base)
	partial := false
	for _, r := range rows {
		x := fmtNum(r.Multiplier, 2)
		live := []string{"-", "-", "-", "-"}
		offered := "-"
		if p := r.Live; p != nil {
			offered = fmtNum(p.OfferedRPS, 1)
			live = []string{fmtNum(p.GoodputRPS, 1), fmtNum(100*p.BadRate, 2) + "%", shares(r), fmtNum(100*p.GPUIdleFraction, 1) + "%"}
			if p.Partial {
				x += "*"
				partial = true
			}
		}
		sim := []string{"-", "-", "-"}
		if p := r.Sim; p != nil {
			if r.Live == nil {
				offered = fmtNum(p.OfferedRPS, 1)
			}
			sim = []string{fmtNum(p.GoodputRPS, 1), fmtNum(100*p.BadRate, 2) + "%", fmtNum(100*p.GPUIdleFraction, 1) + "%"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x, offered, live[0], live[1], live[2], live[3],
			sim[0], sim[1], sim[2], ratioText(r.GoodputVsSim), ratioText(r.GoodputVsBase))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	if p := s.Live.PeakGoodputRPS; p > 0 {
		ew.printf("peak goodput: live %s req/s, simulator %s req/s (ideal flat top in the JSON and the charts)\n",
			fmtNum(p, 1), fmtNum(s.Sim.PeakGoodputRPS, 1))
	}
	if partial {
		ew.printf("* stopped part-way: the point covers only the part of its window that ran\n")
	}
	for _, n := range s.Notes {
		ew.printf("note: %s\n", n)
	}
	if s.Stopped != "" {
		ew.printf("stopped: %s\n", s.Stopped)
	}
	if ew.err != nil {
		return fmt.Errorf("report: SweepComparison.WriteText: %w", ew.err)
	}
	return nil
}

// scaleText says what x multiplies.
func (s *SweepComparison) scaleText() string {
	if s.Scale == 1 || s.Scale == 0 {
		return "the file's rates"
	}
	return fmtNum(s.Scale, 4) + "× the file's rates (the live goodput)"
}

// shares is "late/dropped/failed" as whole percentages of the bad
// requests, "-" when none was bad.
func shares(r SweepRow) string {
	if r.LateShare == nil {
		return "-"
	}
	return fmtNum(100**r.LateShare, 0) + "/" + fmtNum(100**r.DroppedShare, 0) + "/" + fmtNum(100**r.FailedShare, 0)
}

func ratioText(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmtNum(*v, 3)
}

// sweepCSVHeader is the header of SweepComparison.WriteCSV, in column order.
var sweepCSVHeader = []string{
	"multiplier", "offered_rps",
	"live_goodput_rps", "live_bad_rate", "live_late", "live_dropped", "live_failed",
	"live_late_share", "live_dropped_share", "live_failed_share", "live_gpu_idle_fraction", "live_partial",
	"sim_goodput_rps", "sim_bad_rate", "sim_gpu_idle_fraction",
	"goodput_vs_sim", "goodput_vs_base",
}

// WriteCSV writes the table of WriteText as CSV, one row per multiplier,
// with the live counts as well as their shares; fractions are in [0, 1],
// and a figure that is undefined or was not measured is empty.
func (s *SweepComparison) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(sweepCSVHeader); err != nil {
		return fmt.Errorf("report: SweepComparison.WriteCSV: %w", err)
	}
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return fmtFloat(*v)
	}
	for _, r := range s.Rows() {
		rec := make([]string, 0, len(sweepCSVHeader))
		offered := ""
		if r.Sim != nil {
			offered = fmtFloat(r.Sim.OfferedRPS)
		}
		live := make([]string, 10)
		if p := r.Live; p != nil {
			offered = fmtFloat(p.OfferedRPS)
			live = []string{fmtFloat(p.GoodputRPS), fmtFloat(p.BadRate), "", "", "",
				opt(r.LateShare), opt(r.DroppedShare), opt(r.FailedShare), fmtFloat(p.GPUIdleFraction), strconv.FormatBool(p.Partial)}
			if o := p.Outcomes; o != nil {
				live[2], live[3], live[4] = strconv.FormatUint(o.Late, 10), strconv.FormatUint(o.Dropped, 10), strconv.FormatUint(o.Failed, 10)
			}
		}
		sim := make([]string, 3)
		if p := r.Sim; p != nil {
			sim = []string{fmtFloat(p.GoodputRPS), fmtFloat(p.BadRate), fmtFloat(p.GPUIdleFraction)}
		}
		rec = append(rec, fmtFloat(r.Multiplier), offered)
		rec = append(rec, live...)
		rec = append(rec, sim...)
		rec = append(rec, opt(r.GoodputVsSim), opt(r.GoodputVsBase))
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("report: SweepComparison.WriteCSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("report: SweepComparison.WriteCSV: %w", err)
	}
	return nil
}

// WriteJSON writes the comparison as one indented JSON object: its fields,
// the index of the base point and the rows' derived figures under
// "comparison", so that a script checks the flat top without redoing the
// arithmetic. Non-finite floats are written as 0.
func (s *SweepComparison) WriteJSON(w io.Writer) error {
	c := *s
	c.Live, c.Sim = sanitizeCurve(s.Live), sanitizeCurve(s.Sim)
	c.Scale = finite(c.Scale)
	c.WarmupSeconds, c.DurationSeconds = finite(c.WarmupSeconds), finite(c.DurationSeconds)
	base := -1.0
	if i := s.BaseIndex(); i >= 0 {
		base = finite(s.Live.Points[i].Multiplier)
	}
	err := EncodeJSON(w, struct {
		*SweepComparison
		// BaseMultiplier is the multiplier of the point GoodputVsBase
		// divides by; -1 when no live point was measured.
		BaseMultiplier float64    `json:"base_multiplier"`
		Comparison     []SweepRow `json:"comparison"`
	}{&c, base, c.Rows()})
	if err != nil {
		return fmt.Errorf("report: SweepComparison.WriteJSON: %w", err)
	}
	return nil
}

// sanitizeCurve returns a copy of c with every float finite, for JSON.
func sanitizeCurve(c Curve) Curve {
	c.PeakGoodputRPS = finite(c.PeakGoodputRPS)
	pts := make([]CurvePoint, len(c.Points))
	for i, p := range c.Points {
		p.Multiplier, p.OfferedRPS, p.GoodputRPS = finite(p.Multiplier), finite(p.OfferedRPS), finite(p.GoodputRPS)
		p.BadRate, p.GPUIdleFraction, p.MeanBatchSize = finite(p.BadRate), finite(p.GPUIdleFraction), finite(p.MeanBatchSize)
		p.IdealBadRate, p.IdealIdleFraction = finite(p.IdealBadRate), finite(p.IdealIdleFraction)
		pts[i] = p
	}
	c.Points = pts
	return c
}

// WritePlots writes the comparison's charts into dir, each as SVG and PNG,
// and returns the paths: sweep_goodput, sweep_bad_rate and sweep_gpu_idle,
// each against offered load with the live curve, the simulator's and, for
// a curve whose peak goodput is known, its ideal flat top (dashed, in the
// curve's color).
func (s *SweepComparison) WritePlots(dir string) ([]string, error) {
	charts := []struct {
		name, title, yLabel string
		value               func(CurvePoint) float64
		ideal               func(offered, peak float64) float64
	}{
		{"sweep_goodput", "Goodput against offered load", "goodput (req/s)",
			func(p CurvePoint) float64 { return p.GoodputRPS }, IdealGoodput},
		{"sweep_bad_rate", "Bad rate against offered load", "bad rate (%)",
			func(p CurvePoint) float64 { return 100 * p.BadRate },
			func(o, p float64) float64 { return 100 * IdealBadRate(o, p) }},
		{"sweep_gpu_idle", "GPU idle against offered load", "GPU idle (%)",
			func(p CurvePoint) float64 { return 100 * p.GPUIdleFraction },
			func(o, p float64) float64 { return 100 * IdealIdleFraction(o, p) }},
	}
	curves := []struct {
		c     *Curve
		label string
	}{{&s.Live, s.Live.Policy}, {&s.Sim, s.Sim.Policy + " (simulator)"}}
	var paths []string
	for _, ch := range charts {
		var series []Series
		for i, c := range curves {
			pts := make([][2]float64, len(c.c.Points))
			for j, p := range c.c.Points {
				pts[j] = [2]float64{p.OfferedRPS, ch.value(p)}
			}
			series = append(series, Series{Label: c.label, Points: pts, Color: i})
			if peak := c.c.PeakGoodputRPS; peak > 0 {
				var ideal [][2]float64
				for _, o := range idealXs(c.c.Points, peak) {
					ideal = append(ideal, [2]float64{o, ch.ideal(o, peak)})
				}
				series = append(series, Series{Label: c.label + ", ideal", Points: ideal, Color: i, Dashed: true})
			}
		}
		title := ch.title
		if s.Workload != "" {
			title += " (" + s.Workload + ")"
		}
		written, err := WriteLinePlot(dir, ch.name, title, "offered (req/s)", ch.yLabel, series)
		paths = append(paths, written...)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// idealXs are the offered loads to draw an ideal flat top at: the curve's
// own, and the peak itself where it lies among them, so that the line
// bends where the ideal does.
func idealXs(points []CurvePoint, peak float64) []float64 {
	var xs []float64
	for _, p := range points {
		xs = append(xs, p.OfferedRPS)
	}
	if len(xs) == 0 {
		return nil
	}
	if lo, hi := slices.Min(xs), slices.Max(xs); lo < peak && peak < hi {
		xs = append(xs, peak)
	}
	slices.Sort(xs)
	return xs
}
