package scheduler

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

const us = time.Microsecond

// The 1080Ti profiles of the paper's Table 5 that Figure 4 compares: BERT
// batches weakly (β/α ≈ 0.02), ResNet50 strongly (β/α ≈ 4.8).
var (
	bertProfile     = profile.MustLinear(7008*us, 159*us, 0)
	resnet50Profile = profile.MustLinear(1053*us, 5072*us, 0)
	figure4Delays   = Delays{Ctrl: 100 * us, DataPerRequest: 20 * us, Result: 100 * us}
)

// firstPlan drives a ModelCore and a RankCore with gpus idle GPUs: one
// request arrives at 0 with a 30ms SLO, and the cores run until the first
// batch is planned. It returns when the GPU was granted and the plan.
func firstPlan(t *testing.T, prof profile.Profile, gpus int) (Time, BatchPlan) {
	t.Helper()
	m := newModel(t, ModelConfig{Policy: PolicySymphony, Profile: prof, Delays: figure4Delays})
	r := newRank(t, RankConfig{Models: 1, GPUs: gpus, Policy: PolicySymphony, Delays: figure4Delays})
	r.Update(0, m.Enqueue(0, []Request{{ID: 1, Arrival: 0, Deadline: at(30 * ms)}}).Candidate)
	now := Time(0)
	for range 10 {
		for _, g := range r.Tick(now) {
			out := m.Grant(now, g)
			if len(out.Plans) != 1 {
				t.Fatalf("grant %+v at %v planned %d batches", g, now, len(out.Plans))
			}
			p := out.Plans[0]
			p.Requests = append([]Request(nil), p.Requests...)
			return now, p
		}
		if now = MaxTime(now, r.WakeAt()); now == Never {
			break
		}
	}
	t.Fatal("no batch planned")
	return 0, BatchPlan{}
}

// A lone BERT request with idle GPUs runs at once: holding it until
// sched_at (30ms − 0.1ms − ℓ(2) = 15.725ms) could save at most β = 0.159ms
// of GPU time, while the GPU sits idle for 15ms that the requests to come
// could have used (issue 19: BERT came out at 0.63-0.97× work-conserving
// on the Figure 4 grid). Before the backfill rule the grant came at
// 15.605ms.
func TestWeakBatcherBackfillsIdleGPU(t *testing.T) {
	grantedAt, p := firstPlan(t, bertProfile, 2)
	if grantedAt != 0 || p.ExecAt != at(120*us) {
		t.Fatalf("BERT: granted at %v, batch of %d starts at %v; want granted at 0, starting at 120µs (dispatch of 1)",
			grantedAt, len(p.Requests), p.ExecAt)
	}
}

// A strong batcher still holds its batch until sched_at, with idle GPUs or
// not: for ResNet50, 30ms − 0.1ms − ℓ(2) = 22.722ms.
func TestStrongBatcherStillHolds(t *testing.T) {
	grantedAt, p := firstPlan(t, resnet50Profile, 2)
	schedAt := at(30*ms - 100*us - resnet50Profile.Latency(2))
	if p.ExecAt != schedAt || grantedAt != schedAt.Add(-120*us) {
		t.Fatalf("ResNet50: granted at %v, starts at %v; want granted at %v, starting at sched_at %v",
			grantedAt, p.ExecAt, schedAt.Add(-120*us), schedAt)
	}
}

