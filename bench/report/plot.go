package report

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Every chart is written in both formats: SVG scales in papers and browsers,
// PNG previews anywhere (a CI artifact page, a chat).
var plotFormats = []string{"svg", "png"}

const (
	plotWidth  = 6 * vg.Inch
	plotHeight = 4 * vg.Inch

	// maxSLOLines bounds the SLO markers on the latency CDF: with a whole
	// zoo of SLOs the lines would hide the curve.
	maxSLOLines = 5
)

// palette is a fixed qualitative palette (Tableau 10), so the same series
// gets the same color in every run and the output files are reproducible.
var palette = []color.Color{
	color.RGBA{R: 0x4e, G: 0x79, B: 0xa7, A: 0xff},
	color.RGBA{R: 0xf2, G: 0x8e, B: 0x2b, A: 0xff},
	color.RGBA{R: 0x59, G: 0xa1, B: 0x4f, A: 0xff},
	color.RGBA{R: 0xe1, G: 0x57, B: 0x59, A: 0xff},
	color.RGBA{R: 0xb0, G: 0x7a, B: 0xa1, A: 0xff},
	color.RGBA{R: 0x76, G: 0xb7, B: 0xb2, A: 0xff},
	color.RGBA{R: 0xed, G: 0xc9, B: 0x48, A: 0xff},
	color.RGBA{R: 0xff, G: 0x9d, B: 0xa7, A: 0xff},
	color.RGBA{R: 0x9c, G: 0x75, B: 0x5f, A: 0xff},
	color.RGBA{R: 0xba, G: 0xb0, B: 0xac, A: 0xff},
}

// glyphs tell curves apart where colors cannot (print, color blindness).
var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
	draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{},
}

func colorOf(i int) color.Color { return palette[i%len(palette)] }

// SeriesColor is the color of the i-th series in every chart of the
// project, so that other reports (the partition experiment's) match these.
func SeriesColor(i int) color.Color { return colorOf(i) }

// WritePlots writes the `--plot DIR` charts of r into dir, creating it if
// needed, each as NAME.svg and NAME.png, and returns the paths written in
// order. The charts are:
//
//   - latency_cdf: the CDF of every answered request's end-to-end latency
//     (r.Latency) in ms, with a dashed line at each model SLO when there are
//     at most 5 distinct SLOs, to show how much of the load meets them;
//   - batch_size_hist: requests per batch size (size × number of batches),
//     because the batch size the average request ran in is what tells
//     batching policies apart, not the raw count of batches;
//   - timeline_rate, timeline_gpus and timeline_badrate, when r has more than
//     one time point (rate schedules): offered and good requests/s, busy and
//     total GPUs, and the bad rate over time, to show how the scheduler and
//     the autoscaler follow the load;
//   - figure14, for runs with an epoch job: the paper's Figure 14 panels
//     (per-model goodput stacked, GPUs in use, autoscaling advice, bad rate).
//
// A chart without data (nil Latency, empty histogram, one time point) is
// skipped without error, so an empty report writes nothing and succeeds.
// Given the same report, the files are byte-identical.
func WritePlots(dir string, r *Report) ([]string, error) {
	if r == nil {
		return nil, errors.New("report: WritePlots: nil report")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: WritePlots: %w", err)
	}
	charts := []struct {
		name string
		make func(*Report) (*plot.Plot, error)
	}{
		{"latency_cdf", latencyCDFPlot},
		{"batch_size_hist", batchSizePlot},
		{"timeline_rate", timelineRatePlot},
		{"timeline_gpus", timelineGPUsPlot},
		{"timeline_badrate", timelineBadRatePlot},
	}
	var paths []string
	for _, c := range charts {
		p, err := c.make(r)
		if err != nil {
			return paths, fmt.Errorf("report: WritePlots: %s: %w", c.name, err)
		}
		if p == nil {
			continue
		}
		written, err := savePlot(p, dir, c.name)
		paths = append(paths, written...)
		if err != nil {
			return paths, fmt.Errorf("report: WritePlots: %w", err)
		}
	}
	written, err := writeEpochFigure(dir, r)
	paths = append(paths, written...)
	if err != nil {
		return paths, fmt.Errorf("report: WritePlots: figure14: %w", err)
	}
	return paths, nil
}

