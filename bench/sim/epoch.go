package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// epochJob is the epoch job of §4.7 and §4.4 inside a simulation. Every
// interval it measures each model's rate and each part's signals (bad rate,
// GPU idle fraction), re-partitions the models within the disruption
// budget, sizes each part (Eqs. 2-3 plus headroom), combines the sizing with
// the autoscaler's advice, and moves GPUs between the free pool and the
// parts.
//
// Loading is modelled as the paper describes it: a loading GPU runs no
// batches. A GPU that joins a part loads all of the part's models. A model
// that moves is loaded make-before-break: the destination part's GPUs load
// it a few at a time (as many as its headroom spares) while the source part
// keeps serving it, and the model switches rank loops once every load is
// done; unloading it from the source is then instant. While a move is in
// progress the job re-sizes but does not re-partition.
//
// The first epoch, at time 0, is planned on the workload's declared rates
// and starts loaded: the run begins from a cluster already sized for them.
type epochJob struct {
	e        *symphonyEngine
	w        *workload.Workload
	cfg      workload.Epoch
	engine   partition.Engine
	scale    scheduler.AutoscaleConfig
	capacity int

	gpuPart      []int            // each GPU's part, -1 in the free pool
	gpuLoadUntil []scheduler.Time // end of the GPU's current load
	gpuGen       []uint64         // bumped when a GPU leaves a part

	events    []epochEvent // timed actions, by (at, seq)
	seq       uint64
	nextEpoch scheduler.Time
	end       scheduler.Time // the end of the run
	started   bool

	// target[i] is model i's part after the last re-partitioning; it
	// differs from e.partOf[i] while the model's move is in progress.
	target       []int
	pendingLoads []int // per part: move loads not yet done
	moving       int   // models whose move is in progress
	leaving      []int // per part: models moving out, not yet switched
	leavingGPUs  []int // per part: GPUs sized for them, released once they leave

	// Measurements over the current epoch.
	arrivals   [2][]uint64 // per model, in each half of the epoch
	epochStart scheduler.Time
	good, bad  []uint64 // per model: requests that ended
	busy       []time.Duration
	online     []time.Duration // per part: GPU time able to run batches
	onlineGPUs []int           // per part, now
	inUse      int
	lastT      scheduler.Time

	records []report.EpochRecord
}

type epochEventKind uint8

const (
	evLoadStart epochEventKind = iota // a GPU of a part starts loading n models
	evLoadEnd                         // a GPU's load is done
)

type epochEvent struct {
	at   scheduler.Time
	seq  uint64
	kind epochEventKind
	gpu  scheduler.GPUID
	gen  uint64 // the GPU's generation when scheduled; stale if it changed
	part int
	n    int  // models to load
	move bool // part of a model move (counts in pendingLoads)
}

func newEpochJob(w *workload.Workload, e *symphonyEngine) (*epochJob, error) {
	eng, err := partition.NewEngine(w.Epoch.Engine, w.Seed, "")
	if err != nil {
		return nil, fmt.Errorf("sim: epoch: %w", err)
	}
	parts, models, gpus := w.Epoch.Parts, len(w.Models), w.Cluster.GPUs
	j := &epochJob{
		e: e, w: w, cfg: *w.Epoch, engine: eng, scale: epochAutoscale(w.Epoch.Headroom), capacity: gpus,
		gpuPart: make([]int, gpus), gpuLoadUntil: make([]scheduler.Time, gpus), gpuGen: make([]uint64, gpus),
		target: make([]int, models), pendingLoads: make([]int, parts),
		leaving: make([]int, parts), leavingGPUs: make([]int, parts),
		arrivals: [2][]uint64{make([]uint64, models), make([]uint64, models)}, good: make([]uint64, models), bad: make([]uint64, models),
		busy: make([]time.Duration, parts), online: make([]time.Duration, parts), onlineGPUs: make([]int, parts),
		end: scheduler.Time(w.Warmup + w.Duration),
	}
	for g := range j.gpuPart {
		j.gpuPart[g] = -1
		j.gpuLoadUntil[g] = scheduler.Past
	}
	return j, nil
}

