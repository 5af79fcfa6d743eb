package cloudscale

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/provision"
)

func twoModuleApp() *provision.App {
	pts := func(alpha, beta time.Duration) []provision.Point {
		var out []provision.Point
		for b := 1; b <= 16; b *= 2 {
			out = append(out, provision.Point{Batch: b, Concurrency: 1, Latency: alpha*time.Duration(b) + beta})
		}
		return out
	}
	return &provision.App{
		SLO:      300 * time.Millisecond,
		Hardware: []provision.Hardware{{Name: "gpu", PricePerHour: 3}},
		Modules: []provision.Module{
			{Name: "detect", Kind: provision.GPU, Ingress: 100, Profiles: []provision.Profile{{Hardware: "gpu", Points: pts(8*time.Millisecond, 20*time.Millisecond)}}},
			{Name: "classify", Kind: provision.GPU, Profiles: []provision.Profile{{Hardware: "gpu", Points: pts(2*time.Millisecond, 10*time.Millisecond)}}},
		},
		Edges: []provision.Edge{{From: "detect", To: "classify", Scale: 4}},
	}
}

// rentedFor plans app and counts the GPU instances its packing rents.
func rentedFor(t *testing.T, app *provision.App) int {
	t.Helper()
	p, err := provision.Solve(app, provision.Default())
	if err != nil {
		t.Fatal(err)
	}
	pk := provision.Pack(app, p)
	return pk.Count("gpu")
}

// TestReplanner: the first plan's instances and budgets come at once; a
// period whose arrivals show the scale unchanged re-plans nothing; one
// that shows it doubled re-plans, for what Solve rents at the doubled
// scale, and gives the new budgets; the baseline never re-plans.
func TestReplanner(t *testing.T) {
	app := twoModuleApp()
	typ := InstanceType{Name: "g", GPUs: 1, PricePerHour: 3, Launch: time.Minute}
	for _, replan := range []bool{true, false} {
		cfg := DefaultReplan(app, provision.Default(), []InstanceType{typ}, []string{"detect", "classify"})
		cfg.Replan, cfg.WarmPool = replan, 1
		r, err := NewReplanner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		first := rentedFor(t, app)
		if got := len(r.Start(0)); got != first+1 {
			t.Fatalf("starts %d instances, want the plan's %d and one warm", got, first)
		}
		fleet := fleetOf([]InstanceType{typ}, 0, first+1, 0)
		d := r.Decide(&Observation{Now: 0, Fleet: fleet})
		if len(d.SLOs) != 2 || d.SLOs[0]+d.SLOs[1] > app.SLO || len(d.Launch) != 0 {
			t.Fatalf("first tick: SLOs %v (must fit %v), launches %v", d.SLOs, app.SLO, d.Launch)
		}
		tick := func(now time.Duration, detect, classify uint64) Decision {
			return r.Decide(&Observation{Now: now, ModelArrivals: []uint64{detect, classify}, Fleet: fleet})
		}
		// Two minutes at the planned rates: 100 and 400 a second.
		for now := 5 * time.Second; now < 2*time.Minute; now += 5 * time.Second {
			tick(now, 500, 2000)
		}
		if d := tick(2*time.Minute, 500, 2000); d.SLOs != nil || len(d.Launch) != 0 || r.Replans() != 0 {
			t.Fatalf("steady rates re-planned: %+v, %d re-plans", d, r.Replans())
		}
		// Two minutes at eight objects a frame.
		for now := 2*time.Minute + 5*time.Second; now < 4*time.Minute; now += 5 * time.Second {
			tick(now, 500, 4000)
		}
		d = tick(4*time.Minute, 500, 4000)
		doubled := twoModuleApp()
		doubled.Edges[0].Scale = 8
		want := rentedFor(t, doubled) + 1 - len(fleet)
		switch {
		case replan && (r.Replans() != 1 || len(d.Launch) != want || d.SLOs == nil):
			t.Errorf("scale doubled: %d re-plans, %d launches (want %d), SLOs %v", r.Replans(), len(d.Launch), want, d.SLOs)
		case !replan && (r.Replans() != 0 || len(d.Launch) != 0 || d.SLOs != nil):
			t.Errorf("without re-planning: %d re-plans, launches %v, SLOs %v", r.Replans(), d.Launch, d.SLOs)
		}
	}
}

