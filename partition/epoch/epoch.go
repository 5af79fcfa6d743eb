// Package epoch is the epoch controller of §4.7, §4.4 and Appendix A as a
// pure core: once an epoch, it takes what the cluster measured and holds, as
// plain data, and returns what to do about it, as data. It forecasts each
// model's rate from the two halves of the epoch that ended, re-partitions the
// models into parts within the disruption budget C_max (unless the parts are
// balanced enough, or a move is still loading), sizes each part (Eqs. 2-3 plus
// headroom), combines the sizing with the autoscaler's advice
// (scheduler.AutoscaleConfig.Advise), shares the GPUs out when the cluster is
// too small, and says which GPUs leave and join each part and which loads a
// model move needs, in make-before-break order.
//
// The core reads no clock, does no I/O of its own and starts no goroutine:
// the time is Input.Now, and the caller bounds the partitioning engine's
// solve with the deadline of the context it passes (the milp engine runs an
// external solver, the one I/O the core delegates). Randomness comes from
// Config.Seed. The simulator (bench/sim) drives it today, a live controller
// process later; both carry the decisions out themselves.
package epoch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/partition"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// Config is the epoch controller's configuration: the workload file's epoch
// mapping and the serving settings sizing depends on.
type Config struct {
	// Parts is the number of parts (sub-clusters, each with its own rank
	// loop).
	Parts int
	// Headroom is the capacity each part gets above its sized need.
	Headroom float64
	// MaxDisruption is C_max in bytes of model loads and unloads per
	// re-partitioning; negative means no limit.
	MaxDisruption int64
	// RebalanceAbove: the current assignment is kept while it is feasible
	// and its rate imbalance stays within it.
	RebalanceAbove float64
	// MaxRatePerPart (R_max, 0: none) and GPUMemory (S_max, 0: none) bound
	// each part.
	MaxRatePerPart float64
	GPUMemory      int64
	// Engine names the partitioning engine (partition.NewEngine); Seed
	// seeds its search.
	Engine string
	Seed   uint64
	// ModelLoadTime is how long a GPU takes to load one model: the step
	// between the waves of a move's loads.
	ModelLoadTime time.Duration
	// Network holds the delays sizing budgets for.
	Network scheduler.Delays
	// Autoscale is the autoscaling rule; DefaultAutoscale(Headroom) fits
	// an epoch controller.
	Autoscale scheduler.AutoscaleConfig
}

// Validate checks the configuration's own consistency.
func (c *Config) Validate() error {
	switch {
	case c.Parts < 1:
		return fmt.Errorf("epoch: parts must be at least 1, have %d", c.Parts)
	case c.Headroom < 0 || math.IsNaN(c.Headroom) || math.IsInf(c.Headroom, 0):
		return fmt.Errorf("epoch: headroom must be a non-negative number, have %v", c.Headroom)
	case c.RebalanceAbove < 0 || math.IsNaN(c.RebalanceAbove):
		return fmt.Errorf("epoch: rebalance_above must not be negative, have %v", c.RebalanceAbove)
	case c.ModelLoadTime < 0:
		return fmt.Errorf("epoch: model load time must not be negative, have %v", c.ModelLoadTime)
	}
	return nil
}

// DefaultAutoscale is the autoscaling rule of an epoch controller with the
// given headroom: the default, except that idle time the headroom explains
// (a fraction h/(1+h) of the GPUs, plus a 5-point margin for the
// non-work-conserving scheduler's own idling) is no reason to remove GPUs.
func DefaultAutoscale(headroom float64) scheduler.AutoscaleConfig {
	c := scheduler.DefaultAutoscaleConfig()
	c.RemoveAbove = max(c.RemoveAbove, headroom/(1+headroom)+0.05)
	return c
}

// MinRebalanceGain is the least relative improvement of the partitioning
// objective worth moving models for; below it, rates that merely wobble
// would swap similar models back and forth every epoch.
const MinRebalanceGain = 0.1

