// Package partexp is the paper's Appendix A.2 experiment (Figure 15): how
// balanced a partition each engine finds within the epoch job's time limit,
// on random instances of the paper's size (800 models into 20 parts, rates
// drawn from an exponential distribution). It runs every engine on the same
// instances, one at a time so that timings are not disturbed, and reports
// per-engine distributions of the imbalance factors, a CSV row per run and
// a CDF plot.
package partexp

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/partition"
)

// BalancedThreshold is the imbalance factor under which a partition counts
// as balanced in the summary: 2%, below which the paper's Figure 15 shows
// the MILP's partitions (and above which random search stays).
const BalancedThreshold = 0.02

// Limits keep a mistyped flag from starting a run of days or allocating
// without bound.
const (
	maxModels    = 100_000
	maxParts     = 1 << 16
	maxInstances = 100_000
)

// Config is one experiment.
type Config struct {
	// Models and Parts size every instance; Instances is how many, with
	// seeds 1..Instances; MeanRate is the mean of the exponential rates.
	Models, Parts, Instances int
	MeanRate                 float64
	// TimeLimit bounds each engine on each instance. The heuristic gets it
	// as a cap but usually stops far earlier at its local optimum; the MILP
	// and the random search use all of it.
	TimeLimit time.Duration
	// Engines are engine names for NewEngine, in report order.
	Engines []string
	// Solver is the MILP solver ("" for the first installed).
	Solver string
	// NewEngine builds the engines; nil means partition.NewEngine. Tests
	// substitute it.
	NewEngine func(name string, seed uint64, solver string) (partition.Engine, error)
	// Progress, when not nil, is called after each run, with the runs done
	// and the runs in all, so that a long experiment shows it is alive.
	Progress func(r Trial, done, total int)
}

// DefaultConfig is the paper's configuration: 20 instances of 800 models
// into 20 parts, mean rate 100 req/s, a 10 s limit, all three engines.
func DefaultConfig() Config {
	return Config{
		Models: 800, Parts: 20, Instances: 20, MeanRate: 100,
		TimeLimit: partition.DefaultMILPTimeLimit,
		Engines:   partition.EngineNames(),
	}
}

// Validate checks that the configuration can run.
func (c *Config) Validate() error {
	switch {
	case c.Models < 1 || c.Models > maxModels:
		return fmt.Errorf("models must be in 1..%d, have %d", maxModels, c.Models)
	case c.Parts < 1 || c.Parts > maxParts:
		return fmt.Errorf("parts must be in 1..%d, have %d", maxParts, c.Parts)
	case c.Instances < 1 || c.Instances > maxInstances:
		return fmt.Errorf("instances must be in 1..%d, have %d", maxInstances, c.Instances)
	case !(c.MeanRate > 0) || math.IsInf(c.MeanRate, 0):
		return fmt.Errorf("mean rate must be a positive number, have %v", c.MeanRate)
	case c.TimeLimit <= 0:
		return fmt.Errorf("time limit must be positive, have %v", c.TimeLimit)
	case len(c.Engines) == 0:
		return errors.New("no engines to run")
	}
	seen := make(map[string]bool)
	for _, e := range c.Engines {
		if seen[e] {
			return fmt.Errorf("engine %q listed twice", e)
		}
		seen[e] = true
		if _, err := c.newEngine()(e, 1, c.Solver); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) newEngine() func(string, uint64, string) (partition.Engine, error) {
	if c.NewEngine != nil {
		return c.NewEngine
	}
	return partition.NewEngine
}

// Trial is one engine on one instance.
type Trial struct {
	// Instance is the instance's seed.
	Instance int `json:"instance"`
	// Requested is the engine asked for; Engine the one whose assignment
	// was returned (the MILP's fallback when the solver was missing or
	// found nothing better), empty when the run failed.
	Requested string `json:"requested"`
	Engine    string `json:"engine"`
	// Feasible is true when the engine returned an assignment and it meets
	// every constraint when measured again; Error says why not otherwise.
	Feasible        bool    `json:"feasible"`
	Error           string  `json:"error,omitempty"`
	RateImbalance   float64 `json:"rate_imbalance"`
	MemoryImbalance float64 `json:"memory_imbalance"`
	Objective       float64 `json:"objective"`
	// SolveSeconds is the wall time of the Solve call.
	SolveSeconds float64  `json:"solve_seconds"`
	Optimal      bool     `json:"optimal"`
	Notes        []string `json:"notes,omitempty"`
}

// Balanced reports whether both imbalance factors are at most
// BalancedThreshold.
func (r *Trial) Balanced() bool {
	return r.Feasible && r.RateImbalance <= BalancedThreshold && r.MemoryImbalance <= BalancedThreshold
}

// Stats summarises one metric over an engine's feasible runs.
type Stats struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
}

