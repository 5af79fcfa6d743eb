package report

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the oracle for Histogram.Quantile: the same nearest-rank
// definition on the sorted samples, without bucketing.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(q*float64(len(sorted)) + 0.5)
	rank = max(rank, 1)
	rank = min(rank, len(sorted))
	return sorted[rank-1]
}

func relErr(got, want time.Duration) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got-want)) / float64(want)
}

func TestHistogramQuantilesKnownDistributions(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 1))
	dists := map[string]func(i int) time.Duration{
		// 1µs .. 100ms in even steps.
		"uniform": func(i int) time.Duration { return time.Duration(i+1) * time.Microsecond },
		// Mean 10ms: a typical latency body with a long tail.
		"exponential": func(int) time.Duration {
			return time.Duration(rng.ExpFloat64() * float64(10*time.Millisecond))
		},
		// Median 5ms, spanning several orders of magnitude.
		"lognormal": func(int) time.Duration {
			return time.Duration(math.Exp(rng.NormFloat64()*2) * float64(5*time.Millisecond))
		},
		// Small values, below the first power-of-two bucket boundary.
		"tiny": func(i int) time.Duration { return time.Duration(i % 200) },
	}
	const n = 100_000
	for _, name := range []string{"uniform", "exponential", "lognormal", "tiny"} {
		t.Run(name, func(t *testing.T) {
			var h Histogram
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = dists[name](i)
				h.Record(samples[i])
			}
			slices.Sort(samples)
			if h.Count() != n {
				t.Fatalf("Count = %d, want %d", h.Count(), n)
			}
			if h.Max() != samples[n-1] {
				t.Fatalf("Max = %v, want %v", h.Max(), samples[n-1])
			}
			for _, q := range []float64{0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1} {
				got, want := h.Quantile(q), exactQuantile(samples, q)
				if e := relErr(got, want); e > 0.01 {
					t.Errorf("Quantile(%v) = %v, want %v (relative error %.4f > 1%%)", q, got, want, e)
				}
			}
		})
	}
}

func TestHistogramCDFMonotoneEndsAtOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var h Histogram
	for range 50_000 {
		h.Record(time.Duration(rng.ExpFloat64() * float64(3*time.Millisecond)))
	}
	cdf := h.CDF()
	if len(cdf) == 0 {
		t.Fatal("CDF is empty")
	}
	for i := 1; i < len(cdf); i++ {
		if cdf[i].Value < cdf[i-1].Value {
			t.Fatalf("CDF value decreases at %d: %v after %v", i, cdf[i].Value, cdf[i-1].Value)
		}
		if cdf[i].Fraction <= cdf[i-1].Fraction {
			t.Fatalf("CDF fraction does not increase at %d: %v after %v", i, cdf[i].Fraction, cdf[i-1].Fraction)
		}
	}
	if first := cdf[0].Fraction; first <= 0 {
		t.Errorf("first fraction = %v, want > 0", first)
	}
	if last := cdf[len(cdf)-1]; last.Fraction != 1 {
		t.Errorf("last fraction = %v, want 1", last.Fraction)
	}
	if last := cdf[len(cdf)-1]; last.Value > h.Max() {
		t.Errorf("last value %v above Max %v", last.Value, h.Max())
	}
}

