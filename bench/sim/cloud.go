package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/cloudscale"
	"github.com/symphony-serving/symphony/scheduler"
)

// Cloud is a simulated public cloud under a provisioning policy: instances
// that take time to boot and are billed while they run, spot instances the
// cloud takes back after a warning, and a serverless burst pool billed per
// request (MArk §3, §4.5).
type Cloud struct {
	Types  []cloudscale.InstanceType
	Policy cloudscale.Policy
	// Burst is the serverless pool spilled requests go to; nil has none
	// (the policy's spill decisions are then ignored).
	Burst *BurstPool
	// SpillDepth is the admission bucket's depth (cloudscale.Admission).
	SpillDepth time.Duration
	// Step is the width of the result's time series (default 1 min).
	Step time.Duration
}

// BurstPool is a serverless function pool, as AWS Lambda: each request runs
// alone in a container, on CPUs Slowdown times slower than a GPU's batch
// of one, plus an invocation Overhead, after a ColdStart when no warm
// container is idle; a container stays warm KeepWarm after its last
// request; at most Concurrency containers exist. A request it cannot take
// goes to the GPUs after all.
type BurstPool struct {
	PricePerRequest float64
	Overhead        time.Duration
	Slowdown        float64
	ColdStart       time.Duration
	KeepWarm        time.Duration
	Concurrency     int
}

// CloudResult is the cost side of a cloud run, beside its report.
type CloudResult struct {
	Policy string `json:"policy"`
	// Cost is InstanceCost (billed instance time) plus BurstCost (burst
	// requests), over the whole run.
	Cost         float64 `json:"cost"`
	InstanceCost float64 `json:"instance_cost"`
	BurstCost    float64 `json:"burst_cost"`
	// Offered and Good count every request of the run; Attainment is
	// Good/Offered.
	Offered    uint64  `json:"offered"`
	Good       uint64  `json:"good"`
	Attainment float64 `json:"attainment"`
	// Spilled requests went to the burst pool; BurstGood of them met their
	// SLO there; BurstFull found the pool at its concurrency limit and went
	// to the GPUs instead.
	Spilled   uint64 `json:"spilled"`
	BurstGood uint64 `json:"burst_good"`
	BurstFull uint64 `json:"burst_full"`
	// GPUHours is the billed GPU time; PeakGPUs the most GPUs billed at
	// once. CPUMachineHours is the billed time of CPU machines (instance
	// types of no GPUs, which serve a pipeline's CPU modules).
	GPUHours        float64 `json:"gpu_hours"`
	PeakGPUs        int     `json:"peak_gpus"`
	CPUMachineHours float64 `json:"cpu_machine_hours,omitempty"`
	// Launches, Releases and Interruptions count instances; Refused counts
	// launches the pool of device slots of their kind had no room for.
	Launches      int           `json:"launches"`
	Releases      int           `json:"releases"`
	Interruptions int           `json:"interruptions"`
	Refused       int           `json:"refused"`
	Series        []CloudSample `json:"series"`
}

// CloudSample is one step of a cloud run's time series.
type CloudSample struct {
	Start time.Duration `json:"start_ns"`
	// Cost is what was billed for the step (instance time, burst
	// requests); GPUsReady, GPUsBilled and CPUMachinesBilled are time
	// averages.
	Cost              float64 `json:"cost"`
	GPUsReady         float64 `json:"gpus_ready"`
	GPUsBilled        float64 `json:"gpus_billed"`
	CPUMachinesBilled float64 `json:"cpu_machines_billed,omitempty"`
	// Offered, Good and Spilled count requests by arrival in the step.
	Offered uint64 `json:"offered"`
	Good    uint64 `json:"good"`
	Spilled uint64 `json:"spilled"`
}

// Attainment is the step's share of requests that met their SLO (1 with
// no requests).
func (s CloudSample) Attainment() float64 {
	if s.Offered == 0 {
		return 1
	}
	return float64(s.Good) / float64(s.Offered)
}