func TestNewReplannerErrors(t *testing.T) {
	typ := InstanceType{Name: "g", GPUs: 1, PricePerHour: 3}
	for name, mutate := range map[string]func(*ReplanConfig){
		"no app":         func(c *ReplanConfig) { c.App = nil },
		"no drift":       func(c *ReplanConfig) { c.Drift = 0 },
		"tick > period":  func(c *ReplanConfig) { c.TickEvery = time.Hour },
		"unknown module": func(c *ReplanConfig) { c.Models = []string{"detect", "nope"} },
		"no types":       func(c *ReplanConfig) { c.Types = nil },
		"4-GPU type":     func(c *ReplanConfig) { c.Types = []InstanceType{{Name: "g4", GPUs: 4, PricePerHour: 12}} },
		"other hardware": func(c *ReplanConfig) {
			c.Types = []InstanceType{{Name: "v", GPUs: 1, Hardware: "v100", PricePerHour: 3}}
		},
	} {
		cfg := DefaultReplan(twoModuleApp(), provision.Default(), []InstanceType{typ}, []string{"detect", "classify"})
		mutate(&cfg)
		if _, err := NewReplanner(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// pipelineApp is a CPU decoder feeding twoModuleApp's detector: decoding
// takes 30 ms a frame at concurrency 4 on a cpu machine (133 frames a
// second each).
func pipelineApp() *provision.App {
	app := twoModuleApp()
	app.Hardware = append(app.Hardware, provision.Hardware{Name: "cpu", PricePerHour: 0.4})
	app.Modules[0].Ingress = 0
	app.Modules = append([]provision.Module{{Name: "decode", Kind: provision.CPU, Ingress: 100,
		Profiles: []provision.Profile{{Hardware: "cpu", Points: []provision.Point{{Batch: 1, Concurrency: 4, Latency: 30 * time.Millisecond}}}}}}, app.Modules...)
	app.Edges = append([]provision.Edge{{From: "decode", To: "detect", Scale: 1}}, app.Edges...)
	return app
}

// TestReplannerRentsCPUMachines: a pipeline's CPU module is rented as CPU
// machines of its own type beside the GPUs, each type with its warm
// instance; when the frame rate doubles, the re-plan launches both kinds,
// each as many as Solve's new plan packs onto.
func TestReplannerRentsCPUMachines(t *testing.T) {
	gpu := InstanceType{Name: "g", GPUs: 1, Hardware: "gpu", PricePerHour: 3, Launch: time.Minute}
	cpu := InstanceType{Name: "c", CPUs: 4, Hardware: "cpu", PricePerHour: 0.4, Launch: time.Minute}
	types := []InstanceType{gpu, cpu}
	rents := func(app *provision.App) (gpus, cpus int) {
		p, err := provision.Solve(app, provision.Default())
		if err != nil {
			t.Fatal(err)
		}
		pk := provision.Pack(app, p)
		return pk.Count("gpu"), pk.Count("cpu")
	}
	cfg := DefaultReplan(pipelineApp(), provision.Default(), types, []string{"decode", "detect", "classify"})
	r, err := NewReplanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g0, c0 := rents(pipelineApp())
	start := r.Start(0)
	if c0 < 1 || count(start, 0) != g0+1 || count(start, 1) != c0+1 {
		t.Fatalf("starts types %v; the plan rents %d GPUs and %d CPU machines (each type and one warm)", start, g0, c0)
	}
	var fleet []Instance
	for i, typ := range start {
		fleet = append(fleet, Instance{ID: InstanceID(i), Type: typ})
	}
	r.Decide(&Observation{Now: 0, Fleet: fleet})
	for now := 5 * time.Second; now <= 2*time.Minute; now += 5 * time.Second {
		d := r.Decide(&Observation{Now: now, ModelArrivals: []uint64{1000, 1000, 4000}, Fleet: fleet})
		if now < 2*time.Minute {
			continue
		}
		doubled := pipelineApp()
		doubled.Modules[0].Ingress = 200
		g1, c1 := rents(doubled)
		if r.Replans() != 1 || count(d.Launch, 0) != g1-g0 || count(d.Launch, 1) != c1-c0 || c1 <= c0 {
			t.Errorf("frames doubled: %d re-plans, launches %v; the new plan rents %d GPUs and %d CPU machines (was %d and %d)", r.Replans(), d.Launch, g1, c1, g0, c0)
		}
	}
	// Types that cannot rent the plan's machines are refused.
	for name, types := range map[string][]InstanceType{
		"no CPU type":             {gpu},
		"the decoder on GPUs":     {gpu, {Name: "c", GPUs: 1, Hardware: "cpu", PricePerHour: 1}},
		"the detector on CPUs":    {{Name: "g", CPUs: 8, Hardware: "gpu", PricePerHour: 1}, cpu},
		"4 at once on 2 CPUs":     {gpu, {Name: "c", CPUs: 2, Hardware: "cpu", PricePerHour: 0.2}},
		"one type for both kinds": {{Name: "any", GPUs: 1, PricePerHour: 3}},
	} {
		cfg.Types = types
		if _, err := NewReplanner(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func count(types []int, typ int) int {
	n := 0
	for _, t := range types {
		if t == typ {
			n++
		}
	}
	return n
}
