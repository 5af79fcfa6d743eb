package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// ProfileFit's quantiles are exact nearest-rank quantiles of real/ℓ(b);
// batches past the profile are left out, and merging two fits is the fit
// of all their batches.
func TestProfileFit(t *testing.T) {
	ms := time.Millisecond
	prof := []time.Duration{2 * ms, 4 * ms, 5 * ms}
	var a, b ProfileFit
	if a.Batches() != 0 || a.Quantile(0.5) != 0 {
		t.Fatalf("empty fit: %d batches, p50 %v", a.Batches(), a.Quantile(0.5))
	}
	// Batches of 2 (ℓ = 4ms) taking 4.0, 4.4, ... 7.6ms: ratios 1.0 .. 1.9.
	for i := range 10 {
		a.Add(2, 4*ms+time.Duration(i)*400*time.Microsecond, prof)
	}
	a.Add(4, time.Second, prof) // past the profile: not counted
	a.Add(0, time.Second, prof) // no batch: not counted
	a.Add(1, time.Second, nil)  // no profile: not counted
	if a.Batches() != 10 {
		t.Fatalf("%d batches counted, want 10", a.Batches())
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 1.4}, {0.99, 1.9}, {0.1, 1.0}, {0, 1.0}, {1, 1.9}} {
		if got := a.Quantile(c.q); !near(got, c.want) {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	// Ten batches of 3 (ℓ = 5ms) that took 10ms: ratio 2.
	for range 10 {
		b.Add(3, 10*ms, prof)
	}
	a.Merge(&b)
	if a.Batches() != 20 || !near(a.Quantile(0.5), 1.9) || !near(a.Quantile(0.51), 2) {
		t.Errorf("merged: %d batches, p50 %v, p51 %v; want 20, 1.9, 2", a.Batches(), a.Quantile(0.5), a.Quantile(0.51))
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A model's profile fit reaches its report's fields, the total, the CSV
// and the human table; a run without one (the simulator's) shows none.
func TestProfileFitInReports(t *testing.T) {
	ms := time.Millisecond
	prof := []time.Duration{ms, 2 * ms}
	mc := []ModelCounts{{Name: "resnet", SLO: 50 * ms}, {Name: "other", SLO: 50 * ms}}
	mc[0].Offered, mc[0].Good = 2, 2
	mc[0].Profile.Add(1, 1100*time.Microsecond, prof)
	mc[0].Profile.Add(2, 2600*time.Microsecond, prof)
	r := Build(&Measurement{GPUs: 1, Seconds: 1, Models: mc, Interval: time.Second})
	m := r.Models[0]
	if m.ProfileBatches != 2 || !near(m.ProfileRatioP50, 1.1) || !near(m.ProfileRatioP99, 1.3) {
		t.Errorf("model: %d batches, p50 %v, p99 %v; want 2, 1.1, 1.3", m.ProfileBatches, m.ProfileRatioP50, m.ProfileRatioP99)
	}
	if r.Models[1].ProfileBatches != 0 || r.ProfileBatches != 2 || !near(r.ProfileRatioP99, 1.3) {
		t.Errorf("other model %d batches; total %d batches, p99 %v", r.Models[1].ProfileBatches, r.ProfileBatches, r.ProfileRatioP99)
	}
	var csv, table, js bytes.Buffer
	if err := WriteCSV(&csv, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csv.String(), ",2,1.1,1.3\n") || !strings.Contains(csv.String(), "other,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n") {
		t.Errorf("CSV:\n%s", csv.String())
	}
	// The adherence table lists the model with batches, and only it.
	_, section, _ := strings.Cut(table.String(), "profile adherence")
	if !strings.Contains(table.String(), "p50 1.100   p99 1.300   (2 batches)") || fieldLines(section) != "model batches p50 p99|resnet 2 1.100 1.300" {
		t.Errorf("table:\n%s", table.String())
	}
	if !strings.Contains(js.String(), `"profile_ratio_p50": 1.1`) {
		t.Errorf("JSON lacks the model's profile_ratio_p50:\n%s", js.String())
	}
	sim := Build(&Measurement{GPUs: 1, Seconds: 1, Models: mc[1:], Interval: time.Second})
	table.Reset()
	js.Reset()
	if err := WriteTable(&table, sim); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, sim); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(table.String(), "profile") || strings.Contains(js.String(), "profile") {
		t.Errorf("a run without a profile fit shows one:\n%s\n%s", table.String(), js.String())
	}
}

// fieldLines is the lines of s after its first, each as its fields
// joined by spaces, joined by "|", empty lines left out.
func fieldLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			out = append(out, strings.Join(f, " "))
		}
	}
	return strings.Join(out, "|")
}
