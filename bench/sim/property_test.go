package sim_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/sim"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// The safety properties every policy must keep, whatever the load:
//
//   - every request ends exactly once (planned or dropped);
//   - no GPU runs two batches at once;
//   - every planned batch finishes by each of its requests' deadline less
//     the result delay, and starts no earlier than its GPU is free and its
//     inputs can arrive.
//
// They are checked twice: by a small discrete-event loop written here that
// drives ModelCores and a RankCore by hand, with its own oracle, and by
// bench/sim.Run, whose accounting is a second, independent oracle. They
// are tests of package scheduler that live here, as an external test of
// bench/sim, because scheduler's own tests may not import bench/ (bench
// imports scheduler, never the other way round).

const propertySeeds = 200

// randomWorkload builds a small random workload from seed: 1-5 models,
// 1-8 GPUs, random linear profiles and SLOs, arrival kinds and rates from
// well under to well over the cluster's capacity.
func randomWorkload(seed uint64, pol scheduler.Policy) *workload.Workload {
	rng := rand.New(rand.NewPCG(seed, 0x70726f70))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	w := &workload.Workload{
		Source:   fmt.Sprintf("random-%d", seed),
		Seed:     seed,
		Duration: dur(150*time.Millisecond, 400*time.Millisecond),
		Warmup:   dur(0, 50*time.Millisecond),
		Cluster:  workload.Cluster{GPUs: 1 + rng.IntN(8)},
		Settings: serving.Settings{Policy: pol},
	}
	if pol == scheduler.PolicySymphony {
		w.Schedulable = scheduler.Schedulable(rng.IntN(3))
	}
	if pol == scheduler.PolicyClockwork && rng.IntN(2) == 0 {
		w.ScheduleAhead = dur(time.Millisecond, 10*time.Millisecond)
	}
	if pol == scheduler.PolicyNexus {
		w.NexusFrontends = 1 + rng.IntN(4)
	}
	if rng.IntN(3) > 0 {
		w.Network = scheduler.Delays{
			Ctrl:           dur(0, time.Millisecond),
			DataPerRequest: dur(0, 100*time.Microsecond),
			Result:         dur(0, time.Millisecond),
		}
	}
	n := 1 + rng.IntN(5)
	// load is the offered load relative to a rough capacity estimate: the
	// GPUs running every model at its SLO-limited batch size.
	load := 0.1 + 2.9*rng.Float64()
	for i := range n {
		alpha := dur(100*time.Microsecond, 3*time.Millisecond)
		beta := dur(500*time.Microsecond, 10*time.Millisecond)
		maxBatch := 0
		if rng.IntN(4) == 0 {
			maxBatch = 1 + rng.IntN(16)
		}
		prof := profile.MustLinear(alpha, beta, maxBatch)
		// SLO between 1.2 and 6 times ℓ(1) plus the delays, so some models
		// barely fit a batch of one.
		base := prof.Latency(1) + w.Network.Dispatch(1) + w.Network.Result
		slo := time.Duration(float64(base) * (1.2 + 4.8*rng.Float64()))
		b := max(1, prof.LargestBatchWithin((slo-base+prof.Latency(1))/2))
		capacity := prof.Throughput(b) * float64(w.Cluster.GPUs) / float64(n)
		m := workload.Model{Model: serving.Model{Name: fmt.Sprintf("m%d", i), Profile: prof, SLO: slo}, Rates: []workload.RatePhase{{Rate: load * capacity}}}
		if rng.IntN(3) == 0 {
			// A rate step: half the load, then the full load.
			m.Rates = []workload.RatePhase{{Duration: w.Duration / 2, Rate: load * capacity / 2}, {Rate: load * capacity}}
		}
		switch rng.IntN(3) {
		case 0:
			m.Arrival = workload.Arrival{Kind: workload.ArrivalPoisson}
		case 1:
			m.Arrival = workload.Arrival{Kind: workload.ArrivalGamma, Shape: 0.2 + rng.Float64()}
		default:
			m.Arrival = workload.Arrival{Kind: workload.ArrivalConstant}
		}
		w.Models = append(w.Models, m)
	}
	// Keep each run to a few thousand requests: shorten the run, not the
	// load, when the rates are high.
	const maxRequests = 3000
	if total := w.TotalRate() * (w.Warmup + w.Duration).Seconds(); total > maxRequests {
		w.Duration = max(20*time.Millisecond, time.Duration(float64(w.Duration)*maxRequests/total))
	}
	return w
}

