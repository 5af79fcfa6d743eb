package partexp

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"github.com/symphony-serving/symphony/bench/report"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// PlotName is the base name of the chart WritePlot writes.
const PlotName = "imbalance_cdf"

// minPlotted is the smallest imbalance factor the log axis shows.
const minPlotted = 1e-6

// WritePlot writes the paper's Figure 15 for rep into dir (created if
// needed): the CDF over instances of each engine's rate imbalance (solid)
// and memory imbalance (dashed), one color per engine, as
// dir/imbalance_cdf.svg and dir/imbalance_cdf.png, on a log axis with the
// BalancedThreshold marked. It returns the paths
// written. Only feasible runs are plotted; with none it writes nothing and
// returns no error. The same report gives byte-identical files.
func WritePlot(dir string, rep *Report) ([]string, error) {
	if rep == nil {
		return nil, errors.New("partexp: WritePlot: nil report")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Imbalance factors: %d models into %d parts, %d instances", rep.Models, rep.Parts, rep.Instances)
	p.X.Label.Text = "imbalance factor (max-min)/avg, log scale"
	p.Y.Label.Text = "CDF over instances"
	// A log axis, because the engines differ by orders of magnitude (the
	// heuristic's factors are around 1e-4, random search's around 0.4),
	// which a linear axis would squash into two vertical lines.
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	lo, hi := BalancedThreshold, BalancedThreshold
	n := 0
	for i, name := range rep.Engines {
		var rate, mem []float64
		for _, r := range rep.Runs {
			if r.Requested == name && r.Feasible {
				rate = append(rate, r.RateImbalance)
				mem = append(mem, r.MemoryImbalance)
			}
		}
		if len(rate) == 0 {
			continue
		}
		for k, series := range []struct {
			label string
			xs    []float64
		}{{name + " rate", rate}, {name + " memory", mem}} {
			pts := cdfSteps(series.xs)
			for _, pt := range pts {
				lo, hi = min(lo, pt.X), max(hi, pt.X)
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return nil, fmt.Errorf("partexp: WritePlot: %s: %w", series.label, err)
			}
			line.Color = report.SeriesColor(i)
			line.Width = vg.Points(1.5)
			if k == 1 {
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(line)
			p.Legend.Add(series.label, line)
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	// The balanced threshold of the summary, for reference.
	threshold, err := plotter.NewLine(plotter.XYs{{X: BalancedThreshold, Y: 0}, {X: BalancedThreshold, Y: 1}})
	if err != nil {
		return nil, fmt.Errorf("partexp: WritePlot: %w", err)
	}
	threshold.Color = color.Gray{Y: 0x80}
	threshold.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
	p.Add(threshold)
	p.Legend.Add(fmt.Sprintf("balanced (%g)", BalancedThreshold), threshold)
	// Room on the right for the legend, past the worst engine's curves.
	p.X.Min, p.X.Max = lo/2, hi*40
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("partexp: WritePlot: %w", err)
	}
	var paths []string
	for _, ext := range []string{"svg", "png"} {
		path := filepath.Join(dir, PlotName+"."+ext)
		if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
			return paths, fmt.Errorf("partexp: WritePlot: %w", err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// cdfSteps is the empirical CDF of xs as a staircase: at each sorted value
// the curve rises by 1/n, starting from 0 at the smallest. Values below
// minPlotted (a perfect balance of 0, say) are drawn at minPlotted, since a
// log axis has no 0.
func cdfSteps(xs []float64) plotter.XYs {
	s := slices.Clone(xs)
	for i := range s {
		s[i] = max(s[i], minPlotted)
	}
	slices.Sort(s)
	n := float64(len(s))
	pts := make(plotter.XYs, 0, 2*len(s))
	for i, x := range s {
		pts = append(pts, plotter.XY{X: x, Y: float64(i) / n}, plotter.XY{X: x, Y: float64(i+1) / n})
	}
	return pts
}