func TestHistogramMergeEqualsRecordingBoth(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a, b, both Histogram
	// b holds larger values than a, so Merge has to grow a's buckets.
	for range 10_000 {
		v := time.Duration(rng.IntN(int(time.Millisecond)))
		a.Record(v)
		both.Record(v)
	}
	for range 5_000 {
		v := time.Duration(rng.IntN(int(10 * time.Second)))
		b.Record(v)
		both.Record(v)
	}
	// Merge into an empty histogram, and of an empty one, change nothing else.
	var merged Histogram
	merged.Merge(&a)
	merged.Merge(&Histogram{})
	merged.Merge(&b)

	if merged.Count() != both.Count() || merged.Max() != both.Max() {
		t.Fatalf("merged Count/Max = %d/%v, want %d/%v", merged.Count(), merged.Max(), both.Count(), both.Max())
	}
	if !reflect.DeepEqual(merged.CDF(), both.CDF()) {
		t.Fatal("merged CDF differs from recording both")
	}
	for q := 0.0; q <= 1; q += 0.001 {
		if g, w := merged.Quantile(q), both.Quantile(q); g != w {
			t.Fatalf("Quantile(%v): merged %v, recorded %v", q, g, w)
		}
	}
	// The other order grows nothing: a small histogram merged into a large one.
	b.Merge(&a)
	if !reflect.DeepEqual(b.CDF(), both.CDF()) {
		t.Fatal("merging the smaller histogram into the larger differs from recording both")
	}
}

func TestHistogramZeroAndNegative(t *testing.T) {
	var empty Histogram
	if empty.Count() != 0 || empty.Max() != 0 || empty.Quantile(0.5) != 0 || len(empty.CDF()) != 0 {
		t.Fatalf("empty histogram: Count %d Max %v p50 %v CDF %v", empty.Count(), empty.Max(), empty.Quantile(0.5), empty.CDF())
	}

	var h Histogram
	h.Record(0)
	h.Record(-time.Second)
	h.Record(-1)
	if h.Count() != 3 {
		t.Fatalf("Count = %d, want 3", h.Count())
	}
	if h.Max() != 0 {
		t.Errorf("Max = %v, want 0", h.Max())
	}
	for _, q := range []float64{0, 0.5, 1} {
		if v := h.Quantile(q); v != 0 {
			t.Errorf("Quantile(%v) = %v, want 0 (negatives count as zero)", q, v)
		}
	}
	if cdf := h.CDF(); len(cdf) != 1 || cdf[0] != (CDFPoint{Value: 0, Fraction: 1}) {
		t.Errorf("CDF = %v, want [{0 1}]", cdf)
	}

	h.Record(time.Millisecond)
	if v := h.Quantile(0.5); v != 0 {
		t.Errorf("after one 1ms sample, Quantile(0.5) = %v, want 0", v)
	}
	if v := h.Quantile(1); v != time.Millisecond {
		t.Errorf("after one 1ms sample, Quantile(1) = %v, want 1ms", v)
	}
}

func TestBucketRoundTrip(t *testing.T) {
	check := func(v uint64) {
		t.Helper()
		mid := bucketMid(bucketOf(v))
		if e := math.Abs(float64(mid)-float64(v)) / float64(v); e > 0.01 {
			t.Fatalf("bucketMid(bucketOf(%d)) = %d: relative error %.4f > 1%%", v, mid, e)
		}
	}
	// Geometric steps of 0.1% from 1ns to 100s.
	for f := 1.0; f <= float64(100*time.Second); f *= 1.001 {
		check(uint64(f))
	}
	// Both sides of every power-of-two bucket boundary up to 100s.
	for s := 1; uint64(1)<<s <= uint64(100*time.Second); s++ {
		p := uint64(1) << s
		check(p - 1)
		check(p)
		check(p + 1)
	}

	// Buckets are contiguous and ordered: bucketOf is non-decreasing and
	// steps by at most one, and every bucket's midpoint maps back to it.
	prev := bucketOf(0)
	for v := uint64(1); v < 1<<16; v++ {
		b := bucketOf(v)
		if b != prev && b != prev+1 {
			t.Fatalf("bucketOf(%d) = %d after bucketOf(%d) = %d", v, b, v-1, prev)
		}
		prev = b
	}
	for i := 0; i <= bucketOf(uint64(100*time.Second)); i++ {
		if got := bucketOf(bucketMid(i)); got != i {
			t.Fatalf("bucketOf(bucketMid(%d)) = %d", i, got)
		}
	}
}