// cloudInstance is one instance of the simulated cloud.
type cloudInstance struct {
	cloudscale.Instance
	gpus       []scheduler.GPUID // the device slots it holds (a CPU machine: one)
	ready      bool
	released   bool
	drained    bool
	interrupt  scheduler.Time // the cloud takes it back; Never if not spot
	billedFrom scheduler.Time
	billedTo   scheduler.Time // while billed: Never
}

type cloudEventKind uint8

const (
	ceTick cloudEventKind = iota
	ceReady
	ceWarn
	ceDrain
	ceInterrupt
	ceBillEnd
)

type cloudEvent struct {
	at   scheduler.Time
	seq  uint64
	kind cloudEventKind
	inst int
}

type cloudEvents []cloudEvent

func (q cloudEvents) Len() int { return len(q) }
func (q cloudEvents) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q cloudEvents) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *cloudEvents) Push(x any)   { *q = append(*q, x.(cloudEvent)) }
func (q *cloudEvents) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// cloudJob runs the cloud beside the scheduler's cores, on virtual time.
type cloudJob struct {
	e      *symphonyEngine
	w      *workload.Workload
	c      Cloud
	rng    *rand.Rand
	events cloudEvents
	seq    uint64

	insts []*cloudInstance
	// free holds, by rank loop, the device slots not held by an
	// instance, lowest last; typePart is each type's rank loop: the one of
	// its Hardware's gpu_type, where models are pinned, else the only one.
	free     [][]scheduler.GPUID
	typePart []int
	gpuInst  []int            // the instance holding each slot, -1 none
	lastEnd  []scheduler.Time // when each slot's last batch frees it
	// lastDone is when each slot's last batch answers: its end, or, for
	// a model that runs several batches at once, the concurrency times
	// later (a batch holds its slot a share of its run).
	lastDone []scheduler.Time
	drainFor time.Duration // a batch planned now ends within it

	admission cloudscale.Admission
	burst     burstState

	// slo is each model's objective for the requests arriving now (a
	// policy may change it).
	slo []time.Duration
	// The tick's measurements.
	tickModel []uint64 // arrivals by model
	tickGood  uint64
	tickBad   uint64
	lastTick  scheduler.Time
	fleet     []cloudscale.Instance

	res       CloudResult
	readyGPUs int
	billGPUs  int
	billCPUs  int            // CPU machines billed
	lastT     scheduler.Time // GPU-count integrals are up to here
	end       scheduler.Time
}

type burstState struct {
	busy heapTimes        // containers running a request, by when they end
	idle []scheduler.Time // idle containers, by when they went idle
}

type heapTimes []scheduler.Time

func (h heapTimes) Len() int           { return len(h) }
func (h heapTimes) Less(i, j int) bool { return h[i] < h[j] }
func (h heapTimes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heapTimes) Push(x any)        { *h = append(*h, x.(scheduler.Time)) }
func (h *heapTimes) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// RunCloud simulates the workload on a cloud whose fleet the policy
// decides. The workload's cluster is the pool of device slots instances
// take theirs from; none serves until an instance brings it. Where the
// models are pinned to gpu_types, each gpu_type is a pool of its own, with
// its rank loop, and an instance type takes slots of the kind it names: a
// pipeline's CPU decoder runs on CPU machines, its detector on GPUs
// (cloudParts). It returns the report of the requests and the cloud's
// costs over time.
func RunCloud(w *workload.Workload, c Cloud, opts Options) (*report.Report, *CloudResult, error) {
	switch {
	case c.Policy == nil || len(c.Types) == 0:
		return nil, nil, errors.New("sim: a cloud run needs a policy and instance types")
	case c.Policy.Tick() <= 0:
		return nil, nil, fmt.Errorf("sim: cloud policy %s ticks every %v", c.Policy.Name(), c.Policy.Tick())
	}
	parts, err := cloudParts(w, c.Types)
	if err != nil {
		return nil, nil, err
	}
	if v, ok := c.Policy.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, nil, err
		}
	}
	if b := c.Burst; b != nil && (b.Concurrency < 1 || !(b.Slowdown > 0) || b.PricePerRequest < 0 || b.Overhead < 0 || b.ColdStart < 0 || b.KeepWarm < 0) {
		return nil, nil, fmt.Errorf("sim: burst pool %+v: needs concurrency >= 1, a positive slowdown and no negative price or duration", *b)
	}
	if c.Step <= 0 {
		c.Step = time.Minute
	}
	acct := newAccounting(w, time.Second)
	eng, err := newSymphonyEngine(w, acct, acct, true)
	if err != nil {
		return nil, nil, err
	}
	job := newCloudJob(w, eng, c, parts)
	eng.cloud = job
	if err := job.start(); err != nil {
		return nil, nil, err
	}
	if err := drive(w, eng, acct, opts); err != nil {
		return nil, nil, err
	}
	job.finish()
	if acct.err != nil {
		return nil, nil, acct.err
	}
	return acct.build(), &job.res, nil
}