// Model is one served model as the controller sees it at an epoch.
type Model struct {
	// Model holds the name, profile, SLO and memory sizes.
	serving.Model
	// DeclaredRate is the rate the first epoch plans for, before anything
	// was measured.
	DeclaredRate float64
	// Arrivals counts the requests that arrived in each half of the epoch
	// that ended; Good and Bad the requests that ended in it, within and
	// past their SLO (dropped or late).
	Arrivals  [2]uint64
	Good, Bad uint64
	// Assigned is the model's part in the last decision's Assignment;
	// Serving is the part whose scheduler serves it now. They differ while
	// the model's move loads. Both are Unassigned before the first epoch.
	Assigned, Serving int
}

// Unassigned marks a model no decision has placed yet.
const Unassigned = partition.Unassigned

// Part is what one part measured over the epoch that ended.
type Part struct {
	// Busy is the GPU time its batches ran; Online the GPU time its GPUs
	// could run batches (not loading).
	Busy, Online time.Duration
}

// GPU is one GPU of the cluster; its index in Input.GPUs is its ID.
type GPU struct {
	// Part is the part it serves, or -1 in the free pool.
	Part int
	// LastFinish is when its last batch ended: the least busy GPUs leave
	// a shrinking part first.
	LastFinish scheduler.Time
}

// Input is everything one epoch's decision depends on. The controller does
// not keep it; the caller owns it.
type Input struct {
	// Now is the epoch's time.
	Now scheduler.Time
	// Window is the length of the epoch that ended; Model.Arrivals count
	// its halves.
	Window time.Duration
	Models []Model
	// Parts has Config.Parts entries (ignored in the first epoch).
	Parts []Part
	// GPUs is the whole cluster, free pool included.
	GPUs []GPU
}

// Move is one model's move between parts. Carried out make before break:
// every GPU of To loads it (Decision.Loads), then its requests switch to
// To's scheduler, then From unloads it and gives back the GPUs it no longer
// needs (Decision.Leaving).
type Move struct {
	Model    int
	From, To int
	// Bytes is its share of the disruption: a load at To and an unload at
	// From, each its static memory.
	Bytes int64
	// Now is true when To has no GPU to load on: the model switches at
	// once and GPUs joining To load it.
	Now bool
}

// Load is one GPU's load for the moves into its part: from At, it loads
// Models models and runs no batches meanwhile.
type Load struct {
	GPU    scheduler.GPUID
	Part   int
	At     scheduler.Time
	Models int
}

// Join is a free GPU joining a part; it loads the part's Models models
// (those it serves and those moving in or still moving out) unless the
// decision is Preloaded.
type Join struct {
	GPU    scheduler.GPUID
	Part   int
	Models int
}

// Record is what the epoch saw and decided, for reports.
type Record struct {
	Start time.Duration
	// BadRate and IdleFraction are the signals of the epoch that ended,
	// over all parts (zero in the first epoch).
	BadRate, IdleFraction float64
	// GPUsBefore were in use before the decision; Need is the sized need
	// (Eqs. 2-3, without headroom); GPUs the new total in use.
	GPUsBefore int
	Need       float64
	GPUs       int
	// AdviceGPUs is the advice's net GPUs summed over parts.
	AdviceGPUs      int
	CapacityLimited bool
	// Want is the GPUs the parts wanted in all, before the cluster's
	// capacity capped them (GPUs then falls short of it): what an
	// autoscaler that can start GPUs sizes the cluster for.
	Want int
	// The re-partitioning: engine, imbalance, disruption, moves; Skipped
	// says why it did not run or was not taken.
	Engine                         string
	RateImbalance, MemoryImbalance float64
	Disruption                     int64
	Moves                          int
	Skipped                        string
	// PartGPUs is each part's GPUs after the decision.
	PartGPUs []int
	// Deterministic is false when the decision came from an engine whose
	// answer depends on the machine and the wall time (milp, random):
	// rerunning the same input may decide otherwise.
	Deterministic bool
}

