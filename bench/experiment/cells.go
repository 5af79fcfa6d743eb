package experiment

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/sim"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// cell is one simulation of an experiment's grid: a workload and what to
// do with it.
type cell struct {
	// name identifies the cell in progress lines and errors.
	name string
	w    *workload.Workload
	// search finds the goodput (every model's bad rate at most 1%);
	// otherwise the workload runs once at multiplier (1 when 0).
	search     bool
	multiplier float64
	// cloud runs the workload on a simulated cloud (sim.RunCloud) instead.
	cloud *sim.Cloud
}

// outcome is a cell's result: the report, or why there is none.
type outcome struct {
	rep   *report.Report
	cloud *sim.CloudResult // a cloud cell's costs
	err   error
}

// goodput is the cell's goodput: the searched one, or the run's.
func (o outcome) goodput() float64 {
	if o.rep == nil {
		return 0
	}
	if o.rep.GoodputSearch != nil {
		return o.rep.GoodputSearch.GoodputRPS
	}
	return o.rep.GoodputRPS
}

// searchPrecision is the goodput search's relative precision: the search's
// default in full runs, coarser in quick ones.
func (r *Run) searchPrecision() float64 {
	if r.Quick {
		return 0.02
	}
	return 0 // report.DefaultSearchPrecision
}

// simulate runs the cells, Workers at a time, and returns their outcomes
// in the cells' order. A cell whose search finds no passing load, or whose
// run fails, has its error in its outcome; only a stopped context fails
// the whole call.
func (r *Run) simulate(cells []cell) ([]outcome, error) {
	out := make([]outcome, len(cells))
	workers := r.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range min(workers, len(cells)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = runCell(cells[i], r.searchPrecision())
				mu.Lock()
				done++
				if r.Progress != nil {
					r.Progress(done, len(cells), cells[i].name)
				}
				mu.Unlock()
			}
		}()
	}
	var err error
	for i := range cells {
		if r.ctx.Err() != nil {
			err = fmt.Errorf("%w after %d of %d cells: %v", errStopped, i, len(cells), r.ctx.Err())
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out, err
}

func runCell(c cell, precision float64) outcome {
	if c.cloud != nil {
		rep, res, err := sim.RunCloud(c.w, *c.cloud, sim.Options{})
		return outcome{rep: rep, cloud: res, err: err}
	}
	if c.search {
		rep, err := sim.FindGoodput(c.w, sim.GoodputOptions{Precision: precision})
		return outcome{rep: rep, err: err}
	}
	w := c.w
	if c.multiplier > 0 {
		w = w.Scaled(c.multiplier)
	}
	rep, err := sim.Run(w, sim.Options{})
	return outcome{rep: rep, err: err}
}

// spec is a workload an experiment builds: the file a user could write for
// the cell (workloadYAML), parsed by the workload package like any other,
// so that the experiments run exactly what `symphony sim -f` would.
type spec struct {
	seed             uint64
	duration, warmup time.Duration
	gpus             int
	// network is the `network` mapping's body, e.g. "{ctrl_delay: 100us}";
	// empty gives the paper's: ctrl 100us, data 20us per request, result
	// 100us (what the bundled Table 4 and mixed-zoo files use).
	network string
	// load is the `models:` or `zoo:` entry, as YAML text.
	load   string
	policy scheduler.Policy
	// nexusFrontends sets nexus_frontends when above 1.
	nexusFrontends int
}

const paperNetwork = "{ctrl_delay: 100us, data_delay_per_request: 20us, result_delay: 100us}"

func (s spec) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed: %d\nduration: %s\nwarmup: %s\ncluster: {gpus: %d}\n", s.seed, s.duration, s.warmup, s.gpus)
	net := s.network
	if net == "" {
		net = paperNetwork
	}
	fmt.Fprintf(&b, "network: %s\n%s\npolicy: %s\n", net, strings.TrimRight(s.load, "\n"), s.policy)
	if s.nexusFrontends > 1 {
		fmt.Fprintf(&b, "nexus_frontends: %d\n", s.nexusFrontends)
	}
	return b.String()
}

