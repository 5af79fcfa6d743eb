package epoch

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// The hand-worked cases use ℓ(b) = 10ms·b + 10ms, a 100 ms SLO and no
// network delays, so SizePart's largest b with b/λ + ℓ(b) ≤ 100 ms is 4 at
// 100 req/s (ℓ = 50 ms, need 100·0.05/4 = 1.25 GPUs), 4 at 110 req/s (need
// 1.375) and 7 at 500 req/s (ℓ = 80 ms, need 500·0.08/7 = 5.714). Headroom
// is 25%.

const (
	gib    = int64(1) << 30
	window = time.Minute
)

func testConfig() Config {
	return Config{
		Parts: 2, Headroom: 0.25, MaxDisruption: -1, RebalanceAbove: 0.1, Engine: "heuristic", Seed: 1,
		ModelLoadTime: 2 * time.Second, Autoscale: DefaultAutoscale(0.25),
	}
}

func testModel(name string, static int64) serving.Model {
	return serving.Model{Name: name, Profile: profile.MustLinear(10*time.Millisecond, 10*time.Millisecond, 16), SLO: 100 * time.Millisecond, StaticMemory: static}
}

func newController(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decide(t *testing.T, c *Controller, in *Input) *Decision {
	t.Helper()
	d, err := c.Decide(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// steady returns a model measured at rate over the window (flat halves, so
// the forecast is the rate), all requests good.
func steady(m serving.Model, rate float64, part int) Model {
	n := uint64(rate * window.Seconds() / 2)
	return Model{Model: m, Arrivals: [2]uint64{n, n}, Good: 2 * n, Assigned: part, Serving: part}
}

// gpus returns a cluster of total GPUs, the first counts[p] of them (after
// the previous parts') in part p, the rest free.
func gpus(total int, counts ...int) []GPU {
	out := make([]GPU, total)
	g := 0
	for i := range out {
		out[i].Part = -1
	}
	for p, n := range counts {
		for range n {
			out[g].Part = p
			g++
		}
	}
	return out
}

// calm is a part's measurement with idle fraction 0.2: within the rule's
// 25% for a 25% headroom, so the advice holds.
func calm(n int) Part {
	online := time.Duration(n) * window
	return Part{Busy: online * 8 / 10, Online: online}
}

func TestFirstEpochPartitionsAndSizes(t *testing.T) {
	c := newController(t, testConfig())
	in := &Input{GPUs: gpus(8)}
	for _, name := range []string{"A", "B", "C", "D"} {
		in.Models = append(in.Models, Model{Model: testModel(name, gib), DeclaredRate: 100, Assigned: Unassigned, Serving: Unassigned})
	}
	d := decide(t, c, in)
	// Four equal models: two per part, each part 2·1.25 = 2.5 GPUs of need,
	// ⌈2.5·1.25⌉ = 4 GPUs.
	per := make([]int, 2)
	for m, p := range d.Assignment {
		per[p]++
		if d.Serving[m] != p {
			t.Errorf("model %d: serving part %d, assigned %d: the first epoch starts loaded", m, d.Serving[m], p)
		}
	}
	if !reflect.DeepEqual(per, []int{2, 2}) {
		t.Errorf("models per part %v, want [2 2]", per)
	}
	if !d.Preloaded || len(d.Moves) != 0 || len(d.Loads) != 0 || len(d.Release) != 0 {
		t.Errorf("first epoch: preloaded %v, moves %v, loads %v, release %v", d.Preloaded, d.Moves, d.Loads, d.Release)
	}
	want := []Join{{0, 0, 2}, {1, 0, 2}, {2, 0, 2}, {3, 0, 2}, {4, 1, 2}, {5, 1, 2}, {6, 1, 2}, {7, 1, 2}}
	if !reflect.DeepEqual(d.Join, want) {
		t.Errorf("joins %v, want %v", d.Join, want)
	}
	r := d.Record
	if r.Need != 5 || r.GPUs != 8 || r.GPUsBefore != 0 || !reflect.DeepEqual(r.PartGPUs, []int{4, 4}) ||
		r.Engine != "heuristic" || !r.Deterministic || r.RateImbalance != 0 || r.Moves != 0 || r.AdviceGPUs != 0 {
		t.Errorf("record %+v", r)
	}
}

// A rate change that leaves the parts within rebalance_above moves nothing
// and changes no GPU.
func TestSmallRateChangeMovesNothing(t *testing.T) {
	c := newController(t, testConfig())
	in := &Input{Now: scheduler.Time(window), Window: window, GPUs: gpus(8, 4, 4), Parts: []Part{calm(4), calm(4)}}
	for i, name := range []string{"A", "B", "C", "D"} {
		rate := 100.0
		if name == "A" {
			rate = 110
		}
		in.Models = append(in.Models, steady(testModel(name, gib), rate, i/2))
	}
	d := decide(t, c, in)
	// Parts at 210 and 200 req/s: imbalance 10/205 = 0.049.
	if want := "rate imbalance 0.049 within 0.100"; d.Record.Skipped != want {
		t.Errorf("skipped %q, want %q", d.Record.Skipped, want)
	}
	if !reflect.DeepEqual(d.Assignment, []int{0, 0, 1, 1}) || len(d.Moves)+len(d.Loads)+len(d.Release)+len(d.Join) != 0 {
		t.Errorf("assignment %v, moves %v, loads %v, release %v, join %v: want nothing changed", d.Assignment, d.Moves, d.Loads, d.Release, d.Join)
	}
	// Part 0: 1.375 + 1.25 = 2.625 GPUs of need, ⌈3.28⌉ = 4.
	if r := d.Record; r.Need != 2.625+2.5 || !reflect.DeepEqual(r.PartGPUs, []int{4, 4}) || r.AdviceGPUs != 0 {
		t.Errorf("record %+v", r)
	}
	for p, a := range d.Advice {
		if a.Action != scheduler.ScaleHold {
			t.Errorf("part %d: advice %+v, want hold", p, a)
		}
	}
}

// One model's surge unbalances the parts; within a budget of one 1 GiB
// move the controller moves B (the only move that helps) and plans its
// loads make before break: every GPU of the destination loads it, a wave at
// a time, while the source keeps serving it and is sized for it until it
// leaves.
func TestRebalanceWithinBudget(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDisruption = 2 * gib
	c := newController(t, cfg)
	in := &Input{Now: scheduler.Time(10 * window), Window: window, GPUs: gpus(16, 4, 4), Parts: []Part{calm(4), calm(4)}}
	in.Models = []Model{
		steady(testModel("A", 3*gib), 500, 0),
		steady(testModel("B", gib), 100, 0),
		steady(testModel("C", gib), 100, 1),
		steady(testModel("D", gib), 100, 1),
	}
	// Part 0 dropped a fifth of its requests: add N·r/(1−r) = 1.
	in.Models[0].Good, in.Models[0].Bad = 24000, 6000
	in.Models[1].Good, in.Models[1].Bad = 4800, 1200
	d := decide(t, c, in)
	t.Logf("record %+v", d.Record)
	wantMoves := []Move{{Model: 1, From: 0, To: 1, Bytes: 2 * gib}}
	if !reflect.DeepEqual(d.Moves, wantMoves) || !reflect.DeepEqual(d.Assignment, []int{0, 1, 1, 1}) {
		t.Fatalf("moves %+v, assignment %v; want %+v", d.Moves, d.Assignment, wantMoves)
	}
	var bytes int64
	for _, mv := range d.Moves {
		bytes += mv.Bytes
	}
	if bytes > cfg.MaxDisruption || d.Record.Disruption > cfg.MaxDisruption || d.Record.Moves != 1 {
		t.Errorf("moves cost %d bytes, disruption %d: over C_max %d", bytes, d.Record.Disruption, cfg.MaxDisruption)
	}
	// Make before break: B is still served by part 0.
	if !reflect.DeepEqual(d.Serving, []int{0, 0, 1, 1}) {
		t.Errorf("serving %v, want B still on part 0 until its loads are done", d.Serving)
	}
	// Part 1's four GPUs load one model each, one at a time (a wave is
	// ⌊4·0.2/2⌋ → 1 GPU), 2 s apart.
	now := in.Now
	wantLoads := []Load{{4, 1, now, 1}, {5, 1, now.Add(2 * time.Second), 1}, {6, 1, now.Add(4 * time.Second), 1}, {7, 1, now.Add(6 * time.Second), 1}}
	if !reflect.DeepEqual(d.Loads, wantLoads) {
		t.Errorf("loads %v, want %v", d.Loads, wantLoads)
	}
	// Part 0 is sized for A and B (6.964·1.25 → 9 GPUs) and gives back the
	// one GPU it holds for B once B leaves (A alone: 7.14 → 8). Part 1 is
	// sized for B, C, D: 3.75·1.25 → 5.
	if !reflect.DeepEqual(d.Leaving, []int{1, 0}) || !reflect.DeepEqual(d.PartGPUs, []int{9, 5}) {
		t.Errorf("leaving %v, part GPUs %v; want [1 0], [9 5]", d.Leaving, d.PartGPUs)
	}
	// Joining GPUs load what their part will serve: part 0 A and B, part 1
	// B, C and D.
	wantJoin := []Join{{8, 0, 2}, {9, 0, 2}, {10, 0, 2}, {11, 0, 2}, {12, 0, 2}, {13, 1, 3}}
	if !reflect.DeepEqual(d.Join, wantJoin) {
		t.Errorf("joins %v, want %v", d.Join, wantJoin)
	}
	if a := d.Advice[0]; a.Action != scheduler.ScaleAdd || a.GPUs != 1 {
		t.Errorf("part 0 advice %+v, want add 1", a)
	}

	// While B's move loads, the next epoch re-sizes but does not re-partition.
	next := *in
	next.Models = append([]Model(nil), in.Models...)
	next.Models[1].Assigned = 1
	d2 := decide(t, c, &next)
	if d2.Record.Skipped != "1 model moves still loading" || len(d2.Moves) != 0 {
		t.Errorf("during the move: skipped %q, moves %v", d2.Record.Skipped, d2.Moves)
	}

	// With a budget under one move nothing can move.
	cfg.MaxDisruption = gib
	d3 := decide(t, newController(t, cfg), in)
	if len(d3.Moves) != 0 || d3.Record.Disruption != 0 {
		t.Errorf("C_max 1 GiB: moves %v, disruption %d", d3.Moves, d3.Record.Disruption)
	}
}

// The advice of a part with a bad window adds GPUs; that of an idle part
// removes them, but never below the sizing, and the least busy GPUs leave
// first, free for a growing part in the same epoch.
func TestAutoscaleAdvice(t *testing.T) {
	c := newController(t, testConfig())
	in := &Input{Now: scheduler.Time(window), Window: window, GPUs: gpus(12, 4, 6)}
	for i, name := range []string{"A", "B", "C", "D"} {
		in.Models = append(in.Models, steady(testModel(name, gib), 100, i/2))
	}
	// Part 0: a fifth of its requests bad → add ⌈4·0.2/0.8⌉ = 1.
	in.Models[0].Good, in.Models[0].Bad = 4800, 1200
	in.Models[1].Good, in.Models[1].Bad = 4800, 1200
	// Part 1: idle 60% → remove ⌊6·0.6⌋ = 3, but its sizing needs 4.
	online := 6 * window
	in.Parts = []Part{calm(4), {Busy: online * 4 / 10, Online: online}}
	for g, last := range map[int]time.Duration{4: 50, 5: 40, 6: 60, 7: 10, 8: 70, 9: 80} {
		in.GPUs[g].LastFinish = scheduler.Time(last * time.Second)
	}
	d := decide(t, c, in)
	if a := d.Advice[0]; a.Action != scheduler.ScaleAdd || a.GPUs != 1 {
		t.Errorf("bad window: advice %+v, want add 1", a)
	}
	if a := d.Advice[1]; a.Action != scheduler.ScaleRemove || a.GPUs != 3 {
		t.Errorf("idle window: advice %+v, want remove 3", a)
	}
	if d.Signals[0].BadRate != 0.2 || d.Signals[1].IdleFraction < 0.599 || d.Signals[1].IdleFraction > 0.601 {
		t.Errorf("signals %+v", d.Signals)
	}
	if r := d.Record; r.AdviceGPUs != -2 || !reflect.DeepEqual(r.PartGPUs, []int{5, 4}) || r.GPUsBefore != 10 || r.GPUs != 9 {
		t.Errorf("record %+v", r)
	}
	// GPUs 7 (last batch at 10 s) and 5 (40 s) leave part 1; GPU 5 is then
	// the lowest free one and joins part 0.
	if !reflect.DeepEqual(d.Release, []scheduler.GPUID{7, 5}) {
		t.Errorf("release %v, want [7 5]", d.Release)
	}
	if want := []Join{{5, 0, 2}}; !reflect.DeepEqual(d.Join, want) {
		t.Errorf("join %v, want %v", d.Join, want)
	}
	if !strings.Contains(d.Advice[1].Reason, "remove") {
		t.Errorf("reason %q", d.Advice[1].Reason)
	}
}

func TestForecast(t *testing.T) {
	for _, c := range []struct{ first, second, want float64 }{
		{100, 120, 170}, // rising: the trend carried 2.5 half-epochs on
		{100, 200, 300}, // steep: capped at 1.5x the latest
		{200, 100, 100}, // falling: the latest
		{100, 100, 100},
	} {
		if got := Forecast(c.first, c.second); got != c.want {
			t.Errorf("Forecast(%v, %v) = %v, want %v", c.first, c.second, got, c.want)
		}
	}
	// In a decision: A rose from 100 to 120 req/s over the window's halves.
	c := newController(t, testConfig())
	in := &Input{Now: scheduler.Time(window), Window: window, GPUs: gpus(8, 4, 4), Parts: []Part{calm(4), calm(4)}}
	for i, name := range []string{"A", "B", "C", "D"} {
		in.Models = append(in.Models, steady(testModel(name, gib), 100, i/2))
	}
	in.Models[0].Arrivals = [2]uint64{3000, 3600}
	d := decide(t, c, in)
	if want := []float64{170, 100, 100, 100}; !reflect.DeepEqual(d.Rates, want) {
		t.Errorf("rates %v, want %v", d.Rates, want)
	}
}

// Engines whose answer depends on the wall time label their decisions.
func TestNonDeterministicEngineLabelled(t *testing.T) {
	cfg := testConfig()
	cfg.Engine = "random"
	c := newController(t, cfg)
	in := &Input{GPUs: gpus(8)}
	for _, name := range []string{"A", "B", "C"} {
		in.Models = append(in.Models, Model{Model: testModel(name, gib), DeclaredRate: 100, Assigned: Unassigned, Serving: Unassigned})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d, err := c.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Record.Deterministic {
		t.Error("random search decision labelled deterministic")
	}
}

func TestInputChecked(t *testing.T) {
	c := newController(t, testConfig())
	in := &Input{Window: window, GPUs: gpus(4), Parts: []Part{{}, {}}}
	in.Models = []Model{steady(testModel("A", 0), 10, 0), {Model: testModel("B", 0), Assigned: Unassigned, Serving: Unassigned}}
	if _, err := c.Decide(context.Background(), in); err == nil {
		t.Error("a model joining after the first epoch was accepted")
	}
	if _, err := New(Config{Parts: 0}); err == nil {
		t.Error("zero parts accepted")
	}
}

func TestShareCapacity(t *testing.T) {
	for _, c := range []struct {
		want     []int
		capacity int
		got      []int
	}{
		{[]int{10, 10}, 10, []int{5, 5}},
		{[]int{30, 10, 1}, 20, []int{14, 5, 1}}, // by largest remainder
		{[]int{1, 1, 100}, 10, []int{1, 1, 8}},
		{[]int{3, 3, 4}, 3, []int{1, 1, 1}},
		// Fewer GPUs than parts (a live cluster whose backends
		// re-register): the parts that want most get one.
		{[]int{3, 5, 4}, 2, []int{0, 1, 1}},
		{[]int{3, 5, 4}, 0, []int{0, 0, 0}},
	} {
		got := ShareCapacity(c.want, c.capacity)
		if !reflect.DeepEqual(got, c.got) {
			t.Errorf("ShareCapacity(%v, %d) = %v, want %v", c.want, c.capacity, got, c.got)
		}
	}
}
