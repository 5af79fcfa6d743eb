package report

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// unsatisfiedGray fills the requests that were dropped, failed or late, as
// the paper's Figure 14 shows them in grayscale above the goodput.
var unsatisfiedGray = color.Gray{Y: 0x70}

// writeEpochFigure writes the paper's Figure 14 for a run with an epoch job
// as dir/figure14.svg and .png: four panels over time sharing the time axis,
// (1) each model's goodput stacked, with the unsatisfied requests in gray on
// top, so the outline is the offered load; (2) GPUs in use and busy GPUs;
// (3) the autoscaler's advice at each epoch, GPUs to add (up) or remove
// (down); (4) the bad rate. It writes nothing for a run without epochs.
func writeEpochFigure(dir string, r *Report) ([]string, error) {
	ts := r.TimeSeries
	if len(r.Epochs) == 0 || len(ts) < 2 || len(ts[0].ModelGoodputRPS) == 0 {
		return nil, nil
	}
	end := ts[len(ts)-1].Start + (ts[len(ts)-1].Start - ts[len(ts)-2].Start)
	goodput, err := stackedGoodputPanel(r, end)
	if err != nil {
		return nil, err
	}
	gpus, err := timelinePlot(r, "", "GPUs", []timelineSeries{
		{"in use", func(tp TimePoint) float64 { return tp.GPUsInUse }},
		{"busy", func(tp TimePoint) float64 { return tp.BusyGPUs }},
	})
	if err != nil {
		return nil, err
	}
	advice, err := advicePanel(r, end)
	if err != nil {
		return nil, err
	}
	bad, err := timelineBadRatePlot(r)
	if err != nil {
		return nil, err
	}
	bad.Title.Text = ""
	panels := []*plot.Plot{goodput, gpus, advice, bad}
	for i, p := range panels {
		p.X.Min, p.X.Max = 0, end
		if i < len(panels)-1 {
			p.X.Label.Text = ""
		}
	}
	goodput.Title.Text = "Epoch job: goodput per model, GPUs in use, autoscaling advice, bad rate"

	const w, h = 8 * vg.Inch, 11 * vg.Inch
	var paths []string
	for _, f := range plotFormats {
		path := filepath.Join(dir, "figure14."+f)
		var c interface {
			vg.CanvasSizer
			io.WriterTo
		}
		switch f {
		case "svg":
			c = vgsvg.New(w, h)
		case "png":
			c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
		default:
			return paths, fmt.Errorf("figure14: unknown format %q", f)
		}
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(12), PadY: vg.Points(8)}
		grid := make([][]*plot.Plot, len(panels))
		for i, p := range panels {
			grid[i] = []*plot.Plot{p}
		}
		canvases := plot.Align(grid, tiles, draw.New(c))
		for i, p := range panels {
			p.Draw(canvases[i][0])
		}
		if err := writeFile(path, c); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func writeFile(path string, w io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// stackedGoodputPanel stacks each model's goodput as a band, in model order,
// then the unsatisfied requests of all models in gray.
func stackedGoodputPanel(r *Report, end float64) (*plot.Plot, error) {
	ts := r.TimeSeries
	p := plot.New()
	p.Y.Label.Text = "requests/s"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	below := make([]float64, len(ts))
	band := func(value func(i int) float64, fill color.Color, label string) error {
		top := make([]float64, len(ts))
		for i := range ts {
			top[i] = below[i] + value(i)
		}
		// A step outline: along the top left to right, back along the bottom.
		var pts plotter.XYs
		for i, tp := range ts {
			x1 := end
			if i+1 < len(ts) {
				x1 = ts[i+1].Start
			}
			pts = append(pts, plotter.XY{X: tp.Start, Y: top[i]}, plotter.XY{X: x1, Y: top[i]})
		}
		for i := len(ts) - 1; i >= 0; i-- {
			x1 := end
			if i+1 < len(ts) {
				x1 = ts[i+1].Start
			}
			pts = append(pts, plotter.XY{X: x1, Y: below[i]}, plotter.XY{X: ts[i].Start, Y: below[i]})
		}
		poly, err := plotter.NewPolygon(pts)
		if err != nil {
			return err
		}
		poly.Color = fill
		poly.LineStyle.Width = 0
		p.Add(poly)
		if label != "" {
			p.Legend.Add(label, poly)
		}
		below = top
		return nil
	}
	for m := range ts[0].ModelGoodputRPS {
		label := ""
		if len(r.Models) == len(ts[0].ModelGoodputRPS) && m < 10 {
			label = r.Models[m].Name // the first few; a legend of 24 hides the plot
		}
		if err := band(func(i int) float64 { return ts[i].ModelGoodputRPS[m] }, colorOf(m), label); err != nil {
			return nil, err
		}
	}
	err := band(func(i int) float64 {
		var s float64
		for _, b := range ts[i].ModelBadRPS {
			s += b
		}
		return s
	}, unsatisfiedGray, "unsatisfied")
	if err != nil {
		return nil, err
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	addHeadroom(p, 0.35)
	return p, nil
}

// advicePanel draws each epoch's net advice as a step line around zero.
func advicePanel(r *Report, end float64) (*plot.Plot, error) {
	p := plot.New()
	p.Y.Label.Text = "advice (GPUs)"
	p.Add(plotter.NewGrid())
	var xys plotter.XYs
	for _, e := range r.Epochs {
		xys = appendFinite(xys, e.Start, float64(e.AdviceGPUs))
	}
	xys = append(xys, plotter.XY{X: end, Y: xys[len(xys)-1].Y})
	line, err := plotter.NewLine(xys)
	if err != nil {
		return nil, err
	}
	line.StepStyle = plotter.PostStep
	line.Color = colorOf(3)
	line.Width = vg.Points(1.5)
	p.Add(line)
	zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: end, Y: 0}})
	if err != nil {
		return nil, err
	}
	zero.Color = color.Gray{Y: 0x40}
	zero.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(zero)
	p.Legend.Add("add (+) / remove (−)", line)
	p.Legend.Top = true
	addHeadroom(p, 0.2)
	return p, nil
}
