package provision

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestVerifySmallPartialAtLargeRate: a partial machine whose rate is below
// a millionth of the module's is a machine, not rounding. Verify used to
// drop it (and then refused the valid provision for its machine count), and so
// would have skipped its latency.
func TestVerifySmallPartialAtLargeRate(t *testing.T) {
	app := &App{SLO: 10 * time.Second, Hardware: []Hardware{{Name: "g", PricePerHour: 1}},
		Modules: []Module{{Name: "a", Ingress: 1e6 + 0.5, Profiles: []Profile{{Hardware: "g",
			Points: []Point{{Batch: 1, Concurrency: 1, Latency: 100 * time.Millisecond}}}}}}}
	p, err := SolveBaseline(app, Clipper)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Modules[0].Configs[0]
	if math.Abs(c.Machines-100000.05) > 1e-6 {
		t.Fatalf("want 100000 machines and one at 0.5 req/s, have %+v", c)
	}
	if err := Verify(app, p); err != nil {
		t.Fatalf("valid provision refused: %v", err)
	}
	// The partial machine collects a batch in 2 s (round-robin: 0.1 +
	// 1/0.5): a budget of 1 s must fail on its latency.
	p.Modules[0].Budget = time.Second
	if err := Verify(app, p); err == nil || !strings.Contains(err.Error(), "worst-case latency 2.1s exceeds the budget") {
		t.Fatalf("want the partial machine's latency over the budget, have %v", err)
	}
}

// TestDummiesBookedWithinRates: the branch-and-bound may top up a
// configuration other than the last; the provision used to book every dummy on
// the last configuration, more dummies than its rate.
func TestDummiesBookedWithinRates(t *testing.T) {
	app := DefaultRandom().Random(5, 203)
	p, err := Solve(app, Default())
	if err != nil {
		t.Fatal(err)
	}
	checked := false
	for mi, m := range p.Modules {
		sum := 0.0
		for i, c := range m.Configs {
			if c.DummyRate < 0 || c.DummyRate > c.Rate+1e-9 {
				t.Errorf("module %s configuration %d: %v dummies of %v req/s", m.Name, i, c.DummyRate, c.Rate)
			}
			sum += c.DummyRate
		}
		if math.Abs(sum-m.DummyRate) > 1e-9 {
			t.Errorf("module %s: configurations hold %v dummies, the module %v", m.Name, sum, m.DummyRate)
		}
		last := m.Configs[len(m.Configs)-1]
		if m.DummyRate <= last.Rate {
			continue
		}
		checked = true
		// Booking them all on the last configuration is refused.
		q := *p
		q.Modules = append([]ModuleProvision(nil), p.Modules...)
		q.Modules[mi].Configs = append([]ConfigProvision(nil), m.Configs...)
		for i := range q.Modules[mi].Configs {
			q.Modules[mi].Configs[i].DummyRate = 0
		}
		q.Modules[mi].Configs[len(m.Configs)-1].DummyRate = m.DummyRate
		if err := Verify(app, &q); err == nil || !strings.Contains(err.Error(), "dummy req/s of") {
			t.Errorf("all dummies on the last configuration: %v", err)
		}
	}
	if !checked {
		t.Fatal("the instance no longer tops up a configuration before the last; pick another")
	}
	if err := Verify(app, p); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyRejects: what Verify refuses that it used to let through.
func TestVerifyRejects(t *testing.T) {
	app := singleApp(harpagonM3, 198, time.Second)
	good, err := Solve(app, Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(app, good); err != nil {
		t.Fatal(err)
	}
	clone := func() *Provision {
		q := *good
		q.Modules = append([]ModuleProvision(nil), good.Modules...)
		q.Modules[0].Configs = append([]ConfigProvision(nil), good.Modules[0].Configs...)
		return &q
	}
	if err := Verify(app, nil); err == nil {
		t.Error("nil provision accepted")
	}
	q := clone()
	q.Options.Dispatch = Dispatch(9) // would check no full machine's latency
	if err := Verify(app, q); err == nil || !strings.Contains(err.Error(), "unknown dispatch") {
		t.Errorf("unknown dispatch: %v", err)
	}
	q = clone()
	q.Modules[0].WorstCase /= 2
	if err := Verify(app, q); err == nil || !strings.Contains(err.Error(), "states a worst case") {
		t.Errorf("misstated worst case: %v", err)
	}
	// A configuration that does not fit the hardware's memory.
	small := *app
	small.Hardware = []Hardware{{Name: "gpu", PricePerHour: 1, Memory: 1 << 30}}
	small.Modules = append([]Module(nil), app.Modules...)
	small.Modules[0].Memory = 1 << 29
	small.Modules[0].Profiles = []Profile{{Hardware: "gpu", Points: append(append([]Point(nil), app.Modules[0].Profiles[0].Points...),
		Point{Batch: 32, Concurrency: 3, Latency: 900 * time.Millisecond})}}
	q = clone()
	q.Modules[0].Configs[0].Concurrency = 3
	q.Modules[0].Configs[0].Latency = 900 * time.Millisecond
	if err := Verify(&small, q); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("configuration over the memory: %v", err)
	}
}