// Summary is one engine's results over all instances.
type Summary struct {
	Engine string `json:"engine"`
	Runs   int    `json:"runs"`
	// Feasible counts runs with an assignment; Balanced those with both
	// imbalance factors at most BalancedThreshold; Fallbacks those answered
	// by another engine than the one requested; Optimal those proven optimal.
	Feasible  int `json:"feasible"`
	Balanced  int `json:"balanced"`
	Fallbacks int `json:"fallbacks"`
	Optimal   int `json:"optimal"`
	// The statistics cover feasible runs only; they are zero when none was.
	RateImbalance   Stats `json:"rate_imbalance"`
	MemoryImbalance Stats `json:"memory_imbalance"`
	Objective       Stats `json:"objective"`
	SolveSeconds    Stats `json:"solve_seconds"`
}

// Report is the experiment's outcome.
type Report struct {
	Models           int       `json:"models"`
	Parts            int       `json:"parts"`
	Instances        int       `json:"instances"`
	MeanRate         float64   `json:"mean_rate"`
	TimeLimitSeconds float64   `json:"time_limit_seconds"`
	Engines          []string  `json:"engines"`
	Threshold        float64   `json:"balanced_threshold"`
	Summaries        []Summary `json:"summaries"`
	Runs             []Trial   `json:"runs"`
}

// Run runs the experiment: for each seed 1..Instances, the same
// RandomInstance for every engine, each under its own TimeLimit. An engine
// that fails on an instance (no feasible assignment) is recorded as an
// infeasible run, not an error; Run fails only on a bad configuration or
// when ctx ends, and then returns the runs done so far with ctx's error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	newEngine := cfg.newEngine()
	rep := &Report{
		Models: cfg.Models, Parts: cfg.Parts, Instances: cfg.Instances, MeanRate: cfg.MeanRate,
		TimeLimitSeconds: cfg.TimeLimit.Seconds(), Engines: slices.Clone(cfg.Engines), Threshold: BalancedThreshold,
	}
	total := cfg.Instances * len(cfg.Engines)
	for seed := 1; seed <= cfg.Instances; seed++ {
		p := partition.RandomInstance(uint64(seed), cfg.Models, cfg.Parts, cfg.MeanRate)
		for _, name := range cfg.Engines {
			if err := ctx.Err(); err != nil {
				rep.summarise()
				return rep, err
			}
			eng, err := newEngine(name, uint64(seed), cfg.Solver)
			if err != nil {
				return nil, err
			}
			r := solve(ctx, eng, name, seed, p, cfg.TimeLimit)
			rep.Runs = append(rep.Runs, r)
			if cfg.Progress != nil {
				cfg.Progress(r, len(rep.Runs), total)
			}
		}
	}
	rep.summarise()
	return rep, nil
}

// solve runs one engine on one instance and measures its answer again with
// Evaluate, so that the report does not rest on the engine's own account.
func solve(ctx context.Context, eng partition.Engine, name string, seed int, p *partition.Problem, limit time.Duration) Trial {
	r := Trial{Instance: seed, Requested: name}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	began := time.Now()
	res, err := eng.Solve(ctx, p)
	r.SolveSeconds = time.Since(began).Seconds()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Engine, r.Optimal, r.Notes = res.Engine, res.Optimal, res.Notes
	ev, err := p.Evaluate(res.Assignment)
	switch {
	case err != nil:
		r.Error = err.Error()
	case !ev.Feasible():
		r.Error = "infeasible: " + ev.Violations[0]
	default:
		r.Feasible = true
		r.RateImbalance, r.MemoryImbalance, r.Objective = ev.Imbalance.Rate, ev.Imbalance.Memory, ev.Objective
	}
	return r
}