// Decision is one epoch's output. Carry it out in this order: start the
// Loads (make before break) and switch the Moves with Now at once; release
// the GPUs in Release; add the GPUs in Join. Once every load of a part's
// incoming moves is done, switch those models and give back Leaving GPUs of
// each part they leave.
type Decision struct {
	// Rates is each model's forecast rate, which the parts were sized for.
	Rates []float64
	// Signals and Advice are each part's autoscaling inputs and advice
	// (zero in the first epoch).
	Signals []scheduler.Signals
	Advice  []scheduler.AutoscaleAdvice
	// Assignment is each model's part from now on; Serving is the part
	// serving it once the Now moves are done (Assignment in the first
	// epoch, which starts loaded).
	Assignment, Serving []int
	// Moves, by destination part then model: the make-before-break order.
	Moves []Move
	// Loads are the moves' loads, by part then GPU, in waves that keep
	// half of each part's headroom serving.
	Loads []Load
	// Leaving is, per part, the GPUs it was sized for its models moving
	// out, to release once they switch away (keeping one GPU).
	Leaving []int
	// PartGPUs is each part's size after the decision.
	PartGPUs []int
	// Release and Join move GPUs between the parts and the free pool.
	Release []scheduler.GPUID
	Join    []Join
	// Preloaded is true in the first epoch: the cluster starts loaded.
	Preloaded bool
	Record    Record
}

// Controller decides epochs. It holds the configuration and the
// partitioning engine and nothing of the cluster's state; one Decide runs at
// a time.
type Controller struct {
	cfg    Config
	engine partition.Engine
}

// New builds a controller.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	eng, err := partition.NewEngine(cfg.Engine, cfg.Seed, "")
	if err != nil {
		return nil, err
	}
	return &Controller{cfg: cfg, engine: eng}, nil
}

// Config returns the controller's configuration.
func (c *Controller) Config() Config { return c.cfg }

// Deterministic reports whether the controller's engine decides the same
// way for the same input on any machine: the heuristic does (it finishes
// far inside any sane deadline); milp and random search use the deadline.
func (c *Controller) Deterministic() bool { return c.engine.Name() == "heuristic" }

// Forecast is the rate to size the next epoch for, from the rates of the
// two halves of the epoch that ended: while the load rises, its trend
// carried to the end of the next epoch (the second half's midpoint is 2.5
// half-epochs before then), so that the parts do not lag a rising load by
// a whole epoch, but at most 1.5x the latest rate, so that a step (a load
// that jumped and then held) is not mistaken for a steep trend; while it
// falls, the latest rate, so that the parts shrink no faster than the load.
func Forecast(first, second float64) float64 {
	return max(second, min(second+2.5*(second-first), 1.5*second))
}