// CheckCloudWorkload reports why a cloud policy that sizes one mix of
// models (static, reactive, the mark policies) refuses w: an invalid
// workload, or one with faults, an epoch job, gpu_type pinning,
// concurrency or the nexus policy, since such a policy sizes one rank loop
// of one GPU kind, one batch at a time. RunCloud itself also takes pinned
// workloads, whose instance types name their hardware (cloudParts).
func CheckCloudWorkload(w *workload.Workload) error {
	if err := checkCloudBasics(w); err != nil {
		return err
	}
	if w.Pinned() || w.Concurrent() {
		return errors.New("sim: a cloud policy that sizes one mix of models takes neither gpu_type pinning nor concurrency: it sizes one rank loop of one GPU kind, one batch at a time")
	}
	return nil
}

// checkCloudBasics refuses what no cloud run takes: an invalid workload,
// faults (the cloud's own interruptions take their place), an epoch job
// (the policy sizes the fleet) and the nexus policy.
func checkCloudBasics(w *workload.Workload) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if len(w.Faults) > 0 || w.Epoch != nil || w.Policy == scheduler.PolicyNexus {
		return errors.New("sim: a cloud run takes neither faults, an epoch job nor the nexus policy")
	}
	return nil
}

// cloudParts checks that the types can serve w and returns each type's
// rank loop. Where w's models are pinned to gpu_types (an export of
// `symphony provision`), each type names the gpu_type whose slots its
// devices take, every model's gpu_type is some type's, and a CPU
// machine's models run batches of 1 at a concurrency within its CPUs.
// Otherwise every type is of GPUs of the cluster's one kind, which no type
// names, and no model runs concurrently. No type brings more devices than
// its pool of slots holds.
func cloudParts(w *workload.Workload, types []cloudscale.InstanceType) ([]int, error) {
	if err := checkCloudBasics(w); err != nil {
		return nil, err
	}
	parts := make([]int, len(types))
	for i, t := range types {
		if err := t.Validate(); err != nil {
			return nil, err
		}
		if !w.Pinned() {
			if t.Hardware != "" || t.GPUs == 0 {
				return nil, fmt.Errorf("sim: instance type %q names hardware %q or is a CPU machine, but no model of the workload is pinned to a gpu_type", t.Name, t.Hardware)
			}
			continue
		}
		parts[i] = slices.IndexFunc(w.Cluster.GPUTypes, func(g workload.GPUType) bool { return g.Name == t.Hardware })
		if t.Hardware == "" {
			return nil, fmt.Errorf("sim: instance type %q names no hardware, but the workload's models are pinned to gpu_types: name the one its devices serve", t.Name)
		}
		if parts[i] < 0 {
			return nil, fmt.Errorf("sim: instance type %q brings hardware %q, which is no gpu_type of the cluster", t.Name, t.Hardware)
		}
		for k := range w.Models {
			m := &w.Models[k]
			if t.GPUs > 0 || m.GPUType != t.Hardware {
				continue
			}
			if m.Profile.MaxBatch() != 1 || m.Concurrency > t.CPUs {
				return nil, fmt.Errorf("sim: model %q runs on CPU machine %q with batches up to %d at concurrency %d; a CPU machine runs batches of 1, at most one on each of its %d CPUs", m.Name, t.Name, m.Profile.MaxBatch(), m.Concurrency, t.CPUs)
			}
		}
	}
	if !w.Pinned() && w.Concurrent() {
		return nil, errors.New("sim: a cloud run of models not pinned to gpu_types takes no concurrency")
	}
	for _, t := range types {
		pool := w.Cluster.GPUs
		if w.Pinned() {
			_, pool = w.Cluster.GPUsOfType(t.Hardware)
		}
		if t.Devices() > pool {
			return nil, fmt.Errorf("sim: instance type %q brings %d devices; the cluster's pool of slots for it holds %d", t.Name, t.Devices(), pool)
		}
	}
	for k := range w.Models {
		if m := &w.Models[k]; w.Pinned() && !slices.ContainsFunc(types, func(t cloudscale.InstanceType) bool { return t.Hardware == m.GPUType }) {
			return nil, fmt.Errorf("sim: model %q runs on %s, which no instance type brings", m.Name, m.GPUType)
		}
	}
	return parts, nil
}

