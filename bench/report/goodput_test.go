package report

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// searchCapacity searches a cluster that passes up to capacity, to
// precision prec, and returns the multipliers tried and the bracket.
func searchCapacity(t *testing.T, capacity, prec float64) ([]float64, Bracket) {
	t.Helper()
	var tried []float64
	b, err := SearchMultiplier(func(k float64) (bool, error) {
		tried = append(tried, k)
		return k <= capacity, nil
	}, prec, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tried, b
}

// TestSearchMultiplierBisects follows a search by hand: capacity 1.3x, 2%
// precision. Doubling from 1 fails at 2; bisection then tries 1.5 (fail),
// 1.25 (pass), 1.375 (fail), 1.3125 (fail), 1.28125 (pass), 1.296875 (pass)
// and stops, 1.3125−1.296875 = 0.015625 being within 2% of 1.296875.
func TestSearchMultiplierBisects(t *testing.T) {
	tried, b := searchCapacity(t, 1.3, 0.02)
	want := []float64{1, 2, 1.5, 1.25, 1.375, 1.3125, 1.28125, 1.296875}
	if !slices.Equal(tried, want) {
		t.Errorf("tried %v, want %v", tried, want)
	}
	if b.Lo != 1.296875 || b.Hi != 1.3125 || b.Steps != 8 || !b.Found() {
		t.Errorf("bracket %+v, want [1.296875, 1.3125] after 8 steps", b)
	}
}

// Halving from 1: failing at 1 and passing at 0.5 brackets [0.5, 1]; the
// default precision (0.5%) then takes bisections down to a width of
// 0.5/128 < 0.005·lo.
func TestSearchMultiplierHalvesAndDefaultPrecision(t *testing.T) {
	tried, b := searchCapacity(t, 0.6, 0)
	if tried[0] != 1 || tried[1] != 0.5 || tried[2] != 0.75 {
		t.Errorf("tried %v, want 1, 0.5, 0.75, ...", tried)
	}
	if b.Lo > 0.6 || b.Hi <= 0.6 || b.Hi-b.Lo > DefaultSearchPrecision*b.Lo {
		t.Errorf("bracket %+v does not hold 0.6 within 0.5%%", b)
	}
}

func TestSearchMultiplierNeverPasses(t *testing.T) {
	b, err := SearchMultiplier(func(float64) (bool, error) { return false, nil }, 0.02, 0)
	// 1, 1/2, ..., 2^-19 fail; 2^-20 would be below a millionth.
	if err != nil || b.Found() || b.Steps != 20 || b.Hi != math.Ldexp(1, -19) {
		t.Errorf("bracket %+v, err %v; want not found after 20 steps at 2^-19", b, err)
	}
}

func TestSearchMultiplierAlwaysPasses(t *testing.T) {
	b, err := SearchMultiplier(func(float64) (bool, error) { return true, nil }, 0.02, 0)
	if err == nil || !strings.Contains(err.Error(), "still holds") || b.Steps != 40 {
		t.Errorf("uncapped: bracket %+v, err %v; want an error after 40 doublings", b, err)
	}
	// With a step cap (the live search) running out is no error: the
	// bracket says the upper bound was not found.
	b, err = SearchMultiplier(func(float64) (bool, error) { return true, nil }, 0.02, 3)
	if err != nil || b.Lo != 4 || !math.IsInf(b.Hi, 1) || b.Steps != 3 {
		t.Errorf("capped: bracket %+v, err %v; want [4, +Inf) after 3 steps", b, err)
	}
}

func TestSearchMultiplierError(t *testing.T) {
	stop := errors.New("stop")
	b, err := SearchMultiplier(func(k float64) (bool, error) {
		if k > 1 {
			return false, stop
		}
		return true, nil
	}, 0.02, 0)
	if !errors.Is(err, stop) || b.Lo != 1 || b.Steps != 1 {
		t.Errorf("bracket %+v, err %v; want the error with the one step done", b, err)
	}
}

func withBadRates(rates ...float64) *Report {
	r := &Report{}
	for i, br := range rates {
		r.Models = append(r.Models, ModelReport{Name: string(rune('a' + i)), Stats: Stats{BadRate: br}})
	}
	return r
}

func TestWorstModel(t *testing.T) {
	for _, c := range []struct {
		rates []float64
		name  string
		rate  float64
	}{
		{[]float64{0.01, 0.03, 0.02}, "b", 0.03},
		{[]float64{0.02, 0.01, 0.02}, "a", 0.02}, // a tie: the first
		{[]float64{0, 0, 0}, "", 0},              // nothing bad: no model named
		{nil, "", 0},
	} {
		if name, rate := WorstModel(withBadRates(c.rates...)); name != c.name || rate != c.rate {
			t.Errorf("WorstModel(%v) = %q, %g; want %q, %g", c.rates, name, rate, c.name, c.rate)
		}
	}
}

// fakeRuns is a cluster whose model b goes bad above 1.3x, with 100 req/s
// offered per model at 1x.
func fakeRuns(k float64) (*Report, error) {
	r := withBadRates(0, 0)
	if k > 1.3 {
		r.Models[0].BadRate, r.Models[1].BadRate = 0.02, 0.2
	} else if k > 1.2 {
		r.Models[1].BadRate = 0.01 // at the target: still passes
	}
	r.OfferedRPS, r.GoodputRPS = 200*k, 200*k*(1-r.Models[1].BadRate/2)
	return r, nil
}

func TestFindGoodput(t *testing.T) {
	var steps []SearchStep
	rep, b, err := FindGoodput(fakeRuns, SearchOptions{Precision: 0.02, Step: func(s SearchStep) { steps = append(steps, s) }})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.GoodputSearch
	if s == nil || s.TargetBadRate != DefaultTargetBadRate || s.Multiplier != 1.296875 || b.Hi != 1.3125 {
		t.Fatalf("search %+v, bracket %+v; want 1.296875 below 1.3125 at the 1%% target", s, b)
	}
	if !slices.Equal(steps, s.Steps) || len(steps) != 8 {
		t.Errorf("Step saw %v, the search recorded %v", steps, s.Steps)
	}
	if s.GoodputRPS != rep.GoodputRPS || rep.OfferedRPS != 200*1.296875 {
		t.Errorf("goodput %g, report %g, offered %g", s.GoodputRPS, rep.GoodputRPS, rep.OfferedRPS)
	}
	for _, st := range s.Steps {
		switch {
		case st.Multiplier > 1.3:
			if st.OK || st.WorstModel != "b" || st.WorstBadRate != 0.2 {
				t.Errorf("overloaded step %+v", st)
			}
		case st.Multiplier > 1.2:
			if !st.OK || st.WorstModel != "b" || st.WorstBadRate != 0.01 {
				t.Errorf("step at the target %+v", st)
			}
		default:
			if !st.OK || st.WorstModel != "" || st.WorstBadRate != 0 {
				t.Errorf("clean step %+v", st)
			}
		}
	}

	// A stricter target moves the goodput below the 1% steps.
	rep, _, err = FindGoodput(fakeRuns, SearchOptions{TargetBadRate: 0.005, Precision: 0.02})
	if err != nil || rep.GoodputSearch.Multiplier > 1.2 || rep.GoodputSearch.TargetBadRate != 0.005 {
		t.Errorf("target 0.5%%: %+v, %v", rep.GoodputSearch, err)
	}
}

func TestFindGoodputFailures(t *testing.T) {
	never := func(float64) (*Report, error) { return withBadRates(0.5), nil }
	rep, _, err := FindGoodput(never, SearchOptions{MaxSteps: 3})
	if rep != nil || err == nil || !strings.Contains(err.Error(), "above 1% even at 0.25x") {
		t.Errorf("never passes: report %v, err %v", rep != nil, err)
	}

	// Stopped at the third run (1.5x, after 1x passed and 2x failed): the
	// best of the two done comes back with the error.
	stop := errors.New("stopped")
	calls := 0
	rep, b, err := FindGoodput(func(k float64) (*Report, error) {
		if calls++; calls == 3 {
			return nil, stop
		}
		return fakeRuns(k)
	}, SearchOptions{})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "at 1.5x") {
		t.Fatalf("err %v, want the stop at 1.5x", err)
	}
	if rep == nil || rep.GoodputSearch.Multiplier != 1 || len(rep.GoodputSearch.Steps) != 2 || b.Steps != 2 {
		t.Errorf("report %v, bracket %+v; want the 1x run with its 2 steps", rep, b)
	}
}