// WriteComparisonPlot writes a bar chart of the goodput of each run in rows,
// labeled by policy, as dir/name.svg and dir/name.png, and returns the paths.
// It is the chart form of WriteComparison, so it uses the same goodput: the
// searched goodput when a run has a GoodputSearch, else its measured goodput.
// With no rows it writes nothing and returns no error.
func WriteComparisonPlot(dir, name string, rows []Report) ([]string, error) {
	if err := checkPlotName(name); err != nil {
		return nil, fmt.Errorf("report: WriteComparisonPlot: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: WriteComparisonPlot: %w", err)
	}
	values := make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	for i := range rows {
		values[i] = comparisonGoodput(&rows[i])
		names[i] = orDash(rows[i].Policy)
	}
	p := plot.New()
	p.Title.Text = "Goodput by policy"
	if w := rows[0].Workload; w != "" {
		p.Title.Text += " (" + w + ")"
	}
	p.Y.Label.Text = "goodput (requests/s)"
	p.Y.Min = 0
	width := min(vg.Points(40), vg.Points(300/float64(len(rows))))
	bars, err := plotter.NewBarChart(values, width)
	if err != nil {
		return nil, fmt.Errorf("report: WriteComparisonPlot: %w", err)
	}
	bars.Color = colorOf(0)
	bars.LineStyle.Width = 0
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // the X axis is nominal: no vertical grid
	p.Add(grid, bars)
	p.NominalX(names...)
	addHeadroom(p, 0.1)
	paths, err := savePlot(p, dir, name)
	if err != nil {
		return paths, fmt.Errorf("report: WriteComparisonPlot: %w", err)
	}
	return paths, nil
}

// WriteCurvePlot writes a line chart with one line (with point markers) per
// named series, as dir/name.svg and dir/name.png, and returns the paths. Each
// series is a list of (x, y) points drawn in the order given; series are
// drawn, colored and listed in the legend sorted by name, so the output does
// not depend on map iteration order. It serves throughput curves such as the
// flat-top experiment (offered vs goodput per policy). Points with a NaN or
// infinite coordinate are skipped; with no points at all it writes nothing
// and returns no error.
func WriteCurvePlot(dir, name, xLabel, yLabel string, series map[string][][2]float64) ([]string, error) {
	keys := make([]string, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := make([]Series, len(keys))
	for i, k := range keys {
		lines[i] = Series{Label: k, Points: series[k], Color: i}
	}
	paths, err := writeLinePlot(dir, name, name, xLabel, yLabel, lines, false)
	if err != nil {
		return paths, fmt.Errorf("report: WriteCurvePlot: %w", err)
	}
	return paths, nil
}

// Series is one line of a WriteLinePlot chart.
type Series struct {
	Label  string
	Points [][2]float64
	// Color picks the line's color and marker (SeriesColor(Color)), so
	// that the same quantity keeps its color across a report's charts.
	Color int
	// Dashed draws a dashed line without markers: a target or reference
	// line (a flat top's ideal), not a measurement.
	Dashed bool
}

// WriteLinePlot writes a line chart titled title with the series in the
// order given, as dir/name.svg and dir/name.png, and returns the paths.
// Unlike WriteCurvePlot, the caller chooses each line's color and style,
// so that a measured curve and its reference line can be told apart, and
// the axes start at 0 (a flat top reads as flat only against a zero
// baseline), with room above the lines for the legend. Points with a NaN or
// infinite coordinate are skipped; with no points at all it writes nothing
// and returns no error.
func WriteLinePlot(dir, name, title, xLabel, yLabel string, series []Series) ([]string, error) {
	paths, err := writeLinePlot(dir, name, title, xLabel, yLabel, series, true)
	if err != nil {
		return paths, fmt.Errorf("report: WriteLinePlot: %w", err)
	}
	return paths, nil
}

// writeLinePlot draws the series; fromZero starts both axes at 0 and
// leaves room for the legend above the lines.
func writeLinePlot(dir, name, title, xLabel, yLabel string, series []Series, fromZero bool) ([]string, error) {
	if err := checkPlotName(name); err != nil {
		return nil, err
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	n := 0
	for _, s := range series {
		var xys plotter.XYs
		for _, pt := range s.Points {
			xys = appendFinite(xys, pt[0], pt[1])
		}
		if len(xys) == 0 {
			continue
		}
		if s.Dashed {
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("series %q: %w", s.Label, err)
			}
			line.Color = colorOf(s.Color)
			line.Width = vg.Points(1)
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(line)
			p.Legend.Add(s.Label, line)
			n++
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("series %q: %w", s.Label, err)
		}
		line.Color = colorOf(s.Color)
		line.Width = vg.Points(1.5)
		points.Color = colorOf(s.Color)
		points.Shape = glyphs[s.Color%len(glyphs)]
		p.Add(line, points)
		p.Legend.Add(s.Label, line, points)
		n++
	}
	if n == 0 {
		return nil, nil
	}
	if fromZero {
		p.X.Min, p.Y.Min = math.Min(p.X.Min, 0), math.Min(p.Y.Min, 0)
		addHeadroom(p, 0.25)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return savePlot(p, dir, name)
}

// checkPlotName rejects names that are not a plain file name, so a chart
// can only be written inside the directory the caller named.
func checkPlotName(name string) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return fmt.Errorf("invalid chart name %q: want a file name without directory or extension", name)
	}
	return nil
}

