package forecast

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// checkContract fails unless fc has length h and only finite values >= 0.
func checkContract(t *testing.T, name string, fc []float64, h int) {
	t.Helper()
	if len(fc) != max(h, 0) {
		t.Fatalf("%s: Forecast(%d) has len %d", name, h, len(fc))
	}
	for k, v := range fc {
		if !(v >= 0) || math.IsInf(v, 0) {
			t.Fatalf("%s: Forecast(%d)[%d] = %v, want finite >= 0", name, h, k, v)
		}
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func all(t *testing.T) []Forecaster {
	t.Helper()
	var fs []Forecaster
	for _, spec := range []string{"last", "seasonal-naive:3", "holt-winters:3", "holt-winters:1:1:1:1"} {
		f, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	return fs
}

func TestZerosBeforeObservation(t *testing.T) {
	for _, f := range all(t) {
		for _, h := range []int{-1, 0, 1, 7} {
			fc := f.Forecast(h)
			checkContract(t, f.Name(), fc, h)
			if MaxOver(fc, 0, len(fc)) != 0 {
				t.Errorf("%s: Forecast(%d) before any observation = %v, want zeros", f.Name(), h, fc)
			}
		}
	}
}

func TestLast(t *testing.T) {
	f := NewLast()
	for _, y := range []float64{3, 8, 5} {
		f.Observe(y)
	}
	if got := f.Forecast(3); fmt.Sprint(got) != "[5 5 5]" {
		t.Errorf("Forecast(3) = %v, want [5 5 5]", got)
	}
}

// TestBadObservations: each forecaster fed rates with NaN, ±Inf and
// negatives forecasts exactly as one fed the rates Observe documents
// instead: 0 for a negative, the previous rate (0 before any) for NaN/Inf.
func TestBadObservations(t *testing.T) {
	bad := []float64{math.NaN(), 4, 6, math.Inf(1), -3, 5, math.NaN(), 7, math.Inf(-1), 2, -1, 8, 9}
	good := []float64{0, 4, 6, 6, 0, 5, 5, 7, 7, 2, 0, 8, 9}
	for i, f := range all(t) {
		ref := all(t)[i]
		for k := range bad {
			f.Observe(bad[k])
			ref.Observe(good[k])
			got, want := f.Forecast(7), ref.Forecast(7)
			checkContract(t, f.Name(), got, 7)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: after %v: Forecast = %v, want %v (as after %v)", f.Name(), bad[:k+1], got, want, good[:k+1])
			}
		}
	}
}

// TestNeverNegative: a steep fall extrapolated by the trend is clamped at
// 0, and huge rates stay finite.
func TestNeverNegative(t *testing.T) {
	for _, f := range all(t) {
		for i := range 10 {
			f.Observe(float64(1000 - 100*i))
		}
		fc := f.Forecast(50)
		checkContract(t, f.Name(), fc, 50)
		if strings.HasPrefix(f.Name(), "holt-winters") && fc[49] != 0 {
			t.Errorf("%s: 50 steps down a falling trend: %v, want 0", f.Name(), fc[49])
		}
		for i := range 30 {
			f.Observe(math.MaxFloat64 * float64(i%2))
		}
		checkContract(t, f.Name(), f.Forecast(1000), 1000)
	}
}

func TestSeasonalNaive(t *testing.T) {
	pattern := []float64{3, 1, 4, 1, 5}
	f, err := NewSeasonalNaive(len(pattern))
	if err != nil {
		t.Fatal(err)
	}
	// Before a whole season: the last observation.
	f.Observe(3)
	f.Observe(1)
	if got := f.Forecast(3); fmt.Sprint(got) != "[1 1 1]" {
		t.Errorf("before a season: Forecast(3) = %v, want [1 1 1]", got)
	}
	// An exactly periodic series is forecast exactly, from every phase
	// and beyond one season.
	for n := 2; n < 4*len(pattern); n++ {
		if n >= 2 {
			f.Observe(pattern[n%len(pattern)])
		}
		if n+1 < len(pattern) {
			continue
		}
		fc := f.Forecast(12)
		for k, v := range fc {
			if want := pattern[(n+1+k)%len(pattern)]; v != want {
				t.Fatalf("after %d observations: Forecast[%d] = %v, want %v", n+1, k, v, want)
			}
		}
	}
	if s := f.(*seasonalNaive); len(s.buf) != len(pattern) {
		t.Errorf("state holds %d observations, want one season (%d)", len(s.buf), len(pattern))
	}
}

// TestHoltWintersHandWorked checks period 2, alpha = beta = gamma = 0.5 on
// y = 1, 3, 2, 5, 4 against values worked by hand (all exact in binary).
//
// Holt's linear before two seasons:
//
//	y=1: level 1, trend 0                                → 1, 1
//	y=3: level 3, trend 3-1 = 2                          → 5, 7
//	y=2: level .5·2 + .5·(3+2) = 3.5,
//	     trend .5·(3.5-3) + .5·2 = 1.25                  → 4.75, 6
//
// y=5 completes season 2 (season 1 = 1,3; season 2 = 2,5):
//
//	mean(s1) = 2, trend = ((2-1)/2 + (5-3)/2)/2 = .75
//	level = 2 + .75·(2-1)/2 = 2.375 (end of season 1)
//	season = 1-(2-.375), 3-(2+.375) = -.625, .625
//	smooth y=2 (phase 0): level .5·(2+.625) + .5·(2.375+.75) = 2.875
//	                     trend .5·(2.875-2.375) + .5·.75 = .625
//	                     season0 .5·(2-2.875) + .5·(-.625) = -.75
//	smooth y=5 (phase 1): level .5·(5-.625) + .5·(2.875+.625) = 3.9375
//	                     trend .5·(3.9375-2.875) + .5·.625 = .84375
//	                     season1 .5·(5-3.9375) + .5·.625 = .84375
//	forecast: 3.9375+.84375-.75 = 4.03125, 3.9375+1.6875+.84375 = 6.46875,
//	          3.9375+2.53125-.75 = 5.71875
//
// y=4 (phase 0): level .5·(4+.75) + .5·(3.9375+.84375) = 4.765625,
// trend .5·(4.765625-3.9375) + .5·.84375 = .8359375,
// season0 .5·(4-4.765625) + .5·(-.75) = -.7578125;
// forecast: 4.765625+.8359375+.84375 = 6.4453125,
// 4.765625+1.671875-.7578125 = 5.6796875.
func TestHoltWintersHandWorked(t *testing.T) {
	f, err := NewHoltWinters(HoltWintersConfig{Period: 2, Alpha: .5, Beta: .5, Gamma: .5})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		y    float64
		want []float64
	}{
		{1, []float64{1, 1}},
		{3, []float64{5, 7}},
		{2, []float64{4.75, 6}},
		{5, []float64{4.03125, 6.46875, 5.71875}},
		{4, []float64{6.4453125, 5.6796875}},
	}
	for i, s := range steps {
		f.Observe(s.y)
		got := f.Forecast(len(s.want))
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("after observation %d (y=%v): Forecast = %v, want %v", i+1, s.y, got, s.want)
		}
	}
}