// epochAutoscale is the autoscaling rule of an epoch job with the given
// headroom: the default, except that idle time the headroom explains (a
// fraction h/(1+h) of the GPUs, plus a 5-point margin for the
// non-work-conserving scheduler's own idling) is no reason to remove GPUs.
func epochAutoscale(headroom float64) scheduler.AutoscaleConfig {
	c := scheduler.DefaultAutoscaleConfig()
	c.RemoveAbove = max(c.RemoveAbove, headroom/(1+headroom)+0.05)
	return c
}

// wakeAt is when run must next be called.
func (j *epochJob) wakeAt() scheduler.Time {
	t := j.nextEpoch
	if len(j.events) > 0 {
		t = scheduler.MinTime(t, j.events[0].at)
	}
	return t
}

func (j *epochJob) arrived(now scheduler.Time, model int) {
	half := 0
	if now.Sub(j.epochStart) >= j.cfg.Interval/2 {
		half = 1
	}
	j.arrivals[half][model]++
}

// observe counts a ModelCore output's outcomes towards the epoch's signals,
// and checks two more oracle rules: a batch runs only on a GPU of the part
// that serves its model, and never while that GPU is loading models.
func (j *epochJob) observe(model int, out *scheduler.ModelOutput) {
	j.bad[model] += uint64(len(out.Drops))
	for i := range out.Plans {
		p := &out.Plans[i]
		if part := j.gpuPart[p.GPU]; part != j.e.partOf[model] {
			j.e.acct.fail("model %d (part %d) ran on GPU %d of part %d", model, j.e.partOf[model], p.GPU, part)
		}
		if p.ExecAt < j.gpuLoadUntil[p.GPU] {
			j.e.acct.fail("GPU %d runs a batch at %v while loading models until %v", p.GPU, p.ExecAt, j.gpuLoadUntil[p.GPU])
		}
		respond := p.FinishAt.Add(j.w.Network.Result)
		for k := range p.Requests {
			if respond <= p.Requests[k].Deadline {
				j.good[model]++
			} else {
				j.bad[model]++
			}
		}
		if part := j.gpuPart[p.GPU]; part >= 0 {
			j.busy[part] += p.FinishAt.Sub(p.ExecAt)
		}
	}
}

// advance integrates the GPU counts up to now.
func (j *epochJob) advance(now scheduler.Time) {
	if now <= j.lastT {
		return
	}
	d := now.Sub(j.lastT)
	for p, n := range j.onlineGPUs {
		j.online[p] += time.Duration(n) * d
	}
	j.e.acct.addInUse(j.lastT, now, j.inUse)
	j.lastT = now
}

func (j *epochJob) schedule(ev epochEvent) {
	j.seq++
	ev.seq = j.seq
	i, _ := slices.BinarySearchFunc(j.events, ev, func(a, b epochEvent) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return int(a.seq) - int(b.seq)
	})
	j.events = slices.Insert(j.events, i, ev)
}

// run carries out every event due at now, then the epoch if it is due.
func (j *epochJob) run(now scheduler.Time) error {
	for len(j.events) > 0 && j.events[0].at <= now {
		ev := j.events[0]
		j.events = j.events[1:]
		j.advance(ev.at)
		if ev.gen != j.gpuGen[ev.gpu] { // the GPU left the part
			if ev.move && (ev.kind == evLoadEnd || ev.kind == evLoadStart) {
				j.loadDone(ev.at, ev.part) // a load it will never do
			}
			continue
		}
		switch ev.kind {
		case evLoadStart:
			j.startLoad(ev.at, ev.gpu, ev.part, ev.n, ev.move)
		case evLoadEnd:
			if j.gpuLoadUntil[ev.gpu] == ev.at { // its last load is done
				j.onlineGPUs[ev.part]++
			}
			if ev.move {
				j.loadDone(ev.at, ev.part)
			}
		}
	}
	if j.nextEpoch <= now {
		j.advance(now)
		if err := j.epoch(now); err != nil {
			return err
		}
		j.nextEpoch = now.Add(j.cfg.Interval)
		if j.nextEpoch >= j.end {
			j.nextEpoch = scheduler.Never // the run is over by then
		}
	}
	return nil
}