func (rep *Report) summarise() {
	rep.Summaries = rep.Summaries[:0]
	for _, name := range rep.Engines {
		s := Summary{Engine: name}
		var rate, mem, obj, secs []float64
		for i := range rep.Runs {
			r := &rep.Runs[i]
			if r.Requested != name {
				continue
			}
			s.Runs++
			if r.Engine != "" && r.Engine != r.Requested {
				s.Fallbacks++
			}
			if r.Optimal {
				s.Optimal++
			}
			if !r.Feasible {
				continue
			}
			s.Feasible++
			if r.Balanced() {
				s.Balanced++
			}
			rate, mem = append(rate, r.RateImbalance), append(mem, r.MemoryImbalance)
			obj, secs = append(obj, r.Objective), append(secs, r.SolveSeconds)
		}
		s.RateImbalance, s.MemoryImbalance = stats(rate), stats(mem)
		s.Objective, s.SolveSeconds = stats(obj), stats(secs)
		rep.Summaries = append(rep.Summaries, s)
	}
}

// stats computes the summary of xs; quantiles interpolate linearly between
// order statistics, so the median of an even count is the middle mean.
func stats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return Stats{Min: s[0], Median: quantile(s, 0.5), P90: quantile(s, 0.9), Max: s[len(s)-1]}
}

func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	if lo+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(lo)
	return sorted[lo]*(1-f) + sorted[lo+1]*f
}

// WriteText writes the per-engine table: min / median / p90 / max of each
// metric over feasible runs, and how many runs met the threshold.
func (rep *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "Appendix A.2: %d instances of %d models into %d parts (exponential rates, mean %g req/s), time limit %s per engine\n\n",
		rep.Instances, rep.Models, rep.Parts, rep.MeanRate, time.Duration(rep.TimeLimitSeconds*float64(time.Second)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "engine\tmetric\tmin\tmedian\tp90\tmax")
	for _, s := range rep.Summaries {
		rows := []struct {
			name string
			st   Stats
			prec int
		}{
			{"rate imbalance", s.RateImbalance, 4},
			{"memory imbalance", s.MemoryImbalance, 4},
			{"objective", s.Objective, 4},
			{"solve seconds", s.SolveSeconds, 3},
		}
		for i, r := range rows {
			name := ""
			if i == 0 {
				name = s.Engine
			}
			f := func(v float64) string { return strconv.FormatFloat(v, 'g', r.prec, 64) }
			if r.name == "solve seconds" {
				f = func(v float64) string { return strconv.FormatFloat(v, 'f', r.prec, 64) }
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, r.name, f(r.st.Min), f(r.st.Median), f(r.st.P90), f(r.st.Max))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "engine\truns\tfeasible\tbalanced (both <= %g)\tfallbacks\tproven optimal\n", BalancedThreshold)
	for _, s := range rep.Summaries {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", s.Engine, s.Runs, s.Feasible, s.Balanced, s.Fallbacks, s.Optimal)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var failed []string
	for _, r := range rep.Runs {
		if !r.Feasible {
			failed = append(failed, fmt.Sprintf("  instance %d, %s: %s", r.Instance, r.Requested, r.Error))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nruns without a feasible assignment:\n%s\n", strings.Join(failed, "\n"))
	}
	return nil
}

// WriteJSON writes the report, summaries and runs, as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	return report.EncodeJSON(w, rep)
}

// csvHeader is the CSV's first row.
var csvHeader = []string{"instance", "requested_engine", "engine", "feasible", "rate_imbalance", "memory_imbalance", "objective", "solve_seconds", "optimal", "error"}

// WriteCSV writes one row per (instance, engine), in run order.
func (rep *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, r := range rep.Runs {
		row := []string{
			strconv.Itoa(r.Instance), r.Requested, r.Engine, strconv.FormatBool(r.Feasible),
			g(r.RateImbalance), g(r.MemoryImbalance), g(r.Objective), g(r.SolveSeconds),
			strconv.FormatBool(r.Optimal), r.Error,
		}
		if !r.Feasible {
			row[4], row[5], row[6] = "", "", ""
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
