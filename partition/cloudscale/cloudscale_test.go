package cloudscale

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition"
	"github.com/symphony-serving/symphony/partition/forecast"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// linearSizer needs one GPU per perGPU req/s.
type linearSizer struct{ perGPU float64 }

func (s linearSizer) Need(rate float64) float64     { return max(rate, 0) / s.perGPU }
func (s linearSizer) Capacity(gpus float64) float64 { return max(gpus, 0) * s.perGPU }

// fixedForecast forecasts the same series whatever it observes.
type fixedForecast struct {
	f        []float64
	observed []float64
}

func (f *fixedForecast) Observe(r float64) { f.observed = append(f.observed, r) }
func (f *fixedForecast) Forecast(h int) []float64 {
	out := make([]float64, h)
	for i := range out {
		out[i] = f.f[min(i, len(f.f)-1)]
	}
	return out
}
func (f *fixedForecast) Name() string { return "fixed" }

var (
	one  = InstanceType{Name: "one", GPUs: 1, PricePerHour: 3, Launch: 2 * time.Minute, BillingMinimum: time.Minute, BillingIncrement: time.Second}
	four = InstanceType{Name: "four", GPUs: 4, PricePerHour: 10, Launch: 2 * time.Minute, BillingMinimum: time.Minute, BillingIncrement: time.Second}
)

