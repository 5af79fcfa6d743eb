package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/cloudscale"
	"github.com/symphony-serving/symphony/partition/forecast"
	"github.com/symphony-serving/symphony/scheduler"
)

// cloudWorkload is a day-shaped load, compressed, on a pool of 64 GPU slots.
func cloudWorkload(t *testing.T, dur time.Duration) *workload.Workload {
	t.Helper()
	src := `seed: 3
duration: ` + dur.String() + `
warmup: 0s
cluster: {gpus: 64}
models:
  - name: a
    profile: {alpha: 4ms, beta: 16ms, max_batch: 32}
    slo: 150ms
    daily_rate: {low: 100, high: 800, period: 2h, peak_at: 1h, step: 1m}
    arrival: poisson
  - name: b
    profile: {alpha: 2ms, beta: 20ms, max_batch: 64}
    slo: 200ms
    daily_rate: {low: 100, high: 800, period: 2h, peak_at: 1h, step: 1m}
    arrival: poisson
policy: symphony
`
	w, err := workload.Parse([]byte(src), "cloud.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cloudSizer(t *testing.T, w *workload.Workload) *cloudscale.MixSizer {
	t.Helper()
	s, err := WorkloadSizer(w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var testTypes = []cloudscale.InstanceType{
	{Name: "g1", GPUs: 1, PricePerHour: 3, Launch: 90 * time.Second, BillingMinimum: time.Minute, BillingIncrement: time.Second},
	{Name: "g4", GPUs: 4, PricePerHour: 12, Launch: 2 * time.Minute, BillingMinimum: time.Minute, BillingIncrement: time.Second},
	{Name: "g1-spot", GPUs: 1, PricePerHour: 1, Launch: 2 * time.Minute, BillingMinimum: time.Minute, BillingIncrement: time.Second,
		Spot: true, SpotWarning: 2 * time.Minute, InterruptionsPerHour: 3},
}

func testBurst() *BurstPool {
	return &BurstPool{PricePerRequest: 2e-5, Overhead: 20 * time.Millisecond, Slowdown: 2, ColdStart: time.Second, KeepWarm: 10 * time.Minute, Concurrency: 1000}
}

// predictiveForTest is MArk's policy with spot instances, an on-demand
// standby and spill-over, its seasonal forecaster primed with two periods
// of the workload's shape.
func predictiveForTest(t *testing.T, w *workload.Workload, period int) *cloudscale.Predictive {
	t.Helper()
	sn, err := forecast.NewSeasonalNaive(period)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 * period {
		r := 0.0
		for i := range w.Models {
			r += w.Models[i].RateAt(time.Duration(k%period) * time.Minute)
		}
		sn.Observe(r)
	}
	cfg := cloudscale.DefaultPredictive(testTypes, cloudSizer(t, w), sn)
	cfg.Standby = 0
	p, err := cloudscale.NewPredictive(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCloudBillsEveryBatch runs MArk's policy with spot instances that the
// cloud takes back three times an hour, and checks the bill against what
// the accounting counted on its own: every batch ran on a ready instance
// (the run's oracle), the billed GPU time covers the GPUs' busy time, the
// series add up to the totals, and every request is counted once.
func TestCloudBillsEveryBatch(t *testing.T) {
	w := cloudWorkload(t, 40*time.Minute)
	rep, res, err := RunCloud(w, Cloud{Types: testTypes, Policy: predictiveForTest(t, w, 120), Burst: testBurst(), SpillDepth: 100 * time.Millisecond}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Interruptions == 0 || res.Releases == 0 || res.Launches == 0 {
		t.Fatalf("the run did not exercise the cloud: %d launches, %d releases, %d interruptions", res.Launches, res.Releases, res.Interruptions)
	}
	busy := 0.0
	for _, b := range rep.GPUBusy {
		busy += b * rep.DurationSeconds
	}
	if billed := res.GPUHours * 3600; billed < busy {
		t.Errorf("billed %.0f GPU-seconds, but the GPUs were busy %.0f", billed, busy)
	}
	// The bill rounds each instance's time up (a minute at least, whole
	// seconds), so it holds the time the series counts instances billed,
	// and not much more.
	held := 0.0
	for _, s := range res.Series {
		held += s.GPUsBilled * time.Minute.Hours()
	}
	if res.GPUHours < held-1e-9 || res.GPUHours > held+float64(res.Launches+res.Interruptions+8)/60 {
		t.Errorf("billed %.3f GPU-hours; the series holds instances %.3f GPU-hours", res.GPUHours, held)
	}
	var cost float64
	var offered, good, spilled uint64
	for i, s := range res.Series {
		cost += s.Cost
		offered, good, spilled = offered+s.Offered, good+s.Good, spilled+s.Spilled
		if s.GPUsReady > s.GPUsBilled+1e-9 {
			t.Errorf("step %d: %.2f GPUs serving but %.2f billed", i, s.GPUsReady, s.GPUsBilled)
		}
	}
	if math.Abs(cost-res.Cost) > 1e-6*res.Cost {
		t.Errorf("the series bill %.4f, the total %.4f", cost, res.Cost)
	}
	if offered != rep.Offered || res.Offered != rep.Offered || good != rep.Good || res.Good != rep.Good || spilled != res.Spilled {
		t.Errorf("offered %d/%d (report %d), good %d/%d (report %d), spilled %d/%d", offered, res.Offered, rep.Offered, good, res.Good, rep.Good, spilled, res.Spilled)
	}
	if want := float64(res.Spilled) * testBurst().PricePerRequest; math.Abs(res.BurstCost-want) > 1e-9 {
		t.Errorf("burst cost %v for %d spilled requests, want %v", res.BurstCost, res.Spilled, want)
	}
	if res.Attainment < 0.99 {
		t.Errorf("SLO attainment %.4f under spot interruptions, want >= 0.99", res.Attainment)
	}
}

// TestCloudDeterministic: the same workload, policy and seed bill the same.
func TestCloudDeterministic(t *testing.T) {
	run := func() *CloudResult {
		w := cloudWorkload(t, 20*time.Minute)
		_, res, err := RunCloud(w, Cloud{Types: testTypes, Policy: predictiveForTest(t, w, 120), Burst: testBurst()}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if a, b := run(), run(); !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ: cost %v and %v", a.Cost, b.Cost)
	}
}

// TestCloudBurstPool spills what a fleet too small for the load cannot
// serve; a pool of one container turns the rest back to the GPUs.
func TestCloudBurstPool(t *testing.T) {
	w := cloudWorkload(t, 10*time.Minute)
	sz := cloudSizer(t, w)
	small := func() cloudscale.Policy {
		return spillingStatic{&cloudscale.Static{Types: testTypes, Type: 0, Peak: 50, Sizer: sz}, sz}
	}
	_, res, err := RunCloud(w, Cloud{Types: testTypes, Policy: small(), Burst: testBurst(), SpillDepth: 100 * time.Millisecond}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Spilled == 0 || res.BurstGood == 0 || res.BurstFull != 0 {
		t.Fatalf("spilled %d, %d good, %d found the pool full", res.Spilled, res.BurstGood, res.BurstFull)
	}
	one := testBurst()
	one.Concurrency = 1
	_, res1, err := RunCloud(w, Cloud{Types: testTypes, Policy: small(), Burst: one, SpillDepth: 100 * time.Millisecond}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res1.BurstFull == 0 || res1.Spilled >= res.Spilled {
		t.Errorf("one container: spilled %d (vs %d), %d found it full", res1.Spilled, res.Spilled, res1.BurstFull)
	}
	// Without a pool nothing spills, whatever the policy says.
	_, res0, err := RunCloud(w, Cloud{Types: testTypes, Policy: small()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res0.Spilled != 0 || res0.BurstCost != 0 {
		t.Errorf("no pool: spilled %d at %v", res0.Spilled, res0.BurstCost)
	}
}

// spillingStatic is a static fleet that spills above its capacity.
type spillingStatic struct {
	*cloudscale.Static
	sz cloudscale.Sizer
}

func (s spillingStatic) Decide(o *cloudscale.Observation) cloudscale.Decision {
	ready := 0
	for _, in := range o.Fleet {
		if in.Ready(o.Now) {
			ready += testTypes[in.Type].GPUs
		}
	}
	return cloudscale.Decision{SpillAbove: s.sz.Capacity(float64(ready))}
}

func TestRunCloudRejects(t *testing.T) {
	w := cloudWorkload(t, time.Minute)
	sz := cloudSizer(t, w)
	st := &cloudscale.Static{Types: testTypes, Peak: 100, Sizer: sz}
	for name, c := range map[string]Cloud{
		"no policy":       {Types: testTypes},
		"no types":        {Policy: st},
		"bad type":        {Types: []cloudscale.InstanceType{{Name: "x"}}, Policy: st},
		"bad burst":       {Types: testTypes, Policy: st, Burst: &BurstPool{Concurrency: 0, Slowdown: 1}},
		"bad slowdown":    {Types: testTypes, Policy: st, Burst: &BurstPool{Concurrency: 1}},
		"reactive at 0":   {Types: testTypes, Policy: &cloudscale.Reactive{Types: testTypes, Sizer: sz, TickEvery: time.Second}},
		"launches type 9": {Types: testTypes, Policy: badPolicy{launch: []int{9}}},
		"releases id 99":  {Types: testTypes, Policy: badPolicy{release: []cloudscale.InstanceID{99}}},
	} {
		if _, _, err := RunCloud(w, c, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, mutate := range map[string]func(*workload.Workload){
		"concurrency": func(w *workload.Workload) { w.Models[0].Concurrency = 2 },
		"epoch":       func(w *workload.Workload) { e := workload.DefaultEpoch(); e.Interval = time.Second; w.Epoch = &e },
		"nexus":       func(w *workload.Workload) { w.Policy = scheduler.PolicyNexus },
	} {
		wc := cloudWorkload(t, time.Minute)
		mutate(wc)
		if _, _, err := RunCloud(wc, Cloud{Types: testTypes, Policy: st}, Options{}); err == nil {
			t.Errorf("a workload with %s: accepted", name)
		}
	}
}

// badPolicy launches and releases what it is told, every tick.
type badPolicy struct {
	launch  []int
	release []cloudscale.InstanceID
}

func (badPolicy) Name() string        { return "bad" }
func (badPolicy) Start(float64) []int { return []int{0} }
func (badPolicy) Tick() time.Duration { return time.Second }
func (b badPolicy) Decide(*cloudscale.Observation) cloudscale.Decision {
	return cloudscale.Decision{Launch: b.launch, Release: b.release, SpillAbove: math.Inf(1)}
}

// TestCloudReactiveKeepsItsStart: a reactive fleet started for the load
// keeps it through its first ticks (no release before any measurement)
// and serves the run within its SLO.
func TestCloudReactiveKeepsItsStart(t *testing.T) {
	w := cloudWorkload(t, 10*time.Minute)
	p := &cloudscale.Reactive{Types: testTypes, Type: 0, Sizer: cloudSizer(t, w), Target: 0.6, Window: time.Minute, Stabilization: 5 * time.Minute, TickEvery: 15 * time.Second}
	_, res, err := RunCloud(w, Cloud{Types: testTypes, Policy: p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := len(p.Start(w.Models[0].RateAt(0) + w.Models[1].RateAt(0)))
	if first := res.Series[0].GPUsBilled; first < float64(start)-1e-9 {
		t.Errorf("%.2f GPUs billed over the first minute, fewer than the %d it started with", first, start)
	}
	if res.Attainment < 0.99 {
		t.Errorf("attainment %.4f", res.Attainment)
	}
}

// TestNewCloudPolicy: every named policy is made for a workload, an
// unknown name or a bad target is refused, and so is a workload whose
// models the cloud's GPUs cannot hold.
func TestNewCloudPolicy(t *testing.T) {
	w := cloudWorkload(t, 2*time.Hour)
	for _, name := range []string{"static", "reactive", "reactive:0.5", "mark", "mark-nospill", "mark-spot"} {
		if _, types, err := NewCloudPolicy(name, w, CloudPolicyOptions{}); err != nil || len(types) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"elastic", "reactive:0", "reactive:x", "mark:2"} {
		if _, _, err := NewCloudPolicy(name, w, CloudPolicyOptions{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if p := PeakRate(w); p < 1590 || p > 1600 {
		t.Errorf("peak rate %v, want the daily curves' 800+800 at their peak", p)
	}
	w.Models[0].StaticMemory = 20 << 30
	if _, _, err := NewCloudPolicy("mark", w, CloudPolicyOptions{}); err == nil || !strings.Contains(err.Error(), "GPU memory") {
		t.Errorf("20 GiB of models on 16 GiB GPUs: %v", err)
	}
	// The policies size one mix on one GPU kind: pinned models are the
	// Replanner's.
	if _, _, err := NewCloudPolicy("mark", pinnedCloudWorkload(t), CloudPolicyOptions{}); err == nil || !strings.Contains(err.Error(), "pinning") {
		t.Errorf("pinned models: %v", err)
	}
}

// pinnedCloudWorkload is a decoder on CPU machines of 4 vCPUs (30 ms a
// frame, 4 at once) and a detector on GPUs, each pinned to its kind, at
// 200 frames a second.
func pinnedCloudWorkload(t *testing.T) *workload.Workload {
	t.Helper()
	src := `seed: 1
duration: 5m
warmup: 0s
cluster:
  gpu_types:
    - {name: gpu, count: 16}
    - {name: cpu4, count: 8}
models:
  - {name: decode, profile: {batch_latency: [30ms]}, gpu_type: cpu4, concurrency: 4, slo: 60ms, rate: 200, arrival: const}
  - {name: detect, profile: {alpha: 8ms, beta: 20ms, max_batch: 16}, gpu_type: gpu, slo: 200ms, rate: 200, arrival: const}
policy: symphony
`
	w, err := workload.Parse([]byte(src), "pinned.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var pinnedTypes = []cloudscale.InstanceType{
	{Name: "g1", GPUs: 1, Hardware: "gpu", PricePerHour: 3, BillingMinimum: time.Minute, BillingIncrement: time.Second},
	{Name: "c4", CPUs: 4, Hardware: "cpu4", PricePerHour: 0.17, BillingMinimum: time.Minute, BillingIncrement: time.Second},
}

// fixedFleet starts a fleet and keeps it.
type fixedFleet []int

func (fixedFleet) Name() string          { return "fixed" }
func (f fixedFleet) Start(float64) []int { return f }
func (fixedFleet) Tick() time.Duration   { return time.Minute }
func (fixedFleet) Decide(*cloudscale.Observation) cloudscale.Decision {
	return cloudscale.Decision{SpillAbove: math.Inf(1)}
}

// TestCloudPinnedKinds: with models pinned to hardware kinds, an instance
// serves the models of its own kind only. Two CPU machines and three GPUs
// serve the decoder and the detector, and bill GPU-hours and CPU-machine
// hours apart; with no CPU machine the decoder has nothing to run on and
// loses every request, while the GPUs still serve the detector.
func TestCloudPinnedKinds(t *testing.T) {
	w := pinnedCloudWorkload(t)
	rep, res, err := RunCloud(w, Cloud{Types: pinnedTypes, Policy: fixedFleet{0, 0, 0, 1, 1}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Each instance is billed the run and its last batch, at most a
	// second (the billing increment) more than the batch.
	hours, last := (5 * time.Minute).Hours(), (2 * time.Second).Hours()
	near := func(got, want float64) bool { return got >= want && got <= want+last*want/hours }
	if rep.BadRate > 0.001 || !near(res.GPUHours, 3*hours) || !near(res.CPUMachineHours, 2*hours) {
		t.Fatalf("bad %.4f; billed %.4f GPU-hours and %.4f CPU-machine hours, want %.4f and %.4f", rep.BadRate, res.GPUHours, res.CPUMachineHours, 3*hours, 2*hours)
	}
	if want := 3*res.GPUHours + 0.17*res.CPUMachineHours; math.Abs(res.Cost-want) > 1e-9 {
		t.Errorf("cost %v, want %v: the billed hours at their prices", res.Cost, want)
	}
	for _, s := range res.Series {
		if s.GPUsBilled != 3 || s.CPUMachinesBilled != 2 {
			t.Fatalf("step at %v: %v GPUs and %v CPU machines billed, want 3 and 2", s.Start, s.GPUsBilled, s.CPUMachinesBilled)
		}
	}
	rep, _, err = RunCloud(w, Cloud{Types: pinnedTypes, Policy: fixedFleet{0, 0, 0}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range rep.Models {
		if served := m.Good > 0; served != (m.Name == "detect") {
			t.Errorf("three GPUs and no CPU machine: %s answered %d of %d in time", m.Name, m.Good, m.Offered)
		}
	}
}

// TestCloudPinnedRejects: where models are pinned, every type names a
// gpu_type of the cluster, and a CPU machine's models run batches of 1
// within its CPUs; where they are not, no type names hardware or is a CPU
// machine.
func TestCloudPinnedRejects(t *testing.T) {
	cpu := pinnedTypes[1]
	for name, c := range map[string]struct {
		types  []cloudscale.InstanceType
		mutate func(*workload.Workload)
	}{
		"type of no hardware": {[]cloudscale.InstanceType{testTypes[0], cpu}, nil},
		"unknown hardware":    {[]cloudscale.InstanceType{{Name: "t", GPUs: 1, Hardware: "tpu", PricePerHour: 1}, cpu}, nil},
		"concurrency > CPUs":  {pinnedTypes, func(w *workload.Workload) { w.Models[0].Concurrency = 8 }},
		"batches on a CPU":    {pinnedTypes, func(w *workload.Workload) { w.Models[0].Profile = w.Models[1].Profile }},
		"no type for cpu4":    {pinnedTypes[:1], nil},
		"more than the pool":  {[]cloudscale.InstanceType{{Name: "g32", GPUs: 32, Hardware: "gpu", PricePerHour: 96}, cpu}, nil},
	} {
		w := pinnedCloudWorkload(t)
		if c.mutate != nil {
			c.mutate(w)
		}
		if _, _, err := RunCloud(w, Cloud{Types: c.types, Policy: fixedFleet{0}}, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	for _, typ := range []cloudscale.InstanceType{cpu, pinnedTypes[0]} {
		if _, _, err := RunCloud(cloudWorkload(t, time.Minute), Cloud{Types: []cloudscale.InstanceType{typ}, Policy: fixedFleet{0}}, Options{}); err == nil {
			t.Errorf("%s on a workload of no pinned models: accepted", typ.Name)
		}
	}
}
