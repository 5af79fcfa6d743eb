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
	t.Logf("measured %v, Eqs. 2-3 %.1f %.1f %.1f %.1f", caps, analytic.Capacity(1), analytic.Capacity(2), analytic.Capacity(3), analytic.Capacity(4))
	if len(caps) != m.MaxGPUs {
		t.Fatalf("%d counts measured up to %d", len(caps), m.MaxGPUs)
	}
	for i, c := range caps {
		if i > 0 && c.Rate < caps[i-1].Rate {
			t.Errorf("%d GPUs serve %v, less than %d GPUs' %v", c.GPUs, c.Rate, caps[i-1].GPUs, caps[i-1].Rate)
		}
		steady := steadyMix(w, m, c.GPUs)
		for _, k := range []float64{1, 1.1} {
			rep, err := Run(steady.Scaled(c.Rate*k), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if st := (report.SearchOptions{TargetBadRate: 0.01}).Judge(rep); st.OK != (k == 1) {
				t.Errorf("%d GPUs at %.2fx their measured %.1f req/s: %+v", c.GPUs, k, c.Rate, st)
			}
		}
	}
	if a := analytic.Capacity(1); !(caps[0].Rate < a) {
		t.Errorf("1 GPU measured at %v req/s, Eqs. 2-3 say %v: one GPU shared by two models should serve less", caps[0].Rate, a)
	}
	if _, err := MeasureSizer(w, SizerMeasurement{}); err == nil {
		t.Error("a measurement of 0 GPUs accepted")
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
