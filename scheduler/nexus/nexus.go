// Package nexus is the Nexus baseline of the Symphony paper (§2.2, §3.3):
// every epoch, models are bound to GPUs by bin-packing their load; frontends
// route each request to one of its model's GPUs by weighted round-robin,
// each frontend on its own, with no coordination; and each GPU runs its
// models' queued requests in turn, work-conserving, in batches no larger
// than the size that meets the SLO without coordination, 2ℓ(b) <= SLO.
//
// Like the scheduler cores, Cluster is a deterministic state machine: time
// is an argument and decisions come back as data.
package nexus

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/idheap"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// Config configures a Nexus cluster.
type Config struct {
	Models []serving.Demand
	GPUs   int
	Delays scheduler.Delays
	// Frontends is how many frontends route requests independently; more
	// frontends amplify burstiness at the GPUs (Table 2). 0 means 1.
	Frontends int
	// Seed picks each request's frontend.
	Seed uint64
}

// transfer is the time model m's input takes to reach its GPU.
func (c Config) transfer(m int) time.Duration {
	return c.Delays.ForInput(c.Models[m].InputBytes).Dispatch(1)
}

// Share is one model's slice of one GPU.
type Share struct {
	Model int
	// Fraction of the GPU's time the model's load needs; 0 on a spare GPU,
	// one the packing left empty and Allocate gave the model for bursts.
	Fraction float64
}

// Allocation is an epoch's binding of models to GPUs.
type Allocation struct {
	// GPUs[g] lists the models GPU g hosts.
	GPUs [][]Share
	// Batch[m] is model m's batch size limit: the largest b with 2ℓ(b) plus
	// network delays within the SLO.
	Batch []int
}

// Allocate bin-packs the models onto the GPUs (Nexus's squishy bin packing,
// simplified): each model needs rate/throughput(b) GPUs at its batch size b;
// whole GPUs are dedicated, and the fractional remainders are packed
// first-fit-decreasing onto shared GPUs whose round-robin duty cycle still
// meets every hosted model's SLO. The needs are scaled up as far as the
// packing still fits the cluster, so spare GPUs become spare capacity; and
// a GPU that no scale fills (when the residuals cannot share GPUs, each
// takes a whole one, and the next scale up needs a GPU per model more than
// there are) goes to a model as a spare (spread).
func Allocate(cfg Config) Allocation {
	batch, need, total := needs(cfg)
	// Binary search for the largest scale that packs without overcommit.
	lo, hi := 0.0, float64(cfg.GPUs)/total
	if a, ok := pack(cfg, batch, need, hi, false); ok {
		return spread(a, need)
	}
	best, ok := pack(cfg, batch, need, lo, false)
	if !ok {
		// Not even the models alone fit without overcommit (more models
		// than GPUs, or SLOs too tight to share): overcommit at full scale,
		// so that load still decides where models go.
		a, _ := pack(cfg, batch, need, hi, true)
		return spread(a, need)
	}
	for i := 0; i < 30; i++ {
		mid := (lo + hi) / 2
		if a, ok := pack(cfg, batch, need, mid, false); ok {
			best, lo = a, mid
		} else {
			hi = mid
		}
	}
	return spread(best, need)
}

// spread gives each GPU that hosts nothing in a to the model with the
// most load for the capacity it has (need over Capacity summed over its
// GPUs; the first model on a tie), as a spare share of Fraction 0, which
// adds a whole GPU to that model's capacity. Packing leaves GPUs empty
// where residuals cannot share one: 20 like models on 32 GPUs whose
// batches are too long for two to share a GPU take a GPU each at the best
// scale, since any larger scale gives every model a residual that needs a
// GPU of its own, 40 in all; the other 12 would sit idle while the models'
// queues overflow on a burst.
func spread(a Allocation, need []float64) Allocation {
	var capacity []float64
	for g := range a.GPUs {
		if len(a.GPUs[g]) > 0 {
			continue
		}
		if capacity == nil {
			capacity = make([]float64, len(need))
			for h := range a.GPUs {
				for i, s := range a.GPUs[h] {
					capacity[s.Model] += a.Capacity(h, i)
				}
			}
		}
		best := 0
		for m := range need {
			// need[m]/capacity[m] > need[best]/capacity[best], without
			// dividing: a model with need and no capacity comes first.
			if need[m]*capacity[best] > need[best]*capacity[m] {
				best = m
			}
		}
		a.GPUs[g] = append(a.GPUs[g], Share{Model: best})
		capacity[best]++
	}
	return a
}

