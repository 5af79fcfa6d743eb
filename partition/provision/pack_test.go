package provision

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// fewestBins is the brute force: the fewest bins of size 1 that hold the
// items, over every assignment of items to bins (items placed in order,
// each into a used bin or the next new one, so each partition is tried
// once).
func fewestBins(sizes []float64) int {
	best := len(sizes)
	load := make([]float64, 0, len(sizes))
	var try func(i int)
	try = func(i int) {
		if len(load) >= best {
			return
		}
		if i == len(sizes) {
			best = len(load)
			return
		}
		for b := range load {
			if load[b]+sizes[i] <= 1+packEpsilon {
				load[b] += sizes[i]
				try(i + 1)
				load[b] -= sizes[i]
			}
		}
		load = append(load, sizes[i])
		try(i + 1)
		load = load[:len(load)-1]
	}
	try(0)
	return best
}

// checkBins fails unless bins hold every item once and no bin overflows.
func checkBins(t *testing.T, sizes []float64, bins [][]int) {
	t.Helper()
	seen := make([]bool, len(sizes))
	for _, bin := range bins {
		load := 0.0
		for _, i := range bin {
			if seen[i] {
				t.Fatalf("item %d packed twice: %v", i, bins)
			}
			seen[i] = true
			load += sizes[i]
		}
		if load > 1+packEpsilon || len(bin) == 0 {
			t.Fatalf("a bin of %v holds %v: %v", bin, load, sizes)
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("item %d not packed: %v", i, bins)
	}
}

// TestPackFractionsAgainstBruteForce: on random small instances the
// packing uses exactly the fewest bins the brute force finds.
func TestPackFractionsAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 26))
	for trial := range 500 {
		n := 1 + rng.IntN(9)
		sizes := make([]float64, n)
		for i := range sizes {
			// Some instances of sizes that fill bins exactly.
			if trial%5 == 0 {
				sizes[i] = float64(1+rng.IntN(4)) / 4
			} else {
				sizes[i] = 0.05 + 0.95*rng.Float64()
			}
		}
		bins := PackFractions(sizes)
		checkBins(t, sizes, bins)
		if want := fewestBins(sizes); len(bins) != want {
			t.Fatalf("%v: %d bins, the brute force needs %d: %v", sizes, len(bins), want, bins)
		}
	}
}

// TestPackFractionsBeatsBestFit: an instance where best fit decreasing
// opens a bin too many and the exact packing does not.
func TestPackFractionsBeatsBestFit(t *testing.T) {
	sizes := []float64{0.5, 0.4, 0.3, 0.3, 0.3, 0.2}
	idx := []int{0, 1, 2, 3, 4, 5}
	if got := len(bestFitDecreasing(sizes, idx)); got != 3 {
		t.Fatalf("best fit decreasing: %d bins; the test wants an instance where it takes 3", got)
	}
	if bins := PackFractions(sizes); len(bins) != 2 {
		t.Errorf("PackFractions: %d bins %v, want 2 ({0.5 0.3 0.2} {0.4 0.3 0.3})", len(bins), bins)
	}
}

// TestPackFractionsLarge: past the exact limit it packs best fit, every
// item once, within 11/9 of the sum plus one.
func TestPackFractionsLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := make([]float64, 40)
	sum := 0.0
	for i := range sizes {
		sizes[i] = 0.05 + 0.9*rng.Float64()
		sum += sizes[i]
	}
	bins := PackFractions(sizes)
	checkBins(t, sizes, bins)
	if bound := 11.0/9*math.Ceil(sum) + 1; float64(len(bins)) > bound {
		t.Errorf("%d bins for items summing to %.2f, above 11/9·OPT+1 = %.1f", len(bins), sum, bound)
	}
}

// TestPackScroogeExample packs the planner's provision of Scrooge's §3.3
// example: detect's partial machine on Y shares an instance with
// classify's, so the bill is 1 X and 2 Y.
func TestPackScroogeExample(t *testing.T) {
	af, err := ParseAppFile("../../testdata/apps/detect-classify.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Solve(af.App, af.Options)
	if err != nil {
		t.Fatal(err)
	}
	pk := Pack(af.App, p)
	if x, y := pk.Count("X"), pk.Count("Y"); x != 1 || y != 2 {
		t.Fatalf("packed %d X and %d Y: %+v", x, y, pk.Instances)
	}
	if pk.CostPerHour != 8 {
		t.Errorf("packed cost %v, want 8 per hour", pk.CostPerHour)
	}
	shared := 0
	for _, in := range pk.Instances {
		if len(in.Shares) > 1 {
			shared++
		}
	}
	if shared != 1 {
		t.Errorf("%d shared instances, want 1 (detect's and classify's partial machines on Y)", shared)
	}
	if pk.CostPerHour < p.CostPerHour {
		t.Errorf("packed cost %v below the fractional %v", pk.CostPerHour, p.CostPerHour)
	}
}

// TestPackMixedKinds: a CPU module's and a GPU module's partial machines of
// one hardware kind share an instance, which is a GPU instance although
// the larger CPU share is packed first; CPU partials alone make a CPU
// instance.
func TestPackMixedKinds(t *testing.T) {
	app := &App{Hardware: []Hardware{{Name: "h", PricePerHour: 2}}, Modules: []Module{{Name: "dec", Kind: CPU}, {Name: "det", Kind: GPU}, {Name: "enc", Kind: CPU}}}
	p := &Provision{Modules: []ModuleProvision{
		{Name: "dec", Kind: CPU, Configs: []ConfigProvision{{Hardware: "h", Machines: 0.5}}},
		{Name: "det", Kind: GPU, Configs: []ConfigProvision{{Hardware: "h", Machines: 0.3}}},
		{Name: "enc", Kind: CPU, Configs: []ConfigProvision{{Hardware: "h", Machines: 0.9}}},
	}}
	pk := Pack(app, p)
	if len(pk.Instances) != 2 || pk.CostPerHour != 4 {
		t.Fatalf("packed %+v at %v per hour, want 2 instances at 4", pk.Instances, pk.CostPerHour)
	}
	for _, in := range pk.Instances {
		gpu := slices.ContainsFunc(in.Shares, func(sh PackedShare) bool { return sh.Module == "det" })
		if want := map[bool]Kind{true: GPU, false: CPU}[gpu]; in.Kind != want {
			t.Errorf("instance %+v is %v, want %v", in.Shares, in.Kind, want)
		}
	}
}
