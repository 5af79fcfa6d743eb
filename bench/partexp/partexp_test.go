package partexp

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/partition"
)

// tiny is a configuration that runs in well under a second: the real
// heuristic and random search, and the MILP pointed at a solver that does
// not exist, so that it falls back to the heuristic without depending on
// what is installed.
func tiny() Config {
	return Config{
		Models: 40, Parts: 4, Instances: 2, MeanRate: 100,
		TimeLimit: 100 * time.Millisecond,
		Engines:   []string{"heuristic", "milp", "random"},
		Solver:    "/nonexistent/cbc",
	}
}

func TestRunTiny(t *testing.T) {
	cfg := tiny()
	var progress []string
	cfg.Progress = func(r Trial, done, total int) {
		progress = append(progress, fmt.Sprintf("%d/%d %d %s", done, total, r.Instance, r.Requested))
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantProgress := []string{"1/6 1 heuristic", "2/6 1 milp", "3/6 1 random", "4/6 2 heuristic", "5/6 2 milp", "6/6 2 random"}
	if strings.Join(progress, ";") != strings.Join(wantProgress, ";") {
		t.Fatalf("progress %q, want %q", progress, wantProgress)
	}
	if len(rep.Runs) != 6 || len(rep.Summaries) != 3 {
		t.Fatalf("%d runs, %d summaries", len(rep.Runs), len(rep.Summaries))
	}
	for _, r := range rep.Runs {
		if !r.Feasible || r.Error != "" {
			t.Fatalf("run %+v not feasible", r)
		}
		if r.RateImbalance < 0 || r.MemoryImbalance < 0 || r.SolveSeconds <= 0 {
			t.Fatalf("run %+v", r)
		}
		// The engine's answer on this instance, measured again, is what
		// the run records.
		p := partition.RandomInstance(uint64(r.Instance), 40, 4, 100)
		if r.Requested == "heuristic" {
			res, err := (&partition.Heuristic{Seed: uint64(r.Instance)}).Solve(context.Background(), p)
			if err != nil || res.Imbalance.Rate != r.RateImbalance || res.Imbalance.Memory != r.MemoryImbalance {
				t.Fatalf("heuristic run %+v, solving again gives %+v, %v", r, res, err)
			}
		}
		// The random search uses its whole limit; nothing runs much longer.
		if r.Requested == "random" && r.SolveSeconds < 0.09 || r.SolveSeconds > 5 {
			t.Fatalf("run %+v took %.3fs with a 100ms limit", r, r.SolveSeconds)
		}
	}
	byName := map[string]Summary{}
	for _, s := range rep.Summaries {
		byName[s.Engine] = s
		if s.Runs != 2 || s.Feasible != 2 {
			t.Fatalf("summary %+v", s)
		}
		st := s.RateImbalance
		if !(st.Min <= st.Median && st.Median <= st.P90 && st.P90 <= st.Max) {
			t.Fatalf("%s rate stats out of order: %+v", s.Engine, st)
		}
	}
	if s := byName["milp"]; s.Fallbacks != 2 {
		t.Fatalf("milp without a solver: %d fallbacks, want 2", s.Fallbacks)
	}
	for _, r := range rep.Runs {
		if r.Requested == "milp" && (r.Engine != "heuristic" || len(r.Notes) == 0) {
			t.Fatalf("milp run %+v: want the heuristic's answer with a note", r)
		}
	}
	// Random search is the baseline: the heuristic beats it on every
	// instance of this size.
	if h, r := byName["heuristic"], byName["random"]; h.Objective.Max >= r.Objective.Min {
		t.Fatalf("heuristic objective %+v not below random %+v", h.Objective, r.Objective)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"2 instances of 40 models into 4 parts", "time limit 100ms",
		"rate imbalance", "memory imbalance", "objective", "solve seconds",
		"min", "median", "p90", "max", "balanced (both <= 0.02)", "fallbacks",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 6 && f[0] == "milp" {
			if f[1] != "2" || f[2] != "2" || f[4] != "2" {
				t.Errorf("milp count row %q: want 2 runs, 2 feasible, 2 fallbacks", line)
			}
		}
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Models != 40 || len(back.Runs) != 6 || back.Summaries[2].Engine != "random" || back.Threshold != 0.02 {
		t.Fatalf("JSON round trip: %+v", back)
	}

	var c bytes.Buffer
	if err := rep.WriteCSV(&c); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 7 || strings.Join(rows[0], ",") != strings.Join(csvHeader, ",") {
		t.Fatalf("CSV rows %q", rows)
	}
	if rows[2][0] != "1" || rows[2][1] != "milp" || rows[2][2] != "heuristic" || rows[2][3] != "true" {
		t.Fatalf("CSV row %q", rows[2])
	}

	dir := filepath.Join(t.TempDir(), "plots")
	paths, err := WritePlot(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Fatalf("plot paths %q", paths)
	}
	svg, err := os.ReadFile(filepath.Join(dir, PlotName+".svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "heuristic rate", "random memory", "CDF over instances"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, PlotName+".png")); err != nil || fi.Size() == 0 {
		t.Fatalf("PNG: %v", err)
	}
}

// failing is an engine that never finds an assignment.
type failing struct{}

func (failing) Name() string { return "failing" }
func (failing) Solve(context.Context, *partition.Problem) (*partition.Result, error) {
	return nil, fmt.Errorf("%w: test engine", partition.ErrInfeasible)
}

func TestRunRecordsFailures(t *testing.T) {
	cfg := tiny()
	cfg.Engines = []string{"heuristic", "failing"}
	cfg.NewEngine = func(name string, seed uint64, solver string) (partition.Engine, error) {
		if name == "failing" {
			return failing{}, nil
		}
		return partition.NewEngine(name, seed, solver)
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Summaries[1]
	if s.Engine != "failing" || s.Runs != 2 || s.Feasible != 0 || s.Balanced != 0 || s.RateImbalance != (Stats{}) {
		t.Fatalf("summary %+v", s)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "instance 2, failing: partition: no feasible assignment: test engine") {
		t.Fatalf("text report does not list the failure:\n%s", text.String())
	}
	var c bytes.Buffer
	if err := rep.WriteCSV(&c); err != nil {
		t.Fatal(err)
	}
	rows, _ := csv.NewReader(&c).ReadAll()
	if r := rows[2]; r[1] != "failing" || r[3] != "false" || r[4] != "" || !strings.Contains(r[9], "test engine") {
		t.Fatalf("CSV row %q", r)
	}
	// A report with nothing feasible to plot writes nothing, without error.
	only := *rep
	only.Engines = []string{"failing"}
	only.Runs = nil
	for _, r := range rep.Runs {
		if r.Requested == "failing" {
			only.Runs = append(only.Runs, r)
		}
	}
	dir := filepath.Join(t.TempDir(), "none")
	if paths, err := WritePlot(dir, &only); err != nil || len(paths) != 0 {
		t.Fatalf("WritePlot with no feasible runs: %q, %v", paths, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("WritePlot created %s: %v", dir, err)
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := tiny()
	cfg.Engines = []string{"heuristic"}
	cfg.Progress = func(Trial, int, int) { cancel() }
	rep, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) || rep == nil || len(rep.Runs) != 1 || rep.Summaries[0].Runs != 1 {
		t.Fatalf("cancelled run: %v, %+v", err, rep)
	}
}

func TestConfigValidate(t *testing.T) {
	def := DefaultConfig()
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Models = 0 }, "models"},
		{func(c *Config) { c.Parts = 1 << 20 }, "parts"},
		{func(c *Config) { c.Instances = 0 }, "instances"},
		{func(c *Config) { c.MeanRate = 0 }, "mean rate"},
		{func(c *Config) { c.TimeLimit = 0 }, "time limit"},
		{func(c *Config) { c.Engines = nil }, "no engines"},
		{func(c *Config) { c.Engines = []string{"heuristic", "heuristic"} }, "twice"},
		{func(c *Config) { c.Engines = []string{"cplex"} }, `unknown engine "cplex"`},
	} {
		c := DefaultConfig()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want %q", err, tc.want)
		}
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("Run accepted a bad config (%s)", tc.want)
		}
	}
}

func TestStats(t *testing.T) {
	s := stats([]float64{5, 1, 4, 2, 3})
	if s.Min != 1 || s.Median != 3 || s.Max != 5 || s.P90 < 4.5999 || s.P90 > 4.6001 {
		t.Fatalf("stats %+v", s)
	}
	if s := stats([]float64{1, 2}); s.Median != 1.5 {
		t.Fatalf("median of 1, 2 = %v", s.Median)
	}
	if s := stats([]float64{7}); s != (Stats{7, 7, 7, 7}) {
		t.Fatalf("stats of one %+v", s)
	}
}
