package scheduler

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

// Two held batches on one GPU: model 0 held until 10ms (slack to 11ms, a
// 20ms run), model 1 until 20ms (slack to 22ms, a 22ms run). Granted at
// its own ExecAt, model 0 would keep the GPU until 30ms and model 1 could
// not start by 22ms. Laid out backwards in deadline order, model 1 starts
// at 20ms and model 0 must start by 20 − 20 = 0: the collision rule grants
// it the idle GPU at once (Early), and model 1 still gets it at 20ms.
func TestCollisionStartsTheFirstEarly(t *testing.T) {
	first := Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(11 * ms), Deadline: at(31 * ms), Version: 1}
	second := Candidate{BatchSize: 1, ExecAt: at(20 * ms), InvalidAfter: at(22 * ms), Deadline: at(44 * ms), Version: 1}
	r := newRank(t, RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony})
	r.Update(0, first)
	r.Update(1, second)
	if r.WakeAt() != 0 {
		t.Fatalf("WakeAt %v, want 0: model 0 must start now for model 1 to fit", r.WakeAt())
	}
	wantGrants(t, "collision", tick(r, 0), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 1, Early: true})
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(20 * ms), Used: true, Candidate: Candidate{Version: 2}})
	if r.WakeAt() != at(20*ms) {
		t.Fatalf("WakeAt %v after model 0's batch, want model 1's ExecAt, 20ms", r.WakeAt())
	}
	wantGrants(t, "model 1 on time", tick(r, at(20*ms)), Grant{Model: 1, GPU: 0, FreeAt: at(20 * ms), GPUs: 1})

	// A 5ms dispatch delay: the grant leaves 5ms before the start, and
	// with the lead before that.
	r = newRank(t, RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony, Delays: Delays{Ctrl: 5 * ms}, Lead: ms})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(30 * ms), InvalidAfter: at(31 * ms), Deadline: at(51 * ms), Version: 1})
	r.Update(1, Candidate{BatchSize: 1, ExecAt: at(40 * ms), InvalidAfter: at(42 * ms), Deadline: at(64 * ms), Version: 1})
	if want := at(40*ms - 20*ms - 5*ms - ms); r.WakeAt() != want {
		t.Fatalf("with delays: WakeAt %v, want %v", r.WakeAt(), want)
	}
}

// Where the held batches fit one after the other at their own preferred
// starts, on two GPUs that serve one each, under another policy, or at
// mixed priority levels, the rule moves nothing: each batch waits for its
// own timer.
func TestCollisionOnlyWhereTheGPUsCannotFitThem(t *testing.T) {
	first := Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(11 * ms), Deadline: at(31 * ms), Version: 1}
	later := Candidate{BatchSize: 1, ExecAt: at(40 * ms), InvalidAfter: at(42 * ms), Deadline: at(64 * ms), Version: 1}
	second := Candidate{BatchSize: 1, ExecAt: at(20 * ms), InvalidAfter: at(22 * ms), Deadline: at(44 * ms), Version: 1}
	urgent := second
	urgent.Priority = 1
	for _, c := range []struct {
		name          string
		cfg           RankConfig
		first, second Candidate
	}{
		{"they fit", RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony}, first, later},
		// Model 0 runs 10-20ms and model 1 starts at its 25ms, though
		// model 1's deadline (39ms) is the earlier.
		{"they fit, deadlines the other way", RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony},
			Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(30 * ms), Deadline: at(40 * ms), Version: 1},
			Candidate{BatchSize: 1, ExecAt: at(25 * ms), InvalidAfter: at(25 * ms), Deadline: at(39 * ms), Version: 1}},
		{"two GPUs", RankConfig{Models: 2, GPUs: 2, Policy: PolicySymphony}, first, second},
		{"work-conserving", RankConfig{Models: 2, GPUs: 1, Policy: PolicyWorkConserving}, first, second},
		{"priority levels", RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony}, first, urgent},
	} {
		r := newRank(t, c.cfg)
		r.Update(0, c.first)
		r.Update(1, c.second)
		if r.WakeAt() != c.first.ExecAt {
			t.Errorf("%s: WakeAt %v, want model 0's own timer at %v", c.name, r.WakeAt(), c.first.ExecAt)
		}
		wantGrants(t, c.name, tick(r, 0))
	}
	// A batch held past its InvalidAfter (ExecAt 12ms, InvalidAfter 11ms)
	// with no other batch near is left to its own timer, which fires at
	// 12ms: the rule does not move it.
	r := newRank(t, RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(12 * ms), InvalidAfter: at(11 * ms), Deadline: at(31 * ms), Version: 1})
	r.Update(1, Candidate{BatchSize: 1, ExecAt: at(500 * ms), InvalidAfter: at(502 * ms), Deadline: at(524 * ms), Version: 1})
	if r.WakeAt() != at(12*ms) {
		t.Errorf("a batch past its InvalidAfter: WakeAt %v, want its own timer at 12ms", r.WakeAt())
	}
}