func newCloudJob(w *workload.Workload, e *symphonyEngine, c Cloud, typePart []int) *cloudJob {
	n := w.Cluster.GPUs
	j := &cloudJob{
		e: e, w: w, c: c,
		rng:     rand.New(rand.NewPCG(w.Seed, 0x5e0c10d)),
		gpuInst: make([]int, n), lastEnd: make([]scheduler.Time, n), lastDone: make([]scheduler.Time, n),
		end:      scheduler.Time(w.Warmup + w.Duration),
		typePart: typePart,
	}
	// Slots are numbered by gpu_type, in the cluster's order (a pinned
	// workload's rank loops).
	partOf := make([]int, n)
	if w.Pinned() {
		for part, gt := range w.Cluster.GPUTypes {
			first, count := w.Cluster.GPUsOfType(gt.Name)
			for g := first; g < first+count; g++ {
				partOf[g] = part
			}
		}
	}
	j.free = make([][]scheduler.GPUID, len(e.ranks))
	for g := n - 1; g >= 0; g-- {
		j.free[partOf[g]] = append(j.free[partOf[g]], scheduler.GPUID(g))
		j.gpuInst[g] = -1
		j.lastEnd[g], j.lastDone[g] = scheduler.Past, scheduler.Past
	}
	for i := range w.Models {
		j.slo = append(j.slo, w.Models[i].SLO)
	}
	j.tickModel = make([]uint64, len(w.Models))
	j.setDrain()
	j.admission.Depth = c.SpillDepth
	j.admission.SetRate(0, math.Inf(1))
	j.res.Policy = c.Policy.Name()
	steps := int((time.Duration(j.end) + c.Step - 1) / c.Step)
	j.res.Series = make([]CloudSample, steps)
	for i := range j.res.Series {
		j.res.Series[i].Start = time.Duration(i) * c.Step
	}
	return j
}

// setDrain sets how long before a spot instance goes its GPUs leave the
// rotation: a batch planned now ends within the longest objective plus the
// network's trips.
func (j *cloudJob) setDrain() {
	j.drainFor = 0
	for i, slo := range j.slo {
		d := j.e.delays[i]
		j.drainFor = max(j.drainFor, slo+d.Ctrl+d.Result)
	}
}

func (j *cloudJob) at(t scheduler.Time, kind cloudEventKind, inst int) {
	if t >= j.end && kind != ceBillEnd {
		return // the run is over: finish bills what still runs
	}
	j.seq++
	heap.Push(&j.events, cloudEvent{at: t, seq: j.seq, kind: kind, inst: inst})
}

