package nexus

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

const ms = time.Millisecond

// randomConfig builds a cluster of 1-8 GPUs serving 1-5 models with random
// profiles, SLOs and positive rates from under to over capacity.
func randomConfig(seed uint64) Config {
	rng := rand.New(rand.NewPCG(seed, 0x6e6578))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	cfg := Config{GPUs: 1 + rng.IntN(8), Frontends: rng.IntN(5), Seed: seed}
	if rng.IntN(2) == 0 {
		cfg.Delays = scheduler.Delays{Ctrl: dur(0, ms), DataPerRequest: dur(0, 100*time.Microsecond), Result: dur(0, ms)}
	}
	n := 1 + rng.IntN(5)
	load := 0.1 + 2*rng.Float64()
	for range n {
		prof := profile.MustLinear(dur(100*time.Microsecond, 3*ms), dur(500*time.Microsecond, 10*ms), 0)
		slo := time.Duration(float64(prof.Latency(1)+cfg.Delays.Dispatch(1)+cfg.Delays.Result) * (2 + 6*rng.Float64()))
		// Skewed rates, so that some models need several GPUs.
		share := rng.ExpFloat64()
		cfg.Models = append(cfg.Models, serving.Demand{Model: serving.Model{Profile: prof, SLO: slo}, Rate: share})
	}
	// Scale the rates to the wanted load of the cluster's capacity at each
	// model's batch limit.
	a := Allocate(cfg)
	var need float64
	for m, spec := range cfg.Models {
		need += spec.Rate / spec.Profile.Throughput(a.Batch[m])
	}
	for m := range cfg.Models {
		cfg.Models[m].Rate *= load * float64(cfg.GPUs) / need
	}
	return cfg
}

func TestAllocate(t *testing.T) {
	for seed := uint64(1); seed <= 500; seed++ {
		cfg := randomConfig(seed)
		a := Allocate(cfg)
		if len(a.GPUs) != cfg.GPUs || len(a.Batch) != len(cfg.Models) {
			t.Fatalf("seed %d: %d GPUs, %d batch limits", seed, len(a.GPUs), len(a.Batch))
		}
		routes := make([]int, len(cfg.Models))
		var total float64
		for g, shares := range a.GPUs {
			if len(shares) == 0 {
				t.Errorf("seed %d: GPU %d of %d hosts no model (%d models)", seed, g, cfg.GPUs, len(cfg.Models))
			}
			for _, s := range shares {
				routes[s.Model]++
				total += s.Fraction
				if s.Fraction == 1 && len(shares) != 1 && packable(cfg) {
					t.Errorf("seed %d: GPU %d is a whole share of model %d but hosts %d models", seed, g, s.Model, len(shares))
				}
			}
		}
		// The needs are scaled up at most to the whole cluster.
		if total > float64(cfg.GPUs)+1e-6 {
			t.Errorf("seed %d: shares add up to %.6f GPUs of %d", seed, total, cfg.GPUs)
		}
		// Unless no packing without overcommit exists at all, no GPU is
		// overcommitted and every shared GPU's round-robin cycle meets each
		// hosted model's SLO.
		if packable(cfg) {
			budget := func(m int) time.Duration {
				return cfg.Models[m].SLO - cfg.Delays.Result - cfg.Delays.Dispatch(1)
			}
			for g, shares := range a.GPUs {
				var load float64
				var cycle time.Duration
				for _, s := range shares {
					load += s.Fraction
					cycle += cfg.Models[s.Model].Profile.Latency(a.Batch[s.Model])
				}
				if load > 1+1e-6 {
					t.Errorf("seed %d: GPU %d loaded %.3f", seed, g, load)
				}
				for _, s := range shares {
					if len(shares) > 1 && cycle+cfg.Models[s.Model].Profile.Latency(a.Batch[s.Model]) > budget(s.Model) {
						t.Errorf("seed %d: GPU %d cycle %v breaks model %d's SLO", seed, g, cycle, s.Model)
					}
				}
			}
		}
		for m, spec := range cfg.Models {
			if routes[m] == 0 {
				t.Errorf("seed %d: model %d has no GPU", seed, m)
			}
			// Batch limit: the largest b with 2ℓ(b) within the SLO less
			// the delays, at least 1.
			budget := spec.SLO - cfg.Delays.Result - cfg.Delays.Dispatch(1)
			want := 1
			for b := 1; b <= spec.Profile.MaxBatch(); b++ {
				if 2*spec.Profile.Latency(b) <= budget {
					want = b
				}
			}
			if a.Batch[m] != want {
				t.Errorf("seed %d: model %d batch limit %d, want %d", seed, m, a.Batch[m], want)
			}
		}
	}
}