// A busy GPU that frees at 5ms, after the layout's start (0): the first
// batch takes it as it frees, still before its own 10ms.
func TestCollisionWaitsForTheGPU(t *testing.T) {
	r := newRank(t, RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony, StartOffline: true})
	r.EnableGPU(0, at(5*ms))
	r.Update(0, Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(11 * ms), Deadline: at(31 * ms), Version: 1})
	r.Update(1, Candidate{BatchSize: 1, ExecAt: at(20 * ms), InvalidAfter: at(22 * ms), Deadline: at(44 * ms), Version: 1})
	if r.WakeAt() != at(5*ms) {
		t.Fatalf("WakeAt %v, want 5ms, when the GPU frees", r.WakeAt())
	}
	wantGrants(t, "before the GPU frees", tick(r, at(4*ms)))
	wantGrants(t, "as it frees", tick(r, at(5*ms)), Grant{Model: 0, GPU: 0, FreeAt: at(5 * ms), GPUs: 1, Early: true})
}

// An early grant plans the held batch as soon as the GPU and the inputs
// allow, for a strong batcher too, where an ordinary grant plans it at
// ExecAt.
func TestEarlyGrantPlansAtOnce(t *testing.T) {
	for _, early := range []bool{false, true} {
		m := newModel(t, ModelConfig{Policy: PolicySymphony, Profile: resnet50Profile, Delays: figure4Delays})
		cand := m.Enqueue(0, []Request{{ID: 1, Arrival: 0, Deadline: at(30 * ms)}}).Candidate
		if cand.Backfill {
			t.Fatalf("candidate %+v of a strong batcher may backfill", cand)
		}
		out := m.Grant(at(ms), Grant{GPU: 0, FreeAt: at(2 * ms), GPUs: 1, Early: early})
		want := cand.ExecAt
		if early {
			want = at(2 * ms)
		}
		if len(out.Plans) != 1 || out.Plans[0].ExecAt != want {
			t.Fatalf("early %v: plans %+v; want the batch at %v", early, out.Plans, want)
		}
	}
}

// The collision rule allocates nothing once its buffers have grown, on a
// one-GPU loop whose two models' held batches keep colliding.
func TestCollisionAllocationFree(t *testing.T) {
	r := newRank(t, RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony})
	// Each model's next batch is held 9ms (model 0) or 11ms (model 1)
	// after its last grant, with 1ms of slack and a 5ms run: the two come
	// due within a run of each other.
	held := func(m ModelID, now Time, version uint64) Candidate {
		exec := now.Add(9*ms + time.Duration(m)*2*ms)
		return Candidate{BatchSize: 1, ExecAt: exec, InvalidAfter: exec.Add(ms), Deadline: exec.Add(6 * ms), Version: version}
	}
	grants, early := collideFor10000Steps(t, r, 2, held, 5*ms)
	if early < grants/4 {
		t.Errorf("%d early grants of %d in 20000 steps", early, grants)
	}
}