// start brings up the policy's first fleet, serving from time 0, and arms
// the first tick.
func (j *cloudJob) start() error {
	first := 0.0
	for _, m := range j.w.Models {
		first += m.RateAt(0)
	}
	for _, typ := range j.c.Policy.Start(first) {
		if typ < 0 || typ >= len(j.c.Types) {
			return fmt.Errorf("sim: cloud policy %s started an instance of type %d; there are %d types", j.c.Policy.Name(), typ, len(j.c.Types))
		}
		j.launch(0, typ, true)
	}
	// The first tick comes a tick in: at 0 nothing has been measured, and
	// a rate of 0 would tell a reactive policy to release the fleet.
	j.at(scheduler.Time(j.c.Policy.Tick()), ceTick, -1)
	return nil
}

func (j *cloudJob) wakeAt() scheduler.Time {
	if len(j.events) == 0 {
		return scheduler.Never
	}
	return j.events[0].at
}

// run carries out every event due at now. It is called between the cores'
// events, when no grant is outstanding.
func (j *cloudJob) run(now scheduler.Time) error {
	for len(j.events) > 0 && j.events[0].at <= now {
		ev := heap.Pop(&j.events).(cloudEvent)
		j.advance(ev.at)
		switch ev.kind {
		case ceTick:
			if err := j.tick(ev.at); err != nil {
				return err
			}
		case ceReady:
			j.ready(ev.at, ev.inst)
		case ceWarn:
			j.insts[ev.inst].InterruptAt = time.Duration(j.insts[ev.inst].interrupt)
		case ceDrain:
			j.drain(ev.inst)
		case ceInterrupt:
			if err := j.interrupt(ev.at, ev.inst); err != nil {
				return err
			}
		case ceBillEnd:
			j.billEnd(ev.at, ev.inst)
		}
	}
	return nil
}

// advance integrates the GPU counts up to now.
func (j *cloudJob) advance(now scheduler.Time) {
	for t := j.lastT; t < now; {
		i := int(time.Duration(t) / j.c.Step)
		if i >= len(j.res.Series) {
			break
		}
		stepEnd := scheduler.Time(time.Duration(i+1) * j.c.Step)
		to := scheduler.MinTime(now, stepEnd)
		frac := to.Sub(t).Seconds() / j.c.Step.Seconds()
		s := &j.res.Series[i]
		s.GPUsReady += float64(j.readyGPUs) * frac
		s.GPUsBilled += float64(j.billGPUs) * frac
		s.CPUMachinesBilled += float64(j.billCPUs) * frac
		t = to
	}
	j.lastT = scheduler.MaxTime(j.lastT, now)
}

func (j *cloudJob) tick(now scheduler.Time) error {
	p := j.c.Policy
	dt := now.Sub(j.lastTick)
	o := cloudscale.Observation{Now: time.Duration(now), Good: j.tickGood, Bad: j.tickBad, ModelArrivals: j.tickModel}
	if dt > 0 {
		var n uint64
		for _, k := range j.tickModel {
			n += k
		}
		o.Rate = float64(n) / dt.Seconds()
	}
	j.tickGood, j.tickBad, j.lastTick = 0, 0, now
	j.fleet = j.fleet[:0]
	for _, in := range j.insts {
		if !in.released && !in.drained {
			j.fleet = append(j.fleet, in.Instance)
		}
	}
	o.Fleet = j.fleet
	d := p.Decide(&o)
	for _, typ := range d.Launch {
		if typ < 0 || typ >= len(j.c.Types) {
			return fmt.Errorf("sim: cloud policy %s launched an instance of type %d; there are %d types", p.Name(), typ, len(j.c.Types))
		}
		j.launch(now, typ, false)
	}
	for _, id := range d.Release {
		if int(id) >= len(j.insts) || j.insts[id].released {
			return fmt.Errorf("sim: cloud policy %s released instance %d, which is not running", p.Name(), id)
		}
		j.release(now, int(id))
	}
	clear(j.tickModel)
	if d.SLOs != nil {
		if len(d.SLOs) != len(j.slo) || slices.ContainsFunc(d.SLOs, func(s time.Duration) bool { return s <= 0 }) {
			return fmt.Errorf("sim: cloud policy %s set %d objectives for %d models, or one not positive", p.Name(), len(d.SLOs), len(j.slo))
		}
		copy(j.slo, d.SLOs)
		j.setDrain()
	}
	spill := d.SpillAbove
	if j.c.Burst == nil {
		spill = math.Inf(1)
	}
	j.admission.SetRate(time.Duration(now), spill)
	if next := now.Add(p.Tick()); next < j.end {
		j.at(next, ceTick, -1)
	}
	return nil
}

