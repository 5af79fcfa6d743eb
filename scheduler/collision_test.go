package scheduler

import (
	"testing"
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

// Where the held batches fit one after the other at their own ExecAts, on
// more than one GPU, under another policy, or when the GPU frees too late
// for the first to start in time anyway, the rule moves nothing: each
// batch waits for its own timer.
func TestCollisionOnlyWhereOneGPUCannotFitThem(t *testing.T) {
	first := Candidate{BatchSize: 1, ExecAt: at(10 * ms), InvalidAfter: at(11 * ms), Deadline: at(31 * ms), Version: 1}
	later := Candidate{BatchSize: 1, ExecAt: at(40 * ms), InvalidAfter: at(42 * ms), Deadline: at(64 * ms), Version: 1}
	second := Candidate{BatchSize: 1, ExecAt: at(20 * ms), InvalidAfter: at(22 * ms), Deadline: at(44 * ms), Version: 1}
	for _, c := range []struct {
		name   string
		cfg    RankConfig
		second Candidate
		freeAt Time
	}{
		{"they fit", RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony}, later, Past},
		{"two GPUs", RankConfig{Models: 2, GPUs: 2, Policy: PolicySymphony}, second, Past},
		{"work-conserving", RankConfig{Models: 2, GPUs: 1, Policy: PolicyWorkConserving}, second, Past},
		{"the GPU frees at 5ms", RankConfig{Models: 2, GPUs: 1, Policy: PolicySymphony, StartOffline: true}, second, at(5 * ms)},
	} {
		r := newRank(t, c.cfg)
		if c.cfg.StartOffline {
			r.EnableGPU(0, c.freeAt)
		}
		r.Update(0, first)
		r.Update(1, c.second)
		if r.WakeAt() != first.ExecAt {
			t.Errorf("%s: WakeAt %v, want model 0's own timer at %v", c.name, r.WakeAt(), first.ExecAt)
		}
		wantGrants(t, c.name, tick(r, 0))
	}
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

// The collision rule allocates nothing once its buffers have grown.
func TestCollisionAllocationFree(t *testing.T) {
	l := newRankLoop(t, 16, 1)
	if n := allocsIn10000Steps(l.step); n != 0 {
		t.Errorf("%v allocations in 10000 one-GPU rank steps, want 0", n)
	}
}