// savePlot writes p as dir/name.<format> for every plot format and returns
// the paths written, those written before a failure included.
func savePlot(p *plot.Plot, dir, name string) ([]string, error) {
	var paths []string
	for _, f := range plotFormats {
		path := filepath.Join(dir, name+"."+f)
		if err := p.Save(plotWidth, plotHeight, path); err != nil {
			return paths, fmt.Errorf("save %s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// appendFinite appends (x, y) unless either is NaN or infinite, which
// gonum's plotters reject.
func appendFinite(xys plotter.XYs, x, y float64) plotter.XYs {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
		return xys
	}
	return append(xys, plotter.XY{X: x, Y: y})
}

// addHeadroom raises the top of p's Y axis by frac of its data range, so
// the highest value does not touch the frame or hide under the legend.
func addHeadroom(p *plot.Plot, frac float64) {
	if span := p.Y.Max - p.Y.Min; span > 0 && !math.IsInf(span, 0) {
		p.Y.Max += frac * span
	}
}

func durationMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func latencyCDFPlot(r *Report) (*plot.Plot, error) {
	if r.Latency == nil || r.Latency.Count() == 0 {
		return nil, nil
	}
	cdf := r.Latency.CDF()
	// Start at fraction 0 and step up at each bucket: the CDF is a step
	// function, right-continuous, so each value holds until the next one.
	xys := plotter.XYs{{X: durationMS(cdf[0].Value), Y: 0}}
	for _, pt := range cdf {
		xys = append(xys, plotter.XY{X: durationMS(pt.Value), Y: pt.Fraction})
	}
	p := plot.New()
	p.Title.Text = "Latency CDF"
	p.X.Label.Text = "end-to-end latency (ms)"
	p.Y.Label.Text = "fraction of answered requests"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.StepStyle = plotter.PostStep
	line.Color = colorOf(0)
	line.Width = vg.Points(1.5)
	p.Add(line)
	p.Legend.Add("all models", line)

	var slos []float64
	for _, m := range r.Models {
		if s := m.SLOms; s > 0 && !math.IsInf(s, 0) && !slices.Contains(slos, s) {
			slos = append(slos, s)
		}
	}
	if len(slos) <= maxSLOLines {
		slices.Sort(slos)
		for i, s := range slos {
			l, err := plotter.NewLine(plotter.XYs{{X: s, Y: 0}, {X: s, Y: 1}})
			if err != nil {
				return nil, err
			}
			l.Color = colorOf(i + 1)
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
			p.Legend.Add("SLO "+strconv.FormatFloat(s, 'f', -1, 64)+" ms", l)
		}
	}
	p.X.Min = math.Min(p.X.Min, 0)
	p.Y.Min, p.Y.Max = 0, 1
	return p, nil
}

func batchSizePlot(r *Report) (*plot.Plot, error) {
	sizes := make([]int, 0, len(r.BatchSizeHist))
	for s, c := range r.BatchSizeHist {
		if s > 0 && c > 0 {
			sizes = append(sizes, s)
		}
	}
	if len(sizes) == 0 {
		return nil, nil
	}
	slices.Sort(sizes)
	bins := make([]plotter.HistogramBin, len(sizes))
	for i, s := range sizes {
		bins[i] = plotter.HistogramBin{
			Min:    float64(s) - 0.5,
			Max:    float64(s) + 0.5,
			Weight: float64(s) * float64(r.BatchSizeHist[s]),
		}
	}
	h := &plotter.Histogram{
		Bins:      bins,
		Width:     1,
		FillColor: colorOf(0),
		LineStyle: plotter.DefaultLineStyle,
	}
	h.LineStyle.Width = vg.Points(0.5)
	p := plot.New()
	p.Title.Text = "Requests by batch size"
	p.X.Label.Text = "batch size"
	p.Y.Label.Text = "requests (batch size × batches)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid(), h)
	// Leave half a bar of space on each side so no bar touches the frame.
	p.X.Min = math.Min(0, p.X.Min)
	p.X.Max += 0.5
	addHeadroom(p, 0.05)
	return p, nil
}

// timelineSeries is one line of a timeline chart.
type timelineSeries struct {
	label string
	value func(TimePoint) float64
}

// timelinePlot charts series over r.TimeSeries, or returns nil with fewer
// than two points. Each TimePoint covers the interval from its Start to the
// next one's, so the lines are steps, and the last interval is drawn as long
// as the one before it.
func timelinePlot(r *Report, title, yLabel string, series []timelineSeries) (*plot.Plot, error) {
	ts := r.TimeSeries
	if len(ts) < 2 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	end := ts[len(ts)-1].Start + (ts[len(ts)-1].Start - ts[len(ts)-2].Start)
	for i, s := range series {
		var xys plotter.XYs
		for _, tp := range ts {
			xys = appendFinite(xys, tp.Start, s.value(tp))
		}
		if len(xys) == 0 {
			continue
		}
		xys = appendFinite(xys, end, xys[len(xys)-1].Y)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.StepStyle = plotter.PostStep
		line.Color = colorOf(i)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.label, line)
	}
	addHeadroom(p, 0.2) // the legend sits in this space, above the lines
	return p, nil
}

func timelineRatePlot(r *Report) (*plot.Plot, error) {
	return timelinePlot(r, "Offered load and goodput", "requests/s", []timelineSeries{
		{"offered", func(tp TimePoint) float64 { return tp.OfferedRPS }},
		{"goodput", func(tp TimePoint) float64 { return tp.GoodputRPS }},
	})
}

func timelineGPUsPlot(r *Report) (*plot.Plot, error) {
	return timelinePlot(r, "GPUs", "GPUs", []timelineSeries{
		{"busy", func(tp TimePoint) float64 { return tp.BusyGPUs }},
		{"total", func(tp TimePoint) float64 { return float64(tp.GPUs) }},
	})
}

func timelineBadRatePlot(r *Report) (*plot.Plot, error) {
	return timelinePlot(r, "Bad rate", "bad rate (%)", []timelineSeries{
		{"dropped, failed or late", func(tp TimePoint) float64 { return 100 * tp.BadRate }},
	})
}

// BarSeries is one set of bars of a WriteBarPlot chart: a value for each
// group, NaN where it has none.
type BarSeries struct {
	Label  string
	Values []float64
	// Color picks the bars' color (SeriesColor(Color)).
	Color int
}

// WriteBarPlot writes a grouped bar chart, one group per name in groups and
// one bar per series within each group (a paper's "goodput by system for
// each setting"), as dir/name.svg and dir/name.png, and returns the paths.
// The Y axis starts at 0. NaN values draw no bar; with no groups or no
// series it writes nothing and returns no error.
func WriteBarPlot(dir, name, title, yLabel string, groups []string, series []BarSeries) ([]string, error) {
	if err := checkPlotName(name); err != nil {
		return nil, fmt.Errorf("report: WriteBarPlot: %w", err)
	}
	if len(groups) == 0 || len(series) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	p.Legend.Top = true
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // the X axis is nominal: no vertical grid
	p.Add(grid)
	width := min(vg.Points(30), vg.Points(360/float64(len(groups)*len(series))))
	for i, s := range series {
		if len(s.Values) != len(groups) {
			return nil, fmt.Errorf("report: WriteBarPlot: series %q has %d values for %d groups", s.Label, len(s.Values), len(groups))
		}
		values := make(plotter.Values, len(groups))
		for j, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				values[j] = v
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, fmt.Errorf("report: WriteBarPlot: series %q: %w", s.Label, err)
		}
		bars.Color = colorOf(s.Color)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(series)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(s.Label, bars)
	}
	p.NominalX(groups...)
	addHeadroom(p, 0.25)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: WriteBarPlot: %w", err)
	}
	paths, err := savePlot(p, dir, name)
	if err != nil {
		return paths, fmt.Errorf("report: WriteBarPlot: %w", err)
	}
	return paths, nil
}