// collideFor10000Steps drives r, a millisecond a step, for models whose
// next candidate after a grant at now is held(m, now, version), each batch
// running run, fails t if the steps allocate, and returns the grants and
// how many of them were early.
func collideFor10000Steps(t *testing.T, r *RankCore, models int, held func(m ModelID, now Time, version uint64) Candidate, run time.Duration) (grants, early int) {
	t.Helper()
	versions := make([]uint64, models)
	for m := range models {
		versions[m] = 1
		r.Update(ModelID(m), held(ModelID(m), 0, 1))
	}
	var now Time
	step := func() {
		now = now.Add(ms)
		for r.WakeAt() <= now {
			for _, g := range r.Tick(now) {
				grants++
				if g.Early {
					early++
				}
				versions[g.Model]++
				r.Return(GPUReturn{Model: g.Model, GPU: g.GPU, FreeAt: MaxTime(now, g.FreeAt).Add(run), Used: true,
					Candidate: held(g.Model, now, versions[g.Model])})
			}
		}
	}
	if n := allocsIn10000Steps(step); n != 0 {
		t.Errorf("%v allocations in 10000 rank steps of %d GPUs, want 0", n, r.online)
	}
	t.Logf("%d early grants of %d", early, grants)
	return grants, early
}

// Three held batches on two GPUs that free at 0. Models 0 and 1 are held
// until 10ms (slack to 11ms, 20ms runs), model 2 until 20ms (slack to
// 22ms). Held, 0 and 1 take both GPUs from 10 to 30ms and model 2 cannot
// start by 22ms. With model 0 (the first due) started at 0, it frees a GPU
// at 20ms and nothing misses: the rule grants model 0 the idle GPU at once
// (Early); models 1 and 2 keep their timers.
func TestCollisionOnTwoGPUs(t *testing.T) {
	held := func(exec, slack, run time.Duration) Candidate {
		return Candidate{BatchSize: 1, ExecAt: at(exec), InvalidAfter: at(exec + slack), Deadline: at(exec + slack + run), EarlyCheap: true, Version: 1}
	}
	two := func(cfg RankConfig) *RankCore {
		cfg.StartOffline = true
		r := newRank(t, cfg)
		for g := range cfg.GPUs {
			r.EnableGPU(GPUID(g), 0)
		}
		return r
	}
	r := two(RankConfig{Models: 3, GPUs: 2, Policy: PolicySymphony})
	r.Update(0, held(10*ms, ms, 20*ms))
	r.Update(1, held(10*ms, ms, 20*ms))
	r.Update(2, held(20*ms, 2*ms, 22*ms))
	if r.WakeAt() != 0 {
		t.Fatalf("WakeAt %v, want 0: model 0 must start now for model 2 to fit", r.WakeAt())
	}
	wantGrants(t, "collision", tick(r, 0), Grant{Model: 0, GPU: 0, FreeAt: 0, GPUs: 2, Early: true})
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(20 * ms), Used: true, Candidate: Candidate{Version: 2}})
	if r.WakeAt() != at(10*ms) {
		t.Fatalf("WakeAt %v after model 0's batch, want model 1's ExecAt, 10ms", r.WakeAt())
	}

	// Where the rule moves nothing: each batch waits for its own timer.
	for _, c := range []struct {
		name    string
		gpus    int
		a, b, c Candidate
	}{
		{"a GPU for each", 3, held(10*ms, ms, 20*ms), held(10*ms, ms, 20*ms), held(20*ms, 2*ms, 22*ms)},
		{"they fit", 2, held(10*ms, ms, 20*ms), held(10*ms, ms, 20*ms), held(20*ms, 12*ms, 22*ms)},
		// Three batches due at 10ms on two GPUs: model 0 started at 0
		// holds its GPU until 20ms, and model 2 misses anyway.
		{"the early start does not help", 2, held(10*ms, ms, 20*ms), held(10*ms, ms, 20*ms), held(10*ms, ms, 20*ms)},
		{"too dear to start early", 2, func() Candidate { c := held(10*ms, ms, 20*ms); c.EarlyCheap = false; return c }(),
			held(10*ms, ms, 20*ms), held(20*ms, 2*ms, 22*ms)},
		{"priority levels", 2, held(10*ms, ms, 20*ms), held(10*ms, ms, 20*ms), func() Candidate { c := held(20*ms, 2*ms, 22*ms); c.Priority = 1; return c }()},
	} {
		r := two(RankConfig{Models: 3, GPUs: c.gpus, Policy: PolicySymphony})
		r.Update(0, c.a)
		r.Update(1, c.b)
		r.Update(2, c.c)
		if r.WakeAt() != at(10*ms) {
			t.Errorf("%s: WakeAt %v, want the first timer at 10ms", c.name, r.WakeAt())
		}
		wantGrants(t, c.name, tick(r, 0))
	}
}

