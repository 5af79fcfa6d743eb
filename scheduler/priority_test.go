package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

// withPriority sets p on every request of rs.
func withPriority(p Priority, rs []Request) []Request {
	for i := range rs {
		rs[i].Priority = p
	}
	return rs
}

// A higher level is planned first: with room for three, the batch takes
// the high level's two requests, though the low level's are due sooner,
// then the low level's earliest. The plan lists them in deadline order,
// and the batch meets the earliest deadline among them.
func TestPriorityPlannedFirst(t *testing.T) {
	// Work-conserving, ℓ(b) = 1ms·b + 5ms, max batch 3.
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Profile: linear5(3)})
	m.Enqueue(0, mkReqs(1, 20*ms, 21*ms, 22*ms))                  // low: 1, 2, 3
	out := m.Enqueue(0, withPriority(2, mkReqs(4, 40*ms, 41*ms))) // high: 4, 5
	// Batch of 3: high 4, 5 and low 1; deadline 20ms; 0 + ℓ(3) = 8 ≤ 20.
	wantCand(t, "enqueued", out.Candidate, 3, 0, at(12*ms), at(20*ms))
	out = m.Grant(0, Grant{GPU: 0, FreeAt: Past})
	if got := ids(out.Plans[0].Requests); !slices.Equal(got, []RequestID{1, 4, 5}) {
		t.Errorf("plan %v, want the high level's 4 and 5 with low 1, in deadline order [1 4 5]", got)
	}
	// Left: low 2 and 3.
	if m.Queued() != 2 || m.Candidate().Deadline != at(21*ms) {
		t.Errorf("after the grant: %d queued, candidate %+v; want low 2, 3", m.Queued(), m.Candidate())
	}
}

// A low-level request joins the batch only if the whole batch still meets
// its deadline: here its deadline is too near for three, so the batch is
// the high level's two.
func TestPriorityLowerLevelFillsOnlyWhatFits(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Profile: linear5(8)})
	m.Enqueue(0, mkReqs(1, 7500*time.Microsecond))                // low 1: alone it fits (ℓ(1) = 6ms), in three it does not
	out := m.Enqueue(0, withPriority(1, mkReqs(2, 30*ms, 31*ms))) // high 2, 3
	wantCand(t, "enqueued", out.Candidate, 2, 0, at(23*ms), at(30*ms))
}

// Under overload the lower level absorbs the drops: a GPU busy with the
// high level's batches leaves the low level's requests to end by their
// deadlines, and no high request is dropped while the high level alone
// fits.
func TestPriorityLowerLevelAbsorbsOverload(t *testing.T) {
	for _, pol := range []Policy{PolicySymphony, PolicyWorkConserving, PolicyClockwork} {
		m := newModel(t, ModelConfig{Policy: pol, Profile: linear5(8), Drop: DropWindow})
		now, free := Time(0), Time(0)
		var next RequestID
		dropped := map[Priority]int{}
		served := map[Priority]int{}
		for step := 0; step < 400; step++ {
			now = now.Add(2 * ms)
			// Every 2ms: one high and two low requests with a 40ms SLO;
			// the GPU serves at most 8 per 13ms (0.62 a ms), under half
			// of the 1.5 a ms that arrive, and the high level's share
			// (0.5 a ms) fits.
			for _, p := range []Priority{1, 0, 0} {
				next++
				out := m.Enqueue(now, []Request{{ID: next, Arrival: now, Deadline: now.Add(40 * ms), Priority: p}})
				for _, d := range out.Drops {
					dropped[d.Request.Priority]++
				}
			}
			// Granted as the rank loop does: once the GPU is free and the
			// candidate wants to run.
			if c := m.Candidate(); free > now || !c.Valid() || c.ExecAt > now {
				continue
			}
			out := m.Grant(now, Grant{GPU: 0, FreeAt: free, GPUs: 1})
			for _, d := range out.Drops {
				dropped[d.Request.Priority]++
			}
			for _, p := range out.Plans {
				for _, r := range p.Requests {
					served[r.Priority]++
				}
			}
			free = out.Returns[0].FreeAt
		}
		if dropped[1] != 0 || served[1] < 350 || dropped[0] < 300 {
			t.Errorf("%v: high served %d dropped %d, low served %d dropped %d; want no high drop and the low level absorbing the overload",
				pol, served[1], dropped[1], served[0], dropped[0])
		}
	}
}