// counted is a model report with counts: offered requests, bad of them
// dropped, and the bad rate they make.
func counted(name string, offered, bad uint64) ModelReport {
	m := ModelReport{Name: name, Stats: Stats{Offered: offered, Good: offered - bad, Dropped: bad}}
	if offered > 0 {
		m.BadRate = float64(bad) / float64(offered)
	}
	return m
}

// sparseRuns is a cluster whose busy model goes bad above 1.3x, beside a
// rare model offered 6 requests at any load, one of which is bad: the
// Figure 7 Nexus cell whose search fell to x0.0001 on one bad request in
// six.
func sparseRuns(k float64) (*Report, error) {
	busy := counted("busy", uint64(1000*k), 0)
	if k > 1.3 {
		busy = counted("busy", uint64(1000*k), uint64(100*k))
	}
	r := &Report{Models: []ModelReport{busy, counted("rare", 6, 1)}}
	r.OfferedRPS, r.GoodputRPS = 100*k+0.6, float64(busy.Good)/10+0.5
	return r, nil
}

// A model offered too few requests to measure 1% cannot decide the
// goodput alone: the search finds the busy model's limit.
func TestFindGoodputSparseModel(t *testing.T) {
	rep, b, err := FindGoodput(sparseRuns, SearchOptions{Precision: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.GoodputSearch
	if s.Multiplier != 1.296875 || b.Hi != 1.3125 {
		t.Errorf("goodput at %gx below %gx, want 1.296875 below 1.3125, where the busy model fails", s.Multiplier, b.Hi)
	}
	for _, st := range s.Steps {
		if !st.OK && st.WorstModel != "busy" {
			t.Errorf("step %+v failed on %q, want only the busy model to fail a step", st, st.WorstModel)
		}
	}
}

func TestJudge(t *testing.T) {
	o := SearchOptions{}
	if n := o.MeasurableRequests(); n != 100 {
		t.Fatalf("MeasurableRequests at 1%% = %d, want 100", n)
	}
	if n := (SearchOptions{TargetBadRate: 0.003}).MeasurableRequests(); n != 334 {
		t.Errorf("MeasurableRequests at 0.3%% = %d, want 334", n)
	}
	for _, c := range []struct {
		name    string
		models  []ModelReport
		ok      bool
		worst   string
		sparse  *SparseGroup
		because string
	}{
		{"every model measured", []ModelReport{counted("a", 1000, 10), counted("b", 100, 1)}, true, "a", nil,
			"1% of 1000 and of 100 are within the target"},
		{"a measured model over", []ModelReport{counted("a", 1000, 11), counted("b", 5, 0)}, false, "a", &SparseGroup{1, 5, 0},
			"1.1% is over the target, however the sparse ones fare"},
		{"one bad in a small group", []ModelReport{counted("a", 1000, 0), counted("b", 6, 1), counted("c", 40, 0)}, true, "", &SparseGroup{2, 46, 1},
			"one bad request in fewer than 100 is within 1% of 100"},
		{"two bad in a small group", []ModelReport{counted("a", 1000, 0), counted("b", 6, 1), counted("c", 40, 1)}, false, "", &SparseGroup{2, 46, 2},
			"two are not"},
		{"a measurable group", []ModelReport{counted("b", 99, 1), counted("c", 99, 1), counted("d", 99, 0)}, true, "", &SparseGroup{3, 297, 2},
			"2 of 297 is within 1%"},
		{"a measurable group over", []ModelReport{counted("b", 99, 1), counted("c", 99, 1), counted("d", 99, 1)}, false, "", &SparseGroup{3, 297, 3},
			"3 of 297 is not, though each model's one in 99 would pass alone at 100"},
		{"no counts", []ModelReport{{Name: "a", Stats: Stats{BadRate: 0.02}}}, false, "a", nil,
			"a report without counts is judged on its bad rates"},
		{"nothing offered", []ModelReport{counted("a", 0, 0), counted("b", 500, 0)}, true, "", nil,
			"a model with no request is no sparse model"},
	} {
		st := o.Judge(&Report{Models: c.models})
		if st.OK != c.ok || st.WorstModel != c.worst || !reflect.DeepEqual(st.Sparse, c.sparse) {
			t.Errorf("%s: ok %v, worst %q, sparse %+v; want %v, %q, %+v (%s)", c.name, st.OK, st.WorstModel, st.Sparse, c.ok, c.worst, c.sparse, c.because)
		}
	}
}

// When nothing passes, the error says what failed the last step tried.
func TestFindGoodputSaysWhy(t *testing.T) {
	never := func(float64) (*Report, error) {
		return &Report{Models: []ModelReport{counted("a", 1000, 0), counted("b", 6, 2)}}, nil
	}
	_, _, err := FindGoodput(never, SearchOptions{MaxSteps: 2})
	if err == nil || !strings.Contains(err.Error(), "above 1% even at 0.5x the offered load (2 bad of 6 requests to the 1 models offered under 100 each)") {
		t.Errorf("err %v", err)
	}
}

// The human table shows the sparse models of a step, and only when a step
// had some.
func TestWriteTableSparseColumn(t *testing.T) {
	rep, _, err := FindGoodput(sparseRuns, SearchOptions{Precision: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"sparse bad/offered (models)", " 1/6 (1) ", "sparse: the models offered under 100 requests in a run, judged together"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rep, _, err = FindGoodput(fakeRuns, SearchOptions{Precision: 0.02})
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "sparse") {
		t.Errorf("a search without sparse models shows them:\n%s", b.String())
	}
}
