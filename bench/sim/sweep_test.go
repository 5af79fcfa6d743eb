package sim

import (
	"math"
	"testing"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler"
)

// Sweep scales the file's rates by scale × each multiplier and gives each
// point its flat-top targets against the peak: at 2000 req/s × 1.5, the
// 1x point offers about 3000 req/s (below a 5000 peak: idle target
// (p−o)/p ≈ 0.4) and the 2x point about 6000 (above: bad target (o−p)/o ≈
// 1/6).
func TestSweep(t *testing.T) {
	w := table4(scheduler.PolicySymphony, 2000)
	var seen int
	c, err := Sweep(w, 1.5, 5000, []float64{1, 2}, report.SweepOptions{Outcomes: true, Point: func(report.CurvePoint) { seen++ }})
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy != "symphony" || c.PeakGoodputRPS != 5000 || len(c.Points) != 2 || seen != 2 {
		t.Fatalf("curve %+v after %d points seen", c, seen)
	}
	below, above := c.Points[0], c.Points[1]
	if below.Multiplier != 1 || math.Abs(below.OfferedRPS-3000) > 150 || math.Abs(above.OfferedRPS-6000) > 300 {
		t.Errorf("offered %g at 1x and %g at 2x, want about 3000 and 6000", below.OfferedRPS, above.OfferedRPS)
	}
	if got, want := below.IdealIdleFraction, (5000-below.OfferedRPS)/5000; got != want || below.IdealBadRate != 0 || math.Abs(got-0.4) > 0.03 {
		t.Errorf("1x targets: idle %g (want (p−o)/p = %g), bad %g", got, want, below.IdealBadRate)
	}
	if got, want := above.IdealBadRate, (above.OfferedRPS-5000)/above.OfferedRPS; got != want || above.IdealIdleFraction != 0 || math.Abs(got-1.0/6) > 0.03 {
		t.Errorf("2x targets: bad %g (want (o−p)/o = %g), idle %g", got, want, above.IdealIdleFraction)
	}
	if below.Outcomes == nil || below.Outcomes.Offered == 0 || above.Outcomes.Bad() == 0 {
		t.Errorf("outcomes %+v, %+v: want counts, with bad requests above the table's peak", below.Outcomes, above.Outcomes)
	}
}