// TestHoltLinearFallback: before two seasons, Holt's linear method follows
// a linear ramp exactly.
func TestHoltLinearFallback(t *testing.T) {
	f, err := NewHoltWinters(DefaultHoltWinters(50))
	if err != nil {
		t.Fatal(err)
	}
	ramp := func(t int) float64 { return 10 + 3*float64(t) }
	for n := range 99 { // one short of two seasons
		f.Observe(ramp(n))
		if n == 0 {
			continue
		}
		for k, v := range f.Forecast(20) {
			if want := ramp(n + 1 + k); !near(v, want, 1e-9*want) {
				t.Fatalf("after %d observations: Forecast[%d] = %v, want %v", n+1, k, v, want)
			}
		}
	}
}

func TestHoltWintersConstant(t *testing.T) {
	f, err := NewHoltWinters(DefaultHoltWinters(7))
	if err != nil {
		t.Fatal(err)
	}
	for n := range 50 {
		f.Observe(42)
		for k, v := range f.Forecast(30) {
			if !near(v, 42, 1e-9) {
				t.Fatalf("after %d observations: Forecast[%d] = %v, want 42", n+1, k, v)
			}
		}
	}
}

// TestHoltWintersTrendSeason: on a linear trend plus a fixed seasonal
// pattern (with a non-zero mean), once two seasons are seen every forecast
// over the next three seasons is within 1e-9 relative of the series; and
// after a noisy start (±5% on the first two seasons, which skews the
// initial state) the error shrinks season by season, and is within 1% once
// 40 seasons are seen (slowly: Beta 0.01 forgets a wrong trend slowly).
func TestHoltWintersTrendSeason(t *testing.T) {
	pattern := []float64{10, 30, 50, 45, 20, 5, 0}
	p := len(pattern)
	truth := func(t int) float64 { return 100 + 0.5*float64(t) + pattern[t%p] }
	maxErr := func(noisy bool, seasons int) float64 {
		f, err := NewHoltWinters(DefaultHoltWinters(p))
		if err != nil {
			t.Fatal(err)
		}
		n := seasons * p
		for i := range n {
			y := truth(i)
			if noisy && i < 2*p {
				y *= 1 + 0.05*math.Sin(12.9898*float64(i)) // deterministic noise
			}
			f.Observe(y)
		}
		var e float64
		for k, v := range f.Forecast(3 * p) {
			e = max(e, math.Abs(v-truth(n+k))/truth(n+k))
		}
		return e
	}
	for seasons := 2; seasons <= 6; seasons++ {
		if e := maxErr(false, seasons); e > 1e-9 {
			t.Errorf("clean series, %d seasons seen: max relative error %.3g, want <= 1e-9", seasons, e)
		}
	}
	prev := math.Inf(1)
	for seasons := 2; seasons <= 40; seasons++ {
		e := maxErr(true, seasons)
		if e >= prev {
			t.Errorf("noisy start, %d seasons seen: max relative error %.3g, not below %.3g after %d", seasons, e, prev, seasons-1)
		}
		prev = e
	}
	if prev > 0.01 {
		t.Errorf("noisy start, 40 seasons seen: max relative error %.3g, want <= 0.01", prev)
	}
}

