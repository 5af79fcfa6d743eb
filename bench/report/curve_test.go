package report

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestIdealFlatTop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		offered, peak      float64
		bad, idle, goodput float64
		name               string
	}{
		{1500, 1000, 1.0 / 3, 0, 1000, "above the peak: (o−p)/o"},
		{2000, 1000, 0.5, 0, 1000, "twice the peak"},
		{500, 1000, 0, 0.5, 500, "below the peak: (p−o)/p"},
		{1000, 1000, 0, 0, 1000, "at the peak"},
		{1500, 0, 0, 0, 0, "no peak known"},
		{0, 1000, 0, 0, 0, "nothing offered"},
	} {
		if got := IdealBadRate(c.offered, c.peak); math.Abs(got-c.bad) > 1e-12 {
			t.Errorf("%s: IdealBadRate(%g, %g) = %g, want %g", c.name, c.offered, c.peak, got, c.bad)
		}
		if got := IdealIdleFraction(c.offered, c.peak); math.Abs(got-c.idle) > 1e-12 {
			t.Errorf("%s: IdealIdleFraction(%g, %g) = %g, want %g", c.name, c.offered, c.peak, got, c.idle)
		}
		if c.peak > 0 {
			if got := IdealGoodput(c.offered, c.peak); got != c.goodput {
				t.Errorf("%s: IdealGoodput(%g, %g) = %g, want %g", c.name, c.offered, c.peak, got, c.goodput)
			}
		}
	}
}

func TestRatio(t *testing.T) {
	t.Parallel()
	if r, ok := Ratio(900, 1000); !ok || r != 0.9 {
		t.Errorf("Ratio(900, 1000) = %g, %v", r, ok)
	}
	for _, den := range []float64{0, -1, math.NaN()} {
		if _, ok := Ratio(1, den); ok {
			t.Errorf("Ratio(1, %g) is defined", den)
		}
	}
}

func TestBadShares(t *testing.T) {
	t.Parallel()
	o := Outcomes{Offered: 100, Good: 60, Late: 10, Dropped: 25, Failed: 5}
	late, dropped, failed, ok := o.BadShares()
	if !ok || o.Bad() != 40 || late != 0.25 || dropped != 0.625 || failed != 0.125 {
		t.Errorf("bad %d, shares %g/%g/%g (ok %v); want 40, 0.25/0.625/0.125", o.Bad(), late, dropped, failed, ok)
	}
	if _, _, _, ok := (&Outcomes{Offered: 5, Good: 5}).BadShares(); ok {
		t.Error("shares of no bad request are defined")
	}
}

func sweepReport(offered, goodput float64) *Report {
	r := &Report{}
	r.OfferedRPS, r.GoodputRPS, r.BadRate = offered, goodput, 1-goodput/offered
	r.Offered, r.Good = uint64(offered), uint64(goodput)
	r.Dropped = r.Offered - r.Good
	if r.Dropped > 0 {
		r.DropReasons = map[string]uint64{"deadline": r.Dropped}
	}
	return r
}

// Sweep runs each multiplier in turn; a run stopped part-way is kept as a
// partial point and ends the sweep; a run with nothing to report ends it
// without a point. Outcomes are recorded only when asked.
func TestCurveSweep(t *testing.T) {
	t.Parallel()
	stop := errors.New("stopped")
	c := Curve{Policy: "p", PeakGoodputRPS: 1000}
	var seen []float64
	err := c.Sweep([]float64{0.5, 1, 2, 3}, SweepOptions{Outcomes: true, Point: func(p CurvePoint) { seen = append(seen, p.Multiplier) }},
		func(m float64) (*Report, error) {
			switch m {
			case 2:
				return sweepReport(2000, 1000), stop
			case 3:
				t.Fatal("the sweep went on after a stopped point")
			}
			return sweepReport(1000*m, 1000*m), nil
		})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "sweep at 2") {
		t.Fatalf("err %v, want the stop, naming the point", err)
	}
	if len(c.Points) != 3 || len(seen) != 3 {
		t.Fatalf("%d points (%d seen), want 3", len(c.Points), len(seen))
	}
	half, last := c.Points[0], c.Points[2]
	if half.Partial || half.IdealIdleFraction != 0.5 || half.IdealBadRate != 0 {
		t.Errorf("0.5x point %+v: want ideal idle 0.5 and not partial", half)
	}
	if !last.Partial || last.IdealBadRate != 0.5 || last.Outcomes == nil || last.Outcomes.Dropped != 1000 || last.Outcomes.DropReasons["deadline"] != 1000 {
		t.Errorf("2x point %+v: want partial, ideal bad 0.5, 1000 deadline drops", last)
	}
	if half.Outcomes == nil || half.Outcomes.DropReasons == nil {
		t.Error("outcomes without drops should hold an empty reason map, not nil")
	}

	c = Curve{Policy: "p"}
	if err := c.Sweep([]float64{1}, SweepOptions{}, func(float64) (*Report, error) { return sweepReport(10, 5), nil }); err != nil {
		t.Fatal(err)
	}
	if c.Points[0].Outcomes != nil || c.Points[0].IdealBadRate != 0 {
		t.Errorf("point %+v: want no outcomes (not asked) and no ideal (no peak)", c.Points[0])
	}
	if err := c.Sweep([]float64{1}, SweepOptions{}, func(float64) (*Report, error) { return nil, stop }); !errors.Is(err, stop) || len(c.Points) != 1 {
		t.Errorf("a run without a report: err %v, %d points; want the error and no new point", err, len(c.Points))
	}
}

