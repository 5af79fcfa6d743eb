package sim

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
)

// TestMeasureSizer: the measured capacities repeat exactly, and 10% more
// than each is more than that count serves within the target; Eqs. 2-3
// promise more than a single GPU shared by two models serves. Between
// measured counts the interpolation is near what the count in between
// measures on its own.
func TestMeasureSizer(t *testing.T) {
	w := cloudWorkload(t, 20*time.Minute)
	m := SizerMeasurement{MaxGPUs: 11, TargetBadRate: 0.01, Duration: 20 * time.Second, Warmup: 5 * time.Second}
	s, err := MeasureSizer(w, m)
	if err != nil {
		t.Fatal(err)
	}
	caps := s.Capacities()
	again, err := MeasureSizer(w, m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(caps, again.Capacities()) {
		t.Fatalf("two measurements differ: %v and %v", caps, again.Capacities())
	}
	for _, c := range caps {
		rep, err := Run(steadyMix(w, m, c.GPUs).Scaled(1.1*c.Rate), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if st := (report.SearchOptions{TargetBadRate: 0.01}).Judge(rep); st.OK {
			t.Errorf("%d GPUs serve 1.1x their measured %.1f req/s within the target: %+v", c.GPUs, c.Rate, st)
		}
	}
	analytic := cloudSizer(t, w)
	if a := analytic.Capacity(1); !(caps[0].Rate < a) {
		t.Errorf("1 GPU measured at %v req/s, Eqs. 2-3 say %v: one GPU shared by two models should serve less", caps[0].Rate, a)
	}
	// 10 GPUs are not measured (counts 9 and 11 are): the interpolation is
	// within 3% of their own measurement.
	ten, err := MeasureSizer(w, SizerMeasurement{MaxGPUs: 10, TargetBadRate: 0.01, Duration: m.Duration, Warmup: m.Warmup})
	if err != nil {
		t.Fatal(err)
	}
	direct := ten.Capacities()[9]
	t.Logf("10 GPUs: interpolated %.1f req/s, measured %.1f", s.Capacity(10), direct.Rate)
	if got := s.Capacity(10); direct.GPUs != 10 || math.Abs(got-direct.Rate) > 0.03*direct.Rate {
		t.Errorf("10 GPUs: interpolated %.1f req/s, measured %+v", got, direct)
	}
	if _, err := MeasureSizer(w, SizerMeasurement{}); err == nil {
		t.Error("a measurement of 0 GPUs accepted")
	}
}

// TestSteadyMix: the measured load is the mix's shares of the mean rates at
// 1 req/s in all, on the GPUs asked for, without the workload's faults or
// epoch job.
func TestSteadyMix(t *testing.T) {
	w := cloudWorkload(t, 20*time.Minute)
	w.Models[1].Rates = []workload.RatePhase{{Rate: 3 * w.Models[0].MeanRate(0, w.Duration)}}
	w.Epoch = &workload.Epoch{}
	w.Faults = make([]workload.Fault, 1)
	s := steadyMix(w, SizerMeasurement{}.withDefaults(), 5)
	if s.Cluster.GPUs != 5 || s.Epoch != nil || len(s.Faults) != 0 || s.Duration != time.Minute || s.Warmup != 10*time.Second {
		t.Errorf("steady mix: %d GPUs, epoch %v, %d faults, %v after %v", s.Cluster.GPUs, s.Epoch, len(s.Faults), s.Duration, s.Warmup)
	}
	if a, b := s.Models[0].RateAt(0), s.Models[1].RateAt(0); math.Abs(a-0.25) > 1e-9 || math.Abs(b-0.75) > 1e-9 || len(s.Models[0].Rates) != 1 {
		t.Errorf("steady rates %v and %v, want 0.25 and 0.75, constant", a, b)
	}
	if len(w.Faults) != 1 || w.Epoch == nil || w.Cluster.GPUs != 64 {
		t.Error("steadyMix changed the workload it copies")
	}
}

// TestMeasurementFor: counts up to a quarter above the peak's need, within
// the slot pool; a workload a cloud run refuses is refused before anything
// is measured.
func TestMeasurementFor(t *testing.T) {
	w := cloudWorkload(t, 20*time.Minute)
	m, err := MeasurementFor(w)
	if err != nil {
		t.Fatal(err)
	}
	need := cloudSizer(t, w).Need(PeakRate(w))
	if want := int(math.Ceil(1.25*need)) + 2; m.MaxGPUs != want || m.TargetBadRate != 0.01 {
		t.Errorf("measurement %+v for a peak needing %.2f GPUs, want up to %d at 1%%", m, need, want)
	}
	w.Cluster.GPUs = 3
	if m, err := MeasurementFor(w); err != nil || m.MaxGPUs != 3 {
		t.Errorf("a pool of 3 slots: %+v, %v", m, err)
	}
	w.Cluster.GPUs = 64
	w.Models[0].Concurrency = 2
	if _, err := MeasurementFor(w); err == nil {
		t.Error("a workload with concurrency, which a cloud run refuses, was measured")
	}
}

// TestMeasuredCounts: every count to 8, then about an eighth apart, and
// the largest.
func TestMeasuredCounts(t *testing.T) {
	for _, c := range []struct {
		max  int
		want []int
	}{
		{1, []int{1}},
		{4, []int{1, 2, 3, 4}},
		{10, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{40, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 17, 20, 23, 26, 30, 34, 39, 40}},
	} {
		if got := MeasuredCounts(c.max); !reflect.DeepEqual(got, c.want) {
			t.Errorf("MeasuredCounts(%d) = %v, want %v", c.max, got, c.want)
		}
	}
	if got := MeasuredCounts(256); len(got) > 40 || got[len(got)-1] != 256 {
		t.Errorf("MeasuredCounts(256) = %v: want at most 40 counts, ending at 256", got)
	}
}