// Capacity is the share of GPU g's time that its i-th hosted model can
// use: the model's Fraction plus an even split of the time no hosted
// model's load needs (none when the GPU is overcommitted). A GPU that
// hosts one model is all its capacity, however little of it the model's
// load needs. Frontends weight their routes by it, so that a model's load,
// and its bursts, spread over its GPUs by what each can take, not by the
// load the packing happened to leave on each: a model on one whole GPU
// and a residual 0.1 of another, alone there, sends half its requests to
// each, not one in eleven to the second.
func (a Allocation) Capacity(g, i int) float64 {
	shares := a.GPUs[g]
	var load float64
	for _, s := range shares {
		load += s.Fraction
	}
	c := shares[i].Fraction
	if load < 1 {
		c += (1 - load) / float64(len(shares))
	}
	return c
}

// needs returns each model's batch limit and the GPUs its load needs at
// that batch size, with their total; with no load at all every model needs
// the same.
func needs(cfg Config) (batch []int, need []float64, total float64) {
	n := len(cfg.Models)
	batch = make([]int, n)
	need = make([]float64, n)
	for m, spec := range cfg.Models {
		budget := spec.SLO - cfg.Delays.Result - cfg.transfer(m)
		b := spec.Profile.LargestBatchWithin(budget / 2)
		if b < 1 {
			b = 1
		}
		batch[m] = b
		need[m] = spec.Rate / spec.Profile.Throughput(b)
		total += need[m]
	}
	if total <= 0 {
		for m := range need {
			need[m] = 1
		}
		total = float64(n)
	}
	return batch, need, total
}

// pack places every model's scaled need; with overcommit it never fails,
// putting what fits nowhere on the least-loaded GPU.
func pack(cfg Config, batch []int, need []float64, scale float64, overcommit bool) (Allocation, bool) {
	a := Allocation{GPUs: make([][]Share, cfg.GPUs), Batch: batch}
	load := make([]float64, cfg.GPUs)
	next := 0 // next unused GPU
	type residual struct {
		model int
		frac  float64
	}
	var rest []residual
	for m := range cfg.Models {
		share := need[m] * scale
		for share >= 1 {
			if next == cfg.GPUs {
				if !overcommit {
					return a, false
				}
				break
			}
			a.GPUs[next] = append(a.GPUs[next], Share{Model: m, Fraction: 1})
			load[next] = 1
			next++
			share--
		}
		if share > 1e-9 || len(routesOf(a, m)) == 0 {
			rest = append(rest, residual{m, share})
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].frac > rest[j].frac })
	// fits reports whether model m can join GPU g: the GPU's load stays
	// within one, and its duty cycle (one batch of every hosted model, run
	// in turn) plus each hosted model's own batch still meets that model's
	// SLO, as in Nexus's squishy bin packing.
	fits := func(g, m int, frac float64) bool {
		if load[g]+frac > 1+1e-9 {
			return false
		}
		cycle := cfg.Models[m].Profile.Latency(a.Batch[m])
		for _, s := range a.GPUs[g] {
			cycle += cfg.Models[s.Model].Profile.Latency(a.Batch[s.Model])
		}
		budget := func(i int) time.Duration {
			return cfg.Models[i].SLO - cfg.Delays.Result - cfg.transfer(i)
		}
		if cycle+cfg.Models[m].Profile.Latency(a.Batch[m]) > budget(m) {
			return false
		}
		for _, s := range a.GPUs[g] {
			if cycle+cfg.Models[s.Model].Profile.Latency(a.Batch[s.Model]) > budget(s.Model) {
				return false
			}
		}
		return true
	}
	shared := next
	for _, r := range rest {
		placed := false
		for g := shared; g < cfg.GPUs && !placed; g++ {
			if len(a.GPUs[g]) == 0 || fits(g, r.model, r.frac) {
				a.GPUs[g] = append(a.GPUs[g], Share{Model: r.model, Fraction: r.frac})
				load[g] += r.frac
				placed = true
			}
		}
		if !placed && !overcommit {
			return a, false
		}
		if !placed {
			// Out of GPUs: overcommit the least-loaded GPU (preferring
			// one hosting only this model) rather than leave the model
			// without a home.
			best := -1
			for g := 0; g < cfg.GPUs; g++ {
				alone := len(a.GPUs[g]) == 1 && a.GPUs[g][0].Model == r.model
				if best < 0 || alone || load[g] < load[best] {
					best = g
					if alone {
						break
					}
				}
			}
			if len(a.GPUs[best]) == 1 && a.GPUs[best][0].Model == r.model {
				a.GPUs[best][0].Fraction += r.frac
			} else {
				a.GPUs[best] = append(a.GPUs[best], Share{Model: r.model, Fraction: r.frac})
			}
			load[best] += r.frac
		}
	}
	return a, true
}

