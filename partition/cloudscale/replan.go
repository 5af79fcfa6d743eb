package cloudscale

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/partition/provision"
)

// ReplanConfig configures Scrooge's run-time re-planning of a multi-model
// application (seed 000, §2 and §3.5: scaling factors that drift with the
// input, tracked at run time, the allocation solved again).
type ReplanConfig struct {
	// App is the application as planned: its ingress and its edges' scales
	// are the estimates the first plan is made with.
	App     *provision.App
	Options provision.Options
	// Types are the instances the plan's machines are rented as, each one
	// device (a GPU, or a CPU machine): the type whose Hardware names a
	// machine's hardware kind, or else the type of no Hardware, which
	// serves the one kind of a run whose models are not pinned.
	Types []InstanceType
	// Models names the module each model of the run serves, in the run's
	// model order (the modules a provision's export made models of, CPU
	// modules included). A module's machines must stay on one hardware
	// kind at one concurrency from plan to plan: its model is pinned there.
	Models []string
	// Period is how often the scaling factors are estimated, from the
	// arrivals of the period; a drift beyond Drift (a fraction) of any
	// estimate from the plan's re-plans.
	Period time.Duration
	Drift  float64
	// WarmPool is how many instances are kept beyond the plan's, booted
	// and serving, for a rise before the next re-plan; TurnOffDelay is how
	// long an instance beyond the plan and the pool waits before release.
	WarmPool     int
	TurnOffDelay time.Duration
	// Replan false plans once and never again: Scrooge without
	// re-planning, the baseline.
	Replan    bool
	TickEvery time.Duration
}

// DefaultReplan returns the settings of the re-planning experiment: a
// 2-minute period, a 20% drift, one warm instance, a 3-minute turn-off
// delay, and 5 s ticks.
func DefaultReplan(app *provision.App, o provision.Options, types []InstanceType, models []string) ReplanConfig {
	return ReplanConfig{App: app, Options: o, Types: types, Models: models, Period: 2 * time.Minute, Drift: 0.2,
		WarmPool: 1, TurnOffDelay: 3 * time.Minute, Replan: true, TickEvery: 5 * time.Second}
}

// Replanner is Scrooge at run time: every period it estimates each edge's
// scaling factor (the child's arrivals over its parent's) and each
// source's ingress from the period's arrivals; when one has drifted from
// what the plan assumed, it plans the application again (provision.Solve),
// rents what the new plan packs onto (provision.Pack) plus the warm pool
// of each type it rents, and gives the models the new plan's latency
// budgets.
type Replanner struct {
	cfg   ReplanConfig
	app   *provision.App // as last planned
	model map[string]int // module name → model index
	// placed is where each module's machines run: hardware and
	// concurrency, as the first plan put them.
	placed map[string]placement
	// target is, by type, the instances the last plan rents, the warm
	// pool included.
	target  []int
	slos    []time.Duration
	counts  []uint64
	since   time.Duration // start of the period being counted
	started bool
	replans int
	failed  error // the last re-plan that failed, if any
	off     turnOff
	launch  []int
	release []InstanceID
}

// placement is where a module's machines run.
type placement struct {
	hardware    string
	concurrency int
}

// NewReplanner makes the first plan of cfg.App and checks that its types
// rent every machine of it.
func NewReplanner(cfg ReplanConfig) (*Replanner, error) {
	switch {
	case cfg.App == nil:
		return nil, errors.New("cloudscale: replan: no application")
	case cfg.Period < cfg.TickEvery || cfg.TickEvery <= 0:
		return nil, fmt.Errorf("cloudscale: replan: period %v and tick %v must satisfy 0 < tick <= period", cfg.Period, cfg.TickEvery)
	case !(cfg.Drift > 0) || cfg.WarmPool < 0 || cfg.TurnOffDelay < 0:
		return nil, errors.New("cloudscale: replan: drift must be positive, the warm pool and turn-off delay not negative")
	}
	if len(cfg.Types) == 0 {
		return nil, errors.New("cloudscale: replan: no instance types")
	}
	for _, t := range cfg.Types {
		if err := t.Validate(); err != nil {
			return nil, err
		}
		if t.Devices() != 1 {
			return nil, fmt.Errorf("cloudscale: replan: instance type %q brings %d GPUs; a plan's machine is one GPU or one CPU machine", t.Name, t.Devices())
		}
	}
	r := &Replanner{cfg: cfg, model: map[string]int{}, placed: map[string]placement{}, target: make([]int, len(cfg.Types)), off: newTurnOff(cfg.TurnOffDelay)}
	for i, name := range cfg.Models {
		r.model[name] = i
	}
	r.counts = make([]uint64, len(cfg.Models))
	if err := r.plan(cloneApp(cfg.App)); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Replanner) Name() string {
	if !r.cfg.Replan {
		return "scrooge-no-replan"
	}
	return "scrooge-replan"
}

