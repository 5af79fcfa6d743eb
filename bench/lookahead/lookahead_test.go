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

// TestRulesMatchSimulator holds the model of the rules to the real
// scheduler: on the same arrivals, the bad rate and mean batch agree with
// the simulator's, near the goodput and beyond it.
func TestRulesMatchSimulator(t *testing.T) {
	for _, tc := range []struct {
		file string
		k    float64
	}{
		{"table4-inceptionresnetv2.yaml", 1.07},
		{"table4-inceptionresnetv2.yaml", 1.3},
		{"table4-resnet50.yaml", 1.0},
	} {
		w := loadWorkload(t, tc.file, tc.k)
		w.Duration = 10 * time.Second
		rep, err := sim.Run(w, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := FromWorkload(w)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Rules()
		if err != nil {
			t.Fatal(err)
		}
		want := rep.Models[0]
		if got.Requests != int(want.Offered) {
			t.Errorf("%s ×%g: %d requests in the window; the simulator counted %d", tc.file, tc.k, got.Requests, want.Offered)
		}
		if d := math.Abs(got.BadRate() - want.BadRate); d > 0.004 {
			t.Errorf("%s ×%g: bad rate %.4f; the simulator's is %.4f", tc.file, tc.k, got.BadRate(), want.BadRate)
		}
		if d := math.Abs(got.MeanBatch() - want.MeanBatchSize); d > 0.3 {
			t.Errorf("%s ×%g: mean batch %.2f; the simulator's is %.2f", tc.file, tc.k, got.MeanBatch(), want.MeanBatchSize)
		}
	}
}

// TestClairvoyantBeatsRules: knowing the future never serves fewer on the
// Table 4 load, and the replay is deterministic.
func TestClairvoyantBeatsRules(t *testing.T) {
	w := loadWorkload(t, "table4-inceptionresnetv2.yaml", 1.1)
	w.Warmup, w.Duration = 500*time.Millisecond, 2*time.Second
	r, err := FromWorkload(w)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := r.Rules()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Horizon: 150 * time.Millisecond}
	clair, err := r.Clairvoyant(o)
	if err != nil {
		t.Fatal(err)
	}
	if clair.Served < rules.Served || clair.Overrides.Total() == 0 {
		t.Fatalf("clairvoyant served %d with %+v overrides; rules %d", clair.Served, clair.Overrides, rules.Served)
	}
	again, err := r.Clairvoyant(o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Served != clair.Served || again.Overrides != clair.Overrides {
		t.Fatalf("second replay served %d (%+v), first %d (%+v)", again.Served, again.Overrides, clair.Served, clair.Overrides)
	}
}

func TestFromWorkloadWantsOneModel(t *testing.T) {
	w := loadWorkload(t, "mixed-1080ti.yaml", 1)
	if _, err := FromWorkload(w); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Fatalf("error %v; want one saying it replays exactly one model", err)
	}
}
