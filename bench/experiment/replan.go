package experiment

import (
	"fmt"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/sim"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/cloudscale"
	"github.com/symphony-serving/symphony/partition/provision"
)

func replanExperiment() *Experiment {
	return &Experiment{
		Name:  "replan",
		Title: "a scaling factor doubles mid-run: Scrooge's re-planning against the plan it started with",
		Paper: "Scrooge (seed 000) §2 and §3.5: the scaling factors of a media application's edges (objects per frame) change with the " +
			"input; Scrooge estimates them online and re-plans, keeping SLO attainment where a fixed plan loses it.",
		Deterministic: true,
		run:           runReplan,
	}
}

// replanApp is a detector feeding a classifier four objects a frame, at
// 400 frames a second, within 300 ms, on one GPU kind: linear profiles
// ℓ(b) = αb + β measured at powers of two.
func replanApp() *provision.App {
	points := func(alpha, beta time.Duration, upTo int) []provision.Point {
		var pts []provision.Point
		for b := 1; b <= upTo; b *= 2 {
			pts = append(pts, provision.Point{Batch: b, Concurrency: 1, Latency: alpha*time.Duration(b) + beta})
		}
		return pts
	}
	return &provision.App{
		SLO:      300 * time.Millisecond,
		Hardware: []provision.Hardware{{Name: "gpu", PricePerHour: 3.06}},
		Modules: []provision.Module{
			{Name: "detect", Kind: provision.GPU, Ingress: 400, Profiles: []provision.Profile{{Hardware: "gpu", Points: points(8*time.Millisecond, 20*time.Millisecond, 16)}}},
			{Name: "classify", Kind: provision.GPU, Profiles: []provision.Profile{{Hardware: "gpu", Points: points(2*time.Millisecond, 10*time.Millisecond, 32)}}},
		},
		Edges: []provision.Edge{{From: "detect", To: "classify", Scale: 4}},
	}
}

// replanDoubleAt is when the classifier's scaling factor doubles.
const replanDoubleAt = 10 * time.Minute

func runReplan(r *Run) error {
	length := 40 * time.Minute
	if r.Quick {
		length = 20 * time.Minute
	}
	app := replanApp()
	// The objectives start as the first plan's budgets, which the policy
	// sets again at its first tick.
	first, err := provision.Solve(app, provision.Default())
	if err != nil {
		return err
	}
	budget := map[string]time.Duration{}
	for _, m := range first.Modules {
		budget[m.Name] = m.Budget
	}
	// The load: the detector's 400 frames a second, and the classifier's
	// four objects a frame, then eight from replanDoubleAt on, as steady
	// streams (the arrivals the plans are made for).
	load := fmt.Sprintf(`seed: 1
duration: %s
warmup: 0s
cluster: {gpus: 128}
network: %s
models:
  - {name: detect, profile: {alpha: 8ms, beta: 20ms, max_batch: 16}, slo: %s, rate: 400, arrival: const}
  - {name: classify, profile: {alpha: 2ms, beta: 10ms, max_batch: 32}, slo: %s, rates: [{duration: %s, rate: 1600}, {rate: 3200}], arrival: const}
policy: symphony
`, length, paperNetwork, budget["detect"], budget["classify"], replanDoubleAt)
	w, err := workload.Parse([]byte(load), "replan experiment")
	if err != nil {
		return err
	}
	typ := sim.DefaultCloudTypes(0)[0] // gpu.1x: one GPU, 100 s to boot
	var cells []cell
	var policies []*cloudscale.Replanner
	for _, replan := range []bool{true, false} {
		cfg := cloudscale.DefaultReplan(app, provision.Default(), typ, []string{"detect", "classify"})
		cfg.Replan = replan
		p, err := cloudscale.NewReplanner(cfg)
		if err != nil {
			return err
		}
		policies = append(policies, p)
		cells = append(cells, cell{name: p.Name(), w: w, cloud: &sim.Cloud{Types: []cloudscale.InstanceType{typ}, Policy: p}})
	}
	outs, err := r.simulate(cells)
	if err != nil {
		return err
	}
	period := cloudscale.DefaultReplan(app, provision.Default(), typ, nil).Period
	// One row per re-plan period, the two policies side by side.
	r.columns(num("from_minute", "%.0f"), num("replan_attainment_pct", "%.3f"), num("no_replan_attainment_pct", "%.3f"),
		num("replan_gpus", "%.2f"), num("no_replan_gpus", "%.2f"))
	var series []report.Series
	recovered := map[string]float64{} // worst minute from two periods after the change on
	type window struct{ offered, good, gpus [2]float64 }
	perMinute := int(period / time.Minute)
	var windows []window
	for k, o := range outs {
		if o.err != nil {
			return fmt.Errorf("%s: %w", cells[k].name, o.err)
		}
		name := cells[k].name
		s := report.Series{Label: name, Color: k}
		worst := 1.0
		for i, x := range o.cloud.Series {
			minute := x.Start.Minutes()
			s.Points = append(s.Points, [2]float64{minute, 100 * x.Attainment()})
			if x.Start >= replanDoubleAt+2*period {
				worst = min(worst, x.Attainment())
			}
			if i/perMinute >= len(windows) {
				windows = append(windows, window{})
			}
			wd := &windows[i/perMinute]
			wd.offered[k] += float64(x.Offered)
			wd.good[k] += float64(x.Good)
			wd.gpus[k] += x.GPUsBilled / float64(perMinute)
		}
		recovered[name] = worst
		series = append(series, s)
		r.note("%s: %d re-plans; %.3f%% of all requests within SLO; cost %.2f", name, policies[k].Replans(), 100*o.cloud.Attainment, o.cloud.Cost)
		if err := policies[k].Failed(); err != nil {
			r.note("%s: a re-plan failed: %v", name, err)
		}
	}
	for i, wd := range windows {
		r.row(float64(i*perMinute), 100*ratio(wd.good[0], wd.offered[0]), 100*ratio(wd.good[1], wd.offered[1]), wd.gpus[0], wd.gpus[1])
	}
	r.claim("with re-planning, every minute from two re-plan periods after the scaling factor doubles keeps >= 99% in SLO",
		recovered["scrooge-replan"] >= 0.99, "worst minute %.3f%%", 100*recovered["scrooge-replan"])
	r.claim("without re-planning, it does not", recovered["scrooge-no-replan"] < 0.99, "worst minute %.3f%%", 100*recovered["scrooge-no-replan"])
	r.note("The classifier's scaling factor goes from 4 to 8 objects a frame at minute %.0f; re-plan period %v, drift threshold 20%%, one warm instance, instances boot in 100 s.",
		replanDoubleAt.Minutes(), period)
	r.note("Attainment is by arrival minute: the share of the minute's requests answered within the SLO (the module's budget in force when they arrived).")
	if r.OutDir == "" {
		return nil
	}
	return r.plotted(report.WriteLinePlot(r.OutDir, "replan", "A scaling factor doubles at minute "+strings.TrimSuffix(fmt.Sprint(replanDoubleAt.Minutes()), ".0")+": SLO attainment by minute",
		"minute", "requests within SLO (%)", series))
}