func flat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestInstanceTypeCapacity: a type brings GPUs or is a CPU machine, which
// brings one device; neither, both, or out of range is refused.
func TestInstanceTypeCapacity(t *testing.T) {
	cpu := InstanceType{Name: "cpu8", CPUs: 8, Hardware: "cpu8", PricePerHour: 0.4}
	if err := cpu.Validate(); err != nil || cpu.Devices() != 1 || four.Devices() != 4 {
		t.Fatalf("CPU machine: %v; devices %d and %d, want 1 and 4", err, cpu.Devices(), four.Devices())
	}
	for _, bad := range []InstanceType{
		{Name: "none", PricePerHour: 1},
		{Name: "both", GPUs: 1, CPUs: 8, PricePerHour: 1},
		{Name: "huge", CPUs: maxCPUs + 1, PricePerHour: 1},
		{Name: "negative", GPUs: -1, PricePerHour: 1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	// The policies that size one GPU mix refuse CPU machines and pinned kinds.
	for _, types := range [][]InstanceType{{cpu}, {{Name: "v100", GPUs: 1, Hardware: "v100", PricePerHour: 3}}} {
		if err := (&Static{Types: types, Sizer: linearSizer{100}}).Validate(); err == nil {
			t.Errorf("static on %+v: accepted", types)
		}
		if err := (&Reactive{Types: types, Sizer: linearSizer{100}, Target: 0.7, TickEvery: time.Second}).Validate(); err == nil {
			t.Errorf("reactive on %+v: accepted", types)
		}
	}
}

func TestBilled(t *testing.T) {
	for _, c := range []struct{ ran, want time.Duration }{
		{0, time.Minute}, {30 * time.Second, time.Minute}, {61 * time.Second, 61 * time.Second},
		{61*time.Second + time.Millisecond, 62 * time.Second}, {time.Hour, time.Hour},
	} {
		if got := one.Billed(c.ran); got != c.want {
			t.Errorf("Billed(%v) = %v, want %v", c.ran, got, c.want)
		}
	}
	if got := one.Cost(time.Hour); got != 3 {
		t.Errorf("an hour of a $3/h instance costs %v", got)
	}
}

// TestGreedyHandWorked checks Algorithm 1 on cases worked by hand. Steps
// are minutes; both types boot in 2 steps.
func TestGreedyHandWorked(t *testing.T) {
	types := []InstanceType{one, four}
	cases := []struct {
		name    string
		need    []float64
		running [][]int
		want    GreedyPlan
	}{
		// One GPU of need for 10 steps: a "one" costs (2·3/60 + 8·3/60)/8
		// per GPU-step (launch overhead 2 steps, serves steps 2..9), a
		// "four" (2·10/60 + 8·10/60)/8: the small one.
		{"small need takes the small type", flat(1, 10), nil, GreedyPlan{Keep: []int{0, 0}, Launch: []int{1, 0}, Later: []int{0, 0}}},
		// Four GPUs: the first instance chosen sees 4 GPU-steps unmet a
		// step; a "four" serves all 4 at 10/h, a "one" serves 1 at 3/h.
		{"four GPUs of need take one four", flat(4, 10), nil, GreedyPlan{Keep: []int{0, 0}, Launch: []int{0, 1}, Later: []int{0, 0}}},
		// Five: a four, then one GPU left: a one.
		{"five takes a four and a one", flat(5, 10), nil, GreedyPlan{Keep: []int{0, 0}, Launch: []int{1, 1}, Later: []int{0, 0}}},
		// Two running "one"s serve a need of 2 with no launch overhead.
		{"running instances are kept", flat(2, 10), [][]int{{0, 0}, nil}, GreedyPlan{Keep: []int{2, 0}, Launch: []int{0, 0}, Later: []int{0, 0}}},
		// A rise 10 steps ahead is launched 2 steps before it, not now.
		{"a later rise is launched just in time", append(flat(0, 10), flat(2, 10)...), nil, GreedyPlan{Keep: []int{0, 0}, Launch: []int{0, 0}, Later: []int{2, 0}}},
		// A running instance idle for 19 steps before it is needed again
		// costs 28 steps of price to keep for the 9 steps it serves,
		// (28·3)/9 a GPU-step; a relaunch just in time (2·3 + 9·3)/9.
		{"an instance idle longer than a relaunch is let go", append(flat(0, 19), flat(1, 9)...), [][]int{{0}, nil}, GreedyPlan{Keep: []int{0, 0}, Launch: []int{0, 0}, Later: []int{1, 0}}},
		// Need before any instance can boot is left to spill-over.
		{"need within the launch delay is left uncovered", []float64{3, 3}, nil, GreedyPlan{Keep: []int{0, 0}, Launch: []int{0, 0}, Later: []int{0, 0}}},
	}
	for _, c := range cases {
		got := Greedy(GreedyInput{Need: c.need, Step: time.Minute, Types: types, Running: c.running})
		if !slices.Equal(got.Keep, c.want.Keep) || !slices.Equal(got.Launch, c.want.Launch) || !slices.Equal(got.Later, c.want.Later) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestGreedyCovers checks, on random needs, that the plan covers every
// step from the first an instance can serve, and that removing any one
// instance it chose leaves a step uncovered (nothing chosen is idle).
func TestGreedyCovers(t *testing.T) {
	types := []InstanceType{one, four}
	for seed := range 200 {
		need := make([]float64, 20)
		x := uint64(seed*2654435761 + 1)
		for i := range need {
			x = x*6364136223846793005 + 1442695040888963407
			need[i] = float64(x>>40%900) / 100
		}
		g := Greedy(GreedyInput{Need: need, Step: time.Minute, Types: types})
		cover := 0.0
		for typ, n := range g.Launch {
			cover += float64(n * types[typ].GPUs)
		}
		for typ, n := range g.Later {
			cover += float64(n * types[typ].GPUs)
		}
		if peak := slices.Max(need[2:]); cover < peak-1e-9 {
			t.Errorf("seed %d: %v GPUs planned for a peak need of %v", seed, cover, peak)
		}
		if cover >= slices.Max(need[2:])+4 {
			t.Errorf("seed %d: %v GPUs planned for a peak need of %v: one instance too many", seed, cover, slices.Max(need[2:]))
		}
	}
}

func TestStatic(t *testing.T) {
	s := &Static{Types: []InstanceType{one}, Peak: 950, Sizer: linearSizer{100}, Headroom: 0.1}
	if got := len(s.Start(10)); got != 11 { // ⌈9.5·1.1⌉
		t.Errorf("static starts %d instances, want 11", got)
	}
	if d := s.Decide(&Observation{Now: time.Hour, Rate: 5000}); len(d.Launch)+len(d.Release) != 0 || !math.IsInf(d.SpillAbove, 1) {
		t.Errorf("static changed its fleet: %+v", d)
	}
}

func fleetOf(types []InstanceType, typ, n int, readyAt time.Duration) []Instance {
	var out []Instance
	for i := range n {
		out = append(out, Instance{ID: InstanceID(i), Type: typ, ReadyAt: readyAt})
	}
	return out
}

func TestReactiveScalesOutAtOnceAndInAfterStabilization(t *testing.T) {
	r := &Reactive{Types: []InstanceType{one}, Sizer: linearSizer{100}, Target: 0.5, Window: 15 * time.Second, Stabilization: time.Minute, TickEvery: 15 * time.Second}
	if got := len(r.Start(300)); got != 6 {
		t.Fatalf("starts %d, want 6 (300 req/s at 50%% of 100 req/s a GPU)", got)
	}
	fleet := fleetOf(r.Types, 0, 6, 0)
	d := r.Decide(&Observation{Now: 15 * time.Second, Rate: 500, Fleet: fleet})
	if len(d.Launch) != 4 || len(d.Release) != 0 {
		t.Fatalf("at 500 req/s: %+v, want 4 launches", d)
	}
	fleet = fleetOf(r.Types, 0, 10, 0)
	for i, now := range []time.Duration{30, 45, 60, 75} {
		d = r.Decide(&Observation{Now: now * time.Second, Rate: 100, Fleet: fleet})
		if i < 3 && len(d.Release) != 0 {
			t.Fatalf("released %v after %d quiet ticks, within the stabilization window", d.Release, i+1)
		}
	}
	if len(d.Release) != 8 {
		t.Fatalf("after the window: released %v, want 8 of 10 (100 req/s needs 2)", d.Release)
	}
	if d.Release[0] != 9 {
		t.Errorf("released %d first, want the newest (9)", d.Release[0])
	}
}

func TestPredictive(t *testing.T) {
	f := &fixedForecast{f: flat(300, 60)}
	cfg := DefaultPredictive([]InstanceType{one}, linearSizer{100}, f)
	cfg.Floor = 0
	p, err := NewPredictive(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Start(300)); got != 3 {
		t.Fatalf("starts %d, want 3", got)
	}
	fleet := fleetOf(cfg.Types, 0, 3, 0)
	tick := func(now time.Duration, rate float64, good, bad uint64) Decision {
		return p.Decide(&Observation{Now: now, Rate: rate, Good: good, Bad: bad, Fleet: fleet})
	}
	// Spill above what the ready GPUs serve.
	if d := tick(0, 250, 100, 0); d.SpillAbove != 300 || len(d.Launch) != 0 {
		t.Fatalf("first tick: %+v, want no launch and spill above 300", d)
	}
	// The forecast rises to 500 from step 5: at the step boundary
	// nothing launches yet (just in time is 2 steps before).
	f.f = append(flat(300, 5), flat(500, 55)...)
	var now time.Duration
	for now = 10 * time.Second; now <= time.Minute; now += 5 * time.Second {
		if d := tick(now, 250, 100, 0); len(d.Launch) != 0 {
			t.Fatalf("launched %v at %v for a rise 5 steps ahead", d.Launch, now)
		}
	}
	if len(f.observed) != 1 || f.observed[0] != 250 {
		t.Fatalf("the forecaster observed %v, want the step's highest rate, 250", f.observed)
	}
	// Three steps later the rise is 2 steps ahead: launch 2.
	f.f = append(flat(300, 2), flat(500, 58)...)
	if d := tick(2*time.Minute, 250, 100, 0); len(d.Launch) != 2 {
		t.Fatalf("2 steps before the rise: %+v, want 2 launches", d)
	}
	fleet = append(fleet, Instance{ID: 3, ReadyAt: 4 * time.Minute, LaunchedAt: 2 * time.Minute}, Instance{ID: 4, ReadyAt: 4 * time.Minute, LaunchedAt: 2 * time.Minute})
	// The SLO monitor: 50 bad in the last 30 s (6 ticks of 100) launches
	// one of the fastest type at once.
	if d := tick(2*time.Minute+5*time.Second, 250, 50, 50); len(d.Launch) != 1 {
		t.Fatalf("SLO at 550/600: %+v, want 1 launch", d)
	}
	// The forecast falls to 100: the surplus goes after the turn-off
	// delay, and not before.
	f.f = flat(100, 60)
	for now = 3 * time.Minute; now < 6*time.Minute; now += time.Minute {
		if d := tick(now, 100, 100, 0); len(d.Release) != 0 {
			t.Fatalf("released %v at %v, within the turn-off delay", d.Release, now)
		}
	}
	if d := tick(6*time.Minute, 100, 100, 0); len(d.Release) != 4 {
		t.Fatalf("after the turn-off delay: %+v, want 4 of 5 released", d)
	}
}

func TestPredictiveFloorAndStandby(t *testing.T) {
	spot := one
	spot.Name, spot.Spot, spot.PricePerHour, spot.SpotWarning = "spot", true, 1, 2*time.Minute
	f := &fixedForecast{f: flat(100, 60)}
	cfg := DefaultPredictive([]InstanceType{one, spot}, linearSizer{100}, f)
	cfg.Standby = 0
	p, err := NewPredictive(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fleet := []Instance{{ID: 0, Type: 1}, {ID: 1, Type: 1, InterruptAt: 10 * time.Minute}}
	d := p.Decide(&Observation{Now: 0, Rate: 100, Good: 1, Fleet: fleet})
	if !slices.Equal(d.Launch, []int{0}) {
		t.Fatalf("a warned spot instance: launches %v, want one on-demand standby", d.Launch)
	}
	if d.SpillAbove != 200 {
		t.Errorf("spill above %v, want 200: the warned instance still serves", d.SpillAbove)
	}
	// The measured rate (400) is above the forecast (100): the floor
	// plans for it; the cheaper spot type is chosen.
	for now := 5 * time.Second; now < time.Minute; now += 5 * time.Second {
		p.Decide(&Observation{Now: now, Rate: 400, Good: 1, Fleet: fleet})
	}
	d = p.Decide(&Observation{Now: time.Minute, Rate: 400, Good: 1, Fleet: fleet})
	if n := len(d.Launch); n != 3 || d.Launch[0] != 1 {
		t.Fatalf("a measured 400 req/s over a forecast of 100: launches %v, want 3 spot (4 needed, 1 unwarned running)", d.Launch)
	}
}

func TestNewPredictiveErrors(t *testing.T) {
	f, _ := forecast.NewSeasonalNaive(4)
	for _, mutate := range []func(*PredictiveConfig){
		func(c *PredictiveConfig) { c.Types = nil },
		func(c *PredictiveConfig) { c.Forecaster = nil },
		func(c *PredictiveConfig) { c.Step = time.Second },
		func(c *PredictiveConfig) { c.Floor = -1 },
		func(c *PredictiveConfig) { c.Standby = 5 },
		func(c *PredictiveConfig) { c.Types = []InstanceType{{Name: "x", GPUs: 0, PricePerHour: 1}} },
		func(c *PredictiveConfig) { c.Types = []InstanceType{one, {Name: "cpu", CPUs: 8, PricePerHour: 0.4}} },
		func(c *PredictiveConfig) {
			c.Types = []InstanceType{{Name: "v100", GPUs: 1, Hardware: "v100", PricePerHour: 3}}
		},
	} {
		cfg := DefaultPredictive([]InstanceType{one}, linearSizer{100}, f)
		mutate(&cfg)
		if _, err := NewPredictive(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestAdmission(t *testing.T) {
	a := &Admission{Depth: 100 * time.Millisecond}
	a.SetRate(0, math.Inf(1))
	if !a.Admit(0) {
		t.Fatal("an infinite rate spilled")
	}
	a.SetRate(0, 100)
	// 1000 req/s for 1 s against 100 req/s: about 100 admitted.
	admitted := 0
	for i := range 1000 {
		if a.Admit(time.Duration(i) * time.Millisecond) {
			admitted++
		}
	}
	if admitted < 99 || admitted > 111 {
		t.Errorf("admitted %d of 1000 at a refill of 100 req/s over 1 s, want about 100", admitted)
	}
	// Below the rate everything passes.
	a.SetRate(2*time.Second, 100)
	for i := range 50 {
		if !a.Admit(2*time.Second + time.Duration(i)*20*time.Millisecond) {
			t.Fatalf("arrival %d at 50 req/s spilled under a rate of 100", i)
		}
	}
}

func TestMixSizer(t *testing.T) {
	p := profile.MustLinear(4*time.Millisecond, 16*time.Millisecond, 32)
	models := []serving.Demand{
		{Model: serving.Model{Name: "a", Profile: p, SLO: 150 * time.Millisecond}, Rate: 3},
		{Model: serving.Model{Name: "b", Profile: p, SLO: 300 * time.Millisecond}, Rate: 1},
	}
	s, err := NewMixSizer(models, scheduler.Delays{})
	if err != nil {
		t.Fatal(err)
	}
	scaled := []serving.Demand{models[0], models[1]}
	scaled[0].Rate, scaled[1].Rate = 750, 250
	ps, _ := partition.SizePart(scaled, scheduler.Delays{}, 0)
	if got := s.Need(1000); math.Abs(got-ps.Need) > 1e-12 {
		t.Errorf("Need(1000) = %v, SizePart says %v", got, ps.Need)
	}
	for _, g := range []float64{1, 3, 10.5} {
		c := s.Capacity(g)
		if n := s.Need(c); n > g+1e-9 || n < g*0.999 {
			t.Errorf("Capacity(%v) = %v, which needs %v GPUs", g, c, n)
		}
	}
	if _, err := NewMixSizer([]serving.Demand{{Model: models[0].Model}}, scheduler.Delays{}); err == nil {
		t.Error("a mix with no rate accepted")
	}
}

// TestMemoryRulesOutTypes: a type whose GPUs cannot hold the models is
// never launched, however cheap (MArk's Algorithm 1 drops the types that
// cannot serve), and a configuration with none left is refused.
func TestMemoryRulesOutTypes(t *testing.T) {
	small := one
	small.Name, small.PricePerHour, small.Memory = "small", 1, 8<<30
	big := four
	big.Memory = 32 << 30
	types := []InstanceType{small, big}
	g := Greedy(GreedyInput{Need: flat(1, 10), Step: time.Minute, Types: types, Unusable: []bool{true, false}})
	if !slices.Equal(g.Launch, []int{0, 1}) {
		t.Errorf("with the small type ruled out: launches %v, want one big", g.Launch)
	}
	f := &fixedForecast{f: flat(100, 60)}
	cfg := DefaultPredictive(types, linearSizer{100}, f)
	cfg.ModelMemory = 12 << 30
	p, err := NewPredictive(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Start(300); len(got) != 1 || got[0] != 1 {
		t.Errorf("starts %v, want one big instance: the small one's 8 GiB do not hold 12", got)
	}
	cfg.ModelMemory = 64 << 30
	if _, err := NewPredictive(cfg); err == nil {
		t.Error("no type holds 64 GiB, yet the policy was made")
	}
	if !one.Holds(1<<40) || small.Holds(9<<30) {
		t.Error("Holds: a type without a memory holds anything; 8 GiB do not hold 9")
	}
}