// An early start on several GPUs starts no sooner than now: GPUs idle
// since long ago (or never used, free since Past) lend no time before it.
// Three batches due at 1s on two GPUs that freed at 0 (or were never
// used) cannot all start in time whatever starts early, so at 1s, as at
// the first Tick, the rule moves nothing.
func TestCollisionOnManyCountsFromNow(t *testing.T) {
	due := func(exec Time) Candidate {
		return Candidate{BatchSize: 1, ExecAt: exec, InvalidAfter: exec.Add(ms), Deadline: exec.Add(21 * ms), EarlyCheap: true, Version: 1}
	}
	for _, c := range []struct {
		name   string
		freeAt Time // the GPUs'; Past: never used
		now    Time
	}{
		{"never used", Past, at(time.Second - 10*ms)},
		{"idle since 0", 0, at(time.Second - 10*ms)},
	} {
		r := newRank(t, RankConfig{Models: 3, GPUs: 2, Policy: PolicySymphony, StartOffline: true})
		for g := range GPUID(2) {
			r.EnableGPU(g, c.freeAt)
		}
		wantGrants(t, c.name+", first tick", tick(r, 0))
		for m := range ModelID(3) {
			r.Update(m, due(at(time.Second)))
		}
		wantGrants(t, c.name, tick(r, c.now))
		if r.WakeAt() != at(time.Second) {
			t.Errorf("%s: WakeAt %v, want the first timer at 1s", c.name, r.WakeAt())
		}
	}
}

// The rule on several GPUs allocates nothing once its buffers have grown,
// on a two-GPU loop whose three models' held batches keep colliding.
func TestCollisionOnManyAllocationFree(t *testing.T) {
	r := newRank(t, RankConfig{Models: 3, GPUs: 2, Policy: PolicySymphony})
	held := func(m ModelID, now Time, version uint64) Candidate {
		exec := now.Add(9*ms + time.Duration(m)*ms)
		return Candidate{BatchSize: 1, ExecAt: exec, InvalidAfter: exec.Add(ms), Deadline: exec.Add(7 * ms), EarlyCheap: true, Version: version}
	}
	if grants, early := collideFor10000Steps(t, r, 3, held, 6*ms); early == 0 {
		t.Errorf("no early grant of %d", grants)
	}
}

// EarlyCheap: a batch held for a few more requests on a linear profile
// (ResNet50) is cheap to start early; one held to grow from 1 to a dozen,
// or on a profile of steps where a batch of 2 takes as long as one of 4,
// is not; a batch not held is.
func TestEarlyCheap(t *testing.T) {
	steps, err := profile.Table([]time.Duration{53 * ms, 70 * ms, 70 * ms, 70 * ms})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		prof profile.Profile
		bs   int
		wait time.Duration // from now to ExecAt, at 40 requests a second
		want bool
	}{
		{"linear, 11 of 12", resnet50Profile, 11, 25 * ms, true},
		{"linear, 1 of 12", resnet50Profile, 1, 290 * ms, false},
		{"steps, 2 of 4", steps, 2, 50 * ms, false},
		{"steps, 4 of 4", steps, 4, 50 * ms, true},
		{"not held", steps, 1, 0, true},
	} {
		m := newModel(t, ModelConfig{Policy: PolicySymphony, Profile: c.prof, Delays: figure4Delays})
		// 40 requests a second for a second, each dropped at once: the
		// rate is known.
		for k := range 40 {
			now := at(time.Duration(k) * 25 * ms)
			m.Enqueue(now, []Request{{ID: RequestID(k + 1), Arrival: now, Deadline: now.Add(300 * ms)}})
			m.DropAll(now, DropDeadline)
		}
		now := at(time.Second)
		if got := m.earlyCheap(now, c.bs, now.Add(c.wait), now); got != c.want {
			t.Errorf("%s: EarlyCheap %v, want %v (λ %.0f/s)", c.name, got, c.want, m.rate.perSecond(now))
		}
	}
}
