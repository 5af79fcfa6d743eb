package partition

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestRandomInstance(t *testing.T) {
	p := RandomInstance(7, 800, 20, 100)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Parts != 20 || len(p.Models) != 800 || p.Current != nil || p.MaxDisruption != -1 || p.MaxRatePerPart != 0 || p.GPUMemory != 0 {
		t.Fatalf("problem settings %+v", *p)
	}
	bases := map[string]Model{}
	for _, b := range zooBases() {
		bases[strings.ToLower(b.Name)] = Model{StaticMemory: b.StaticMemory, DynamicMemory: b.DynamicMemory}
	}
	if len(bases) != 6 {
		t.Fatalf("%d zoo models with memory sizes, want Table 1's 6", len(bases))
	}
	name := regexp.MustCompile(`^([a-z0-9]+)-v(\d+)$`)
	used := map[string]bool{}
	var total float64
	for _, m := range p.Models {
		sub := name.FindStringSubmatch(m.Name)
		if sub == nil {
			t.Fatalf("name %q", m.Name)
		}
		base, found := bases[sub[1]]
		if !found || m.StaticMemory != base.StaticMemory || m.DynamicMemory != base.DynamicMemory {
			t.Fatalf("%s: memory %d/%d is not its base's", m.Name, m.StaticMemory, m.DynamicMemory)
		}
		used[sub[1]] = true
		total += m.Rate
	}
	if len(used) != 6 {
		t.Fatalf("800 models use %d bases, want all 6", len(used))
	}
	if mean := total / 800; math.Abs(mean-100) > 15 {
		t.Fatalf("mean rate %.1f, want about 100", mean)
	}
	q := RandomInstance(7, 800, 20, 100)
	if !slices.Equal(p.Models, q.Models) {
		t.Fatal("same seed, different instances")
	}
	if r := RandomInstance(8, 800, 20, 100); slices.Equal(p.Models, r.Models) {
		t.Fatal("different seeds, same instance")
	}
}

func TestShiftRates(t *testing.T) {
	p := RandomInstance(2, 300, 10, 100)
	orig := slices.Clone(p.Models)
	cur := make([]int, 300)
	for i := range cur {
		cur[i] = i % 10
	}
	q := ShiftRates(p, cur, 9, 0.3)
	if !slices.Equal(p.Models, orig) || p.Current != nil {
		t.Fatal("ShiftRates modified its input")
	}
	if !slices.Equal(q.Current, cur) || &q.Current[0] == &cur[0] {
		t.Fatal("Current is not a copy of the given assignment")
	}
	var before, after, moved float64
	for i := range q.Models {
		if q.Models[i].Name != p.Models[i].Name || q.Models[i].StaticMemory != p.Models[i].StaticMemory {
			t.Fatalf("model %d changed beyond its rate", i)
		}
		before += p.Models[i].Rate
		after += q.Models[i].Rate
		moved += math.Abs(q.Models[i].Rate - p.Models[i].Rate)
	}
	if math.Abs(after-before) > 1e-9*before {
		t.Fatalf("total rate %v, was %v", after, before)
	}
	if share := moved / before; share > 2*0.3 || share < 0.1 {
		t.Fatalf("Σ|Δr|/R = %.3f, want within (0.1, 0.6]", share)
	}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if r := ShiftRates(p, nil, 9, 0.3); r.Current != nil || !slices.Equal(r.Models, q.Models) {
		t.Fatal("same seed, different shift; or nil current not kept")
	}
}