// gridSpec is a grid cell's spec: 10 s of measurement after 2 s of warmup,
// or 4 s after 1 s in a quick run, with the paper's network delays.
func (r *Run) gridSpec(seed uint64, gpus int, p scheduler.Policy, load string) spec {
	s := spec{seed: seed, duration: 10 * time.Second, warmup: 2 * time.Second, gpus: gpus, policy: p, load: load}
	if r.Quick {
		s.duration, s.warmup = 4*time.Second, time.Second
	}
	return s
}

// searchCell is the goodput search of spec s, named name.
func searchCell(name string, s spec) (cell, error) {
	w, err := s.workload(name)
	return cell{name: name, w: w, search: true}, err
}

// workload parses the spec; a spec that does not parse is a bug in the
// experiment, reported with the YAML.
func (s spec) workload(name string) (*workload.Workload, error) {
	text := s.yaml()
	w, err := workload.Parse([]byte(text), "experiment cell "+name)
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w\n%s", name, err, text)
	}
	return w, nil
}

// zooLoad is a `zoo:` entry: count models from the named zoo's select list,
// each with the SLO slo (0: the zoo's own), total_rate spread by
// popularity, every model with the arrival process arrival.
func zooLoad(profiles string, selectNames []string, count int, slo time.Duration, totalRate float64, popularity, arrival string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "zoo: {profiles: %s", profiles)
	if len(selectNames) > 0 {
		fmt.Fprintf(&b, ", select: [%s]", strings.Join(selectNames, ", "))
	}
	if count > 0 {
		fmt.Fprintf(&b, ", count: %d", count)
	}
	if slo > 0 {
		fmt.Fprintf(&b, ", slo: %s", slo)
	}
	fmt.Fprintf(&b, ", total_rate: %g, popularity: %q, arrival: %q}", totalRate, popularity, arrival)
	return b.String()
}

// ratio is num/den, NaN when den is 0.
func ratio(num, den float64) float64 {
	if den == 0 {
		return nan
	}
	return num / den
}

// nan marks a figure not measured, or one the paper does not give.
var nan = math.NaN()

// gammaArrival is the workload's spelling of Γ(shape) gaps (Γ(1) is
// Poisson).
func gammaArrival(shape float64) string {
	if shape == 1 {
		return "poisson"
	}
	return fmt.Sprintf("gamma:%g", shape)
}

// shortErr is the first line of err, for a table cell.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// zooSpec is the named model of a bundled zoo.
func zooSpec(zoo, name string) (profile.ModelSpec, error) {
	specs, err := profile.Zoo(zoo)
	if err != nil {
		return profile.ModelSpec{}, err
	}
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	return profile.ModelSpec{}, fmt.Errorf("zoo %s has no model %s", zoo, name)
}

// inRange reports whether our range [lo, hi] lies within the paper's
// [paperLo, paperHi] widened by tol (a fraction) on both sides.
func inRange(lo, hi, paperLo, paperHi, tol float64) bool {
	return lo <= hi && lo >= paperLo*(1-tol) && hi <= paperHi*(1+tol)
}

// seeds are the seeds each point of a figure runs with: three in a full
// run, whose mean the figure draws and whose range the table gives, one in
// a quick run.
func (r *Run) seeds() []uint64 {
	if r.Quick {
		return []uint64{42}
	}
	return []uint64{42, 1, 2}
}

// seedAggregate is a point's goodput over its seeds.
type seedAggregate struct {
	mean, min, max float64
	// note is the first failure among the seeds' runs.
	note string
}

func aggregate(outs []outcome) seedAggregate {
	a := seedAggregate{min: math.Inf(1), max: math.Inf(-1)}
	for _, o := range outs {
		g := o.goodput()
		a.mean += g / float64(len(outs))
		a.min, a.max = math.Min(a.min, g), math.Max(a.max, g)
		if o.err != nil && a.note == "" {
			a.note = shortErr(o.err)
		}
	}
	return a
}
