package scheduler

import (
	"testing"
	"time"
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
// starts, on more than one GPU, under another policy, or at mixed priority
// levels, the rule moves nothing: each batch waits for its own timer.
func TestCollisionOnlyWhereOneGPUCannotFitThem(t *testing.T) {
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
	versions := []uint64{1, 1}
	r.Update(0, held(0, 0, 1))
	r.Update(1, held(1, 0, 1))
	var now Time
	grants, early := 0, 0
	step := func() {
		now = now.Add(ms)
		for r.WakeAt() <= now {
			for _, g := range r.Tick(now) {
				grants++
				if g.Early {
					early++
				}
				versions[g.Model]++
				r.Return(GPUReturn{Model: g.Model, GPU: g.GPU, FreeAt: MaxTime(now, g.FreeAt).Add(5 * ms), Used: true,
					Candidate: held(g.Model, now, versions[g.Model])})
			}
		}
	}
	if n := allocsIn10000Steps(step); n != 0 {
		t.Errorf("%v allocations in 10000 one-GPU rank steps, want 0", n)
	}
	t.Logf("%d early grants of %d", early, grants)
	if early < grants/4 {
		t.Errorf("%d early grants of %d in 20000 steps", early, grants)
	}
}