// Requests that all share one level, whatever it is, are scheduled as if
// they had none: the same candidates, plans and drops.
func TestOneLevelIsNoLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for iter := range 200 {
		cfg := ModelConfig{Profile: profile.MustLinear(time.Duration(1+rng.IntN(2000))*time.Microsecond, time.Duration(rng.IntN(5000))*time.Microsecond, 16),
			Policy: []Policy{PolicySymphony, PolicyWorkConserving, PolicyClockwork}[rng.IntN(3)], Drop: DropPolicy(rng.IntN(3))}
		plain, leveled := newModel(t, cfg), newModel(t, cfg)
		now, free := Time(0), Past
		var next RequestID
		for step := 0; step < 80; step++ {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
			var a, b *ModelOutput
			if rng.IntN(3) > 0 {
				rs := make([]Request, 1+rng.IntN(4))
				for i := range rs {
					next++
					rs[i] = Request{ID: next, Arrival: now, Deadline: now.Add(time.Duration(5+rng.IntN(60)) * ms)}
				}
				a = plain.Enqueue(now, rs)
				b = leveled.Enqueue(now, withPriority(7, slices.Clone(rs)))
			} else {
				a = plain.Grant(now, Grant{GPU: 0, FreeAt: free, GPUs: 1})
				b = leveled.Grant(now, Grant{GPU: 0, FreeAt: free, GPUs: 1})
				free = a.Returns[0].FreeAt
			}
			ac, bc := a.Candidate, b.Candidate
			if bc.Valid() && bc.Priority != 7 {
				t.Fatalf("iteration %d step %d: candidate at level %d, want 7", iter, step, bc.Priority)
			}
			bc.Priority = 0
			if ac != bc || len(a.Plans) != len(b.Plans) || len(a.Drops) != len(b.Drops) {
				t.Fatalf("iteration %d step %d: %+v vs %+v", iter, step, a, b)
			}
			for i := range a.Plans {
				if !slices.Equal(ids(a.Plans[i].Requests), ids(b.Plans[i].Requests)) || a.Plans[i].ExecAt != b.Plans[i].ExecAt {
					t.Fatalf("iteration %d step %d: plans differ", iter, step)
				}
			}
		}
	}
}

// With random levels, every plan still meets the earliest deadline among
// its requests, holds no more than the largest batch, and lists them in
// deadline order; every request ends exactly once (planned or dropped).
func TestPriorityPlansHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	plans := 0
	for iter := range 300 {
		d := Delays{Ctrl: time.Duration(rng.IntN(500)) * time.Microsecond, Result: time.Duration(rng.IntN(2000)) * time.Microsecond}
		m := newModel(t, ModelConfig{Profile: profile.MustLinear(time.Duration(1+rng.IntN(2000))*time.Microsecond, time.Duration(rng.IntN(5000))*time.Microsecond, 16),
			Policy: []Policy{PolicySymphony, PolicyWorkConserving, PolicyClockwork}[rng.IntN(3)], Drop: DropPolicy(rng.IntN(3)), Delays: d})
		now, free := Time(0), Past
		var next RequestID
		ended := map[RequestID]int{}
		note := func(out *ModelOutput) {
			for _, dr := range out.Drops {
				ended[dr.Request.ID]++
			}
			for _, p := range out.Plans {
				plans++
				dl := Never
				for _, r := range p.Requests {
					ended[r.ID]++
					dl = MinTime(dl, r.Deadline.Add(-d.Result))
				}
				if p.FinishAt > dl || len(p.Requests) > 16 || !slices.IsSortedFunc(p.Requests, func(a, b Request) int { return int(a.Deadline - b.Deadline) }) {
					t.Fatalf("iteration %d: plan of %d finishing %v, deadline %v, or out of deadline order", iter, len(p.Requests), p.FinishAt, dl)
				}
			}
		}
		for step := 0; step < 80; step++ {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
			if rng.IntN(3) > 0 {
				rs := make([]Request, 1+rng.IntN(4))
				for i := range rs {
					next++
					rs[i] = Request{ID: next, Arrival: now, Deadline: now.Add(time.Duration(5+rng.IntN(60)) * ms), Priority: Priority(rng.IntN(3))}
				}
				note(m.Enqueue(now, rs))
				continue
			}
			out := m.Grant(now, Grant{GPU: 0, FreeAt: free, GPUs: 1})
			note(out)
			free = out.Returns[0].FreeAt
		}
		note(m.DropAll(now, DropShutdown))
		for id := RequestID(1); id <= next; id++ {
			if ended[id] != 1 {
				t.Fatalf("iteration %d: request %d ended %d times", iter, id, ended[id])
			}
		}
	}
	if plans < 1000 {
		t.Fatalf("only %d plans", plans)
	}
}