// startLoad takes a GPU of part out of service while it loads n models,
// from when its current batch ends.
func (j *epochJob) startLoad(now scheduler.Time, g scheduler.GPUID, part, n int, move bool) {
	rank := j.e.ranks[part]
	from := scheduler.MaxTime(now, j.e.acct.gpuLastFinish[g])
	if j.gpuLoadUntil[g] > now {
		from = scheduler.MaxTime(from, j.gpuLoadUntil[g]) // after the load under way
	} else {
		j.onlineGPUs[part]-- // it was serving: now it is not
	}
	until := from.Add(time.Duration(n) * j.cfg.ModelLoadTime)
	rank.DisableGPU(g)
	rank.EnableGPU(g, until) // granted again only once loaded
	j.gpuLoadUntil[g] = until
	j.schedule(epochEvent{at: until, kind: evLoadEnd, gpu: g, gen: j.gpuGen[g], part: part, move: move})
}

// loadDone counts one finished move load of part; when the last is done,
// every model moving into the part switches rank loops.
func (j *epochJob) loadDone(now scheduler.Time, part int) {
	j.pendingLoads[part]--
	if j.pendingLoads[part] > 0 {
		return
	}
	for m, to := range j.target {
		from := j.e.partOf[m]
		if to != part || from == part {
			continue
		}
		j.e.ranks[from].DetachModel(scheduler.ModelID(m))
		j.e.partOf[m] = part
		j.moving--
		if c := j.e.models[m].Candidate(); c.Valid() {
			j.e.ranks[part].Update(scheduler.ModelID(m), c)
		}
		// The source part kept GPUs for its departing models until now.
		j.leaving[from]--
		if j.leaving[from] == 0 && j.leavingGPUs[from] > 0 {
			j.release(now, from, min(j.leavingGPUs[from], j.partCounts()[from]-1))
			j.leavingGPUs[from] = 0
		}
	}
}