// harness drives ModelCores and a RankCore with virtual time, delivering
// every message at once, and checks every decision as it is made.
type harness struct {
	w      *workload.Workload
	models []*scheduler.ModelCore
	rank   *scheduler.RankCore
	now    scheduler.Time

	issued      int
	ended       map[scheduler.RequestID]int
	modelOf     map[scheduler.RequestID]int
	outstanding []*scheduler.Grant // by model: the grant it has not answered
	gpuGranted  []bool
	gpuFinish   []scheduler.Time // end of the last batch planned on each GPU
	plans       int
	err         error

	// hideGPUCount zeroes Grant.GPUs before a ModelCore sees a grant,
	// which turns the window drop policy's keep-up rule off.
	hideGPUCount bool
	// pruned counts DropPruned drops; maxPruned is the most one call made.
	pruned, maxPruned int
}

func newHarness(t *testing.T, w *workload.Workload) *harness {
	h := &harness{
		w: w, now: scheduler.Past,
		ended:       map[scheduler.RequestID]int{},
		modelOf:     map[scheduler.RequestID]int{},
		outstanding: make([]*scheduler.Grant, len(w.Models)),
		gpuGranted:  make([]bool, w.Cluster.GPUs),
		gpuFinish:   make([]scheduler.Time, w.Cluster.GPUs),
	}
	for i := range h.gpuFinish {
		h.gpuFinish[i] = scheduler.Past
	}
	for i := range w.Models {
		mc, err := scheduler.NewModelCore(scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: w.Models[i].Name, Profile: w.Models[i].Profile,
			Policy: w.Policy, Schedulable: w.Schedulable, Delays: w.Network,
		})
		if err != nil {
			t.Fatal(err)
		}
		h.models = append(h.models, mc)
	}
	rank, err := scheduler.NewRankCore(scheduler.RankConfig{
		Models: len(w.Models), GPUs: w.Cluster.GPUs, Policy: w.Policy, Delays: w.Network, ScheduleAhead: w.ScheduleAhead,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.rank = rank
	return h
}

func (h *harness) fail(format string, args ...any) {
	if h.err == nil {
		h.err = fmt.Errorf("at %v: "+format, append([]any{h.now}, args...)...)
	}
}

func (h *harness) end(model int, r *scheduler.Request) {
	h.ended[r.ID]++
	if n := h.ended[r.ID]; n > 1 {
		h.fail("request %d ended %d times", r.ID, n)
	}
	if m, ok := h.modelOf[r.ID]; !ok || m != model {
		h.fail("request %d of model %d (known %v) ended by model %d", r.ID, m, ok, model)
	}
}

// handle checks and carries out one ModelCore output; grant is the grant
// the output answers, if any.
func (h *harness) handle(model int, out *scheduler.ModelOutput, grant *scheduler.Grant) {
	pruned := 0
	for i := range out.Drops {
		h.end(model, &out.Drops[i].Request)
		if out.Drops[i].Reason == scheduler.DropPruned {
			pruned++
		}
	}
	h.pruned += pruned
	h.maxPruned = max(h.maxPruned, pruned)
	if len(out.Plans) > 1 {
		h.fail("model %d: %d plans in one call", model, len(out.Plans))
	}
	prof := h.w.Models[model].Profile
	d := h.w.Network
	for i := range out.Plans {
		p := &out.Plans[i]
		h.plans++
		bs := len(p.Requests)
		switch {
		case grant == nil:
			h.fail("model %d planned on GPU %d without a grant", model, p.GPU)
			continue
		case p.GPU != grant.GPU:
			h.fail("model %d granted GPU %d planned on GPU %d", model, grant.GPU, p.GPU)
			continue
		case bs == 0 || bs > prof.MaxBatch():
			h.fail("model %d: batch of %d (max %d)", model, bs, prof.MaxBatch())
		case p.FinishAt != p.ExecAt.Add(prof.Latency(bs)):
			h.fail("model %d: batch of %d from %v finishes at %v", model, bs, p.ExecAt, p.FinishAt)
		case p.ExecAt < h.now.Add(d.Dispatch(bs)):
			h.fail("model %d: batch of %d starts at %v, before its inputs arrive at %v", model, bs, p.ExecAt, h.now.Add(d.Dispatch(bs)))
		case p.ExecAt < grant.FreeAt || p.ExecAt < h.gpuFinish[p.GPU]:
			h.fail("GPU %d runs two batches at once: one starts at %v, the GPU frees at %v (last batch ends %v)",
				p.GPU, p.ExecAt, grant.FreeAt, h.gpuFinish[p.GPU])
		}
		h.gpuFinish[p.GPU] = p.FinishAt
		for j := range p.Requests {
			r := &p.Requests[j]
			h.end(model, r)
			if p.FinishAt > r.Deadline.Add(-d.Result) {
				h.fail("request %d: batch finishes at %v, after its deadline %v less the result delay %v", r.ID, p.FinishAt, r.Deadline, d.Result)
			}
			if j > 0 && r.Deadline < p.Requests[j-1].Deadline {
				h.fail("plan not in deadline order")
			}
		}
	}
	switch {
	case grant == nil && len(out.Returns) > 0:
		h.fail("model %d returned a GPU it was not granted", model)
	case grant != nil && len(out.Returns) != 1:
		h.fail("model %d answered a grant with %d returns", model, len(out.Returns))
	}
	for _, ret := range out.Returns {
		want := scheduler.MaxTime(h.now, grant.FreeAt)
		if len(out.Plans) == 1 {
			want = out.Plans[0].FinishAt
		}
		if ret.GPU != grant.GPU || ret.FreeAt != want || ret.Used != (len(out.Plans) == 1) {
			h.fail("model %d returned %+v, want GPU %d free at %v", model, ret, grant.GPU, want)
		}
		h.gpuGranted[ret.GPU] = false
		h.outstanding[model] = nil
		h.rank.Return(ret)
	}
	if len(out.Returns) == 0 && out.CandidateChanged {
		h.rank.Update(scheduler.ModelID(model), out.Candidate)
	}
}

func (h *harness) wakeAt() scheduler.Time {
	t := h.rank.WakeAt()
	for _, m := range h.models {
		t = scheduler.MinTime(t, m.WakeAt())
	}
	return t
}

// wake runs everything due at now until nothing more is.
func (h *harness) wake() {
	for round := 0; ; round++ {
		if round > 10000 {
			h.fail("no quiescence after %d rounds", round)
			return
		}
		progressed := false
		for i, m := range h.models {
			if m.WakeAt() <= h.now {
				h.handle(i, m.Tick(h.now), nil)
				progressed = true
			}
		}
		if h.rank.WakeAt() <= h.now {
			// The grants slice is the core's: copy before calling back in.
			grants := append([]scheduler.Grant(nil), h.rank.Tick(h.now)...)
			for i := range grants {
				g := &grants[i]
				if h.gpuGranted[g.GPU] {
					h.fail("GPU %d granted twice", g.GPU)
				}
				if h.outstanding[g.Model] != nil {
					h.fail("model %d granted a second GPU", g.Model)
				}
				h.gpuGranted[g.GPU], h.outstanding[g.Model] = true, g
				if g.GPUs != h.rank.OnlineGPUs() {
					h.fail("grant %+v: %d GPUs online", *g, h.rank.OnlineGPUs())
				}
				if h.hideGPUCount {
					g.GPUs = 0
				}
				h.handle(int(g.Model), h.models[g.Model].Grant(h.now, *g), g)
			}
			progressed = true
		}
		if !progressed || h.err != nil {
			return
		}
	}
}

func (h *harness) advance(t scheduler.Time) { h.now = scheduler.MaxTime(h.now, t) }

// run offers the workload's arrivals and runs until nothing is left to do.
func (h *harness) run() error {
	end := h.w.Warmup + h.w.Duration
	gen := workload.NewGenerator(h.w, end)
	var one [1]scheduler.Request
	for h.err == nil {
		m, ta, ok := gen.Peek()
		te := h.wakeAt()
		if !ok && te == scheduler.Never {
			break
		}
		if ok && ta <= te {
			gen.Pop()
			h.advance(ta)
			id := scheduler.RequestID(h.issued)
			h.issued++
			one[0] = scheduler.Request{ID: id, Arrival: h.now, Deadline: h.now.Add(h.w.Models[m].SLO)}
			h.modelOf[id] = m
			h.handle(m, h.models[m].Enqueue(h.now, one[:]), nil)
		} else {
			h.advance(te)
		}
		h.wake()
	}
	if h.err != nil {
		return h.err
	}
	if len(h.ended) != h.issued {
		return fmt.Errorf("%d requests issued, %d ended", h.issued, len(h.ended))
	}
	if h.rank.FreeGPUs() != h.w.Cluster.GPUs {
		return fmt.Errorf("%d of %d GPUs free at the end", h.rank.FreeGPUs(), h.w.Cluster.GPUs)
	}
	for i, m := range h.models {
		if m.Queued() != 0 {
			return fmt.Errorf("model %d has %d requests left", i, m.Queued())
		}
	}
	return nil
}

func TestPropertiesHandDriven(t *testing.T) {
	for _, pol := range []scheduler.Policy{scheduler.PolicySymphony, scheduler.PolicyWorkConserving, scheduler.PolicyClockwork} {
		t.Run(pol.String(), func(t *testing.T) {
			t.Parallel()
			var issued, plans int
			for seed := uint64(1); seed <= propertySeeds; seed++ {
				w := randomWorkload(seed, pol)
				h := newHarness(t, w)
				if err := h.run(); err != nil {
					t.Fatalf("seed %d (%d models, %d GPUs): %v", seed, len(w.Models), w.Cluster.GPUs, err)
				}
				issued += h.issued
				plans += h.plans
			}
			if issued < 10000 || plans < 1000 {
				t.Errorf("workloads too small: %d requests, %d plans over %d seeds", issued, plans, propertySeeds)
			}
		})
	}
}

func TestPropertiesSim(t *testing.T) {
	for _, pol := range scheduler.Policies() {
		t.Run(pol.String(), func(t *testing.T) {
			t.Parallel()
			var overloaded, clean int
			for seed := uint64(1); seed <= propertySeeds; seed++ {
				w := randomWorkload(seed, pol)
				rep, err := sim.Run(w, sim.Options{})
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				var sum struct{ offered, good, late, dropped uint64 }
				for _, m := range rep.Models {
					if m.Offered != m.Good+m.Late+m.Dropped {
						t.Errorf("seed %d model %s: offered %d ≠ good %d + late %d + dropped %d",
							seed, m.Name, m.Offered, m.Good, m.Late, m.Dropped)
					}
					if m.Late != 0 {
						t.Errorf("seed %d model %s: %d late answers passed the oracle", seed, m.Name, m.Late)
					}
					sum.offered += m.Offered
					sum.good += m.Good
					sum.late += m.Late
					sum.dropped += m.Dropped
				}
				if rep.Offered != sum.offered || rep.Good != sum.good || rep.Late != sum.late || rep.Dropped != sum.dropped {
					t.Errorf("seed %d: totals %d/%d/%d/%d, models sum to %+v", seed, rep.Offered, rep.Good, rep.Late, rep.Dropped, sum)
				}
				for g, b := range rep.GPUBusy {
					if b < 0 || b > 1+1e-9 {
						t.Errorf("seed %d: GPU %d busy %.3f of the time", seed, g, b)
					}
				}
				if rep.BadRate > 0.2 {
					overloaded++
				} else if rep.BadRate < 0.01 {
					clean++
				}
			}
			// The generator must cover both regimes.
			if overloaded < 20 || clean < 20 {
				t.Errorf("%d overloaded and %d clean runs of %d", overloaded, clean, propertySeeds)
			}
		})
	}
}
