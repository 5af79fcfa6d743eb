package sim

import (
	"reflect"

	"github.com/symphony-serving/symphony/bench/report"
	"testing"
	"time"
)

// TestMeasureSizer: the measured capacities grow with the GPUs, repeat
// exactly, and each is a rate that count serves within the target while
// 10% more is not; Eqs. 2-3 promise more than a single GPU shared by two
// models serves.
func TestMeasureSizer(t *testing.T) {
	w := cloudWorkload(t, 20*time.Minute)
	m := SizerMeasurement{MaxGPUs: 4, TargetBadRate: 0.01, Duration: 20 * time.Second, Warmup: 5 * time.Second}
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
	analytic := cloudSizer(t, w)
	t.Logf("measured %.1f, Eqs. 2-3 %.1f %.1f %.1f %.1f", caps, analytic.Capacity(1), analytic.Capacity(2), analytic.Capacity(3), analytic.Capacity(4))
	for g, c := range caps {
		if g > 0 && c < caps[g-1] {
			t.Errorf("%d GPUs serve %v, less than %d GPUs' %v", g+1, c, g, caps[g-1])
		}
		steady := steadyMix(w, m, g+1)
		for _, k := range []float64{1, 1.1} {
			rep, err := Run(steady.Scaled(c*k), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if st := (report.SearchOptions{TargetBadRate: 0.01}).Judge(rep); st.OK != (k == 1) {
				t.Errorf("%d GPUs at %.2fx their measured %.1f req/s: %+v", g+1, k, c, st)
			}
		}
	}
	if a := analytic.Capacity(1); !(caps[0] < a) {
		t.Errorf("1 GPU measured at %v req/s, Eqs. 2-3 say %v: one GPU shared by two models should serve less", caps[0], a)
	}
	if _, err := MeasureSizer(w, SizerMeasurement{}); err == nil {
		t.Error("a measurement of 0 GPUs accepted")
	}
}