// Decide is one epoch: in is not modified, and the decision shares no
// memory with it. ctx's deadline bounds the partitioning engine.
func (c *Controller) Decide(ctx context.Context, in *Input) (*Decision, error) {
	cfg := &c.cfg
	parts, nm := cfg.Parts, len(in.Models)
	first, err := c.check(in)
	if err != nil {
		return nil, err
	}
	d := &Decision{
		Rates: make([]float64, nm), Signals: make([]scheduler.Signals, parts), Advice: make([]scheduler.AutoscaleAdvice, parts),
		Assignment: make([]int, nm), Serving: make([]int, nm), Leaving: make([]int, parts), Preloaded: first,
	}
	rec := &d.Record
	rec.Start = time.Duration(in.Now)
	rec.Deterministic = c.Deterministic()

	// Measure: each model's rate, each part's signals.
	var ended, bad uint64
	var busy, online time.Duration
	half := (in.Window / 2).Seconds()
	for m := range in.Models {
		md := &in.Models[m]
		d.Assignment[m], d.Serving[m] = md.Assigned, md.Serving
		if first {
			d.Rates[m] = md.DeclaredRate
			continue
		}
		d.Rates[m] = Forecast(float64(md.Arrivals[0])/half, float64(md.Arrivals[1])/half)
		s := &d.Signals[md.Serving]
		s.Requests += md.Good + md.Bad
		s.BadRate += float64(md.Bad) // a count until divided below
		ended += md.Good + md.Bad
		bad += md.Bad
	}
	partGPUs := make([]int, parts)
	for _, g := range in.GPUs {
		if g.Part >= 0 {
			partGPUs[g.Part]++
			rec.GPUsBefore++
		}
	}
	for p := range d.Signals {
		s := &d.Signals[p]
		s.GPUs = partGPUs[p]
		if s.Requests > 0 {
			s.BadRate /= float64(s.Requests)
		}
		if first {
			continue
		}
		pm := in.Parts[p]
		if pm.Online > 0 {
			s.IdleFraction = max(0, 1-pm.Busy.Seconds()/pm.Online.Seconds())
		}
		busy += pm.Busy
		online += pm.Online
	}
	if ended > 0 {
		rec.BadRate = float64(bad) / float64(ended)
	}
	if online > 0 {
		rec.IdleFraction = max(0, 1-busy.Seconds()/online.Seconds())
	}

	// Re-partition, unless a move is still in progress.
	moving := 0
	for m := range in.Models {
		if d.Assignment[m] != d.Serving[m] {
			moving++
		}
	}
	if moving > 0 {
		rec.Skipped = fmt.Sprintf("%d model moves still loading", moving)
	} else if err := c.repartition(ctx, in, d, first); err != nil {
		return nil, err
	}

	// Size each part on its new composition, then apply the advice.
	want := make([]int, parts)
	total := 0
	for p := range parts {
		// A model moving out keeps loading its old part until it switches:
		// the part is sized for it too, and gives those GPUs back then.
		var staying, all []serving.Demand
		for m, to := range d.Assignment {
			if to != p && d.Serving[m] != p {
				continue
			}
			dm := serving.Demand{Model: in.Models[m].Model, Rate: d.Rates[m]}
			all = append(all, dm)
			if to == p {
				staying = append(staying, dm)
			}
		}
		ps, err := partition.SizePart(all, cfg.Network, cfg.Headroom)
		if err != nil {
			return nil, err
		}
		if len(staying) < len(all) {
			after, err := partition.SizePart(staying, cfg.Network, cfg.Headroom)
			if err != nil {
				return nil, err
			}
			d.Leaving[p] = ps.GPUs - after.GPUs
			ps.Need = after.Need
		}
		rec.Need += ps.Need
		want[p] = max(1, ps.GPUs) // every part keeps a GPU for its models
		if !first {
			adv := cfg.Autoscale.Advise(d.Signals[p])
			d.Advice[p] = adv
			n := partGPUs[p]
			switch adv.Action {
			case scheduler.ScaleAdd:
				rec.AdviceGPUs += adv.GPUs
				n += adv.GPUs
			case scheduler.ScaleRemove:
				rec.AdviceGPUs -= adv.GPUs
				n -= adv.GPUs
			}
			want[p] = max(want[p], n)
		}
		total += want[p]
	}
	rec.Want = total
	if total > len(in.GPUs) {
		rec.CapacityLimited = true
		want = ShareCapacity(want, len(in.GPUs))
	}
	c.resize(in, d, want, partGPUs)
	d.PartGPUs = want
	rec.PartGPUs = slices.Clone(want)
	for _, n := range want {
		rec.GPUs += n
	}
	return d, nil
}