// Candidate.Backfill follows §4.3's βλ test, for weak batchers only: a
// weak batcher's held batch may backfill while it holds at least βλ
// requests, and not once the rate makes waiting for one more pay; a
// strong batcher's never may.
func TestCandidateBackfillRule(t *testing.T) {
	// β = 1ms ≤ α = 2ms: waiting for one more request pays from λ = 1000/s.
	weak := profile.MustLinear(2*ms, ms, 0)
	cases := []struct {
		name string
		prof profile.Profile
		rate int // requests per second over the past second
		want bool
	}{
		{"weak, slow", weak, 100, true},
		{"weak, fast", weak, 3000, false},
		{"strong, slow", resnet50Profile, 10, false},
		{"weak, beta-lambda", weak, 100, false},
	}
	for _, c := range cases {
		cfg := ModelConfig{Policy: PolicySymphony, Profile: c.prof, Delays: figure4Delays}
		if c.name == "weak, beta-lambda" {
			cfg.Schedulable = SchedulableBetaLambda // no hold at all: nothing to backfill
		}
		m := newModel(t, cfg)
		id := RequestID(0)
		for tenth := range 10 {
			now := at(time.Duration(tenth) * 100 * ms)
			reqs := make([]Request, c.rate/10)
			for i := range reqs {
				id++
				reqs[i] = Request{ID: id, Arrival: now, Deadline: now.Add(50 * ms)}
			}
			m.Enqueue(now, reqs)
			m.DropAll(now, DropDeadline)
		}
		now := at(time.Second)
		id++
		cand := m.Enqueue(now, []Request{{ID: id, Arrival: now, Deadline: now.Add(50 * ms)}}).Candidate
		if cand.Backfill != c.want {
			t.Errorf("%s: λ %.0f/s, candidate %+v: Backfill %v, want %v", c.name, m.rate.perSecond(now), cand, cand.Backfill, c.want)
		}
	}
}

// A backfill never takes a GPU that an armed candidate needs before the
// backfilled batch would end, and leaves one more GPU free for requests not
// yet queued; when the GPUs are busy, it tries again as the first frees.
func TestBackfillSparesGPUs(t *testing.T) {
	// Model 0 is held until 5ms; model 1, held until 20ms, may backfill a
	// 10ms batch (Deadline − InvalidAfter), which would keep its GPU past 5ms.
	held := Candidate{BatchSize: 1, ExecAt: at(5 * ms), InvalidAfter: at(8 * ms), Deadline: at(10 * ms), Version: 1}
	mayBackfill := Candidate{BatchSize: 1, ExecAt: at(20 * ms), Backfill: true, InvalidAfter: at(25 * ms), Deadline: at(35 * ms), Version: 1}
	// Two idle GPUs: one for model 0 at 5ms, one to spare; none to backfill.
	r := newRank(t, RankConfig{Models: 2, GPUs: 2})
	r.Update(0, held)
	r.Update(1, mayBackfill)
	wantGrants(t, "two GPUs", tick(r, 0))
	if r.WakeAt() != at(5*ms) {
		t.Fatalf("two GPUs: WakeAt %v, want model 0's timer at 5ms", r.WakeAt())
	}
	wantGrants(t, "model 0's timer", tick(r, at(5*ms)), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 2})
	// Three: model 1 backfills the first at once, and model 0 still gets one.
	r = newRank(t, RankConfig{Models: 2, GPUs: 3})
	r.Update(0, held)
	r.Update(1, mayBackfill)
	wantGrants(t, "three GPUs", tick(r, 0), Grant{Model: 1, GPU: 0, FreeAt: Past, GPUs: 3, Backfill: true})
	wantGrants(t, "model 0 keeps its GPU", tick(r, at(5*ms)), Grant{Model: 0, GPU: 1, FreeAt: Past, GPUs: 3})

	// Two busy GPUs, free at 8ms and 9ms: model 1 backfills the first as
	// it frees, the second to spare.
	r = newRank(t, RankConfig{Models: 2, GPUs: 2, StartOffline: true})
	r.EnableGPU(0, at(8*ms))
	r.EnableGPU(1, at(9*ms))
	r.Update(1, mayBackfill)
	wantGrants(t, "GPUs busy", tick(r, 0))
	if r.WakeAt() != at(8*ms) {
		t.Fatalf("GPUs busy: WakeAt %v, want 8ms, when the first frees", r.WakeAt())
	}
	wantGrants(t, "backfill", tick(r, at(8*ms)), Grant{Model: 1, GPU: 0, FreeAt: at(8 * ms), GPUs: 2, Backfill: true})
	if r.WakeAt() != Never {
		t.Fatalf("WakeAt %v after the backfill, want never", r.WakeAt())
	}

	// Both GPUs granted: model 1 waits for one to come back, then for it
	// to free.
	r = newRank(t, RankConfig{Models: 3, GPUs: 2})
	r.Update(0, Candidate{BatchSize: 1, ExecAt: 0, InvalidAfter: at(ms), Deadline: at(3 * ms), Version: 1})
	r.Update(2, Candidate{BatchSize: 1, ExecAt: 0, InvalidAfter: at(ms), Deadline: at(4 * ms), Version: 1})
	r.Update(1, mayBackfill)
	wantGrants(t, "GPUs granted", tick(r, 0), Grant{Model: 0, GPU: 0, FreeAt: Past, GPUs: 2}, Grant{Model: 2, GPU: 1, FreeAt: Past, GPUs: 2})
	r.Return(GPUReturn{Model: 0, GPU: 0, FreeAt: at(3 * ms), Used: true, Candidate: Candidate{Version: 2}})
	r.Return(GPUReturn{Model: 2, GPU: 1, FreeAt: at(4 * ms), Used: true, Candidate: Candidate{Version: 2}})
	wantGrants(t, "GPUs back, busy", tick(r, r.WakeAt()))
	if r.WakeAt() != at(3*ms) {
		t.Fatalf("GPUs back: WakeAt %v, want 3ms, when the first frees", r.WakeAt())
	}
	wantGrants(t, "backfill after return", tick(r, at(3*ms)), Grant{Model: 1, GPU: 0, FreeAt: at(3 * ms), GPUs: 2, Backfill: true})
}

