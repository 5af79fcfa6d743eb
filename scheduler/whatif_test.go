package scheduler_test

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
)

// On random queues, LargestBatch names exactly the batches GrantBatch
// plans: the largest finishes in time behind its skipped heads, one more
// would not, and a refused choice changes nothing.
func TestGrantBatchPlansWhatLargestBatchAllows(t *testing.T) {
	checked := 0
	for seed := uint64(0); seed < cloneSeeds; seed++ {
		cfg := randomModelConfig(seed)
		d := newModelDriver(t, cfg)
		for k := range cloneSteps {
			d.feed(eventRNG(seed, 0, k))
			r := eventRNG(seed, 2, k)
			g := d.grant(r)
			queued := d.core.Queued()
			for skip := range min(queued, 4) {
				largest := d.core.LargestBatch(d.now, g.FreeAt, skip)
				if largest == 0 {
					continue
				}
				checked++
				c := d.core.Clone()
				out, err := c.GrantBatch(d.now, g, skip, largest)
				if err != nil {
					t.Fatalf("seed %d step %d: batch of %d behind %d, as LargestBatch allows: %v", seed, k, largest, skip, err)
				}
				if len(out.Plans) != 1 || len(out.Returns) != 1 || len(out.Drops) < skip {
					t.Fatalf("seed %d step %d: %d plans, %d returns, %d drops; want 1, 1 and at least %d", seed, k, len(out.Plans), len(out.Returns), len(out.Drops), skip)
				}
				p := out.Plans[0]
				head := p.Requests[0]
				for _, dr := range out.Drops[:skip] {
					if dr.Reason != scheduler.DropPruned || dr.Request.Deadline > head.Deadline {
						t.Fatalf("seed %d step %d: skipped %+v; want pruned heads due before the batch's %v", seed, k, dr, head.Deadline)
					}
				}
				exec := scheduler.MaxTime(d.now.Add(cfg.Delays.Dispatch(largest)), g.FreeAt)
				dl := head.Deadline.Add(-cfg.Delays.Result)
				ret := out.Returns[0]
				switch {
				case len(p.Requests) != largest || p.GPU != g.GPU || p.ExecAt != exec || p.FinishAt != exec.Add(cfg.Profile.Latency(largest)):
					t.Fatalf("seed %d step %d: plan %+v; want %d requests on GPU %d from %v", seed, k, p, largest, g.GPU, exec)
				case p.FinishAt > dl:
					t.Fatalf("seed %d step %d: batch ends at %v, after its head's deadline %v", seed, k, p.FinishAt, dl)
				case !ret.Used || ret.GPU != g.GPU || ret.FreeAt != p.FinishAt || ret.Candidate != out.Candidate || !out.CandidateChanged:
					t.Fatalf("seed %d step %d: return %+v after plan %+v", seed, k, ret, p)
				case c.Queued()+len(out.Drops)+largest != queued:
					t.Fatalf("seed %d step %d: %d queued, %d dropped, %d planned of %d", seed, k, c.Queued(), len(out.Drops), largest, queued)
				}
				more := largest + 1
				if more <= min(queued-skip, cfg.Profile.MaxBatch()) {
					start := scheduler.MaxTime(d.now.Add(cfg.Delays.Dispatch(more)), g.FreeAt)
					if start.Add(cfg.Profile.Latency(more)) <= dl {
						t.Fatalf("seed %d step %d: LargestBatch %d behind %d, but %d fit", seed, k, largest, skip, more)
					}
				}
				refused := d.core.Clone()
				if _, err := refused.GrantBatch(d.now, g, skip, more); err == nil {
					t.Fatalf("seed %d step %d: a batch of %d behind %d was planned; LargestBatch allows %d", seed, k, more, skip, largest)
				}
				again, _ := refused.GrantBatch(d.now, g, skip, largest)
				if a, b := d.observe(again, "after refusal"), d.observe(out, "after refusal"); a != b {
					t.Fatalf("seed %d step %d: a refused choice changed the core:\n%s\n%s", seed, k, a, b)
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d batches checked", checked)
	}
}

// NextGrant names the earliest-free GPU and when the hand-off would give
// it; GrantEarly grants it then, ahead of the candidate's timer, and the
// timer does not grant the model again.
func TestGrantEarlyBeatsTheTimer(t *testing.T) {
	ms := func(x float64) scheduler.Time { return scheduler.Time(x * float64(time.Millisecond)) }
	r, err := scheduler.NewRankCore(scheduler.RankConfig{Models: 2, GPUs: 2, Policy: scheduler.PolicySymphony, StartOffline: true,
		Delays: scheduler.Delays{Ctrl: time.Millisecond, DataPerRequest: 100 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	r.EnableGPU(0, ms(30))
	r.EnableGPU(1, ms(40))
	if _, at := r.NextGrant(0); at != scheduler.Never {
		t.Fatalf("next grant at %v for a model without a candidate; want never", at)
	}
	r.Update(0, scheduler.Candidate{BatchSize: 4, ExecAt: ms(50), InvalidAfter: ms(60), Deadline: ms(70), Version: 1})
	// Dispatching 4 takes 1.4ms: the timer fires at 48.6ms, the GPU free
	// at 30ms could be handed over from 28.6ms.
	want := scheduler.Grant{Model: 0, GPU: 0, FreeAt: ms(30), GPUs: 2}
	if g, at := r.NextGrant(0); g != want || at != ms(28.6) {
		t.Fatalf("next grant %+v at %v; want %+v at 28.6ms", g, at, want)
	}
	if r.WakeAt() != ms(48.6) {
		t.Fatalf("wake at %v; want the timer at 48.6ms", r.WakeAt())
	}
	if g, ok := r.GrantEarly(ms(28), 0); ok {
		t.Fatalf("granted %+v at 28ms, before the GPU could be handed over", g)
	}
	if g, ok := r.GrantEarly(ms(28.6), 0); !ok || g != want {
		t.Fatalf("early grant %+v %v; want %+v", g, ok, want)
	}
	if _, at := r.NextGrant(0); at != scheduler.Never || r.WakeAt() != scheduler.Never || r.FreeGPUs() != 1 {
		t.Fatalf("after the early grant: next grant at %v, wake at %v, %d GPUs free; want never, never, 1", at, r.WakeAt(), r.FreeGPUs())
	}
	if gs := r.Tick(ms(48.6)); len(gs) != 0 {
		t.Fatalf("the timer granted %+v after the early grant", gs)
	}
	r.Return(scheduler.GPUReturn{Model: 0, GPU: 0, FreeAt: ms(45), Used: true,
		Candidate: scheduler.Candidate{BatchSize: 1, ExecAt: ms(80), InvalidAfter: ms(90), Deadline: ms(95), Version: 2}})
	if g, at := r.NextGrant(0); g.GPU != 1 || at != ms(40).Add(-1100*time.Microsecond) {
		t.Fatalf("after the return: next grant %+v at %v; want GPU 1, free at 40ms, at 38.9ms", g, at)
	}
}