// launch starts an instance of typ; prewarmed ones serve at once.
func (j *cloudJob) launch(now scheduler.Time, typ int, prewarmed bool) {
	t := j.c.Types[typ]
	part := j.typePart[typ]
	if len(j.free[part]) < t.Devices() {
		j.res.Refused++
		return
	}
	idx := len(j.insts)
	in := &cloudInstance{
		Instance:   cloudscale.Instance{ID: cloudscale.InstanceID(idx), Type: typ, LaunchedAt: time.Duration(now), ReadyAt: time.Duration(now)},
		interrupt:  scheduler.Never,
		billedFrom: now, billedTo: scheduler.Never,
	}
	if !prewarmed {
		in.ReadyAt += t.Launch
		j.res.Launches++
	}
	free := j.free[part]
	for range t.Devices() {
		g := free[len(free)-1]
		free = free[:len(free)-1]
		j.gpuInst[g] = idx
		in.gpus = append(in.gpus, g)
	}
	j.free[part] = free
	j.insts = append(j.insts, in)
	j.billGPUs += t.GPUs
	if t.GPUs == 0 {
		j.billCPUs++
	}
	j.res.PeakGPUs = max(j.res.PeakGPUs, j.billGPUs)
	ready := scheduler.Time(in.ReadyAt)
	j.at(ready, ceReady, idx)
	if t.Spot && t.InterruptionsPerHour > 0 {
		life := time.Duration(j.rng.ExpFloat64() / t.InterruptionsPerHour * float64(time.Hour))
		at := ready.Add(max(life, time.Second))
		in.interrupt = at
		j.at(scheduler.MaxTime(ready, at.Add(-t.SpotWarning)), ceWarn, idx)
		j.at(scheduler.MaxTime(ready, at.Add(-j.drainFor)), ceDrain, idx)
		j.at(at, ceInterrupt, idx)
	}
}

func (j *cloudJob) ready(now scheduler.Time, idx int) {
	in := j.insts[idx]
	if in.released || in.drained {
		return
	}
	in.ready = true
	j.readyGPUs += j.c.Types[in.Type].GPUs
	rank := j.e.ranks[j.typePart[in.Type]]
	for _, g := range in.gpus {
		rank.EnableGPU(g, scheduler.MaxTime(now, j.lastEnd[g]))
	}
}

// drain takes an instance's GPUs out of rotation: no batch is planned on
// them again, and those planned end within drainFor.
func (j *cloudJob) drain(idx int) {
	in := j.insts[idx]
	if in.drained {
		return
	}
	in.drained = true
	if in.ready {
		j.readyGPUs -= j.c.Types[in.Type].GPUs
		for _, g := range in.gpus {
			j.e.ranks[j.typePart[in.Type]].DisableGPU(g)
		}
	}
}

// release gives an instance back: drained at once, billed until its last
// batch ends.
func (j *cloudJob) release(now scheduler.Time, idx int) {
	in := j.insts[idx]
	j.drain(idx)
	in.released = true
	j.res.Releases++
	end := now
	for _, g := range in.gpus {
		end = scheduler.MaxTime(end, j.lastDone[g])
	}
	j.at(end, ceBillEnd, idx)
}

