package partition

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// summaryFile is three models in two parts: a and b on part 0, c new.
const summaryFile = `parts: 2
models:
  - {name: a, rate: 100, memory: {static: 1GiB, dynamic: 2GiB}}
  - {name: b, rate: 50, memory: {static: 512MiB, dynamic: 1GiB}}
  - {name: c, rate: 150, memory: {static: 1GiB, dynamic: 1GiB}}
current: {a: 0, b: 0}
max_disruption: 4GiB
`

func parseSummaryFile(t *testing.T, text string) *ModelFile {
	t.Helper()
	mf, err := ParseModel([]byte(text), "dir/models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return mf
}

// A summary names every model's part, lists each part's load and memory
// as Evaluate measures them, and the moves from the current assignment.
func TestSummaryOfAnAnswer(t *testing.T) {
	mf := parseSummaryFile(t, summaryFile)
	res, err := mf.Problem.NewResult("heuristic", []int{0, 1, 1}, 1500*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	res.Notes = []string{"stopped at the time limit"}
	s, err := NewSummary(mf, "milp", res)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != "dir/models.yaml" || s.Engine != "heuristic" || s.RequestedEngine != "milp" || s.SolveSeconds != 0.0015 {
		t.Errorf("header fields %+v", s)
	}
	if want := map[string]int{"a": 0, "b": 1, "c": 1}; len(s.Assignment) != 3 || s.Assignment["a"] != 0 || s.Assignment["b"] != 1 || s.Assignment["c"] != 1 {
		t.Errorf("assignment %v, want %v", s.Assignment, want)
	}
	if len(s.Parts) != 2 || strings.Join(s.Parts[0].Models, ",") != "a" || strings.Join(s.Parts[1].Models, ",") != "b,c" {
		t.Fatalf("parts %+v", s.Parts)
	}
	if p := s.Parts[1]; p.Part != 1 || p.Rate != 200 || p.StaticMemory != 3<<29 || p.Memory != 3<<29+1<<30 {
		t.Errorf("part 1 %+v: want rate 200, static 1.5GiB, memory 2.5GiB", p)
	}
	// b moved from 0 to 1 (an unload and a load), c is new (a load).
	if len(s.Moves) != 2 || s.Moves[0] != (Move{"b", 0, 1}) || s.Moves[1] != (Move{"c", Unassigned, 1}) {
		t.Errorf("moves %+v", s.Moves)
	}
	if s.Disruption != res.Disruption || s.Disruption != 2*(512<<20)+1<<30 || s.MaxDisruption == nil || *s.MaxDisruption != 4<<30 {
		t.Errorf("disruption %d, max %v", s.Disruption, s.MaxDisruption)
	}
	if len(s.Notes) != 1 || s.Notes[0] != "stopped at the time limit" {
		t.Errorf("notes %q", s.Notes)
	}

	var text strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"models.yaml: 3 models into 2 parts\n", "engine:      heuristic (requested milp), solved in 1.5ms\n",
		"max_disruption 4GiB), 2 models placed or moved", "b c\n", "(moved from 0)\n", "c      1     (new)\n", "\nnotes:\n  - stopped at the time limit\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}

	// The JSON is the command's --json: these names, and no more.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"source", "engine", "requested_engine", "assignment", "parts", "imbalance", "objective",
		"disruption", "max_disruption", "moves", "optimal", "solve_seconds", "notes"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
		delete(fields, k)
	}
	if len(fields) != 0 {
		t.Errorf("JSON has more fields than the command's: %v", fields)
	}
}

// Without a current assignment nothing moves, nothing bounds the
// disruption, and the text says it is the first epoch; an empty part has
// an empty model list, not null; a proven optimum is said.
func TestSummaryFirstEpoch(t *testing.T) {
	mf := parseSummaryFile(t, "parts: 3\nmodels:\n  - {name: a, rate: 1}\n  - {name: b, rate: 1}\n")
	res, err := mf.Problem.NewResult("milp", []int{2, 0}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	res.Optimal = true
	s, err := NewSummary(mf, "milp", res)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Moves) != 0 || s.MaxDisruption != nil || s.Disruption != 0 || s.Parts[1].Models == nil || len(s.Parts[1].Models) != 0 {
		t.Errorf("first epoch: %+v", s)
	}
	var text strings.Builder
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"engine:      milp, proven optimal", "disruption:  none (no current assignment: the first epoch)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "notes:") {
		t.Errorf("notes without any:\n%s", text.String())
	}
}

// An assignment that breaks the problem's constraints is refused, not
// reported.
func TestSummaryRefusesAnInfeasibleAnswer(t *testing.T) {
	mf := parseSummaryFile(t, summaryFile+"max_rate_per_part: 200\n")
	res := &Result{Assignment: []int{0, 0, 0}, Engine: "broken"}
	if _, err := NewSummary(mf, "broken", res); err == nil || !strings.Contains(err.Error(), "engine broken returned an infeasible assignment") {
		t.Errorf("infeasible answer: %v", err)
	}
	if _, err := NewSummary(mf, "broken", &Result{Assignment: []int{0, 5, 0}}); err == nil {
		t.Error("an assignment out of range was reported")
	}
}
