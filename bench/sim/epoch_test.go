package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// dailyWorkload is a small §5.6: six heavy 1080Ti models on up to gpus
// GPUs in two parts, each model's rate swinging 4x over a 20-minute "day"
// with epochs every 2 minutes.
func dailyWorkload(t *testing.T, gpus int, peak float64) *workload.Workload {
	t.Helper()
	specs, err := profile.Zoo("1080ti")
	if err != nil {
		t.Fatal(err)
	}
	e := workload.DefaultEpoch()
	e.Interval, e.Parts, e.ModelLoadTime = 2*time.Minute, 2, time.Second
	w := &workload.Workload{
		Source: "daily", Seed: 3, Duration: 20 * time.Minute, Cluster: workload.Cluster{GPUs: gpus},
		Settings: serving.Settings{Network: table4Network}, AutoscaleWindow: 30 * time.Second, Epoch: &e,
	}
	for i, name := range []string{"NASNetLarge", "EfficientNetB4", "EfficientNetV2S", "BERT", "InceptionResNetV2", "ResNet152"} {
		var s profile.ModelSpec
		for _, c := range specs {
			if c.Name == name {
				s = c
			}
		}
		d := workload.DailyRate{Low: peak / 4, High: peak, Period: 20 * time.Minute, PeakAt: time.Duration(8+i) * time.Minute, Step: 30 * time.Second}
		w.Models = append(w.Models, workload.Model{Model: serving.Model{Name: name, Profile: s.Profile(), SLO: s.SLO}, Rates: d.Phases(w.Duration)})
	}
	return w
}

// The epoch job sizes the parts for the load as it rises and falls: GPUs
// in use follow the need within one epoch, never fall below it, and the bad
// rate stays within 1% while the cluster has room. The run is reproducible.
func TestEpochFollowsDailyLoad(t *testing.T) {
	w := dailyWorkload(t, 256, 300)
	rep := run(t, w)
	if len(rep.Epochs) != 10 {
		t.Fatalf("%d epochs in 20 minutes at 2-minute intervals, want 10", len(rep.Epochs))
	}
	lo, hi := rep.Epochs[0].GPUs, rep.Epochs[0].GPUs
	for _, e := range rep.Epochs {
		t.Logf("t=%4.0fs need %5.1f GPUs %3d parts %v advice %+d bad %.4f idle %.2f moves %d %s", e.Start, e.Need, e.GPUs, e.PartGPUs, e.AdviceGPUs, e.BadRate, e.IdleFraction, e.Moves, e.Skipped)
		if e.CapacityLimited {
			t.Errorf("t=%.0fs: capacity limited with 256 GPUs", e.Start)
		}
		if float64(e.GPUs) < e.Need {
			t.Errorf("t=%.0fs: %d GPUs for a need of %.1f", e.Start, e.GPUs, e.Need)
		}
		if e.BadRate > 0.01 {
			t.Errorf("t=%.0fs: bad rate %.4f over the epoch before, want ≤ 1%%", e.Start, e.BadRate)
		}
		lo, hi = min(lo, e.GPUs), max(hi, e.GPUs)
	}
	if hi < 2*lo {
		t.Errorf("GPUs in use range %d..%d for a 4x swing in load", lo, hi)
	}
	if rep.BadRate > 0.01 {
		t.Errorf("bad rate %.4f, want ≤ 1%%", rep.BadRate)
	}
	for _, tp := range rep.TimeSeries {
		if len(tp.ModelGoodputRPS) != len(w.Models) || tp.GPUsInUse <= 0 {
			t.Fatalf("time point %+v lacks per-model goodput or GPUs in use", tp)
		}
	}
	short := func() *report.Report {
		w := dailyWorkload(t, 256, 300)
		w.Duration = 5 * time.Minute
		return run(t, w)
	}
	if a, b := short(), short(); !reflect.DeepEqual(stripHistograms(a), stripHistograms(b)) {
		t.Error("same workload and seed, different reports")
	}
}

func stripHistograms(r *report.Report) report.Report {
	c := *r
	c.Latency = nil
	c.Models = nil
	return c
}

// A cluster too small for the load gives every part a share of what there
// is, says so, and still ends every request.
func TestEpochCapacityLimited(t *testing.T) {
	w := dailyWorkload(t, 16, 300)
	w.Duration = 10 * time.Minute
	rep := run(t, w)
	limited := false
	for _, e := range rep.Epochs {
		if e.GPUs > 16 {
			t.Errorf("t=%.0fs: %d GPUs in use on a 16-GPU cluster", e.Start, e.GPUs)
		}
		limited = limited || e.CapacityLimited
	}
	if !limited {
		t.Error("no epoch was capacity limited")
	}
	if rep.Offered != rep.Good+rep.Late+rep.Dropped {
		t.Errorf("offered %d != good %d + late %d + dropped %d", rep.Offered, rep.Good, rep.Late, rep.Dropped)
	}
}

// When one model's load surges, the parts drift apart and the job moves
// models (make before break: loads first, then the switch); no request is
// lost or runs on a loading GPU (the oracle). Once the parts have grown for
// the surge, the bad rate is back within 1%. The models have no memory
// sizes, so only the rates are balanced; partition's own tests cover the
// disruption budget.
func TestEpochRebalancesWithinBudget(t *testing.T) {
	w := dailyWorkload(t, 256, 200)
	w.Duration = 14 * time.Minute
	for i := range w.Models {
		w.Models[i].Rates = []workload.RatePhase{{Rate: 200}}
	}
	// At 5 minutes one model's load grows 6x.
	w.Models[0].Rates = []workload.RatePhase{{Duration: 5 * time.Minute, Rate: 200}, {Rate: 1200}}
	rep := run(t, w)
	moved, done := -1, false
	for i, e := range rep.Epochs {
		t.Logf("t=%4.0fs parts %v bad %.4f rate imbalance %.3f moves %d disruption %d %s", e.Start, e.PartGPUs, e.BadRate, e.RateImbalance, e.Moves, e.Disruption, e.Skipped)
		if moved >= 0 && i >= moved+2 && e.BadRate > 0.01 {
			t.Errorf("t=%.0fs: bad rate %.4f after the move, want ≤ 1%%", e.Start, e.BadRate)
		}
		// Without moves the surge leaves the parts at (1600−600)/1100 = 0.9.
		if moved >= 0 && !strings.Contains(e.Skipped, "loading") && e.RateImbalance < 0.5 {
			done = true // the move completed and left the parts more even
		}
		if moved < 0 && e.Moves > 0 {
			moved = i
		}
	}
	if moved < 0 || !done {
		t.Errorf("moved at epoch %d, completed %v: want a move that completes", moved, done)
	}
}