// interrupt is the cloud taking a spot instance back. It must have been
// drained in time: a batch still running on it would be lost.
func (j *cloudJob) interrupt(now scheduler.Time, idx int) error {
	in := j.insts[idx]
	if in.released {
		return nil
	}
	j.drain(idx)
	for _, g := range in.gpus {
		if j.lastDone[g] > now {
			return fmt.Errorf("sim: oracle: spot instance %d was taken back at %v while GPU %d ran a batch until %v", idx, now, g, j.lastDone[g])
		}
	}
	in.released = true
	j.res.Interruptions++
	j.billEnd(now, idx)
	return nil
}

// billEnd stops an instance's bill and frees its GPU slots.
func (j *cloudJob) billEnd(now scheduler.Time, idx int) {
	in := j.insts[idx]
	if in.billedTo != scheduler.Never {
		return
	}
	in.billedTo = now
	t := j.c.Types[in.Type]
	j.charge(in, now)
	j.billGPUs -= t.GPUs
	part := j.typePart[in.Type]
	for _, g := range slices.Backward(in.gpus) {
		j.gpuInst[g] = -1
		j.free[part] = append(j.free[part], g)
	}
	// Keep the free list lowest-last, so that slots are reused in order.
	slices.SortFunc(j.free[part], func(a, b scheduler.GPUID) int { return int(b) - int(a) })
	billed := t.Billed(now.Sub(in.billedFrom)).Hours()
	if t.GPUs == 0 {
		j.billCPUs--
		j.res.CPUMachineHours += billed
	}
	j.res.GPUHours += float64(t.GPUs) * billed
}

// charge bills an instance's run [billedFrom, to): its cost spread over
// the steps it ran in, the rounding up to the billing unit in the last.
func (j *cloudJob) charge(in *cloudInstance, to scheduler.Time) {
	t := j.c.Types[in.Type]
	total := t.Cost(to.Sub(in.billedFrom))
	j.res.InstanceCost += total
	spent := 0.0
	for at := in.billedFrom; at < to; {
		i := min(int(time.Duration(at)/j.c.Step), len(j.res.Series)-1)
		stepEnd := scheduler.MinTime(to, scheduler.Time(time.Duration(i+1)*j.c.Step))
		if stepEnd <= at { // past the series: the rest goes to its last step
			stepEnd = to
		}
		c := t.PricePerHour * stepEnd.Sub(at).Hours()
		j.res.Series[i].Cost += c
		spent += c
		at = stepEnd
	}
	last := min(int(time.Duration(to)/j.c.Step), len(j.res.Series)-1)
	j.res.Series[last].Cost += total - spent
}

// finish bills what still runs at the end of the run.
func (j *cloudJob) finish() {
	j.advance(j.end)
	for i, in := range j.insts {
		if in.billedTo == scheduler.Never {
			end := j.end
			for _, g := range in.gpus {
				end = scheduler.MaxTime(end, j.lastDone[g])
			}
			j.billEnd(end, i)
		}
	}
	j.res.Cost = j.res.InstanceCost + j.res.BurstCost
	if j.res.Offered > 0 {
		j.res.Attainment = float64(j.res.Good) / float64(j.res.Offered)
	}
}

func (j *cloudJob) sample(t scheduler.Time) *CloudSample {
	i := int(time.Duration(t) / j.c.Step)
	if i < 0 || i >= len(j.res.Series) {
		return nil
	}
	return &j.res.Series[i]
}

// arrive counts an arrival and reports whether it goes to the GPUs; a
// spilled one the burst pool has taken and ended.
func (j *cloudJob) arrive(now scheduler.Time, model int, req *scheduler.Request) bool {
	j.tickModel[model]++
	if slo := j.slo[model]; slo != j.w.Models[model].SLO {
		req.Deadline = req.Arrival.Add(slo)
	}
	j.res.Offered++
	if s := j.sample(now); s != nil {
		s.Offered++
	}
	if j.c.Burst == nil || j.admission.Admit(time.Duration(now)) {
		return true
	}
	return !j.spill(now, model, req)
}

