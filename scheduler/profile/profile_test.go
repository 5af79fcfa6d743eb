package profile

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

const (
	usec = time.Microsecond
	ms   = time.Millisecond
)

func TestLinearValidation(t *testing.T) {
	for _, c := range []struct {
		name        string
		alpha, beta time.Duration
		maxBatch    int
	}{
		{"negative alpha", -1, ms, 0},
		{"negative beta", ms, -1, 0},
		{"both zero", 0, 0, 0},
		{"negative max batch", ms, ms, -1},
		{"max batch too large", ms, ms, 1<<16 + 1},
	} {
		if _, err := Linear(c.alpha, c.beta, c.maxBatch); err == nil {
			t.Errorf("%s: Linear(%v, %v, %d) accepted", c.name, c.alpha, c.beta, c.maxBatch)
		}
	}
	for _, c := range []struct {
		alpha, beta time.Duration
		maxBatch    int
		wantMax     int
	}{
		{ms, 5 * ms, 0, DefaultMaxBatch},
		{0, 5 * ms, 1, 1},
		{ms, 0, 1 << 16, 1 << 16},
	} {
		p, err := Linear(c.alpha, c.beta, c.maxBatch)
		if err != nil {
			t.Errorf("Linear(%v, %v, %d): %v", c.alpha, c.beta, c.maxBatch, err)
			continue
		}
		if !p.Valid() || p.MaxBatch() != c.wantMax || p.Alpha() != c.alpha || p.Beta() != c.beta {
			t.Errorf("Linear(%v, %v, %d): max %d α %v β %v", c.alpha, c.beta, c.maxBatch, p.MaxBatch(), p.Alpha(), p.Beta())
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("MustLinear(0, 0, 0) did not panic")
		}
	}()
	MustLinear(0, 0, 0)
}

func TestLinearLatency(t *testing.T) {
	p := MustLinear(2*ms, 5*ms, 8)
	for b, want := range map[int]time.Duration{1: 7 * ms, 2: 9 * ms, 8: 21 * ms} {
		if got := p.Latency(b); got != want {
			t.Errorf("ℓ(%d) = %v, want %v", b, got, want)
		}
	}
	// Beyond MaxBatch: effectively infinite, yet far from overflowing when
	// added to a time.
	huge := p.Latency(9)
	if huge < 1000*time.Hour || huge > time.Duration(1<<62) {
		t.Errorf("ℓ(MaxBatch+1) = %v, want huge but addable", huge)
	}
	if p.Latency(1000) != huge {
		t.Errorf("ℓ(1000) = %v, want %v", p.Latency(1000), huge)
	}
	if got, want := p.Throughput(4), 4/0.013; got != want {
		t.Errorf("throughput(4) = %v, want %v", got, want)
	}
	var zero Profile
	if zero.Valid() {
		t.Error("zero profile is valid")
	}
}

func TestTableValidation(t *testing.T) {
	for name, lat := range map[string][]time.Duration{
		"empty":      nil,
		"zero":       {0, ms},
		"negative":   {ms, -ms},
		"decreasing": {ms, 3 * ms, 2 * ms},
		"too long":   make([]time.Duration, 1<<16+1),
	} {
		if name == "too long" {
			for i := range lat {
				lat[i] = ms
			}
		}
		if _, err := Table(lat); err == nil {
			t.Errorf("%s: Table accepted %d entries", name, len(lat))
		}
	}
	lat := []time.Duration{ms, ms, 2 * ms}
	p, err := Table(lat)
	if err != nil {
		t.Fatal(err)
	}
	lat[0] = time.Hour // the profile keeps its own copy
	if p.Latency(1) != ms || p.Latency(2) != ms || p.Latency(3) != 2*ms || p.MaxBatch() != 3 {
		t.Errorf("table profile %v %v %v max %d", p.Latency(1), p.Latency(2), p.Latency(3), p.MaxBatch())
	}
}

func TestTableFitRecoversLinear(t *testing.T) {
	for _, c := range []struct{ alpha, beta time.Duration }{
		{1053 * usec, 5072 * usec},
		{ms, 5 * ms},
		{0, 3 * ms},
		{7008 * usec, 159 * usec},
	} {
		lin := MustLinear(c.alpha, c.beta, 64)
		lat := make([]time.Duration, 64)
		for b := range lat {
			lat[b] = lin.Latency(b + 1)
		}
		p, err := Table(lat)
		if err != nil {
			t.Fatal(err)
		}
		if p.Alpha() != c.alpha || p.Beta() != c.beta {
			t.Errorf("fit of α=%v β=%v: α=%v β=%v", c.alpha, c.beta, p.Alpha(), p.Beta())
		}
	}
	// One entry: no slope to fit; β is the latency.
	p, err := Table([]time.Duration{4 * ms})
	if err != nil {
		t.Fatal(err)
	}
	if p.Alpha() != 0 || p.Beta() != 4*ms {
		t.Errorf("single-entry fit: α=%v β=%v", p.Alpha(), p.Beta())
	}
}

func TestLargestBatchWithinBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	for iter := range 2000 {
		var p Profile
		if rng.IntN(2) == 0 {
			p = MustLinear(time.Duration(rng.IntN(3000))*usec, time.Duration(1+rng.IntN(8000))*usec, 1+rng.IntN(64))
		} else {
			// A table with plateaus (equal neighbours).
			lat := make([]time.Duration, 1+rng.IntN(64))
			l := time.Duration(1+rng.IntN(5000)) * usec
			for i := range lat {
				if rng.IntN(3) > 0 {
					l += time.Duration(rng.IntN(2000)) * usec
				}
				lat[i] = l
			}
			var err error
			if p, err = Table(lat); err != nil {
				t.Fatal(err)
			}
		}
		budget := time.Duration(rng.IntN(100000)) * usec
		if rng.IntN(4) == 0 {
			budget = p.Latency(1 + rng.IntN(p.MaxBatch())) // exactly on an entry
		}
		want := 0
		for b := 1; b <= p.MaxBatch(); b++ {
			if p.Latency(b) <= budget {
				want = b
			}
		}
		if got := p.LargestBatchWithin(budget); got != want {
			t.Fatalf("iter %d: LargestBatchWithin(%v) = %d, brute force %d", iter, budget, got, want)
		}
	}
}

func TestZoos(t *testing.T) {
	if got, want := ZooNames(), []string{"1080ti", "a100", "table4"}; !slices.Equal(got, want) {
		t.Errorf("zoo names %v, want %v", got, want)
	}
	for name, n := range map[string]int{"1080ti": 35, "a100": 37, "table4": 2} {
		z, err := Zoo(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(z) != n {
			t.Errorf("zoo %s has %d models, want %d", name, len(z), n)
		}
		seen := map[string]bool{}
		for _, s := range z {
			if seen[s.Name] {
				t.Errorf("zoo %s lists %s twice", name, s.Name)
			}
			seen[s.Name] = true
			p := s.Profile()
			if !p.Valid() || p.MaxBatch() != DefaultMaxBatch || p.Alpha() != s.Alpha || p.Beta() != s.Beta {
				t.Errorf("zoo %s/%s: profile α %v β %v max %d", name, s.Name, p.Alpha(), p.Beta(), p.MaxBatch())
			}
			if p.Latency(1) > s.SLO {
				t.Errorf("zoo %s/%s: ℓ(1) = %v exceeds the SLO %v", name, s.Name, p.Latency(1), s.SLO)
			}
		}
	}
	want := map[string]ModelSpec{
		"1080ti": {Name: "ResNet50", Alpha: 2050 * usec, Beta: 5378 * usec, SLO: 27 * ms, StaticMemory: 170 << 20, DynamicMemory: 2798 << 20},
		"a100":   {Name: "ResNet50", Alpha: 268 * usec, Beta: 5172 * usec, SLO: 20 * ms},
		"table4": {Name: "ResNet50", Alpha: 1053 * usec, Beta: 5072 * usec, SLO: 25 * ms},
	}
	for zoo, w := range want {
		z, _ := Zoo(zoo)
		i := slices.IndexFunc(z, func(s ModelSpec) bool { return s.Name == w.Name })
		if i < 0 || z[i] != w {
			t.Errorf("zoo %s: ResNet50 %+v, want %+v", zoo, z[max(i, 0)], w)
		}
	}
	// Names are case-insensitive; unknown names fail; Zoo returns a copy.
	z, err := Zoo("1080Ti")
	if err != nil || len(z) != 35 {
		t.Errorf("Zoo(1080Ti): %d models, %v", len(z), err)
	}
	z[0].Name = "changed"
	if again, _ := Zoo("1080ti"); again[0].Name == "changed" {
		t.Error("Zoo returned the bundled slice, not a copy")
	}
	if _, err := Zoo("v100"); err == nil {
		t.Error("Zoo(v100) succeeded")
	}
}