func TestWriteCurveTable(t *testing.T) {
	t.Parallel()
	c := Curve{Policy: "symphony", PeakGoodputRPS: 1000}
	c.Points = []CurvePoint{NewCurvePoint(1.5, sweepReport(1500, 1000), 1000, false)}
	var b strings.Builder
	if err := WriteCurveTable(&b, c); err != nil {
		t.Fatal(err)
	}
	want := "\nthroughput curve, symphony (peak goodput p = 1000 req/s)\n" +
		"         x      offered      goodput       bad     ideal bad      idle ideal idle    mean bs\n" +
		"      1.50         1500         1000    33.33%        33.33%     0.00%      0.00%        0.0\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestParseMultipliers(t *testing.T) {
	t.Parallel()
	got, err := ParseMultipliers("0.5, 1,2e0")
	if err != nil || len(got) != 3 || got[0] != 0.5 || got[1] != 1 || got[2] != 2 {
		t.Errorf("ParseMultipliers: %v, %v; want [0.5 1 2]", got, err)
	}
	if got, err := ParseMultipliers(""); got != nil || err != nil {
		t.Errorf("empty list: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"0", "-1", "inf", "NaN", "x", "1,,2"} {
		if _, err := ParseMultipliers(bad); err == nil || !strings.Contains(err.Error(), "not a positive finite number") {
			t.Errorf("ParseMultipliers(%q): err %v", bad, err)
		}
	}
}

func TestSweepBase(t *testing.T) {
	t.Parallel()
	if scale, peak := SweepBase(&Report{}); scale != 1 || peak != 0 {
		t.Errorf("no search: %g, %g; want 1, 0", scale, peak)
	}
	r := &Report{GoodputSearch: &GoodputSearch{Multiplier: 1.25, GoodputRPS: 5000}}
	if scale, peak := SweepBase(r); scale != 1.25 || peak != 5000 {
		t.Errorf("after a search: %g, %g; want 1.25, 5000", scale, peak)
	}
}

func TestPointSummary(t *testing.T) {
	t.Parallel()
	live := CurvePoint{GoodputRPS: 90, BadRate: 0.1, GPUIdleFraction: 0.05,
		Outcomes: &Outcomes{Offered: 100, Good: 90, Late: 1, Dropped: 3, Failed: 6}}
	want := "goodput 90.0 req/s (simulator 100.0, live/sim 0.900)  bad 10.00% (late 10%, dropped 30%, failed 60%)  GPU idle 5.0%"
	if got := PointSummary(live, CurvePoint{GoodputRPS: 100}); got != want {
		t.Errorf("PointSummary:\n got %q\nwant %q", got, want)
	}
	// No simulator goodput: no ratio; no bad request: no shares.
	live = CurvePoint{GoodputRPS: 10, Partial: true, Outcomes: &Outcomes{Offered: 10, Good: 10}}
	want = "goodput 10.0 req/s (simulator 0.0)  bad 0.00%  GPU idle 0.0%  (stopped part-way)"
	if got := PointSummary(live, CurvePoint{}); got != want {
		t.Errorf("PointSummary:\n got %q\nwant %q", got, want)
	}
}
