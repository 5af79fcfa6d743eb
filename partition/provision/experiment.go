package provision

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/partition/internal/textout"
	"github.com/symphony-serving/symphony/partition/lpsolve"
)

// ExperimentConfig is the comparison of Harpagon §IV-B on random
// instances: the planner, every baseline, the papers' heuristics alone,
// the brute force and, when a solver is installed, Scrooge's MILP.
type ExperimentConfig struct {
	Instances int
	// Seed selects the instance series: instance i is
	// Random.Random(Seed, i).
	Seed   uint64
	Random RandomConfig
	// BruteNodes is the brute force's node budget per module (0:
	// BruteForceNodes); an instance over it counts as too large.
	BruteNodes int
	// MILP runs Scrooge's MILP on every instance; Solver names the solver
	// ("" for the first installed) and MILPTimeLimit bounds each solve.
	MILP          bool
	Solver        string
	MILPTimeLimit time.Duration
	// Progress, when set, is called after every instance.
	Progress func(t Trial, done, total int)
}

// DefaultExperiment returns 500 instances of DefaultRandom, seed 1, with
// the MILP when a solver is installed.
func DefaultExperiment() ExperimentConfig {
	_, err := lpsolve.Find("")
	return ExperimentConfig{Instances: 500, Seed: 1, Random: DefaultRandom(), MILP: err == nil, MILPTimeLimit: 10 * time.Second}
}

// Validate checks the configuration.
func (c ExperimentConfig) Validate() error {
	if c.Instances < 1 || c.Instances > 1_000_000 {
		return fmt.Errorf("provision: %d instances is outside 1..1000000", c.Instances)
	}
	if c.BruteNodes < 0 {
		return fmt.Errorf("provision: negative brute-force node budget %d", c.BruteNodes)
	}
	if c.MILP && c.MILPTimeLimit <= 0 {
		return fmt.Errorf("provision: MILP time limit %v is not positive", c.MILPTimeLimit)
	}
	return c.Random.Validate()
}

// The systems of the experiment, in report order.
const (
	SystemOurs     = "symphony"
	SystemHarpagon = "harpagon-heuristics"
	SystemBrute    = "brute-force"
	SystemMILP     = "scrooge-milp"
)

// HeuristicsOnly returns Default() without this package's additions to the
// papers' design (the module branch-and-bound, the split over module provisions
// with its exchange search): Harpagon as published, for the ablation row.
func HeuristicsOnly() Options {
	o := Default()
	o.ModuleNodes, o.SplitOverModules = 0, false
	return o
}

// Trial is one instance's results. Costs are per hour; a system without a
// provision has no entry in Cost (and a reason in Errors).
type Trial struct {
	Instance int `json:"instance"`
	Modules  int `json:"modules"`
	Edges    int `json:"edges"`
	// Cost per system; PlanSeconds the planner's own time.
	Cost        map[string]float64 `json:"cost"`
	PlanSeconds map[string]float64 `json:"plan_seconds"`
	Errors      map[string]string  `json:"errors,omitempty"`
	// MILPObjective is the MILP's own objective (before the refinement).
	MILPObjective float64 `json:"milp_objective,omitempty"`
}

// SystemRow summarises one system over the instances.
type SystemRow struct {
	System string `json:"system"`
	// Planned counts instances with a provision; Infeasible the others.
	Planned    int `json:"planned"`
	Infeasible int `json:"infeasible"`
	// AvgExtra and MaxExtra are the cost over ours, (cost/ours − 1), over
	// instances both planned; Below counts instances where it was cheaper
	// than ours.
	AvgExtra float64 `json:"avg_extra"`
	MaxExtra float64 `json:"max_extra"`
	Below    int     `json:"below_ours"`
	// OptimalShare is the share of brute-forced instances where the system
	// cost the optimum (within a relative 1e-9).
	OptimalShare float64 `json:"optimal_share"`
	// MedianSeconds and P99Seconds are its planning times.
	MedianSeconds float64 `json:"median_seconds"`
	P99Seconds    float64 `json:"p99_seconds"`
}

// Report is the experiment's outcome.
type Report struct {
	Config struct {
		Instances int          `json:"instances"`
		Seed      uint64       `json:"seed"`
		Random    RandomConfig `json:"random"`
		MILP      bool         `json:"milp"`
	} `json:"config"`
	Systems []SystemRow `json:"systems"`
	// BruteForced counts the instances the brute force solved.
	BruteForced int     `json:"brute_forced"`
	Trials      []Trial `json:"trials"`
	// Notes say what did not run (no MILP solver, ...).
	Notes []string `json:"notes"`
}

