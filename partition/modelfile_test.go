package partition

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

const modelExamplesDir = "../testdata/partition"

func TestParseModelFileSmall(t *testing.T) {
	mf, err := ParseModelFile(filepath.Join(modelExamplesDir, "small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := mf.Problem
	if p.Parts != 3 || p.MaxRatePerPart != 2000 || p.GPUMemory != 11<<30 || p.MaxDisruption != 2<<30 {
		t.Fatalf("parts %d, max rate %g, gpu memory %d, max disruption %d", p.Parts, p.MaxRatePerPart, p.GPUMemory, p.MaxDisruption)
	}
	if len(p.Models) != 8 {
		t.Fatalf("%d models, want 8", len(p.Models))
	}
	if m := p.Models[0]; m.Name != "resnet50" || m.Rate != 420 || m.StaticMemory != 170<<20 || m.DynamicMemory != 2798<<20 {
		t.Fatalf("first model %+v", m)
	}
	want := []int{0, 0, 1, 1, 2, 2, 0, Unassigned}
	for i, c := range p.Current {
		if c != want[i] {
			t.Fatalf("current %v, want %v", p.Current, want)
		}
	}
	if len(mf.Warnings) != 0 {
		t.Fatalf("warnings %v", mf.Warnings)
	}
	// The current assignment plus loading the new vgg16-b must be within
	// the file's own disruption bound, so the example is solvable.
	cur := append([]int(nil), p.Current...)
	cur[7] = 1
	e, err := p.Evaluate(cur)
	if err != nil || !e.Feasible() {
		t.Fatalf("current assignment with vgg16-b on part 1 is not feasible: %v %v", err, e.Violations)
	}
}

func TestParseModelFileInitial(t *testing.T) {
	mf, err := ParseModelFile(filepath.Join(modelExamplesDir, "initial.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if mf.Problem.Current != nil || mf.Problem.MaxDisruption != -1 || mf.Problem.MaxRatePerPart != 0 {
		t.Fatalf("current %v, max disruption %d, max rate %g", mf.Problem.Current, mf.Problem.MaxDisruption, mf.Problem.MaxRatePerPart)
	}
}

func TestParseModelDefaultsAndWarnings(t *testing.T) {
	mf, err := ParseModel([]byte("parts: 2\nmodels: [{name: a, rate: 1}, {name: b, rate: 2.5, memory: {static: 1.5KiB}}]\nmax_disruption: 0\nmemory_weight: 0.5\n"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := mf.Problem
	if p.Models[1].StaticMemory != 1536 || p.Models[1].DynamicMemory != 0 || p.Models[0].StaticMemory != 0 {
		t.Fatalf("models %+v", p.Models)
	}
	if p.MaxDisruption != 0 || p.MemoryWeight != 0.5 || p.Current != nil {
		t.Fatalf("problem %+v", p)
	}
	if len(mf.Warnings) != 1 || !strings.Contains(mf.Warnings[0], "max_disruption") {
		t.Fatalf("warnings %v", mf.Warnings)
	}
	// An empty current mapping means every model is new.
	mf, err = ParseModel([]byte("parts: 1\nmodels: [{name: a, rate: 1}]\ncurrent: {}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(mf.Problem.Current) != 1 || mf.Problem.Current[0] != Unassigned {
		t.Fatalf("current %v", mf.Problem.Current)
	}
}

func TestParseModelErrors(t *testing.T) {
	const head = "parts: 3\ngpu_memory: 11GiB\nmodels:\n"
	m := func(lines ...string) string { return head + strings.Join(lines, "\n") + "\n" }
	a := "  - {name: a, rate: 1, memory: {static: 1MiB, dynamic: 1MiB}}"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"bad rate", m(a, strings.Replace(a, "a,", "b,", 1), strings.Replace(a, "a,", "c,", 1), "  - {name: d, rate: abc}"), `models.yaml:7: models[3].rate: "abc" is not a number`},
		{"negative rate", m("  - {name: a, rate: -1}"), `models.yaml:4: models[0].rate: must not be negative, got -1`},
		{"nan rate", m("  - {name: a, rate: .nan}"), `models[0].rate: ".nan" is not a number`},
		{"missing rate", m("  - {name: a}"), `models.yaml:4: models[0].rate: required`},
		{"unknown key", m("  - {name: a, rate: 1, ratee: 2}"), `models.yaml:4: models[0].ratee: unknown key "ratee"`},
		{"unknown top key", "part: 3\n", `models.yaml:1: part: unknown key "part"`},
		{"duplicate", m("  - {name: a, rate: 1}", "  - {name: a, rate: 2}"), `models.yaml:5: models[1].name: duplicate model name "a" (models[0] at line 4`},
		{"bad name", m("  - {name: 'a b', rate: 1}"), `models[0].name: model name "a b" has character ' '`},
		{"name list", m("  - {name: [a], rate: 1}"), `models[0].name: want a model name, got a list`},
		{"negative static", m("  - {name: a, rate: 1, memory: {static: -1MiB}}"), `models[0].memory.static: "-1MiB" is negative; a size must be at least 0`},
		{"SI unit", m("  - {name: a, rate: 1, memory: {static: 1MB}}"), `models[0].memory.static: "1MB" has unknown unit "MB"`},
		{"too big", m("  - {name: a, rate: 1, memory: {static: 10GiB, dynamic: 2GiB}}"), `models.yaml:4: models[0].memory: static 10GiB + dynamic 2GiB exceeds gpu_memory 11GiB`},
		{"huge static", m("  - {name: a, rate: 1, memory: {static: 1PiB}}"), `models[0].memory.static: "1PiB" is larger than 16TiB`},
		{"memory scalar", m("  - {name: a, rate: 1, memory: 1GiB}"), `models[0].memory: want a mapping {static, dynamic}, got "1GiB"`},
		{"no parts", "models: [{name: a, rate: 1}]\n", `models.yaml:1: parts: required`},
		{"zero parts", "parts: 0\nmodels: [{name: a, rate: 1}]\n", `models.yaml:1: parts: 0 is outside 1..65536`},
		{"float parts", "parts: 2.5\nmodels: [{name: a, rate: 1}]\n", `parts: "2.5" is not an integer`},
		{"no models", "parts: 2\n", `models: required`},
		{"empty models", "parts: 2\nmodels: []\n", `models.yaml:2: models: no models`},
		{"models mapping", "parts: 2\nmodels: {a: 1}\n", `models: want a list of models, got a mapping`},
		{"current unknown model", m(a) + "current: {b: 1}\n", `models.yaml:5: current.b: no model named "b" in models`},
		{"current part out of range", m(a) + "current: {a: 3}\n", `models.yaml:5: current.a: 3 is outside 0..2`},
		{"current negative", m(a) + "current: {a: -1}\n", `current.a: -1 is outside 0..2`},
		{"current twice", m(a) + "current: {a: 1, a: 2}\n", `current`},
		{"current list", m(a) + "current: [a]\n", `current: want a mapping of model name to part, got a list`},
		{"max_disruption", m(a) + "max_disruption: lots\n", `models.yaml:5: max_disruption: "lots" is not a size`},
		{"gpu_memory negative", "parts: 1\ngpu_memory: -5\nmodels: [{name: a, rate: 1}]\n", `models.yaml:2: gpu_memory: "-5" is negative`},
		{"max rate", "parts: 1\nmax_rate_per_part: 10\nmodels: [{name: a, rate: 11}]\n", `models.yaml:3: models[0].rate: 11 exceeds max_rate_per_part 10`},
		{"rate too large", m("  - {name: a, rate: 1e300}"), `models[0].rate: 1e+300 is larger than 1e+12`},
		{"memory weight", "parts: 1\nmemory_weight: x\nmodels: [{name: a, rate: 1}]\n", `memory_weight: "x" is not a number`},
		{"merge of a scalar", "parts: 1\nmodels:\n  - {<<: 3, name: b, rate: 1}\n", `models.yaml:3: models[0]: merge key (<<) wants a mapping`},
		{"empty", "", `models.yaml: empty model file`},
		{"null", "~\n", `empty model file`},
		{"scalar", "3\n", `want a mapping of model file fields`},
		{"syntax", "parts: [1\n", `models.yaml:`},
		{"two docs", "parts: 1\n---\nparts: 2\n", `models.yaml:2: more than one YAML document`},
		{"key twice", "parts: 1\nparts: 2\n", `models.yaml:2: parts: key "parts" given twice (first at line 1)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mf, err := ParseModel([]byte(tc.in), "models.yaml")
			if err == nil {
				t.Fatalf("accepted %q: %+v", tc.in, mf.Problem)
			}
			if mf != nil {
				t.Fatal("returned a model file with the error")
			}
			var fe *ModelFileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T %v is not a *ModelFileError", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\nwant it to contain\n  %s", err, tc.want)
			}
		})
	}
}

// Merge keys work in model files as in workload files (one strict reader
// serves both): a model may take its fields from an anchored one and
// override some.
func TestParseModelMergeKeys(t *testing.T) {
	in := "parts: 1\nmodels:\n  - &m {name: a, rate: 2, memory: {static: 1GiB}}\n  - {<<: *m, name: b}\n"
	mf, err := ParseModel([]byte(in), "models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := mf.Problem.Models[1]
	if b.Name != "b" || b.Rate != 2 || b.StaticMemory != 1<<30 {
		t.Fatalf("merged model b = %+v, want name b, rate 2, static 1GiB", b)
	}
}

func TestParseModelLimits(t *testing.T) {
	big := make([]byte, MaxModelFileSize+1)
	if _, err := ParseModel(big, "big.yaml"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	// Aliases cannot multiply models: an aliased model repeats its name.
	var s strings.Builder
	s.WriteString("parts: 1\nmodels:\n  - &m {name: a, rate: 1}\n")
	for i := 0; i < 2000; i++ {
		s.WriteString("  - *m\n")
	}
	if _, err := ParseModel([]byte(s.String()), "alias.yaml"); err == nil || !strings.Contains(err.Error(), "duplicate model name") {
		t.Fatalf("aliased models: %v", err)
	}
}

func TestParseModelFileErrors(t *testing.T) {
	if _, err := ParseModelFile(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := ParseModelFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory: %v", err)
	}
}

func TestParseSizeAndFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"170MiB", 170 << 20}, {"1.5GiB", 3 << 29}, {"11gib", 11 << 30}, {"1024", 1024}, {" 2 KiB ", 2048}} {
		if v, err := strictyaml.ParseSize(tc.in); err != nil || v != tc.want {
			t.Errorf("strictyaml.ParseSize(%q) = %d, %v; want %d", tc.in, v, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1", "1MB", "GiB", "1.2.3KiB", "9223372036854775807KiB", "99999999999999999999"} {
		if v, err := strictyaml.ParseSize(in); err == nil {
			t.Errorf("strictyaml.ParseSize(%q) = %d, want an error", in, v)
		}
	}
	for _, tc := range []struct {
		in   int64
		want string
	}{{0, "0B"}, {1023, "1023B"}, {170 << 20, "170MiB"}, {3 << 29, "1.5GiB"}, {-(2 << 30), "-2GiB"}} {
		if s := FormatSize(tc.in); s != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.in, s, tc.want)
		}
	}
}

// FuzzParseModelFile checks that ParseModel never panics, that whatever it
// accepts passes Problem.Validate and respects the file limits, and that
// every rejection is a *ModelFileError with a message.
func FuzzParseModelFile(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(modelExamplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed model files in %s: %v", modelExamplesDir, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"parts: 1\nmodels: &m [*m]\n",
		"parts: &p {<<: *p}\n",
		"parts: 2\nmodels: [{name: a, rate: 1, memory: {static: 16TiB, dynamic: 16TiB}}]\ncurrent: {a: 1}\nmax_disruption: 0\n",
		"parts: 65536\nmax_rate_per_part: 1e308\nmodels: [{name: a, rate: 1e12}]\n",
		"parts: 1\nmodels: [{name: a, rate: 1}]\ncurrent: {a: 0, ? [x] : 1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mf, err := ParseModel(data, "fuzz.yaml")
		if err != nil {
			if mf != nil {
				t.Fatalf("returned both a model file and %v", err)
			}
			var fe *ModelFileError
			if !errors.As(err, &fe) || err.Error() == "" {
				t.Fatalf("unexplained error %T %q", err, err)
			}
			return
		}
		p := mf.Problem
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted a problem that fails Validate: %v", err)
		}
		if len(p.Models) > MaxModelFileModels || p.Parts > MaxModelFileParts {
			t.Fatalf("limits exceeded: %d models, %d parts", len(p.Models), p.Parts)
		}
		// Every accepted problem can be measured without overflow: the
		// all-on-part-0 assignment evaluates to finite numbers.
		e, err := p.Evaluate(make([]int, len(p.Models)))
		if err != nil {
			t.Fatal(err)
		}
		if e.Disruption < 0 || e.PartStatic[0] < 0 || e.PartMemory[0] < 0 {
			t.Fatalf("overflow: disruption %d, static %d, memory %d", e.Disruption, e.PartStatic[0], e.PartMemory[0])
		}
	})
}

func TestNewEngine(t *testing.T) {
	for _, tc := range []struct{ name, want string }{{"", "heuristic"}, {"heuristic", "heuristic"}, {"milp", "milp"}, {"random", "random"}} {
		e, err := NewEngine(tc.name, 7, "cbc")
		if err != nil {
			t.Fatalf("NewEngine(%q): %v", tc.name, err)
		}
		if e.Name() != tc.want {
			t.Fatalf("NewEngine(%q).Name() = %q, want %q", tc.name, e.Name(), tc.want)
		}
	}
	e, _ := NewEngine("milp", 7, "glpsol")
	m, ok := e.(*MILP)
	if !ok || m.Solver != "glpsol" {
		t.Fatalf("milp engine %#v", e)
	}
	if h, ok := m.Fallback.(*Heuristic); !ok || h.Seed != 7 {
		t.Fatalf("milp fallback %#v, want the heuristic with seed 7", m.Fallback)
	}
	if r, _ := NewEngine("random", 9, ""); r.(*RandomSearch).Seed != 9 {
		t.Fatalf("random engine %#v", r)
	}
	_, err := NewEngine("cplex", 1, "")
	if err == nil || !strings.Contains(err.Error(), `"cplex"`) || !strings.Contains(err.Error(), "heuristic, milp, random") {
		t.Fatalf("unknown engine: %v", err)
	}
}