// A backfill grant plans the batch as soon as the GPU and the inputs
// allow, where an ordinary grant of the same held candidate plans it at
// ExecAt.
func TestBackfillGrantPlansAtOnce(t *testing.T) {
	for _, backfill := range []bool{false, true} {
		m := newModel(t, ModelConfig{Policy: PolicySymphony, Profile: bertProfile, Delays: figure4Delays})
		cand := m.Enqueue(0, []Request{{ID: 1, Arrival: 0, Deadline: at(30 * ms)}}).Candidate
		if !cand.Backfill {
			t.Fatalf("candidate %+v may not backfill", cand)
		}
		out := m.Grant(at(ms), Grant{GPU: 3, FreeAt: at(2 * ms), GPUs: 4, Backfill: backfill})
		want := cand.ExecAt
		if backfill {
			want = at(2 * ms)
		}
		if len(out.Plans) != 1 || out.Plans[0].ExecAt != want || out.Returns[0].FreeAt != want.Add(bertProfile.Latency(1)) {
			t.Fatalf("backfill %v: plans %+v, return %+v; want the batch at %v", backfill, out.Plans, out.Returns, want)
		}
	}
}

// The backfill path allocates nothing once its buffers have grown.
func TestBackfillAllocationFree(t *testing.T) {
	l := newRankLoop(t, 16, 8)
	l.backfill = true
	if n := allocsIn10000Steps(l.step); n != 0 {
		t.Errorf("%v allocations in 10000 rank steps with backfills, want 0", n)
	}
	if l.backfills < 1000 {
		t.Errorf("only %d backfills in 20000 steps", l.backfills)
	}
	m := newModel(t, ModelConfig{Policy: PolicySymphony, Profile: bertProfile, Delays: figure4Delays})
	now, id := Time(0), RequestID(0)
	one := make([]Request, 1)
	step := func() {
		now = now.Add(2 * ms)
		id++
		one[0] = Request{ID: id, Arrival: now, Deadline: now.Add(30 * ms)}
		out := m.Enqueue(now, one)
		if out.Candidate.Backfill {
			m.Grant(now, Grant{FreeAt: now, GPUs: 8, Backfill: true})
		}
	}
	if n := allocsIn10000Steps(step); n != 0 {
		t.Errorf("%v allocations in 10000 weak-batcher steps, want 0", n)
	}
}