// epoch is one run of the job at now.
func (j *epochJob) epoch(now scheduler.Time) error {
	parts := j.cfg.Parts
	rec := report.EpochRecord{Start: time.Duration(now).Seconds()}
	// Measure: each model's rate, each part's signals.
	first := !j.started
	rates := make([]float64, len(j.w.Models))
	signals := make([]scheduler.Signals, parts)
	var ended, bad uint64
	var busy, online time.Duration
	half := (j.cfg.Interval / 2).Seconds()
	for m := range j.w.Models {
		if first {
			rates[m] = j.w.Models[m].RateAt(0)
			continue
		}
		rates[m] = forecast(float64(j.arrivals[0][m])/half, float64(j.arrivals[1][m])/half)
		p := j.e.partOf[m]
		signals[p].Requests += j.good[m] + j.bad[m]
		signals[p].BadRate += float64(j.bad[m]) // a count until divided below
		ended += j.good[m] + j.bad[m]
		bad += j.bad[m]
	}
	partGPUs := j.partCounts()
	rec.GPUsBefore = j.inUse
	for p := range signals {
		s := &signals[p]
		s.GPUs = partGPUs[p]
		if s.Requests > 0 {
			s.BadRate /= float64(s.Requests)
		}
		if j.online[p] > 0 {
			s.IdleFraction = max(0, 1-j.busy[p].Seconds()/j.online[p].Seconds())
		}
		busy += j.busy[p]
		online += j.online[p]
	}
	if ended > 0 {
		rec.BadRate = float64(bad) / float64(ended)
	}
	if online > 0 {
		rec.IdleFraction = max(0, 1-busy.Seconds()/online.Seconds())
	}

	// Re-partition, unless a move is still in progress.
	if j.moving > 0 {
		rec.Skipped = fmt.Sprintf("%d model moves still loading", j.moving)
	} else if err := j.repartition(now, rates, first, &rec); err != nil {
		return err
	}

	// Size each part on its new composition, then apply the advice.
	want := make([]int, parts)
	total := 0
	for p := 0; p < parts; p++ {
		// A model moving out keeps loading its old part until it switches:
		// the part is sized for it too, and gives those GPUs back then.
		var staying, all []serving.Demand
		for m, to := range j.target {
			if to != p && j.e.partOf[m] != p {
				continue
			}
			md := &j.w.Models[m]
			d := serving.Demand{Model: md.Serving(), Rate: rates[m]}
			all = append(all, d)
			if to == p {
				staying = append(staying, d)
			}
		}
		ps, err := partition.SizePart(all, j.w.Network, j.cfg.Headroom)
		if err != nil {
			return err
		}
		if len(staying) < len(all) {
			after, err := partition.SizePart(staying, j.w.Network, j.cfg.Headroom)
			if err != nil {
				return err
			}
			j.leavingGPUs[p] = ps.GPUs - after.GPUs
			ps.Need = after.Need
		}
		rec.Need += ps.Need
		want[p] = max(1, ps.GPUs) // every part keeps a GPU for its models
		if !first {
			adv := j.scale.Advise(signals[p])
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
	if total > j.capacity {
		rec.CapacityLimited = true
		want = shareCapacity(want, j.capacity)
	}
	j.resize(now, want, first)
	rec.PartGPUs = j.partCounts()
	rec.GPUs = j.inUse

	// A new epoch of measurements.
	for m := range j.good {
		j.arrivals[0][m], j.arrivals[1][m], j.good[m], j.bad[m] = 0, 0, 0, 0
	}
	j.epochStart = now
	for p := range j.busy {
		j.busy[p], j.online[p] = 0, 0
	}
	j.started = true
	j.records = append(j.records, rec)
	return nil
}

// repartition runs the partitioning engine on the measured rates and
// starts the moves it decides.
func (j *epochJob) repartition(now scheduler.Time, rates []float64, first bool, rec *report.EpochRecord) error {
	prob := &partition.Problem{
		Parts: j.cfg.Parts, MaxRatePerPart: j.cfg.MaxRatePerPart, GPUMemory: j.cfg.GPUMemory,
		MaxDisruption: j.cfg.MaxDisruption,
	}
	for m := range j.w.Models {
		md := &j.w.Models[m]
		prob.Models = append(prob.Models, partition.Model{Name: md.Name, Rate: rates[m], StaticMemory: md.StaticMemory, DynamicMemory: md.DynamicMemory})
	}
	var current *partition.Evaluation
	if !first {
		prob.Current = slices.Clone(j.target)
		ev, err := prob.Evaluate(prob.Current)
		if err != nil {
			return err
		}
		current = ev
		if ev.Feasible() && ev.Imbalance.Rate <= j.cfg.RebalanceAbove {
			rec.Skipped = fmt.Sprintf("rate imbalance %.3f within %.3f", ev.Imbalance.Rate, j.cfg.RebalanceAbove)
			rec.RateImbalance, rec.MemoryImbalance = ev.Imbalance.Rate, ev.Imbalance.Memory
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), epochSolveLimit)
	defer cancel()
	res, err := j.engine.Solve(ctx, prob)
	if err != nil {
		return fmt.Errorf("re-partitioning at %v: %w", now, err)
	}
	rec.Engine = res.Engine
	if current != nil && current.Feasible() && res.Objective > (1-minRebalanceGain)*current.Objective {
		rec.Skipped = fmt.Sprintf("best assignment gains %.1f%% of the objective, under %.0f%%", 100*(1-res.Objective/current.Objective), 100*minRebalanceGain)
		rec.RateImbalance, rec.MemoryImbalance = current.Imbalance.Rate, current.Imbalance.Memory
		return nil
	}
	rec.RateImbalance, rec.MemoryImbalance = res.Imbalance.Rate, res.Imbalance.Memory
	rec.Disruption = res.Disruption
	if first {
		copy(j.target, res.Assignment)
		copy(j.e.partOf, res.Assignment)
		return nil
	}
	incoming := make([]int, j.cfg.Parts)
	for m, to := range res.Assignment {
		if to != j.target[m] {
			rec.Moves++
			incoming[to]++
		}
	}
	copy(j.target, res.Assignment)
	// Make before break: each destination part's GPUs load the incoming
	// models a wave at a time; the models switch when all are loaded.
	for p, n := range incoming {
		if n == 0 {
			continue
		}
		var gpus []scheduler.GPUID
		for g, gp := range j.gpuPart {
			if gp == p {
				gpus = append(gpus, scheduler.GPUID(g))
			}
		}
		// A wave takes half of the part's headroom out of service.
		wave := max(1, int(float64(len(gpus))*j.cfg.Headroom/(1+j.cfg.Headroom)/2))
		step := time.Duration(n) * j.cfg.ModelLoadTime
		for k, g := range gpus {
			j.pendingLoads[p]++
			j.schedule(epochEvent{at: now.Add(time.Duration(k/wave) * step), kind: evLoadStart, gpu: g, gen: j.gpuGen[g], part: p, n: n, move: true})
		}
		for m, to := range j.target {
			if to == p && j.e.partOf[m] != p {
				j.moving++
				j.leaving[j.e.partOf[m]]++
			}
		}
		if len(gpus) == 0 { // nothing to load on yet: GPUs joining will
			j.pendingLoads[p]++
			j.loadDone(now, p)
		}
	}
	return nil
}

// forecast is the rate to size the next epoch for, from the rates of the
// two halves of the epoch that ended: while the load rises, its trend
// carried to the end of the next epoch (the second half's midpoint is 2.5
// half-epochs before then), so that the parts do not lag a rising load by
// a whole epoch, but at most 1.5x the latest rate, so that a step (a load
// that jumped and then held) is not mistaken for a steep trend; while it
// falls, the latest rate, so that the parts shrink no faster than the load.
func forecast(first, second float64) float64 {
	return max(second, min(second+2.5*(second-first), 1.5*second))
}

// minRebalanceGain is the least relative improvement of the partitioning
// objective worth moving models for; below it, rates that merely wobble
// would swap similar models back and forth every epoch.
const minRebalanceGain = 0.1

// epochSolveLimit bounds one re-partitioning in wall time. The heuristic
// answers tens of models in microseconds, so runs with it stay
// reproducible; milp and random search use the limit and depend on the
// machine.
const epochSolveLimit = 10 * time.Second

// partCounts returns each part's GPUs.
func (j *epochJob) partCounts() []int {
	n := make([]int, j.cfg.Parts)
	for _, p := range j.gpuPart {
		if p >= 0 {
			n[p]++
		}
	}
	return n
}

// shareCapacity scales the parts' wants down to the capacity in proportion,
// by largest remainder, keeping one GPU per part.
func shareCapacity(want []int, capacity int) []int {
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

// release returns k of part p's GPUs to the free pool: the least busy ones
// (earliest last batch end), by ID among equals.
func (j *epochJob) release(now scheduler.Time, p, k int) {
	if k <= 0 {
		return
	}
	var gpus []scheduler.GPUID
	for g, gp := range j.gpuPart {
		if gp == p {
			gpus = append(gpus, scheduler.GPUID(g))
		}
	}
	last := j.e.acct.gpuLastFinish
	slices.SortStableFunc(gpus, func(a, b scheduler.GPUID) int {
		switch {
		case last[a] < last[b]:
			return -1
		case last[a] > last[b]:
			return 1
		}
		return int(a) - int(b)
	})
	for _, g := range gpus[:k] {
		j.e.ranks[p].DisableGPU(g)
		if j.gpuLoadUntil[g] <= now {
			j.onlineGPUs[p]--
		}
		j.gpuPart[g] = -1
		j.gpuGen[g]++
		j.inUse--
	}
}

// resize moves GPUs between the free pool and the parts to reach want.
// Parts shrink first, giving up their least busy GPUs; growing parts then
// take free GPUs by ID, each loading the part's models (instantly in the
// first epoch, when the cluster starts loaded).
func (j *epochJob) resize(now scheduler.Time, want []int, first bool) {
	have := j.partCounts()
	for p := range want {
		if have[p] > want[p] {
			j.release(now, p, have[p]-want[p])
		}
	}
	models := make([]int, j.cfg.Parts) // each part's models to load
	for m, p := range j.target {
		models[p]++
		if from := j.e.partOf[m]; from != p {
			models[from]++ // still served there until it switches
		}
	}
	g := 0
	for p := range want {
		for n := have[p]; n < want[p]; n++ {
			for j.gpuPart[g] >= 0 {
				g++
			}
			j.gpuPart[g] = p
			j.inUse++
			if first {
				j.e.ranks[p].EnableGPU(scheduler.GPUID(g), scheduler.Past)
				j.onlineGPUs[p]++
				continue
			}
			j.gpuLoadUntil[g] = scheduler.Past
			j.onlineGPUs[p]++ // startLoad takes it out again
			j.startLoad(now, scheduler.GPUID(g), p, models[p], false)
		}
	}
}