func (r *Replanner) Tick() time.Duration { return r.cfg.TickEvery }

// Replans counts the plans made after the first.
func (r *Replanner) Replans() int { return r.replans }

// Failed is the last re-plan's error, when one failed (the plan in force
// then stays until a later period plans again).
func (r *Replanner) Failed() error { return r.failed }

// Start is the first plan's instances.
func (r *Replanner) Start(float64) []int {
	var types []int
	for typ, n := range r.target {
		for range n {
			types = append(types, typ)
		}
	}
	return types
}

// plan solves app and takes its instances and budgets.
func (r *Replanner) plan(app *provision.App) error {
	p, err := provision.Solve(app, r.cfg.Options)
	if err != nil {
		return fmt.Errorf("cloudscale: replan: %w", err)
	}
	placed := maps.Clone(r.placed)
	for _, mp := range p.Modules {
		if _, ok := r.model[mp.Name]; !ok {
			continue
		}
		for _, c := range mp.Configs {
			at := placement{c.Hardware, max(c.Concurrency, 1)}
			was, ok := placed[mp.Name]
			if !ok {
				placed[mp.Name], was = at, at
			}
			if at != was {
				return fmt.Errorf("cloudscale: replan: the plan runs %s on %s at concurrency %d, where its model runs on %s at %d", mp.Name, at.hardware, at.concurrency, was.hardware, was.concurrency)
			}
		}
	}
	target := make([]int, len(r.cfg.Types))
	served := make([]string, len(r.cfg.Types))
	for _, in := range provision.Pack(app, p).Instances {
		typ := r.typeOf(in.Hardware)
		if typ < 0 {
			return fmt.Errorf("cloudscale: replan: the plan rents %s, which no instance type brings", in.Hardware)
		}
		t := r.cfg.Types[typ]
		if served[typ] != "" && served[typ] != in.Hardware {
			return fmt.Errorf("cloudscale: replan: the plan rents %s and %s as instance type %q, which serves one kind", served[typ], in.Hardware, t.Name)
		}
		if err := suits(t, in, p); err != nil {
			return err
		}
		served[typ] = in.Hardware
		target[typ]++
	}
	slos := make([]time.Duration, len(r.cfg.Models))
	for _, mp := range p.Modules {
		if i, ok := r.model[mp.Name]; ok {
			slos[i] = mp.Budget
		}
	}
	if i := slices.Index(slos, 0); i >= 0 {
		return fmt.Errorf("cloudscale: replan: model %d (%s) serves no module of the plan", i, r.cfg.Models[i])
	}
	for typ, n := range target {
		if n > 0 {
			target[typ] += r.cfg.WarmPool
		}
	}
	r.app, r.slos, r.target, r.placed = app, slos, target, placed
	return nil
}

// suits reports why type t cannot be the instance in of plan p: a GPU
// module's machine on a CPU machine, a CPU module's on GPUs, or a CPU
// module run at a concurrency above the machine's CPUs.
func suits(t InstanceType, in provision.PackedInstance, p *provision.Provision) error {
	if cpu := t.GPUs == 0; cpu != (in.Kind == provision.CPU) {
		return fmt.Errorf("cloudscale: replan: the plan rents a %v machine of %s as instance type %q, which has %d GPUs", in.Kind, in.Hardware, t.Name, t.GPUs)
	}
	if t.GPUs > 0 {
		return nil
	}
	for _, sh := range in.Shares {
		i := slices.IndexFunc(p.Modules, func(mp provision.ModuleProvision) bool { return mp.Name == sh.Module })
		if c := p.Modules[i].Configs[sh.Config]; c.Concurrency > t.CPUs {
			return fmt.Errorf("cloudscale: replan: the plan runs %s at concurrency %d on instance type %q, which has %d CPUs", sh.Module, c.Concurrency, t.Name, t.CPUs)
		}
	}
	return nil
}

