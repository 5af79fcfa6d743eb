package experiment

import (
	"fmt"
	"slices"
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

// replanDoubleAt is when the scenario's load changes.
const replanDoubleAt = 10 * time.Minute

// replanScenario is one re-planning experiment: an application, the run's
// models (one per module, in order), the instance types its machines are
// rented as, and the workload: each module's load before and after
// replanDoubleAt, at the objectives of the first plan.
type replanScenario struct {
	app    *provision.App
	models []string
	types  []cloudscale.InstanceType
	// load is the workload's YAML for a run of length whose modules start
	// with the objectives budget.
	load func(budget map[string]time.Duration, length time.Duration) string
	// change says what happens at replanDoubleAt.
	change string
}

func runReplan(r *Run) error {
	typ := sim.DefaultCloudTypes(0)[0] // gpu.1x: one GPU, 100 s to boot
	return runReplanScenario(r, replanScenario{
		app: replanApp(), models: []string{"detect", "classify"}, types: []cloudscale.InstanceType{typ},
		// The detector's 400 frames a second, and the classifier's four
		// objects a frame, then eight, as steady streams (the arrivals
		// the plans are made for).
		load: func(budget map[string]time.Duration, length time.Duration) string {
			return fmt.Sprintf(`seed: 1
duration: %s
warmup: 0s
cluster: {gpus: 128}
network: %s
models:
  - {name: detect, profile: {alpha: 8ms, beta: 20ms, max_batch: 16}, slo: %s, rate: 400, arrival: const}
  - {name: classify, profile: {alpha: 2ms, beta: 10ms, max_batch: 32}, slo: %s, rates: [{duration: %s, rate: 1600}, {rate: 3200}], arrival: const}
policy: symphony
`, length, paperNetwork, budget["detect"], budget["classify"], replanDoubleAt)
		},
		change: "The classifier's scaling factor goes from 4 to 8 objects a frame",
	})
}

func replanPipelineExperiment() *Experiment {
	return &Experiment{
		Name:  "replan-pipeline",
		Title: "the frame rate doubles mid-run: Scrooge's re-planning of a pipeline whose decoder runs on CPU machines",
		Paper: "Scrooge (seed 000) §2 and §3.5: media applications mix CPU modules (decoding) with GPU ones, on instances of their own; " +
			"when the input changes, Scrooge re-plans both.",
		Deterministic: true,
		run:           runReplanPipeline,
	}
}

// pipelineApp is replanApp behind a video decoder that runs on CPU
// machines of 4 vCPUs (EC2's c5.xlarge, $0.17 an hour), 30 ms a frame on
// each vCPU, at 200 frames a second.
func pipelineApp() *provision.App {
	app := replanApp()
	app.Hardware = append(app.Hardware, provision.Hardware{Name: "cpu4", PricePerHour: 0.17})
	app.Modules[0].Ingress = 0
	decode := provision.Module{Name: "decode", Kind: provision.CPU, Ingress: 200, Profiles: []provision.Profile{{Hardware: "cpu4",
		Points: []provision.Point{{Batch: 1, Concurrency: 4, Latency: 30 * time.Millisecond}}}}}
	app.Modules = append([]provision.Module{decode}, app.Modules...)
	app.Edges = append([]provision.Edge{{From: "decode", To: "detect", Scale: 1}}, app.Edges...)
	return app
}

func runReplanPipeline(r *Run) error {
	gpu := sim.DefaultCloudTypes(0)[0]
	gpu.Hardware = "gpu"
	cpu := cloudscale.InstanceType{Name: "cpu.4x", CPUs: 4, Hardware: "cpu4", PricePerHour: 0.17, Launch: 60 * time.Second,
		BillingMinimum: time.Minute, BillingIncrement: time.Second}
	return runReplanScenario(r, replanScenario{
		app: pipelineApp(), models: []string{"decode", "detect", "classify"}, types: []cloudscale.InstanceType{gpu, cpu},
		// Every module's requests double with the frames: 200 and then
		// 400 frames a second, four objects each. The decoder's requests
		// run one at a time, up to 4 at once on each CPU machine.
		load: func(budget map[string]time.Duration, length time.Duration) string {
			rates := func(before float64) string {
				return fmt.Sprintf("[{duration: %s, rate: %g}, {rate: %g}]", replanDoubleAt, before, 2*before)
			}
			return fmt.Sprintf(`seed: 1
duration: %s
warmup: 0s
cluster:
  gpu_types:
    - {name: gpu, count: 128, price_per_hour: 3.06}
    - {name: cpu4, count: 32, price_per_hour: 0.17}
network: %s
models:
  - {name: decode, profile: {batch_latency: [30ms]}, gpu_type: cpu4, concurrency: 4, slo: %s, rates: %s, arrival: const}
  - {name: detect, profile: {alpha: 8ms, beta: 20ms, max_batch: 16}, gpu_type: gpu, slo: %s, rates: %s, arrival: const}
  - {name: classify, profile: {alpha: 2ms, beta: 10ms, max_batch: 32}, gpu_type: gpu, slo: %s, rates: %s, arrival: const}
policy: symphony
`, length, paperNetwork, budget["decode"], rates(200), budget["detect"], rates(200), budget["classify"], rates(800))
		},
		change: "The frames go from 200 to 400 a second",
	})
}

func runReplanScenario(r *Run, sc replanScenario) error {
	length := 40 * time.Minute
	if r.Quick {
		length = 20 * time.Minute
	}
	// The objectives start as the first plan's budgets, which the policy
	// sets again at its first tick.
	first, err := provision.Solve(sc.app, provision.Default())
	if err != nil {
		return err
	}
	budget := map[string]time.Duration{}
	for _, m := range first.Modules {
		budget[m.Name] = m.Budget
	}
	w, err := workload.Parse([]byte(sc.load(budget, length)), r.exp.Name+" experiment")
	if err != nil {
		return err
	}
	cpus := slices.ContainsFunc(sc.types, func(t cloudscale.InstanceType) bool { return t.GPUs == 0 })
	var cells []cell
	var policies []*cloudscale.Replanner
	for _, replan := range []bool{true, false} {
		cfg := cloudscale.DefaultReplan(sc.app, provision.Default(), sc.types, sc.models)
		cfg.Replan = replan
		p, err := cloudscale.NewReplanner(cfg)
		if err != nil {
			return err
		}
		policies = append(policies, p)
		cells = append(cells, cell{name: p.Name(), w: w, cloud: &sim.Cloud{Types: sc.types, Policy: p}})
	}
	outs, err := r.simulate(cells)
	if err != nil {
		return err
	}
	period := cloudscale.DefaultReplan(sc.app, provision.Default(), sc.types, nil).Period
	// One row per re-plan period, the two policies side by side.
	cols := []Column{num("from_minute", "%.0f"), num("replan_attainment_pct", "%.3f"), num("no_replan_attainment_pct", "%.3f"),
		num("replan_gpus", "%.2f"), num("no_replan_gpus", "%.2f")}
	if cpus {
		cols = append(cols, num("replan_cpu_machines", "%.2f"), num("no_replan_cpu_machines", "%.2f"))
	}
	r.columns(cols...)
	var series []report.Series
	recovered := map[string]float64{} // worst minute from two periods after the change on
	type window struct{ offered, good, gpus, cpus [2]float64 }
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
			wd.cpus[k] += x.CPUMachinesBilled / float64(perMinute)
		}
		recovered[name] = worst
		series = append(series, s)
		r.note("%s: %d re-plans; %.3f%% of all requests within SLO; cost %.2f", name, policies[k].Replans(), 100*o.cloud.Attainment, o.cloud.Cost)
		if err := policies[k].Failed(); err != nil {
			r.note("%s: a re-plan failed: %v", name, err)
		}
	}
	for i, wd := range windows {
		row := []any{float64(i * perMinute), 100 * ratio(wd.good[0], wd.offered[0]), 100 * ratio(wd.good[1], wd.offered[1]), wd.gpus[0], wd.gpus[1]}
		if cpus {
			row = append(row, wd.cpus[0], wd.cpus[1])
		}
		r.row(row...)
	}
	r.claim("with re-planning, every minute from two re-plan periods after the change keeps >= 99% in SLO",
		recovered["scrooge-replan"] >= 0.99, "worst minute %.3f%%", 100*recovered["scrooge-replan"])
	r.claim("without re-planning, it does not", recovered["scrooge-no-replan"] < 0.99, "worst minute %.3f%%", 100*recovered["scrooge-no-replan"])
	if cpus {
		before, after := windows[0].cpus[0], windows[len(windows)-1].cpus[0]
		r.claim("re-planning rents more CPU machines for the decoder", after > before, "%.2f before the change, %.2f at the end", before, after)
	}
	r.note("%s at minute %.0f; re-plan period %v, drift threshold 20%%, one warm instance of each type, instances boot in %s.",
		sc.change, replanDoubleAt.Minutes(), period, boots(sc.types))
	r.note("Attainment is by arrival minute: the share of the minute's requests answered within the SLO (the module's budget in force when they arrived).")
	if r.OutDir == "" {
		return nil
	}
	return r.plotted(report.WriteLinePlot(r.OutDir, r.exp.Name, sc.change+" at minute "+strings.TrimSuffix(fmt.Sprint(replanDoubleAt.Minutes()), ".0")+": SLO attainment by minute",
		"minute", "requests within SLO (%)", series))
}

// boots says how long the types take to boot: "100 s", or by type.
func boots(types []cloudscale.InstanceType) string {
	if len(types) == 1 {
		return fmt.Sprintf("%.0f s", types[0].Launch.Seconds())
	}
	var parts []string
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%.0f s (%s)", t.Launch.Seconds(), t.Name))
	}
	return strings.Join(parts, ", ")
}