// TestHoltWintersState: the seasonal model keeps one season of state once
// initialised, not the history.
func TestHoltWintersState(t *testing.T) {
	f, _ := NewHoltWinters(DefaultHoltWinters(5))
	for i := range 100 {
		f.Observe(float64(i % 5))
	}
	hw := f.(*holtWinters)
	if hw.first != nil || len(hw.season) != 5 {
		t.Errorf("state: %d buffered, %d seasonal; want 0 and 5", len(hw.first), len(hw.season))
	}
}

func TestMaxOver(t *testing.T) {
	f := []float64{1, 5, 2, math.NaN(), 4}
	for _, c := range []struct {
		from, to int
		want     float64
	}{
		{0, 5, 5}, {2, 5, 4}, {2, 3, 2}, {3, 4, 0}, {-3, 1, 1}, {4, 99, 4},
		{3, 3, 0}, {4, 2, 0}, {7, 9, 0}, {-5, -1, 0},
	} {
		if got := MaxOver(f, c.from, c.to); got != c.want {
			t.Errorf("MaxOver(%v, %d, %d) = %v, want %v", f, c.from, c.to, got, c.want)
		}
	}
	if got := MaxOver(nil, 0, 3); got != 0 {
		t.Errorf("MaxOver(nil) = %v, want 0", got)
	}
}

