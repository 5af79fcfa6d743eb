package lookahead

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/sim"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

func ms(x float64) scheduler.Time { return scheduler.Time(x * float64(time.Millisecond)) }

// handSetting is one GPU running ℓ(b) = b + 10 ms with a 20ms SLO and no
// network delays: a batch of k started at s finishes at s + k + 10.
func handSetting() Setting {
	return Setting{Profile: profile.MustLinear(time.Millisecond, 10*time.Millisecond, 64), SLO: 20 * time.Millisecond, GPUs: 1}
}

func TestRulesHoldUntilSchedAt(t *testing.T) {
	// r0 at 0ms: alone, sched_at = 20 − ℓ(2) = 8. r1 at 3ms: the pair's
	// sched_at = 20 − ℓ(3) = 7; nothing else comes, so the pair starts at
	// 7 and finishes at 19, within r0's deadline.
	arr := []scheduler.Time{ms(0), ms(3)}
	r, err := Rules(handSetting(), arr, 0, ms(100))
	if err != nil {
		t.Fatal(err)
	}
	if r.Served != 2 || r.Batches[2] != 1 || r.Requests != 2 {
		t.Fatalf("served %d of %d in batches %v; want both in one batch of 2", r.Served, r.Requests, r.Batches)
	}
}

func TestClairvoyantStartsEarlyBeforeABurst(t *testing.T) {
	// r0 at 0ms, then ten requests at 12ms (deadline 32ms). The rules hold
	// r0 until its sched_at (8ms) and run it alone until 19ms; by then the
	// burst can only start 3 (19 + ℓ(3) = 32) and the other 7 miss. Knowing
	// the burst, the clairvoyant scheduler starts r0 at once (done at
	// 11ms) and the whole burst in one batch of 10 (12 + ℓ(10) = 32).
	arr := []scheduler.Time{ms(0)}
	for range 10 {
		arr = append(arr, ms(12))
	}
	rules, err := Rules(handSetting(), arr, 0, ms(100))
	if err != nil {
		t.Fatal(err)
	}
	if rules.Served != 4 {
		t.Fatalf("rules served %d, batches %v; want 4 (1, then 3)", rules.Served, rules.Batches)
	}
	clair, err := Clairvoyant(handSetting(), arr, 0, ms(100), Options{Horizon: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if clair.Served != 11 || clair.Batches[1] != 1 || clair.Batches[10] != 1 {
		t.Fatalf("clairvoyant served %d in batches %v; want all 11 (1, then 10)", clair.Served, clair.Batches)
	}
	if clair.Overrides.StartEarly != 1 || clair.Overrides.Total() != 1 {
		t.Fatalf("overrides %+v; want one early start", clair.Overrides)
	}
}

func TestRejectsBadInput(t *testing.T) {
	good := handSetting()
	for name, tc := range map[string]struct {
		s    Setting
		arr  []scheduler.Time
		want string
	}{
		"unsorted":   {good, []scheduler.Time{ms(2), ms(1)}, "before arrival"},
		"no gpus":    {Setting{Profile: good.Profile, SLO: good.SLO}, nil, "GPUs"},
		"no slo":     {Setting{Profile: good.Profile, GPUs: 1}, nil, "SLO"},
		"no profile": {Setting{SLO: good.SLO, GPUs: 1}, nil, "profile"},
	} {
		if _, err := Rules(tc.s, tc.arr, 0, ms(10)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one naming %q", name, err, tc.want)
		}
	}
}

func loadWorkload(t *testing.T, name string, k float64) *workload.Workload {
	t.Helper()
	w, err := workload.ParseFile("../../testdata/workloads/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return w.Scaled(k)
}

// replayRules replays w under the rules.
func replayRules(t *testing.T, w *workload.Workload) (*Replay, Result) {
	t.Helper()
	r, err := FromWorkload(w)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Rules()
	if err != nil {
		t.Fatal(err)
	}
	return r, res
}

// TestRulesMatchSimulator: the rules replay runs the simulator's cores the
// simulator's way, so on the same arrivals it serves exactly the requests
// the simulator serves, in batches of the same sizes, near the goodput and
// beyond it.
func TestRulesMatchSimulator(t *testing.T) {
	for _, tc := range []struct {
		file string
		k    float64
	}{
		{"table4-inceptionresnetv2.yaml", 1.07},
		{"table4-inceptionresnetv2.yaml", 1.3},
		{"table4-resnet50.yaml", 1.0},
		{"small-batch", 1},   // batches reach the profile's largest size
		{"small-batch", 1.5}, // and beyond capacity
	} {
		var w *workload.Workload
		if tc.file == "small-batch" {
			w = smallBatchWorkload(t, tc.k)
		} else {
			w = loadWorkload(t, tc.file, tc.k)
			w.Duration = 10 * time.Second
		}
		rep, err := sim.Run(w, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, got := replayRules(t, w)
		want := rep.Models[0]
		t.Logf("%s ×%g: bad %.4f sim %.4f; batch %.2f sim %.2f", tc.file, tc.k, got.BadRate(), want.BadRate, got.MeanBatch(), want.MeanBatchSize)
		if got.Requests != int(want.Offered) {
			t.Errorf("%s ×%g: %d requests in the window; the simulator counted %d", tc.file, tc.k, got.Requests, want.Offered)
		}
		if d := math.Abs(got.BadRate() - want.BadRate); d > 1e-12 {
			t.Errorf("%s ×%g: bad rate %.6f; the simulator's is %.6f", tc.file, tc.k, got.BadRate(), want.BadRate)
		}
		if d := math.Abs(got.MeanBatch() - want.MeanBatchSize); d > 0.005 {
			t.Errorf("%s ×%g: mean batch %.6f; the simulator's is %.6f", tc.file, tc.k, got.MeanBatch(), want.MeanBatchSize)
		}
	}
}

// TestClairvoyantBeatsRules: above the Table 4 goodput, where the rules
// lose requests, knowing the future serves more of them, and the replay is
// deterministic.
func TestClairvoyantBeatsRules(t *testing.T) {
	w := loadWorkload(t, "table4-inceptionresnetv2.yaml", 1.15)
	w.Warmup, w.Duration = 500*time.Millisecond, time.Second
	r, rules := replayRules(t, w)
	o := Options{Horizon: 150 * time.Millisecond}
	clair, err := r.Clairvoyant(o)
	if err != nil {
		t.Fatal(err)
	}
	if rules.Served == rules.Requests {
		t.Fatalf("rules served all %d requests: nothing to beat", rules.Requests)
	}
	if clair.Served <= rules.Served || clair.Overrides.Total() == 0 {
		t.Fatalf("clairvoyant served %d with %+v overrides; rules %d", clair.Served, clair.Overrides, rules.Served)
	}
	// The same result again, whatever the number of workers.
	for _, workers := range []int{1, 3} {
		o.Workers = workers
		again, err := r.Clairvoyant(o)
		if err != nil {
			t.Fatal(err)
		}
		if again.Served != clair.Served || again.Overrides != clair.Overrides {
			t.Fatalf("%d workers served %d (%+v), first replay %d (%+v)", workers, again.Served, again.Overrides, clair.Served, clair.Overrides)
		}
	}
}

func TestFromWorkloadWantsOneModel(t *testing.T) {
	w := loadWorkload(t, "mixed-1080ti.yaml", 1)
	if _, err := FromWorkload(w); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Fatalf("error %v; want one saying it replays exactly one model", err)
	}
}

// A batch of the profile's largest size can take no more requests: the
// rules start it at once, as the real scheduler does, rather than hold it
// for a sched_at that does not exist.
func TestFullBatchStartsAtOnce(t *testing.T) {
	s := handSetting()
	s.Profile = profile.MustLinear(time.Millisecond, 10*time.Millisecond, 4)
	s.SLO = 100 * time.Millisecond
	arr := []scheduler.Time{ms(0), ms(0), ms(0), ms(0)}
	r, err := Rules(s, arr, 0, ms(100))
	if err != nil {
		t.Fatal(err)
	}
	if r.Served != 4 || r.Batches[4] != 1 {
		t.Fatalf("served %d in batches %v; want all 4 in one batch", r.Served, r.Batches)
	}
}

// smallBatchWorkload is a Poisson load on 2 GPUs whose profile caps the
// batch at 8, far below what its 100ms SLO allows.
func smallBatchWorkload(t *testing.T, k float64) *workload.Workload {
	w := loadWorkload(t, "table4-resnet50.yaml", 1)
	w.Warmup, w.Duration = time.Second, 5*time.Second
	w.Cluster.GPUs = 2
	m := &w.Models[0]
	m.Profile = profile.MustLinear(time.Millisecond, 5*time.Millisecond, 8)
	m.SLO = 100 * time.Millisecond
	m.Rates = []workload.RatePhase{{Rate: 1000 * k}}
	return w
}

// With a horizon shorter than the SLO, a trial scores only the requests
// whose deadlines it reaches: holding a batch is not mistaken for losing it.
func TestShortHorizonDoesNotStartEverythingEarly(t *testing.T) {
	w := loadWorkload(t, "table4-resnet50.yaml", 1)
	w.Warmup, w.Duration = 200*time.Millisecond, time.Second
	w.Cluster.GPUs = 1
	m := &w.Models[0]
	m.Profile = profile.MustLinear(time.Millisecond, 5*time.Millisecond, 0)
	m.SLO = 600 * time.Millisecond
	m.Rates = []workload.RatePhase{{Rate: 400}}
	r, rules := replayRules(t, w)
	clair, err := r.Clairvoyant(Options{Horizon: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if clair.Overrides.StartEarly > clair.Decisions/100 || clair.MeanBatch() < 0.9*rules.MeanBatch() {
		t.Fatalf("clairvoyant: %+v overrides in %d decisions, mean batch %.1f (rules %.1f); want it to keep holding",
			clair.Overrides, clair.Decisions, clair.MeanBatch(), rules.MeanBatch())
	}
}

func TestFromWorkloadRejectsOtherRules(t *testing.T) {
	for _, tc := range []struct {
		edit func(*workload.Workload)
		want string
	}{
		{func(w *workload.Workload) { w.Policy = scheduler.PolicyClockwork }, "policy clockwork"},
		{func(w *workload.Workload) { w.Drop = scheduler.DropTimeout }, "drop timeout"},
		{func(w *workload.Workload) { w.Schedulable = scheduler.SchedulableBetaLambda }, "schedulable beta-lambda"},
		{func(w *workload.Workload) { w.Models[0].Rates = []workload.RatePhase{{Rate: 0}} }, "no requests"},
	} {
		w := loadWorkload(t, "table4-resnet50.yaml", 1)
		w.Duration = time.Second
		tc.edit(w)
		if _, err := FromWorkload(w); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v; want one naming %q", err, tc.want)
		}
	}
}