// spill runs a request on the burst pool, if it has a container for it.
func (j *cloudJob) spill(now scheduler.Time, model int, req *scheduler.Request) bool {
	b, st := j.c.Burst, &j.burst
	for st.busy.Len() > 0 && st.busy[0] <= now {
		st.idle = append(st.idle, heap.Pop(&st.busy).(scheduler.Time))
	}
	for len(st.idle) > 0 && st.idle[0].Add(b.KeepWarm) < now {
		st.idle = st.idle[1:]
	}
	start := now
	if n := len(st.idle); n > 0 {
		st.idle = st.idle[:n-1] // the most recently used: warmest
	} else if st.busy.Len()+len(st.idle) < b.Concurrency {
		start = now.Add(b.ColdStart)
	} else {
		j.res.BurstFull++
		return false
	}
	run := b.Overhead + time.Duration(b.Slowdown*float64(j.w.Models[model].Profile.Latency(1)))
	respond := start.Add(run)
	heap.Push(&st.busy, respond)
	j.res.Spilled++
	j.res.BurstCost += b.PricePerRequest
	s := j.sample(now)
	if s != nil {
		s.Spilled++
		s.Cost += b.PricePerRequest
	}
	o, reason := report.OutcomeGood, ""
	if respond > req.Deadline {
		o, reason = report.OutcomeLate, "burst pool too slow"
	}
	j.e.acct.outcome(req.ID, model, req.Priority, req.Arrival, respond, start, 1, o, reason)
	j.ended(req.Arrival, o == report.OutcomeGood)
	if o == report.OutcomeGood {
		j.res.BurstGood++
	}
	return true
}

// ended counts a request's end for the policy's SLO monitor and the
// series.
func (j *cloudJob) ended(arrival scheduler.Time, good bool) {
	if good {
		j.tickGood++
		j.res.Good++
		if s := j.sample(arrival); s != nil {
			s.Good++
		}
	} else {
		j.tickBad++
	}
}

// observe checks the cores' plans against the bill (a batch runs only on a
// ready, billed instance) and counts their requests' ends.
func (j *cloudJob) observe(model int, out *scheduler.ModelOutput) {
	for i := range out.Drops {
		j.ended(out.Drops[i].Request.Arrival, false)
	}
	for i := range out.Plans {
		p := &out.Plans[i]
		idx := j.gpuInst[p.GPU]
		if idx < 0 {
			j.e.acct.fail("cloud: batch planned on GPU %d, which no instance holds", p.GPU)
			continue
		}
		in := j.insts[idx]
		done := p.FinishAt
		if e := j.w.Models[model].Concurrency; e > 1 {
			done = p.ExecAt.Add(time.Duration(float64(p.FinishAt.Sub(p.ExecAt)) * float64(e)))
		}
		if !in.ready || in.drained || time.Duration(p.ExecAt) < in.ReadyAt || done > in.interrupt {
			j.e.acct.fail("cloud: batch on GPU %d of instance %d runs [%v, %v), outside its serving time (ready %v, drained %v, taken back %v)",
				p.GPU, idx, p.ExecAt, done, in.ReadyAt, in.drained, in.interrupt)
		}
		if part := j.typePart[in.Type]; part != j.e.partOf[model] {
			j.e.acct.fail("cloud: model %s's batch on GPU %d of instance %d, of type %s: a device of another kind", j.w.Models[model].Name, p.GPU, idx, j.c.Types[in.Type].Name)
		}
		j.lastEnd[p.GPU] = scheduler.MaxTime(j.lastEnd[p.GPU], p.FinishAt)
		j.lastDone[p.GPU] = scheduler.MaxTime(j.lastDone[p.GPU], done)
		for k := range p.Requests {
			j.ended(p.Requests[k].Arrival, true)
		}
	}
}