func TestAllocateDedicatesHeavyModels(t *testing.T) {
	heavy := profile.MustLinear(ms, 5*ms, 0)
	small := profile.MustLinear(ms, 5*ms, 2)
	cfg := Config{GPUs: 8, Models: []serving.Demand{
		{Model: serving.Model{Profile: small, SLO: 25 * ms}, Rate: 50},
		{Model: serving.Model{Profile: heavy, SLO: 25 * ms}, Rate: 3000},
		{Model: serving.Model{Profile: small, SLO: 25 * ms}, Rate: 50},
	}}
	a := Allocate(cfg)
	// Heavy: 2(b + 5) ≤ 25 → b = 7, ℓ(7) = 12ms, 583 req/s per GPU, so
	// 3000 req/s needs 5.14 GPUs. Small: capped at b = 2, ℓ(2) = 7ms, 286
	// req/s per GPU, 0.175 GPUs each. The heavy model cannot share a GPU
	// (12 + 7 + 12 > 25 for it), the two small ones can (7 + 7 + 7 ≤ 25):
	// at least five whole GPUs go to the heavy model, and the small models
	// share one.
	if !slices.Equal(a.Batch, []int{2, 7, 2}) {
		t.Fatalf("batch limits %v, want [2 7 2]", a.Batch)
	}
	dedicated, sharedSmall := 0, false
	for g, shares := range a.GPUs {
		switch {
		case len(shares) == 1 && shares[0].Model == 1 && shares[0].Fraction == 1:
			dedicated++
		case len(shares) == 2 && shares[0].Model != 1 && shares[1].Model != 1:
			sharedSmall = true
		case len(shares) == 0:
			t.Errorf("GPU %d unused", g)
		}
	}
	if dedicated < 5 || !sharedSmall {
		t.Errorf("%d GPUs dedicated to the heavy model (want ≥ 5), small models share a GPU: %v; %+v", dedicated, sharedSmall, a.GPUs)
	}
}

