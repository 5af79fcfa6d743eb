package scheduler

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

// enqueueLoop is the ModelCore hot path at Table 4's ResNet50 load: one
// request per call every 250µs (4000 req/s, 25ms SLO), a grant every eighth
// request so that the queue stays bounded, and a tick whenever one is due.
type enqueueLoop struct {
	m   *ModelCore
	now Time
	id  RequestID
	one [1]Request
	// planned and dropped count requests, so tests can tell the loop
	// exercised both paths.
	planned, dropped int
}

func newEnqueueLoop(t testing.TB) *enqueueLoop {
	m := newModel(t, ModelConfig{
		Policy:  PolicySymphony,
		Profile: profile.MustLinear(1053*time.Microsecond, 5072*time.Microsecond, 0),
		Delays:  Delays{Ctrl: 100 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, Result: 100 * time.Microsecond},
	})
	return &enqueueLoop{m: m}
}

func (l *enqueueLoop) step() {
	l.now = l.now.Add(250 * time.Microsecond)
	l.id++
	l.one[0] = Request{ID: l.id, Arrival: l.now, Deadline: l.now.Add(25 * time.Millisecond)}
	l.dropped += len(l.m.Enqueue(l.now, l.one[:]).Drops)
	if l.m.WakeAt() <= l.now {
		l.dropped += len(l.m.Tick(l.now).Drops)
	}
	if l.id%8 == 0 {
		out := l.m.Grant(l.now, Grant{GPU: 0, FreeAt: l.now.Add(time.Millisecond), GPUs: 8})
		l.dropped += len(out.Drops)
		for i := range out.Plans {
			l.planned += len(out.Plans[i].Requests)
		}
	}
}

func BenchmarkModelEnqueue(b *testing.B) {
	l := newEnqueueLoop(b)
	b.ReportAllocs()
	for b.Loop() {
		l.step()
	}
}

// allocsIn10000Steps warms step up for 10000 calls, so that buffers reach
// their working size, then counts the allocations of 10000 more, as one
// run, so that a single allocation anywhere shows (AllocsPerRun divides by
// the number of runs, rounding down).
func allocsIn10000Steps(step func()) float64 {
	for range 10000 {
		step()
	}
	return testing.AllocsPerRun(1, func() {
		for range 10000 {
			step()
		}
	})
}

// TestEnqueueAllocationFree proves the hot path's contract: once the queue
// and output buffers have grown to their working size, Enqueue (with its
// candidate update), Tick and Grant allocate nothing.
func TestEnqueueAllocationFree(t *testing.T) {
	l := newEnqueueLoop(t)
	if n := allocsIn10000Steps(l.step); n != 0 {
		t.Errorf("%v allocations in 10000 enqueue steps, want 0", n)
	}
	if l.planned < 10000 || l.planned+l.dropped+l.m.Queued() != int(l.id) {
		t.Errorf("%d requests: %d planned, %d dropped, %d queued", l.id, l.planned, l.dropped, l.m.Queued())
	}
	// Enqueue alone, without grants: the queue grows past its initial ring
	// buffer once, then stays allocation-free while requests expire.
	m := l.m
	now := l.now
	one := make([]Request, 1)
	enq := func() {
		now = now.Add(250 * time.Microsecond)
		one[0] = Request{ID: 1, Arrival: now, Deadline: now.Add(25 * time.Millisecond)}
		m.Enqueue(now, one)
	}
	for range 1000 {
		enq()
	}
	if n := testing.AllocsPerRun(1000, enq); n != 0 {
		t.Errorf("Enqueue allocates %v times per call", n)
	}
}

// rankLoop keeps a RankCore busy: each step publishes a new candidate for
// one model, ticks, and answers every grant at once with the GPU busy for
// the batch's latency. With backfill set, the candidates are held 20ms
// and may backfill (Candidate.Backfill) a 1ms batch.
type rankLoop struct {
	r         *RankCore
	now       Time
	versions  []uint64
	next      int
	grants    int
	backfill  bool
	backfills int
}

func newRankLoop(t testing.TB, models, gpus int) *rankLoop {
	return &rankLoop{
		r:        newRank(t, RankConfig{Models: models, GPUs: gpus, Policy: PolicySymphony, Delays: Delays{Ctrl: 100 * time.Microsecond}}),
		versions: make([]uint64, models),
	}
}

func (l *rankLoop) step() {
	l.now = l.now.Add(50 * time.Microsecond)
	m := ModelID(l.next % len(l.versions))
	l.next++
	l.versions[m]++
	c := Candidate{BatchSize: 4, ExecAt: l.now.Add(200 * time.Microsecond), InvalidAfter: l.now.Add(5 * time.Millisecond),
		Deadline: l.now.Add(10 * time.Millisecond), Version: l.versions[m]}
	if l.backfill {
		c.ExecAt, c.Backfill = l.now.Add(20*time.Millisecond), true
		c.InvalidAfter, c.Deadline = l.now.Add(25*time.Millisecond), l.now.Add(26*time.Millisecond)
	}
	l.r.Update(m, c)
	if l.r.WakeAt() > l.now {
		return
	}
	for _, g := range l.r.Tick(l.now) {
		l.grants++
		if g.Backfill {
			l.backfills++
		}
		l.versions[g.Model]++
		l.r.Return(GPUReturn{Model: g.Model, GPU: g.GPU, FreeAt: MaxTime(l.now, g.FreeAt).Add(3 * time.Millisecond), Used: true,
			Candidate: Candidate{Version: l.versions[g.Model]}})
	}
}

func BenchmarkRankUpdateTick(b *testing.B) {
	l := newRankLoop(b, 16, 8)
	b.ReportAllocs()
	for b.Loop() {
		l.step()
	}
}

func TestRankAllocationFree(t *testing.T) {
	l := newRankLoop(t, 16, 8)
	if n := allocsIn10000Steps(l.step); n != 0 {
		t.Errorf("%v allocations in 10000 rank steps, want 0", n)
	}
	// 8 GPUs busy 3ms each: about 8 grants every 3ms = 60 steps.
	if l.grants < 2000 {
		t.Errorf("only %d grants in 20000 steps", l.grants)
	}
}