func TestParse(t *testing.T) {
	for spec, name := range map[string]string{
		"last":                          "last",
		"seasonal-naive:1":              "seasonal-naive(period=1)",
		"seasonal-naive:1440":           "seasonal-naive(period=1440)",
		"holt-winters:24":               "holt-winters(period=24,alpha=0.5,beta=0.01,gamma=0.3)",
		"holt-winters:1000000:1:0.2:.1": "holt-winters(period=1000000,alpha=1,beta=0.2,gamma=0.1)",
	} {
		f, err := Parse(spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
			continue
		}
		if f.Name() != name {
			t.Errorf("Parse(%q).Name() = %q, want %q", spec, f.Name(), name)
		}
	}
	for spec, msg := range map[string]string{
		"":                          `forecast: spec "": unknown method "", want "last", "seasonal-naive:PERIOD" or "holt-winters:PERIOD[:ALPHA:BETA:GAMMA]"`,
		"lstm":                      `unknown method "lstm"`,
		"Last":                      `unknown method "Last"`,
		"last:3":                    `forecast: spec "last:3": last takes no parameters, got 1`,
		"seasonal-naive":            `want seasonal-naive:PERIOD, got 0 parameters`,
		"seasonal-naive:24:1":       `want seasonal-naive:PERIOD, got 2 parameters`,
		"seasonal-naive:x":          `forecast: spec "seasonal-naive:x": period "x" is not an integer`,
		"seasonal-naive:0":          `period 0 out of range 1..1000000`,
		"seasonal-naive:1000001":    `period 1000001 out of range 1..1000000`,
		"holt-winters":              `want holt-winters:PERIOD or holt-winters:PERIOD:ALPHA:BETA:GAMMA, got 0 parameters`,
		"holt-winters:24:0.5":       `got 2 parameters`,
		"holt-winters:-1":           `period -1 out of range`,
		"holt-winters:24:x:0.1:0.1": `alpha "x" is not a number`,
		"holt-winters:24:0.5:0:0.1": `beta 0 out of range (0, 1]`,
		"holt-winters:24:.5:.1:1.5": `gamma 1.5 out of range (0, 1]`,
		"holt-winters:24:NaN:.1:.1": `alpha NaN out of range (0, 1]`,
		"holt-winters:24:.5:.1:":    `gamma "" is not a number`,
	} {
		f, err := Parse(spec)
		if err == nil {
			t.Errorf("Parse(%q) = %s, want error %q", spec, f.Name(), msg)
		} else if !strings.Contains(err.Error(), msg) {
			t.Errorf("Parse(%q) error %q, want it to contain %q", spec, err, msg)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := NewSeasonalNaive(0); err == nil {
		t.Error("NewSeasonalNaive(0): no error")
	}
	for _, c := range []HoltWintersConfig{
		{Period: 0, Alpha: .5, Beta: .5, Gamma: .5},
		{Period: 2, Alpha: 0, Beta: .5, Gamma: .5},
		{Period: 2, Alpha: .5, Beta: 1.01, Gamma: .5},
		{Period: 2, Alpha: .5, Beta: .5, Gamma: math.NaN()},
	} {
		if _, err := NewHoltWinters(c); err == nil {
			t.Errorf("NewHoltWinters(%+v): no error", c)
		}
	}
}

// FuzzParse: Parse never panics, and whatever it accepts keeps the
// Forecaster contract on any observations.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"last", "seasonal-naive:3", "holt-winters:2", "holt-winters:4:1:1:1", "holt-winters:3:.5:.01:.3", "x:y:z", ":::"} {
		f.Add(s, 1.0, -2.0, math.Inf(1))
	}
	f.Fuzz(func(t *testing.T, spec string, a, b, c float64) {
		fc, err := Parse(spec)
		if err != nil {
			return
		}
		if fc.Name() == "" {
			t.Fatalf("Parse(%q): empty Name", spec)
		}
		for i := range 20 {
			fc.Observe([]float64{a, b, c}[i%3])
			checkContract(t, fc.Name(), fc.Forecast(i%4), i%4)
		}
	})
}

// ExampleParse sizes against the largest rate forecast for steps 5..10
// ahead, as a controller whose backends take 5 steps to start would.
func ExampleParse() {
	f, err := Parse("seasonal-naive:4")
	if err != nil {
		panic(err)
	}
	for _, rate := range []float64{10, 20, 40, 20, 12, 22, 38, 21} {
		f.Observe(rate)
	}
	fc := f.Forecast(10)
	fmt.Println(f.Name())
	fmt.Println(fc)
	fmt.Println(MaxOver(fc, 4, 10))
	// Output:
	// seasonal-naive(period=4)
	// [12 22 38 21 12 22 38 21 12 22]
	// 38
}
