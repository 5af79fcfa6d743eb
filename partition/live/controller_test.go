package live

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition/epoch"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

func report(sched string, start int64, busy, online time.Duration, counts map[string]registry.Counts) registry.Report {
	return registry.Report{Scheduler: sched, Start: start, At: start + 1, Models: counts, Busy: busy, Online: online}
}

// A report of the same series counts since its base; one of another
// series (a restart or a takeover) counts whole.
func TestSinceTakesDifferencesWithinASeries(t *testing.T) {
	base := report("a", 100, time.Second, 4*time.Second, map[string]registry.Counts{"m": {Tasks: 10, Bad: 1}})
	cur := report("a", 100, 3*time.Second, 10*time.Second, map[string]registry.Counts{"m": {Tasks: 25, Bad: 2}, "n": {Tasks: 4}})
	counts, busy, online := since(cur, base, true)
	if counts["m"] != (registry.Counts{Tasks: 15, Bad: 1}) || counts["n"] != (registry.Counts{Tasks: 4}) || busy != 2*time.Second || online != 6*time.Second {
		t.Errorf("same series: %v, busy %v, online %v", counts, busy, online)
	}
	standby := report("b", 200, time.Second, 2*time.Second, map[string]registry.Counts{"m": {Tasks: 3}})
	counts, busy, online = since(standby, base, true)
	if counts["m"] != (registry.Counts{Tasks: 3}) || busy != time.Second || online != 2*time.Second {
		t.Errorf("takeover: %v, busy %v, online %v; want the new series whole", counts, busy, online)
	}
	counts, _, _ = since(cur, registry.Report{}, false)
	if counts["m"].Tasks != 25 {
		t.Errorf("no base: %v, want the report whole", counts)
	}
}

// measure splits each model's arrivals into the epoch's halves from the
// reports at its start, middle and end, sums them over the parts that
// served the model (a moved model counts at both), and takes each part's
// busy and online time.
func TestMeasureHalvesAndParts(t *testing.T) {
	m := func(name string) epoch.Model {
		return epoch.Model{Model: serving.Model{Name: name, Profile: profile.MustLinear(time.Millisecond, time.Millisecond, 4), SLO: 50 * time.Millisecond}}
	}
	c := &Controller{cfg: ControllerConfig{Epoch: epoch.Config{Parts: 2}, Models: []epoch.Model{m("x"), m("y")}},
		index: map[string]int{"x": 0, "y": 1}}
	c.base = map[int]registry.Report{
		0: report("s0", 1, time.Second, time.Second, map[string]registry.Counts{"x": {Tasks: 100, Bad: 5}}),
		1: report("s1", 1, 0, 0, map[string]registry.Counts{}),
	}
	mid := map[int]registry.Report{
		0: report("s0", 1, 2*time.Second, 3*time.Second, map[string]registry.Counts{"x": {Tasks: 130, Bad: 5}}),
		1: report("s1", 1, 0, time.Second, map[string]registry.Counts{"y": {Tasks: 8}}),
	}
	end := map[int]registry.Report{
		0: report("s0", 1, 3*time.Second, 5*time.Second, map[string]registry.Counts{"x": {Tasks: 150, Bad: 7}}),
		1: report("s1", 1, time.Second, 3*time.Second, map[string]registry.Counts{"x": {Tasks: 6, Bad: 1}, "y": {Tasks: 20, Bad: 2}}),
	}
	in := &epoch.Input{Models: []epoch.Model{m("x"), m("y")}}
	c.measure(in, mid, end)
	x, y := in.Models[0], in.Models[1]
	// x: part 0 took 30 then 20 (bad 2), part 1 took 6 in the second half
	// (its middle report had none of x), bad 1.
	if x.Arrivals != [2]uint64{30, 26} || x.Bad != 3 || x.Good != 53 {
		t.Errorf("x: arrivals %v, good %d, bad %d; want [30 26], 53, 3", x.Arrivals, x.Good, x.Bad)
	}
	if y.Arrivals != [2]uint64{8, 12} || y.Bad != 2 || y.Good != 18 {
		t.Errorf("y: arrivals %v, good %d, bad %d; want [8 12], 18, 2", y.Arrivals, y.Good, y.Bad)
	}
	if in.Parts[0] != (epoch.Part{Busy: 2 * time.Second, Online: 4 * time.Second}) || in.Parts[1] != (epoch.Part{Busy: time.Second, Online: 3 * time.Second}) {
		t.Errorf("parts %+v", in.Parts)
	}
}

// Reports are up to ReportEvery old when read, so the halves they bound
// may be of unequal spans: each half's arrivals are scaled to half of the
// window, or a steady rate would read as a trend.
func TestMeasureScalesHalvesToTheirSpans(t *testing.T) {
	mk := func(at time.Duration, tasks uint64) registry.Report {
		return registry.Report{Scheduler: "s", Start: 1, At: 1 + int64(at), Models: map[string]registry.Counts{"x": {Tasks: tasks}}}
	}
	m := epoch.Model{Model: serving.Model{Name: "x", Profile: profile.MustLinear(time.Millisecond, time.Millisecond, 4), SLO: 50 * time.Millisecond}}
	c := &Controller{cfg: ControllerConfig{Epoch: epoch.Config{Parts: 1}, Models: []epoch.Model{m}}, index: map[string]int{"x": 0}}
	// 10 req/s throughout: 60 in the first 6 s, 40 in the last 4 s.
	c.base = map[int]registry.Report{0: mk(0, 100)}
	in := &epoch.Input{Models: []epoch.Model{m}, Window: 10 * time.Second}
	c.measure(in, map[int]registry.Report{0: mk(6*time.Second, 160)}, map[int]registry.Report{0: mk(10*time.Second, 200)})
	if got := in.Models[0].Arrivals; got != [2]uint64{50, 50} {
		t.Errorf("arrivals %v, want [50 50]: a steady rate's halves", got)
	}
	if f := epoch.Forecast(float64(in.Models[0].Arrivals[0])/5, float64(in.Models[0].Arrivals[1])/5); f != 10 {
		t.Errorf("forecast %v req/s, want the steady 10", f)
	}
}