func routesOf(a Allocation, m int) []int {
	var gs []int
	for g, shares := range a.GPUs {
		for _, s := range shares {
			if s.Model == m {
				gs = append(gs, g)
			}
		}
	}
	return gs
}

// Plan is a batch a GPU ran.
type Plan struct {
	Model int
	scheduler.BatchPlan
}

// ModelDrop is a request dropped by a GPU.
type ModelDrop struct {
	Model int
	scheduler.Drop
}

// Output is what one call decided; owned by the Cluster and valid until its
// next call.
type Output struct {
	Plans []Plan
	Drops []ModelDrop
}

type queued struct {
	req         scheduler.Request
	availableAt scheduler.Time // when the input has reached the GPU
}

type gpuQueue struct {
	model int
	reqs  []queued
	head  int
}

type gpu struct {
	queues    []gpuQueue
	rr        int // next queue in turn
	busyUntil scheduler.Time
	wakeAt    scheduler.Time
}

type route struct {
	gpu    int
	queue  int // index in that GPU's queues
	weight float64
}

// Cluster is a Nexus deployment: frontends and GPU backends.
type Cluster struct {
	cfg    Config
	alloc  Allocation
	routes [][]route // by model
	// wrr[f][m][i] is frontend f's smooth weighted round-robin credit for
	// model m's route i.
	wrr      [][][]float64
	gpus     []gpu
	wakes    *idheap.Heap[int] // GPUs with a wake-up, by wakeAt
	rng      *rand.Rand
	out      Output
	nextPlan uint64
	transfer []time.Duration // per model
}

// New plans the epoch and returns an idle cluster.
func New(cfg Config) (*Cluster, error) {
	if cfg.GPUs < 1 || len(cfg.Models) == 0 {
		return nil, fmt.Errorf("nexus: need at least one GPU and one model")
	}
	if cfg.Frontends <= 0 {
		cfg.Frontends = 1
	}
	c := &Cluster{cfg: cfg, alloc: Allocate(cfg), rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e65787573))}
	for m := range cfg.Models {
		c.transfer = append(c.transfer, cfg.transfer(m))
	}
	c.gpus = make([]gpu, cfg.GPUs)
	c.wakes = idheap.New(cfg.GPUs, func(a, b int) bool {
		ta, tb := c.gpus[a].wakeAt, c.gpus[b].wakeAt
		return ta < tb || ta == tb && a < b
	})
	c.routes = make([][]route, len(cfg.Models))
	for g, shares := range c.alloc.GPUs {
		c.gpus[g] = gpu{busyUntil: scheduler.Past, wakeAt: scheduler.Never}
		for i, s := range shares {
			c.routes[s.Model] = append(c.routes[s.Model], route{gpu: g, queue: len(c.gpus[g].queues), weight: c.alloc.Capacity(g, i)})
			c.gpus[g].queues = append(c.gpus[g].queues, gpuQueue{model: s.Model})
		}
	}
	c.wrr = make([][][]float64, cfg.Frontends)
	for f := range c.wrr {
		c.wrr[f] = make([][]float64, len(cfg.Models))
		for m := range cfg.Models {
			c.wrr[f][m] = make([]float64, len(c.routes[m]))
		}
	}
	return c, nil
}

// Allocation returns the epoch's binding of models to GPUs.
func (c *Cluster) Allocation() Allocation { return c.alloc }

// pickRoute is frontend f's smooth weighted round-robin over m's GPUs.
func (c *Cluster) pickRoute(f, m int) route {
	rs := c.routes[m]
	credit := c.wrr[f][m]
	var total float64
	best := 0
	for i, r := range rs {
		w := r.weight
		if w <= 0 {
			w = 1e-6
		}
		credit[i] += w
		total += w
		if credit[i] > credit[best] {
			best = i
		}
	}
	credit[best] -= total
	return rs[best]
}