// RunExperiment runs the comparison. ctx stops it between instances (and
// a running MILP solve); the report then covers the instances done.
func RunExperiment(ctx context.Context, c ExperimentConfig) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{}
	rep.Config.Instances, rep.Config.Seed, rep.Config.Random, rep.Config.MILP = c.Instances, c.Seed, c.Random, c.MILP
	solverOK := true
	if c.MILP {
		if _, err := lpsolve.Find(c.Solver); err != nil {
			if !errors.Is(err, lpsolve.ErrNoSolver) {
				return nil, err
			}
			solverOK = false
			rep.Notes = append(rep.Notes, fmt.Sprintf("Scrooge's MILP not run: %v", err))
		}
	} else {
		rep.Notes = append(rep.Notes, "Scrooge's MILP not run (disabled)")
	}
	for i := 0; i < c.Instances; i++ {
		if ctx.Err() != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("stopped after %d of %d instances: %v", i, c.Instances, ctx.Err()))
			break
		}
		app := c.Random.Random(c.Seed, i)
		t := Trial{Instance: i, Modules: len(app.Modules), Edges: len(app.Edges),
			Cost: map[string]float64{}, PlanSeconds: map[string]float64{}, Errors: map[string]string{}}
		record := func(name string, p *Provision, took time.Duration, err error) {
			if err == nil {
				err = Verify(app, p)
				if err != nil {
					err = fmt.Errorf("invalid provision: %w", err)
				}
			}
			if err != nil {
				t.Errors[name] = err.Error()
				return
			}
			t.Cost[name] = p.CostPerHour
			t.PlanSeconds[name] = took.Seconds()
		}
		p, took, err := timed(func() (*Provision, error) { return Solve(app, Default()) })
		record(SystemOurs, p, took, err)
		p, took, err = timed(func() (*Provision, error) { return Solve(app, HeuristicsOnly()) })
		record(SystemHarpagon, p, took, err)
		for _, b := range Baselines() {
			p, took, err = timed(func() (*Provision, error) { return SolveBaseline(app, b) })
			record(b.String(), p, took, err)
		}
		p, took, err = timed(func() (*Provision, error) { return BruteForce(app, Default(), c.BruteNodes) })
		record(SystemBrute, p, took, err)
		if c.MILP && solverOK {
			mctx, cancel := context.WithTimeout(ctx, c.MILPTimeLimit)
			var res *MILPResult
			p, took, err = timed(func() (*Provision, error) {
				q, r, err := SolveMILP(mctx, app, c.Solver)
				res = r
				return q, err
			})
			cancel()
			record(SystemMILP, p, took, err)
			if res != nil {
				t.MILPObjective = res.Objective
			}
		}
		if len(t.Errors) == 0 {
			t.Errors = nil
		}
		rep.Trials = append(rep.Trials, t)
		if c.Progress != nil {
			c.Progress(t, i+1, c.Instances)
		}
	}
	rep.summarise()
	return rep, nil
}

// systems lists the report's systems in order.
func (r *Report) systems() []string {
	s := []string{SystemOurs, SystemHarpagon}
	for _, b := range Baselines() {
		s = append(s, b.String())
	}
	s = append(s, SystemBrute)
	if r.Config.MILP {
		s = append(s, SystemMILP)
	}
	return s
}

const costTol = 1e-9

func (r *Report) summarise() {
	r.BruteForced = 0
	for _, t := range r.Trials {
		if _, ok := t.Cost[SystemBrute]; ok {
			r.BruteForced++
		}
	}
	r.Systems = nil
	for _, name := range r.systems() {
		row := SystemRow{System: name}
		var extras, times []float64
		optimal := 0
		for _, t := range r.Trials {
			c, ok := t.Cost[name]
			if !ok {
				row.Infeasible++
				continue
			}
			row.Planned++
			times = append(times, t.PlanSeconds[name])
			if ours, ok := t.Cost[SystemOurs]; ok && ours > 0 {
				x := c/ours - 1
				extras = append(extras, x)
				if c < ours*(1-costTol) {
					row.Below++
				}
			}
			if opt, ok := t.Cost[SystemBrute]; ok && c <= opt*(1+costTol) {
				optimal++
			}
		}
		if len(extras) > 0 {
			sum := 0.0
			row.MaxExtra = math.Inf(-1)
			for _, x := range extras {
				sum += x
				row.MaxExtra = math.Max(row.MaxExtra, x)
			}
			row.AvgExtra = sum / float64(len(extras))
		}
		if r.BruteForced > 0 {
			row.OptimalShare = float64(optimal) / float64(r.BruteForced)
		}
		row.MedianSeconds, row.P99Seconds = quantile(times, 0.5), quantile(times, 0.99)
		r.Systems = append(r.Systems, row)
	}
}

// quantile is the q-quantile (nearest rank) of xs, 0 when empty.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// WriteText prints the comparison table.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%d random instances (seed %d): %d-%d modules, %d-%d hardware kinds; brute force solved %d\n\n",
		len(r.Trials), r.Config.Seed, r.Config.Random.MinModules, r.Config.Random.MaxModules,
		r.Config.Random.MinHardware, r.Config.Random.MaxHardware, r.BruteForced)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tplanned\tavg extra over ours\tmax extra over ours\tcheaper than ours\toptimal\tmedian time\tp99 time")
	for _, s := range r.Systems {
		fmt.Fprintf(tw, "%s\t%d/%d\t%+.1f%%\t%+.1f%%\t%d\t%.1f%%\t%s\t%s\n", s.System, s.Planned, s.Planned+s.Infeasible,
			100*s.AvgExtra, 100*s.MaxExtra, s.Below, 100*s.OptimalShare, FormatSeconds(s.MedianSeconds), FormatSeconds(s.P99Seconds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	textout.WriteNotes(w, r.Notes)
	return nil
}

// FormatSeconds renders a duration given in seconds (as the JSON reports
// hold them) to the microsecond, for the text tables.
func FormatSeconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteCSV writes one row per (instance, system): the cost, the planning
// time and, for a system without a provision, why.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"instance", "modules", "edges", "system", "cost_per_hour", "plan_seconds", "error"}); err != nil {
		return err
	}
	for _, t := range r.Trials {
		for _, s := range r.systems() {
			row := []string{strconv.Itoa(t.Instance), strconv.Itoa(t.Modules), strconv.Itoa(t.Edges), s, "", "", t.Errors[s]}
			if c, ok := t.Cost[s]; ok {
				row[4] = strconv.FormatFloat(c, 'g', 10, 64)
				row[5] = strconv.FormatFloat(t.PlanSeconds[s], 'g', 6, 64)
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