// typeOf is the type that rents machines of hardware hw: the one that
// names it, else the one that names none; -1 if there is neither.
func (r *Replanner) typeOf(hw string) int {
	fallback := -1
	for i, t := range r.cfg.Types {
		switch t.Hardware {
		case hw:
			return i
		case "":
			fallback = i
		}
	}
	return fallback
}

// Decide counts the tick's arrivals and, at the end of each period,
// estimates, re-plans if the estimates drifted, and fits the fleet to the
// plan.
func (r *Replanner) Decide(o *Observation) Decision {
	r.launch, r.release = r.launch[:0], r.release[:0]
	d := Decision{SpillAbove: math.Inf(1)}
	if !r.started {
		r.started, r.since = true, o.Now
		d.SLOs = r.slos // the first plan's budgets, from the start
	}
	for i, n := range o.ModelArrivals {
		if i < len(r.counts) {
			r.counts[i] += n
		}
	}
	if o.Now-r.since < r.cfg.Period {
		d.Launch, d.Release = r.fit(o), r.release
		return d
	}
	secs := (o.Now - r.since).Seconds()
	r.since = o.Now
	if r.cfg.Replan {
		if est, drifted := r.estimate(secs); drifted {
			if err := r.plan(est); err != nil {
				r.failed = err // the plan in force stays; the next period tries again
			} else {
				r.replans++
				d.SLOs = r.slos
			}
		}
	}
	clear(r.counts)
	d.Launch, d.Release = r.fit(o), r.release
	return d
}

// estimate is the application with the period's measured ingress and
// scaling factors, and whether any moved by more than the drift from the
// plan's. A scale is measured where both ends of its edge are models of
// the run and the child has no other parent; the rest keep the plan's.
func (r *Replanner) estimate(secs float64) (*provision.App, bool) {
	est := cloneApp(r.app)
	rate := func(module string) (float64, bool) {
		i, ok := r.model[module]
		if !ok {
			return 0, false
		}
		return float64(r.counts[i]) / secs, true
	}
	drifted := false
	moved := func(was, now float64) bool { return math.Abs(now-was) > r.cfg.Drift*was }
	parents := map[string]int{}
	for _, e := range est.Edges {
		parents[e.To]++
	}
	for i := range est.Modules {
		m := &est.Modules[i]
		if m.Ingress > 0 && parents[m.Name] == 0 {
			if x, ok := rate(m.Name); ok {
				drifted = drifted || moved(m.Ingress, x)
				m.Ingress = x
			}
		}
	}
	for i := range est.Edges {
		e := &est.Edges[i]
		from, okf := rate(e.From)
		to, okt := rate(e.To)
		if !okf || !okt || from == 0 || parents[e.To] != 1 {
			continue
		}
		x := to / from
		drifted = drifted || moved(e.Scale, x)
		e.Scale = x
	}
	return est, drifted
}

// fit launches up to the plan's instances of each type at once and
// releases beyond them after the turn-off delay, the newest first.
func (r *Replanner) fit(o *Observation) []int {
	have := make([]int, len(r.target))
	for _, in := range o.Fleet {
		have[in.Type]++
	}
	for typ, n := range r.target {
		for k := have[typ]; k < n; k++ {
			r.launch = append(r.launch, typ)
		}
	}
	excess := have
	for typ := range excess {
		excess[typ] -= r.target[typ]
	}
	for i := len(o.Fleet) - 1; i >= 0; i-- {
		in := o.Fleet[i]
		if excess[in.Type] <= 0 {
			r.off.needed(in.ID)
			continue
		}
		if r.off.surplus(in.ID, o.Now) {
			r.release = append(r.release, in.ID)
			r.off.needed(in.ID)
		}
		excess[in.Type]--
	}
	return r.launch
}

// cloneApp copies what estimate changes: the modules' ingress and the
// edges' scales.
func cloneApp(a *provision.App) *provision.App {
	c := *a
	c.Modules = slices.Clone(a.Modules)
	c.Edges = slices.Clone(a.Edges)
	return &c
}