// Arrive routes a request through a random frontend to one of its model's
// GPUs, where it becomes available after the input's transfer.
func (c *Cluster) Arrive(now scheduler.Time, model int, req scheduler.Request) *Output {
	c.out.Plans, c.out.Drops = c.out.Plans[:0], c.out.Drops[:0]
	f := 0
	if c.cfg.Frontends > 1 {
		f = c.rng.IntN(c.cfg.Frontends)
	}
	r := c.pickRoute(f, model)
	g := &c.gpus[r.gpu]
	q := &g.queues[r.queue]
	at := now.Add(c.transfer[model])
	q.reqs = append(q.reqs, queued{req: req, availableAt: at})
	if g.busyUntil <= now && at < g.wakeAt {
		c.setWake(r.gpu, at)
	}
	return &c.out
}

// WakeAt is when Tick must next be called.
func (c *Cluster) WakeAt() scheduler.Time {
	if c.wakes.Len() == 0 {
		return scheduler.Never
	}
	return c.gpus[c.wakes.Top()].wakeAt
}

// Tick lets every GPU due at now pick its next batch.
func (c *Cluster) Tick(now scheduler.Time) *Output {
	c.out.Plans, c.out.Drops = c.out.Plans[:0], c.out.Drops[:0]
	for c.wakes.Len() > 0 && c.gpus[c.wakes.Top()].wakeAt <= now {
		g := c.wakes.Top()
		c.setWake(g, c.runGPU(g, now))
	}
	return &c.out
}

// runGPU starts the next batch on GPU g, round-robin over its models, and
// returns when it next needs attention.
func (c *Cluster) runGPU(gi int, now scheduler.Time) scheduler.Time {
	g := &c.gpus[gi]
	if g.busyUntil > now {
		return g.busyUntil
	}
	next := scheduler.Never
	for i := 0; i < len(g.queues); i++ {
		qi := (g.rr + i) % len(g.queues)
		q := &g.queues[qi]
		spec := &c.cfg.Models[q.model]
		prof := spec.Profile
		// Early drop (Nexus §6.2): drop the head if a batch of the target
		// size starting with it would miss its deadline; with fewer requests
		// available than the target, the batch of those available decides.
		target := c.alloc.Batch[q.model]
		for q.head < len(q.reqs) {
			h := &q.reqs[q.head]
			start := scheduler.MaxTime(now, h.availableAt)
			size := 1
			for size < target && q.head+size < len(q.reqs) && q.reqs[q.head+size].availableAt <= start {
				size++
			}
			if start.Add(prof.Latency(size)) <= h.req.Deadline.Add(-c.cfg.Delays.Result) {
				break
			}
			c.out.Drops = append(c.out.Drops, ModelDrop{Model: q.model, Drop: scheduler.Drop{Request: h.req, Reason: scheduler.DropPruned}})
			q.head++
		}
		if q.head == len(q.reqs) {
			q.reqs, q.head = q.reqs[:0], 0
			continue
		}
		if at := q.reqs[q.head].availableAt; at > now {
			next = scheduler.MinTime(next, at)
			continue
		}
		dl := q.reqs[q.head].req.Deadline.Add(-c.cfg.Delays.Result)
		k := 1
		for k < c.alloc.Batch[q.model] && q.head+k < len(q.reqs) && q.reqs[q.head+k].availableAt <= now &&
			now.Add(prof.Latency(k+1)) <= dl {
			k++
		}
		reqs := make([]scheduler.Request, k)
		for j := range reqs {
			reqs[j] = q.reqs[q.head+j].req
		}
		q.head += k
		if q.head == len(q.reqs) {
			q.reqs, q.head = q.reqs[:0], 0
		}
		c.nextPlan++
		finish := now.Add(prof.Latency(k))
		c.out.Plans = append(c.out.Plans, Plan{Model: q.model, BatchPlan: scheduler.BatchPlan{
			ID: scheduler.PlanID(c.nextPlan), Model: scheduler.ModelID(q.model), GPU: scheduler.GPUID(gi),
			GrantedAt: now, ExecAt: now, FinishAt: finish, Requests: reqs,
		}})
		g.busyUntil = finish
		g.rr = (qi + 1) % len(g.queues)
		return finish
	}
	return next
}

func (c *Cluster) setWake(g int, at scheduler.Time) {
	c.gpus[g].wakeAt = at
	if at == scheduler.Never {
		c.wakes.Remove(g)
	} else {
		c.wakes.Fix(g)
	}
}
