package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/epoch"
	"github.com/symphony-serving/symphony/scheduler"
)

// epochJob is the epoch job of §4.7 and §4.4 inside a simulation. Every
// interval it measures each model's rate and each part's signals (bad rate,
// GPU idle fraction), re-partitions the models within the disruption
// budget, sizes each part (Eqs. 2-3 plus headroom), combines the sizing with
// the autoscaler's advice, and moves GPUs between the free pool and the
// parts. The decisions are the controller core's (partition/epoch); the job
// measures, builds the core's input, and carries the decision out on
// virtual time: GPU loads, model switches, GPUs joining and leaving.
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
	e   *symphonyEngine
	w   *workload.Workload
	cfg workload.Epoch
	ctl *epoch.Controller // decides each epoch

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
	ctl, err := epoch.New(w.EpochConfig())
	if err != nil {
		return nil, fmt.Errorf("sim: epoch: %w", err)
	}
	parts, models, gpus := w.Epoch.Parts, len(w.Models), w.Cluster.GPUs
	j := &epochJob{
		e: e, w: w, cfg: *w.Epoch, ctl: ctl,
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

// epoch is one run of the job at now: the controller core decides on what
// the job measured, and the job carries the decision out.
func (j *epochJob) epoch(now scheduler.Time) error {
	in := &epoch.Input{Now: now, Window: j.cfg.Interval, Models: make([]epoch.Model, len(j.w.Models)), GPUs: j.gpus()}
	for m := range j.w.Models {
		md := &j.w.Models[m]
		em := &in.Models[m]
		em.Model = md.Serving()
		if !j.started {
			em.DeclaredRate = md.RateAt(0)
			em.Assigned, em.Serving = epoch.Unassigned, epoch.Unassigned
			continue
		}
		em.Arrivals = [2]uint64{j.arrivals[0][m], j.arrivals[1][m]}
		em.Good, em.Bad = j.good[m], j.bad[m]
		em.Assigned, em.Serving = j.target[m], j.e.partOf[m]
	}
	if j.started {
		in.Parts = make([]epoch.Part, j.cfg.Parts)
		for p := range in.Parts {
			in.Parts[p] = epoch.Part{Busy: j.busy[p], Online: j.online[p]}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), epochSolveLimit)
	d, err := j.ctl.Decide(ctx, in)
	cancel()
	if err != nil {
		return err
	}
	j.apply(now, d)

	// A new epoch of measurements.
	for m := range j.good {
		j.arrivals[0][m], j.arrivals[1][m], j.good[m], j.bad[m] = 0, 0, 0, 0
	}
	j.epochStart = now
	for p := range j.busy {
		j.busy[p], j.online[p] = 0, 0
	}
	j.started = true
	j.records = append(j.records, report.EpochRecordOf(&d.Record, d.Record.Start.Seconds()))
	return nil
}

// apply carries out a decision: the moves' loads (make before break), then
// the GPUs leaving and joining the parts.
func (j *epochJob) apply(now scheduler.Time, d *epoch.Decision) {
	copy(j.target, d.Assignment)
	if d.Preloaded {
		copy(j.e.partOf, d.Assignment)
	}
	for p := range j.cfg.Parts {
		n := 0
		for _, mv := range d.Moves {
			if mv.To == p {
				n++
			}
		}
		if n == 0 {
			continue
		}
		loads := 0
		for _, l := range d.Loads {
			if l.Part == p {
				j.pendingLoads[p]++
				loads++
				j.schedule(epochEvent{at: l.At, kind: evLoadStart, gpu: l.GPU, gen: j.gpuGen[l.GPU], part: p, n: l.Models, move: true})
			}
		}
		for _, mv := range d.Moves {
			if mv.To == p {
				j.moving++
				j.leaving[mv.From]++
			}
		}
		if loads == 0 { // nothing to load on yet: GPUs joining will
			j.pendingLoads[p]++
			j.loadDone(now, p)
		}
	}
	for p, n := range d.Leaving {
		if j.leaving[p] > 0 {
			j.leavingGPUs[p] = n
		}
	}
	for _, g := range d.Release {
		j.releaseGPU(now, g)
	}
	for _, jn := range d.Join {
		g := jn.GPU
		j.gpuPart[g] = jn.Part
		j.inUse++
		if d.Preloaded {
			j.e.ranks[jn.Part].EnableGPU(g, scheduler.Past)
			j.onlineGPUs[jn.Part]++
			continue
		}
		j.gpuLoadUntil[g] = scheduler.Past
		j.onlineGPUs[jn.Part]++ // startLoad takes it out again
		j.startLoad(now, g, jn.Part, jn.Models, false)
	}
}

// epochSolveLimit bounds one re-partitioning in wall time. The heuristic
// answers tens of models in microseconds, so runs with it stay
// reproducible; milp and random search use the limit and depend on the
// machine (their records say so).
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

// gpus is the cluster's GPUs as the controller core sees them.
func (j *epochJob) gpus() []epoch.GPU {
	out := make([]epoch.GPU, len(j.gpuPart))
	for g, p := range j.gpuPart {
		out[g] = epoch.GPU{Part: p, LastFinish: j.e.acct.gpuLastFinish[g]}
	}
	return out
}

// release returns k of part p's GPUs to the free pool, the least busy
// first (epoch.LeastBusy).
func (j *epochJob) release(now scheduler.Time, p, k int) {
	for _, g := range epoch.LeastBusy(j.gpus(), p, k) {
		j.releaseGPU(now, g)
	}
}

// releaseGPU returns GPU g of its part to the free pool.
func (j *epochJob) releaseGPU(now scheduler.Time, g scheduler.GPUID) {
	p := j.gpuPart[g]
	j.e.ranks[p].DisableGPU(g)
	if j.gpuLoadUntil[g] <= now {
		j.onlineGPUs[p]--
	}
	j.gpuPart[g] = -1
	j.gpuGen[g]++
	j.inUse--
}
