package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/partition"
)

const smallModels = "../../testdata/partition/small.yaml"

func TestPartitionJSON(t *testing.T) {
	code, out, stderr := runCLI(t, "partition", "-f", smallModels, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Engine     string         `json:"engine"`
		Assignment map[string]int `json:"assignment"`
		Imbalance  *struct {
			Rate   *float64 `json:"rate"`
			Memory *float64 `json:"memory"`
		} `json:"imbalance"`
		Disruption    *int64   `json:"disruption"`
		MaxDisruption *int64   `json:"max_disruption"`
		SolveSeconds  *float64 `json:"solve_seconds"`
		Objective     *float64 `json:"objective"`
		Optimal       *bool    `json:"optimal"`
		Notes         []string `json:"notes"`
		Parts         []struct {
			Part         int      `json:"part"`
			Models       []string `json:"models"`
			Rate         float64  `json:"rate"`
			StaticMemory int64    `json:"static_memory"`
			Memory       int64    `json:"memory"`
		} `json:"parts"`
		Moves []struct {
			Model    string `json:"model"`
			From, To int
		} `json:"moves"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if got.Engine != "heuristic" || got.Imbalance == nil || got.Imbalance.Rate == nil || got.Imbalance.Memory == nil ||
		got.Disruption == nil || got.SolveSeconds == nil || got.Objective == nil || got.Optimal == nil || got.Notes == nil {
		t.Fatalf("JSON lacks fields:\n%s", out)
	}
	// Check the answer against the file with the library's own measure.
	mf, err := partition.ParseModelFile(smallModels)
	if err != nil {
		t.Fatal(err)
	}
	p := mf.Problem
	if len(got.Assignment) != len(p.Models) {
		t.Fatalf("assignment %v for %d models", got.Assignment, len(p.Models))
	}
	assign := make([]int, len(p.Models))
	for i, m := range p.Models {
		j, ok := got.Assignment[m.Name]
		if !ok {
			t.Fatalf("assignment lacks %s", m.Name)
		}
		assign[i] = j
	}
	ev, err := p.Evaluate(assign)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Feasible() {
		t.Fatalf("infeasible answer: %v", ev.Violations)
	}
	if *got.Imbalance.Rate != ev.Imbalance.Rate || *got.Imbalance.Memory != ev.Imbalance.Memory || *got.Disruption != ev.Disruption {
		t.Fatalf("imbalance %v/%v, disruption %d; Evaluate says %+v, %d", *got.Imbalance.Rate, *got.Imbalance.Memory, *got.Disruption, ev.Imbalance, ev.Disruption)
	}
	if got.MaxDisruption == nil || *got.MaxDisruption != 2<<30 || *got.Disruption > *got.MaxDisruption {
		t.Fatalf("disruption %d, max %v", *got.Disruption, got.MaxDisruption)
	}
	if len(got.Parts) != 3 {
		t.Fatalf("%d parts", len(got.Parts))
	}
	seen := 0
	for j, part := range got.Parts {
		if part.Part != j || part.Rate != ev.PartRate[j] || part.StaticMemory != ev.PartStatic[j] || part.Memory != ev.PartMemory[j] {
			t.Fatalf("part %+v; Evaluate says rate %v static %d memory %d", part, ev.PartRate[j], ev.PartStatic[j], ev.PartMemory[j])
		}
		for _, m := range part.Models {
			if got.Assignment[m] != j {
				t.Fatalf("part %d lists %s, assigned to %d", j, m, got.Assignment[m])
			}
			seen++
		}
	}
	if seen != len(p.Models) {
		t.Fatalf("parts list %d models, want %d", seen, len(p.Models))
	}
	// vgg16-b is new, so it is always among the moves, from -1.
	var newModel bool
	for _, m := range got.Moves {
		if m.Model == "vgg16-b" && m.From == partition.Unassigned && m.To == got.Assignment["vgg16-b"] {
			newModel = true
		}
	}
	if !newModel {
		t.Fatalf("moves %+v lack the new vgg16-b", got.Moves)
	}
}

func TestPartitionText(t *testing.T) {
	code, out, stderr := runCLI(t, "partition", "-f", smallModels, "--engine", "random", "--time-limit", "50ms", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"8 models into 3 parts", "engine:      random", "imbalance:   rate ", "max_disruption 2GiB",
		"memory incl. dynamic", "vgg16-b", "(new)", "notes:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}
	code, out, stderr = runCLI(t, "partition", "-f", "../../testdata/partition/initial.yaml")
	if code != 0 || !strings.Contains(out, "no current assignment") {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
}

func TestPartitionMILPFallback(t *testing.T) {
	code, out, stderr := runCLI(t, "partition", "-f", smallModels, "--json", "--engine", "milp", "--solver", "/nonexistent/cbc", "--time-limit", "2s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Engine    string   `json:"engine"`
		Requested string   `json:"requested_engine"`
		Notes     []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Engine != "heuristic" || got.Requested != "milp" || len(got.Notes) == 0 {
		t.Fatalf("MILP without a solver: %+v", got)
	}
}

func TestPartitionErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(bad, []byte("parts: 2\nmodels:\n  - {name: a, rate: 1}\n  - {name: b, rate: abc}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tight := filepath.Join(dir, "tight.yaml")
	if err := os.WriteFile(tight, []byte("parts: 2\nmodels:\n  - {name: a, rate: 1, memory: {static: 1GiB}}\n  - {name: b, rate: 1, memory: {static: 1GiB}}\ncurrent: {a: 0, b: 0}\nmax_disruption: 0\nmax_rate_per_part: 1.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"partition"}, 2, "-f MODELFILE is required"},
		{[]string{"partition", "-f", bad}, 1, bad + `:4: models[1].rate: "abc" is not a number`},
		{[]string{"partition", "-f", filepath.Join(dir, "missing.yaml")}, 1, "no such file"},
		{[]string{"partition", "-f", smallModels, "--engine", "cplex"}, 2, `unknown engine "cplex" (valid: heuristic, milp, random)`},
		{[]string{"partition", "-f", smallModels, "--time-limit", "0s"}, 2, "--time-limit must be positive"},
		{[]string{"partition", "-f", smallModels, "extra"}, 2, "unexpected arguments"},
		{[]string{"partition", "-f", tight}, 1, "no feasible assignment"},
		{[]string{"partition", "experiment"}, 2, "run it as symphony-bench partition"},
	} {
		code, out, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit %d and %q", tc.args, code, stderr, out, tc.code, tc.want)
		}
	}
}
