package provision

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validApp() *App {
	return &App{
		SLO:      time.Second,
		Hardware: []Hardware{{Name: "g", PricePerHour: 1}},
		Modules: []Module{
			{Name: "a", Ingress: 10, Profiles: []Profile{{Hardware: "g", Points: []Point{{Batch: 2, Concurrency: 1, Latency: 50 * time.Millisecond}}}}},
			{Name: "b", Profiles: []Profile{{Hardware: "g", Points: []Point{{Batch: 4, Concurrency: 1, Latency: 60 * time.Millisecond}}}}},
		},
		Edges: []Edge{{From: "a", To: "b", Scale: 2}},
	}
}

func TestAppValidate(t *testing.T) {
	if err := validApp().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(a *App)
		want   string
	}{
		{func(a *App) { a.SLO = 0 }, "slo"},
		{func(a *App) { a.Hardware = nil }, "no hardware"},
		{func(a *App) { a.Hardware[0].PricePerHour = 0 }, "price_per_hour"},
		{func(a *App) { a.Hardware = append(a.Hardware, a.Hardware[0]) }, "listed twice"},
		{func(a *App) { a.Modules = nil }, "no modules"},
		{func(a *App) { a.Modules[1].Name = "a" }, "listed twice"},
		{func(a *App) { a.Modules[0].Name = "a/b" }, "name"},
		{func(a *App) { a.Modules[0].Ingress = 0 }, "source (no incoming edge) without ingress"},
		{func(a *App) { a.Modules[0].Profiles[0].Hardware = "h" }, "unknown hardware"},
		{func(a *App) { a.Modules[0].Profiles[0].Points[0].Batch = 0 }, "batch is outside"},
		{func(a *App) { a.Modules[0].Profiles[0].Points[0].Concurrency = 0 }, "concurrency"},
		{func(a *App) { a.Modules[0].Profiles[0].Points[0].Latency = 0 }, "latency"},
		{func(a *App) { a.Modules[0].Kind = CPU }, "cpu module runs one input"},
		{func(a *App) { a.Edges[0].To = "c" }, `no module named "c"`},
		{func(a *App) { a.Edges[0].Scale = -1 }, "scale"},
		{func(a *App) { a.Edges = append(a.Edges, Edge{From: "b", To: "a", Scale: 1}) }, "cycle"},
		{func(a *App) {
			a.Hardware[0].Memory = 1 << 30
			a.Modules[0].Memory = 2 << 30
		}, "no configuration that fits"},
	} {
		a := validApp()
		tc.change(a)
		if err := a.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error about %q", err, tc.want)
		}
	}
}

func TestPathsAndRates(t *testing.T) {
	a := dagApp(time.Second, []string{"a", "b", "c", "d"}, [][2]string{{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}})
	paths, more, err := a.Paths(0)
	if err != nil || more || len(paths) != 2 || strings.Join(paths[0], ">") != "a>b>d" || strings.Join(paths[1], ">") != "a>c>d" {
		t.Fatalf("paths %v, more %v, %v", paths, more, err)
	}
	if paths, more, _ := a.Paths(1); len(paths) != 1 || !more {
		t.Fatalf("limited paths %v, more %v", paths, more)
	}
	// d gets both parents' outputs.
	a.Edges[2].Scale, a.Edges[3].Scale = 2, 3
	in, err := compile(a)
	if err != nil {
		t.Fatal(err)
	}
	if in.rate[3] != 5 || in.pathLen[0] != 3 {
		t.Fatalf("rates %v, path lengths %v", in.rate, in.pathLen)
	}
	// Configurations that do not fit the hardware's memory are left out.
	m := validApp()
	m.Hardware[0].Memory = 3 << 30
	m.Modules[0].Memory = 1 << 30
	m.Modules[0].Profiles[0].Points = append(m.Modules[0].Profiles[0].Points, Point{Batch: 2, Concurrency: 4, Latency: 150 * time.Millisecond})
	in, err = compile(m)
	if err != nil || len(in.cands[0]) != 1 {
		t.Fatalf("memory filter: %d candidates, %v", len(in.cands[0]), err)
	}
}

// TestRandomValidForValidConfigs: every configuration Validate accepts
// gives valid applications. Random used to panic on MaxPoints 8 (a batch
// of 5·4^7 > MaxBatch) and on large DAGs whose scales compound the rate
// past MaxRate.
func TestRandomValidForValidConfigs(t *testing.T) {
	rc := DefaultRandom()
	rc.MinModules, rc.MaxModules = 200, MaxModules
	rc.MinPoints, rc.MaxPoints = 8, 8
	rc.MaxRate = 1e6
	rc.MaxMachines = 1e12
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		app := rc.Random(7, i)
		if err := app.Validate(); err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
	}
}

// TestInfeasibleSaysWhy: an SLO below the fastest executions of a path is
// an ErrInfeasible that names the path's least latency.
func TestInfeasibleSaysWhy(t *testing.T) {
	app := dagApp(50*time.Millisecond, []string{"a", "b"}, [][2]string{{"a", "b"}})
	for i := range app.Modules {
		app.Modules[i].Profiles[0].Points[0].Latency = 40 * time.Millisecond
	}
	for _, o := range []Options{Default(), HeuristicsOnly(), Clipper.Options()} {
		_, err := Solve(app, o)
		if !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), "needs at least 80ms") {
			t.Errorf("%v: %v", o.Split, err)
		}
	}
}