// check validates the input against the configuration and reports whether
// it is the first epoch.
func (c *Controller) check(in *Input) (first bool, err error) {
	parts := c.cfg.Parts
	if len(in.Models) == 0 {
		return false, errors.New("epoch: no models")
	}
	unassigned := 0
	for m := range in.Models {
		md := &in.Models[m]
		if md.Assigned == Unassigned && md.Serving == Unassigned {
			unassigned++
			continue
		}
		if md.Assigned < 0 || md.Assigned >= parts || md.Serving < 0 || md.Serving >= parts {
			return false, fmt.Errorf("epoch: model %q: assigned to part %d, served by part %d, not both in 0..%d", md.Name, md.Assigned, md.Serving, parts-1)
		}
	}
	first = unassigned == len(in.Models)
	switch {
	case unassigned > 0 && !first:
		return false, fmt.Errorf("epoch: %d of %d models unassigned: models join only with the first epoch", unassigned, len(in.Models))
	case !first && len(in.Parts) != parts:
		return false, fmt.Errorf("epoch: %d part measurements for %d parts", len(in.Parts), parts)
	case !first && in.Window <= 0:
		return false, fmt.Errorf("epoch: measurement window %v", in.Window)
	}
	for g, gpu := range in.GPUs {
		if gpu.Part < -1 || gpu.Part >= parts {
			return false, fmt.Errorf("epoch: GPU %d in part %d, not in -1..%d", g, gpu.Part, parts-1)
		}
	}
	return first, nil
}

// repartition runs the partitioning engine on the forecast rates and plans
// the moves it decides.
func (c *Controller) repartition(ctx context.Context, in *Input, d *Decision, first bool) error {
	cfg := &c.cfg
	rec := &d.Record
	prob := &partition.Problem{
		Parts: cfg.Parts, MaxRatePerPart: cfg.MaxRatePerPart, GPUMemory: cfg.GPUMemory,
		MaxDisruption: cfg.MaxDisruption,
	}
	for m := range in.Models {
		md := &in.Models[m]
		prob.Models = append(prob.Models, partition.Model{Name: md.Name, Rate: d.Rates[m], StaticMemory: md.StaticMemory, DynamicMemory: md.DynamicMemory})
	}
	var current *partition.Evaluation
	if !first {
		prob.Current = slices.Clone(d.Assignment)
		ev, err := prob.Evaluate(prob.Current)
		if err != nil {
			return err
		}
		current = ev
		if ev.Feasible() && ev.Imbalance.Rate <= cfg.RebalanceAbove {
			rec.Skipped = fmt.Sprintf("rate imbalance %.3f within %.3f", ev.Imbalance.Rate, cfg.RebalanceAbove)
			rec.RateImbalance, rec.MemoryImbalance = ev.Imbalance.Rate, ev.Imbalance.Memory
			return nil
		}
	}
	res, err := c.engine.Solve(ctx, prob)
	if err != nil {
		return fmt.Errorf("re-partitioning at %v: %w", in.Now, err)
	}
	rec.Engine = res.Engine
	if current != nil && current.Feasible() && res.Objective > (1-MinRebalanceGain)*current.Objective {
		rec.Skipped = fmt.Sprintf("best assignment gains %.1f%% of the objective, under %.0f%%", 100*(1-res.Objective/current.Objective), 100*MinRebalanceGain)
		rec.RateImbalance, rec.MemoryImbalance = current.Imbalance.Rate, current.Imbalance.Memory
		return nil
	}
	rec.RateImbalance, rec.MemoryImbalance = res.Imbalance.Rate, res.Imbalance.Memory
	rec.Disruption = res.Disruption
	if first {
		copy(d.Assignment, res.Assignment)
		copy(d.Serving, res.Assignment)
		return nil
	}
	incoming := make([]int, cfg.Parts)
	for m, to := range res.Assignment {
		if to != d.Assignment[m] {
			rec.Moves++
			incoming[to]++
		}
	}
	old := slices.Clone(d.Assignment)
	copy(d.Assignment, res.Assignment)
	// Make before break: each destination part's GPUs load the incoming
	// models a wave at a time; the models switch when all are loaded.
	for p, n := range incoming {
		if n == 0 {
			continue
		}
		var gpus []scheduler.GPUID
		for g, gpu := range in.GPUs {
			if gpu.Part == p {
				gpus = append(gpus, scheduler.GPUID(g))
			}
		}
		// A wave takes half of the part's headroom out of service.
		wave := max(1, int(float64(len(gpus))*cfg.Headroom/(1+cfg.Headroom)/2))
		step := time.Duration(n) * cfg.ModelLoadTime
		for k, g := range gpus {
			d.Loads = append(d.Loads, Load{GPU: g, Part: p, At: in.Now.Add(time.Duration(k/wave) * step), Models: n})
		}
		for m, to := range d.Assignment {
			if to == p && old[m] != p {
				mv := Move{Model: m, From: old[m], To: p, Bytes: 2 * partition.MoveCost(prob.Models[m]), Now: len(gpus) == 0}
				d.Moves = append(d.Moves, mv)
				if mv.Now { // nothing to load on yet: GPUs joining will
					d.Serving[m] = p
				}
			}
		}
	}
	return nil
}