// run drives a cluster through Poisson arrivals for d of virtual time and
// then until it is idle, checking every plan. It returns the number of
// requests issued and planned.
func run(t *testing.T, seed uint64, cfg Config, d time.Duration) (issued, planned int) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	alloc := c.Allocation()
	hosts := make([]map[int]bool, cfg.GPUs)
	for g, shares := range alloc.GPUs {
		hosts[g] = map[int]bool{}
		for _, s := range shares {
			hosts[g][s.Model] = true
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	next := make([]scheduler.Time, len(cfg.Models))
	for m, spec := range cfg.Models {
		next[m] = scheduler.Time(rng.ExpFloat64() / spec.Rate * 1e9)
	}
	modelOf := map[scheduler.RequestID]int{}
	arrival := map[scheduler.RequestID]scheduler.Time{}
	ended := map[scheduler.RequestID]int{}
	lastFinish := make([]scheduler.Time, cfg.GPUs)
	for g := range lastFinish {
		lastFinish[g] = scheduler.Past
	}
	transfer := cfg.Delays.Dispatch(1)
	check := func(now scheduler.Time, out *Output) {
		for _, d := range out.Drops {
			if ended[d.Request.ID]++; ended[d.Request.ID] > 1 || modelOf[d.Request.ID] != d.Model {
				t.Fatalf("seed %d: request %d of model %d dropped again, or by model %d", seed, d.Request.ID, modelOf[d.Request.ID], d.Model)
			}
		}
		for _, p := range out.Plans {
			bs := len(p.Requests)
			switch {
			case bs == 0 || bs > alloc.Batch[p.Model]:
				t.Fatalf("seed %d: model %d batch of %d, limit %d", seed, p.Model, bs, alloc.Batch[p.Model])
			case !hosts[p.GPU][p.Model]:
				t.Fatalf("seed %d: model %d ran on GPU %d, which does not host it", seed, p.Model, p.GPU)
			case p.ExecAt < lastFinish[p.GPU]:
				t.Fatalf("seed %d: GPU %d starts a batch at %v before its last ends at %v", seed, p.GPU, p.ExecAt, lastFinish[p.GPU])
			case p.ExecAt != now || p.FinishAt != p.ExecAt.Add(cfg.Models[p.Model].Profile.Latency(bs)):
				t.Fatalf("seed %d: batch of %d at %v runs %v-%v", seed, bs, now, p.ExecAt, p.FinishAt)
			}
			lastFinish[p.GPU] = p.FinishAt
			for _, r := range p.Requests {
				if ended[r.ID]++; ended[r.ID] > 1 || modelOf[r.ID] != p.Model {
					t.Fatalf("seed %d: request %d of model %d planned again, or by model %d", seed, r.ID, modelOf[r.ID], p.Model)
				}
				if p.ExecAt < arrival[r.ID].Add(transfer) {
					t.Fatalf("seed %d: request %d runs at %v before its input arrives at %v", seed, r.ID, p.ExecAt, arrival[r.ID].Add(transfer))
				}
				if p.FinishAt.Add(cfg.Delays.Result) > r.Deadline {
					t.Fatalf("seed %d: request %d answered at %v after its deadline %v", seed, r.ID, p.FinishAt.Add(cfg.Delays.Result), r.Deadline)
				}
			}
			planned += bs
		}
	}
	end := scheduler.Time(d)
	for {
		m := 0
		for i := range next {
			if next[i] < next[m] {
				m = i
			}
		}
		ta := next[m]
		te := c.WakeAt()
		if ta >= end && te == scheduler.Never {
			break
		}
		if ta < end && ta <= te {
			id := scheduler.RequestID(issued)
			issued++
			modelOf[id], arrival[id] = m, ta
			check(ta, c.Arrive(ta, m, scheduler.Request{ID: id, Arrival: ta, Deadline: ta.Add(cfg.Models[m].SLO)}))
			next[m] = ta.Add(time.Duration(rng.ExpFloat64() / cfg.Models[m].Rate * 1e9))
		} else {
			check(te, c.Tick(te))
		}
	}
	if len(ended) != issued {
		t.Fatalf("seed %d: %d requests issued, %d ended", seed, issued, len(ended))
	}
	return issued, planned
}

func TestClusterSafety(t *testing.T) {
	var issued, planned int
	for seed := uint64(1); seed <= 100; seed++ {
		cfg := randomConfig(seed)
		// A few thousand requests per seed.
		var rate float64
		for _, m := range cfg.Models {
			rate += m.Rate
		}
		d := min(300*ms, time.Duration(3000/rate*float64(time.Second)))
		i, p := run(t, seed, cfg, d)
		issued += i
		planned += p
	}
	if issued < 20000 || planned < issued/4 {
		t.Errorf("%d requests issued, %d planned: workloads too small or too overloaded", issued, planned)
	}
}

// Under light load on one model with one GPU, nothing is dropped and
// batches stay within the limit.
func TestClusterLightLoad(t *testing.T) {
	p := profile.MustLinear(ms, 5*ms, 0)
	cfg := Config{GPUs: 2, Models: []serving.Demand{{Model: serving.Model{Profile: p, SLO: 25 * ms}, Rate: 200}}}
	issued, planned := run(t, 9, cfg, time.Second)
	if issued < 150 || planned != issued {
		t.Errorf("light load: %d issued, %d planned", issued, planned)
	}
}

func TestNewRejectsEmpty(t *testing.T) {
	p := profile.MustLinear(ms, 5*ms, 0)
	if _, err := New(Config{GPUs: 0, Models: []serving.Demand{{Model: serving.Model{Profile: p, SLO: 25 * ms}, Rate: 1}}}); err == nil {
		t.Error("New accepted 0 GPUs")
	}
	if _, err := New(Config{GPUs: 1}); err == nil {
		t.Error("New accepted no models")
	}
}

// When not even the bare models pack without overcommit, load must still
// decide placement: the heavy model gets a GPU of its own.
func TestAllocateOvercommitFollowsLoad(t *testing.T) {
	prof := profile.MustLinear(time.Millisecond, 5*time.Millisecond, 0)
	cfg := Config{GPUs: 2, Models: []serving.Demand{
		{Model: serving.Model{Profile: prof, SLO: 25 * time.Millisecond}, Rate: 1000},
		{Model: serving.Model{Profile: prof, SLO: 25 * time.Millisecond}, Rate: 100},
		{Model: serving.Model{Profile: prof, SLO: 25 * time.Millisecond}, Rate: 100},
	}}
	a := Allocate(cfg)
	own := false
	for _, shares := range a.GPUs {
		if len(shares) == 1 && shares[0].Model == 0 {
			own = true
		}
	}
	if !own {
		t.Fatalf("heavy model has no GPU of its own: %v", a.GPUs)
	}
}

// packable reports whether the bare models pack without overcommit.
func packable(cfg Config) bool {
	batch, need, _ := needs(cfg)
	_, ok := pack(cfg, batch, need, 0, false)
	return ok
}

// Twenty like models on 32 GPUs (Figure 7's even cells): no residual can
// share a GPU (two batches of 6 plus one more run 34ms, over the 25ms SLO),
// so packing takes one GPU per model, and a scale that gave any model a
// second GPU would need 40. The other 12 GPUs must not sit idle: each goes
// to a model as a spare, and its frontends route to it.
func TestAllocateSpreadsSpareGPUs(t *testing.T) {
	prof := profile.MustLinear(1053*time.Microsecond, 5072*time.Microsecond, 0)
	cfg := Config{GPUs: 32, Delays: scheduler.Delays{Ctrl: 100 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, Result: 100 * time.Microsecond}}
	for range 20 {
		cfg.Models = append(cfg.Models, serving.Demand{Model: serving.Model{Profile: prof, SLO: 25 * ms}, Rate: 100})
	}
	a := Allocate(cfg)
	gpus := make([]int, len(cfg.Models))
	for g, shares := range a.GPUs {
		if len(shares) != 1 {
			t.Fatalf("GPU %d hosts %d models, want 1: %v", g, len(shares), a.GPUs)
		}
		gpus[shares[0].Model]++
	}
	for m, n := range gpus {
		if n < 1 || n > 2 {
			t.Errorf("model %d on %d GPUs, want 1 or 2 (32 GPUs for 20 like models): %v", m, n, gpus)
		}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for m, rs := range c.routes {
		for _, r := range rs {
			if r.weight != 1 {
				t.Errorf("model %d routes to GPU %d with weight %g, want 1 (a GPU of its own)", m, r.gpu, r.weight)
			}
		}
	}
}

// A model's requests spread over its GPUs by what each can take: model 0
// needs 1.5 GPUs at the best scale, a whole GPU and half of one it has to
// itself (model 1 takes the third; no two models can share one), so its
// frontend sends it every other request on each, not two in three to the
// whole GPU while the other idles half the time.
func TestRoutesFollowCapacity(t *testing.T) {
	prof := profile.MustLinear(ms, 5*ms, 0)
	cfg := Config{GPUs: 3, Models: []serving.Demand{
		{Model: serving.Model{Profile: prof, SLO: 25 * ms}, Rate: 150},
		{Model: serving.Model{Profile: prof, SLO: 25 * ms}, Rate: 100},
	}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rs := c.routes[0]; len(rs) != 2 {
		t.Fatalf("model 0 has %d routes, want 2: %v", len(rs), c.alloc.GPUs)
	}
	perGPU := map[scheduler.GPUID]int{}
	// One request every 20ms: each runs alone as soon as it arrives.
	for i := range 60 {
		now := scheduler.Time(time.Duration(i) * 20 * ms)
		out := c.Arrive(now, 0, scheduler.Request{ID: scheduler.RequestID(i), Arrival: now, Deadline: now.Add(25 * ms)})
		for len(out.Plans) == 0 && c.WakeAt() <= now.Add(time.Millisecond) {
			out = c.Tick(c.WakeAt())
		}
		if len(out.Plans) != 1 || len(out.Drops) != 0 {
			t.Fatalf("request %d: %d plans, %d drops", i, len(out.Plans), len(out.Drops))
		}
		perGPU[out.Plans[0].GPU]++
		for c.WakeAt() < now.Add(20*ms) {
			c.Tick(c.WakeAt())
		}
	}
	if len(perGPU) != 2 {
		t.Fatalf("model 0 ran on %v", perGPU)
	}
	for g, n := range perGPU {
		if n != 30 {
			t.Errorf("GPU %d ran %d of model 0's 60 requests, want 30: %v", g, n, perGPU)
		}
	}
}
