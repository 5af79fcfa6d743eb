package sim

import (
	"fmt"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
)

// WriteCloudPlots charts cloud runs over time, one line per run (labelled
// by its policy): the GPUs billed, the cost so far and the share of
// requests within their SLO, as dir/NAME-gpus, NAME-cost and NAME-slo (SVG
// and PNG). The x axis is the hour of the day, the runs starting at start.
// It returns the files written.
func WriteCloudPlots(dir, name string, start time.Duration, runs []*CloudResult) ([]string, error) {
	var gpus, cost, attain []report.Series
	for i, c := range runs {
		g := report.Series{Label: c.Policy, Color: i}
		k := report.Series{Label: c.Policy, Color: i}
		a := report.Series{Label: c.Policy, Color: i}
		var sum float64
		for _, s := range c.Series {
			h := (start + s.Start).Hours()
			sum += s.Cost
			g.Points = append(g.Points, [2]float64{h, s.GPUsBilled})
			k.Points = append(k.Points, [2]float64{h, sum})
			a.Points = append(a.Points, [2]float64{h, 100 * s.Attainment()})
		}
		gpus, cost, attain = append(gpus, g), append(cost, k), append(attain, a)
	}
	var files []string
	for _, p := range []struct {
		what, y string
		s       []report.Series
	}{{"gpus", "GPUs billed", gpus}, {"cost", "cost so far ($)", cost}, {"slo", "requests within SLO (%)", attain}} {
		paths, err := report.WriteLinePlot(dir, name+"-"+p.what, fmt.Sprintf("%s: %s over time", name, p.y), "hour", p.y, p.s)
		files = append(files, paths...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