// resize decides the GPUs that leave and join each part to reach want.
// Parts shrink first, giving up their least busy GPUs; growing parts then
// take free GPUs by ID, each loading the part's models.
func (c *Controller) resize(in *Input, d *Decision, want, have []int) {
	gpus := slices.Clone(in.GPUs)
	for p := range want {
		if have[p] > want[p] {
			for _, g := range LeastBusy(gpus, p, have[p]-want[p]) {
				d.Release = append(d.Release, g)
				gpus[g].Part = -1
			}
		}
	}
	models := make([]int, c.cfg.Parts) // each part's models to load
	for m, p := range d.Assignment {
		models[p]++
		if from := d.Serving[m]; from != p {
			models[from]++ // still served there until it switches
		}
	}
	g := 0
	for p := range want {
		for n := have[p]; n < want[p]; n++ {
			for gpus[g].Part >= 0 {
				g++
			}
			gpus[g].Part = p
			d.Join = append(d.Join, Join{GPU: scheduler.GPUID(g), Part: p, Models: models[p]})
		}
	}
}

// LeastBusy returns k of part p's GPUs to release: the least busy ones
// (earliest last batch end), by ID among equals, in that order. The caller
// releasing GPUs between epochs (a move's source part giving back its
// Leaving GPUs) uses it too.
func LeastBusy(gpus []GPU, p, k int) []scheduler.GPUID {
	if k <= 0 {
		return nil
	}
	var ids []scheduler.GPUID
	for g, gpu := range gpus {
		if gpu.Part == p {
			ids = append(ids, scheduler.GPUID(g))
		}
	}
	slices.SortStableFunc(ids, func(a, b scheduler.GPUID) int {
		switch la, lb := gpus[a].LastFinish, gpus[b].LastFinish; {
		case la < lb:
			return -1
		case la > lb:
			return 1
		}
		return int(a) - int(b)
	})
	return ids[:min(k, len(ids))]
}

// ShareCapacity scales the parts' wants down to the capacity in proportion,
// by largest remainder, keeping one GPU per part while the capacity has
// one for each.
func ShareCapacity(want []int, capacity int) []int {
	if capacity < len(want) {
		// Not a GPU for every part: one each for the parts that want
		// most, none for the rest (no GPU at all while the cluster's
		// backends re-register, say).
		out := make([]int, len(want))
		order := make([]int, len(want))
		for p := range order {
			order[p] = p
		}
		slices.SortStableFunc(order, func(a, b int) int { return want[b] - want[a] })
		for _, p := range order[:max(0, capacity)] {
			out[p] = 1
		}
		return out
	}
	total := 0
	for _, w := range want {
		total += w
	}
	out := make([]int, len(want))
	type rem struct {
		p int
		r float64
	}
	var rems []rem
	left := capacity
	for p, w := range want {
		x := float64(w) * float64(capacity) / float64(total)
		out[p] = max(1, int(math.Floor(x)))
		left -= out[p]
		rems = append(rems, rem{p, x - math.Floor(x)})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		switch {
		case a.r > b.r:
			return -1
		case a.r < b.r:
			return 1
		}
		return 0
	})
	for i := 0; left > 0; i = (i + 1) % len(rems) {
		out[rems[i].p]++
		left--
	}
	for p := 0; left < 0; p = (p + 1) % len(out) { // the floor of 1 overshot
		if out[p] > 1 {
			out[p]--
			left++
		}
	}
	return out
}
