package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

const ms = time.Millisecond

// at is a point in time d after the epoch, for readable test tables.
func at(d time.Duration) Time { return Time(d) }

// linear5 is ℓ(b) = 1ms·b + 5ms: ℓ(1)=6ms, ℓ(2)=7ms, ℓ(3)=8ms, …, β = 5ms.
func linear5(maxBatch int) profile.Profile { return profile.MustLinear(ms, 5*ms, maxBatch) }

func newModel(t testing.TB, cfg ModelConfig) *ModelCore {
	t.Helper()
	if !cfg.Profile.Valid() {
		cfg.Profile = linear5(0)
	}
	m, err := NewModelCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mkReqs returns one request per deadline, with IDs first, first+1, ….
func mkReqs(first RequestID, deadlines ...time.Duration) []Request {
	rs := make([]Request, len(deadlines))
	for i, d := range deadlines {
		rs[i] = Request{ID: first + RequestID(i), Deadline: at(d)}
	}
	return rs
}

func ids(rs []Request) []RequestID {
	out := make([]RequestID, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func dropIDs(ds []Drop, reason DropReason, t *testing.T) []RequestID {
	t.Helper()
	out := []RequestID{}
	for _, d := range ds {
		if d.Reason != reason {
			t.Errorf("request %d dropped for %v, want %v", d.Request.ID, d.Reason, reason)
		}
		out = append(out, d.Request.ID)
	}
	return out
}

// wantCand compares the fields of a candidate that the hand-worked cases
// compute (not the version).
func wantCand(t *testing.T, step string, got Candidate, bs int, execAt, invalidAfter, deadline Time) {
	t.Helper()
	if got.BatchSize != bs || got.ExecAt != execAt || got.InvalidAfter != invalidAfter || got.Deadline != deadline {
		t.Errorf("%s: candidate {bs %d exec %v invalid %v dl %v}, want {bs %d exec %v invalid %v dl %v}",
			step, got.BatchSize, got.ExecAt, got.InvalidAfter, got.Deadline, bs, execAt, invalidAfter, deadline)
	}
}

func TestModelConfigValidate(t *testing.T) {
	good := ModelConfig{Name: "m", Profile: linear5(0)}
	if _, err := NewModelCore(good); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	bad := map[string]ModelConfig{
		"no profile":      {Name: "m"},
		"nexus policy":    {Name: "m", Profile: linear5(0), Policy: PolicyNexus},
		"unknown policy":  {Name: "m", Profile: linear5(0), Policy: PolicyNexus + 1},
		"negative window": {Name: "m", Profile: linear5(0), RateWindow: -time.Second},
		"negative delay":  {Name: "m", Profile: linear5(0), Delays: Delays{DataPerRequest: -1}},
	}
	for name, cfg := range bad {
		if _, err := NewModelCore(cfg); err == nil {
			t.Errorf("%s: NewModelCore accepted %+v", name, cfg)
		}
	}
}

// TestSchedAt: under the symphony policy's default schedulable condition
// (sched_at only) a candidate waits until sched_at = dl − ℓ(bs+1), the last
// moment it could still take one more request, whatever the arrival rate.
func TestSchedAt(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicySymphony})
	// t=0, one request dl=25ms: ExecAt = max(0, dl − ℓ(2)) = 25 − 7 = 18ms;
	// InvalidAfter = 25 − ℓ(1) = 19ms.
	out := m.Enqueue(0, mkReqs(1, 25*ms))
	wantCand(t, "1 request", out.Candidate, 1, at(18*ms), at(19*ms), at(25*ms))
	if !out.CandidateChanged || out.Candidate.Version != 1 {
		t.Errorf("first candidate: changed %v version %d, want true 1", out.CandidateChanged, out.Candidate.Version)
	}
	// WakeAt = InvalidAfter − dispatch(1) + 1ns.
	if got, want := m.WakeAt(), at(19*ms)+1; got != want {
		t.Errorf("WakeAt %v, want %v", got, want)
	}
	// t=0, second request dl=30ms, bs=2:
	// ExecAt = 25 − ℓ(3) = 17ms, InvalidAfter = 25 − ℓ(2) = 18ms.
	out = m.Enqueue(0, mkReqs(2, 30*ms))
	wantCand(t, "2 requests", out.Candidate, 2, at(17*ms), at(18*ms), at(25*ms))
	if out.Candidate.Version != 2 {
		t.Errorf("version %d, want 2", out.Candidate.Version)
	}
	// t=0.5ms, third request dl=26ms (out of order, lands second), bs=3:
	// ExecAt = 25 − ℓ(4) = 16ms, InvalidAfter = 25 − ℓ(3) = 17ms.
	out = m.Enqueue(at(ms/2), mkReqs(3, 26*ms))
	wantCand(t, "3 requests", out.Candidate, 3, at(16*ms), at(17*ms), at(25*ms))
	// A tick at the same instant sees the same queue: the candidate is not
	// republished.
	out = m.Tick(at(ms / 2))
	if out.CandidateChanged || out.Candidate.Version != 3 {
		t.Errorf("Tick without change republished %+v", out.Candidate)
	}
	// Once sched_at is past, the earliest start takes over: at 16.5ms the
	// batch of three still fits (16.5 + 8 ≤ 25), ExecAt = now.
	out = m.Tick(at(16*ms + ms/2))
	wantCand(t, "past sched_at", out.Candidate, 3, at(16*ms+ms/2), at(17*ms), at(25*ms))

	// SchedulableSchedAt is the default spelled out.
	m = newModel(t, ModelConfig{Policy: PolicySymphony, Schedulable: SchedulableSchedAt})
	out = m.Enqueue(0, mkReqs(1, 25*ms))
	wantCand(t, "sched-at", out.Candidate, 1, at(18*ms), at(19*ms), at(25*ms))
}

// TestSchedAtBetaLambda: with SchedulableBetaLambda the candidate is
// schedulable at once when it already holds βλ requests, and waits for
// sched_at while it holds fewer.
func TestSchedAtBetaLambda(t *testing.T) {
	// Default window 1s = 10 buckets of 100ms. One arrival at t=0: the
	// window has covered 0s, clamped to one bucket, so λ = 1/0.1s = 10/s
	// and βλ = 5ms·10/s = 0.05. bs=1 < 0.05 is false: ExecAt is the
	// earliest start, now + dispatch(1) = 0.
	m := newModel(t, ModelConfig{Policy: PolicySymphony, Schedulable: SchedulableBetaLambda})
	out := m.Enqueue(0, mkReqs(1, 25*ms))
	wantCand(t, "tiny λ", out.Candidate, 1, 0, at(19*ms), at(25*ms))

	// Window 10ms = 10 buckets of 1ms. One arrival at t=0: λ = 1/1ms =
	// 1000/s, βλ = 5. bs=1 < 5: wait for sched_at = 25 − ℓ(2) = 18ms.
	m = newModel(t, ModelConfig{Policy: PolicySymphony, Schedulable: SchedulableBetaLambda, RateWindow: 10 * ms})
	out = m.Enqueue(0, mkReqs(1, 25*ms))
	wantCand(t, "large λ", out.Candidate, 1, at(18*ms), at(19*ms), at(25*ms))
	// Five more at t=0: λ = 6/1ms = 6000/s, βλ = 30: bs=6 still waits,
	// ExecAt = 25 − ℓ(7) = 13ms, InvalidAfter = 25 − ℓ(6) = 14ms.
	out = m.Enqueue(0, mkReqs(2, 30*ms, 30*ms, 30*ms, 30*ms, 30*ms))
	wantCand(t, "6 requests", out.Candidate, 6, at(13*ms), at(14*ms), at(25*ms))
	// At t=20ms the window (10ms) has rolled past every arrival: λ = 0,
	// βλ = 0, and the candidate is schedulable at once. The 25ms request
	// is gone by then (20 + ℓ(1) > 25); the five 30ms ones fit
	// (20 + ℓ(5) = 30): ExecAt = now, InvalidAfter = 30 − 10 = 20ms.
	out = m.Tick(at(20 * ms))
	if got := dropIDs(out.Drops, DropDeadline, t); !slices.Equal(got, []RequestID{1}) {
		t.Errorf("drops %v, want [1]", got)
	}
	wantCand(t, "λ decayed", out.Candidate, 5, at(20*ms), at(20*ms), at(30*ms))
}

func TestSchedAtResultDelay(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicySymphony, Delays: Delays{Result: 2 * ms}})
	// dl = Deadline − Result = 25 − 2 = 23ms.
	// ExecAt = 23 − ℓ(2) = 16ms; InvalidAfter = 23 − ℓ(1) = 17ms.
	out := m.Enqueue(0, mkReqs(1, 25*ms))
	wantCand(t, "result delay", out.Candidate, 1, at(16*ms), at(17*ms), at(23*ms))
}

func TestSchedAtDispatchDelay(t *testing.T) {
	d := Delays{Ctrl: ms, DataPerRequest: ms / 2}
	m := newModel(t, ModelConfig{Policy: PolicySymphony, Delays: d})
	// Loose deadline: earliest = 0 + 1ms + 1·0.5ms = 1.5ms; sched_at = 18ms.
	out := m.Enqueue(0, mkReqs(1, 25*ms))
	wantCand(t, "loose", out.Candidate, 1, at(18*ms), at(19*ms), at(25*ms))
	// WakeAt = InvalidAfter − dispatch(1) + 1ns = 19 − 1.5 + 1ns.
	if got, want := m.WakeAt(), at(19*ms-3*ms/2)+1; got != want {
		t.Errorf("WakeAt %v, want %v", got, want)
	}

	// Tight deadline 8ms: sched_at = 8 − ℓ(2) = 1ms is before the earliest
	// start 1.5ms, so ExecAt = 1.5ms; InvalidAfter = 8 − 6 = 2ms.
	m = newModel(t, ModelConfig{Policy: PolicySymphony, Delays: d})
	out = m.Enqueue(0, mkReqs(1, 8*ms))
	wantCand(t, "tight", out.Candidate, 1, at(3*ms/2), at(2*ms), at(8*ms))

	// Work-conserving, three requests at t=2ms: ExecAt = now + Ctrl +
	// 3·Data = 2 + 1 + 1.5 = 4.5ms; InvalidAfter = 50 − ℓ(3) = 42ms.
	m = newModel(t, ModelConfig{Policy: PolicyWorkConserving, Delays: d})
	out = m.Enqueue(at(2*ms), mkReqs(1, 50*ms, 50*ms, 50*ms))
	wantCand(t, "work-conserving", out.Candidate, 3, at(9*ms/2), at(42*ms), at(50*ms))
}

// A model's input size becomes per-request data delay: 2.5 MiB at 2ms per
// MiB adds 5ms to each request's pull, and the candidate starts that much
// later than a small-input model's would.
func TestDelaysForInput(t *testing.T) {
	d := Delays{Ctrl: ms, DataPerRequest: ms / 2, DataPerMiB: 2 * ms, Result: ms}
	big := d.ForInput(5 << 19) // 2.5 MiB
	if want := (Delays{Ctrl: ms, DataPerRequest: ms/2 + 5*ms, Result: ms}); big != want {
		t.Fatalf("ForInput(2.5MiB) = %+v, want %+v", big, want)
	}
	if small := d.ForInput(0); small.DataPerRequest != ms/2 || small.DataPerMiB != 0 {
		t.Errorf("ForInput(0) = %+v: only the per-request delay should remain", small)
	}
	// Work-conserving, two requests at t=0: ExecAt = Ctrl + 2·(0.5 + 5)ms.
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Delays: big})
	out := m.Enqueue(0, mkReqs(1, 50*ms, 50*ms))
	if want := at(ms + 11*ms); out.Candidate.ExecAt != want {
		t.Errorf("ExecAt %v, want %v (the pulls of two 2.5MiB inputs)", out.Candidate.ExecAt, want)
	}
	if err := (Delays{DataPerMiB: -1}).Validate(); err == nil {
		t.Error("a negative data delay per MiB validated")
	}
}

// TestBetaLambdaRule feeds a steady 1923 req/s (one request every 0.52ms)
// for a second of virtual time, so λ ≈ 1923/s and βλ ≈ 5ms·1923/s ≈ 9.6.
// With SchedulableBetaLambda, candidates of up to 9 requests wait for
// sched_at and candidates of 10 or more are schedulable at the earliest
// start. (At exactly 2000 req/s βλ would sit on the integer 10, and the
// estimator's off-by-one-arrival window would decide the bs=10 case.)
// The default condition always waits for sched_at; the work-conserving
// policy never waits.
func TestBetaLambdaRule(t *testing.T) {
	const gap = 520 * time.Microsecond
	const slo = 200 * ms
	for _, c := range []struct {
		name     string
		pol      Policy
		sched    Schedulable
		waitUpTo int // candidates of up to this many requests wait for sched_at
	}{
		{"beta-lambda", PolicySymphony, SchedulableBetaLambda, 9},
		{"default", PolicySymphony, SchedulableDefault, 20},
		{"work-conserving", PolicyWorkConserving, SchedulableBetaLambda, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newModel(t, ModelConfig{Policy: c.pol, Schedulable: c.sched})
			var now Time
			id := RequestID(1)
			enqueue := func() *ModelOutput {
				out := m.Enqueue(now, []Request{{ID: id, Arrival: now, Deadline: now.Add(slo)}})
				id++
				now = now.Add(gap)
				return out
			}
			// Warm the estimator for one second, emptying the queue now
			// and then (DropAll does not touch the rate).
			for now < at(time.Second) {
				enqueue()
				if id%8 == 0 {
					m.DropAll(now, DropShutdown)
				}
			}
			m.DropAll(now, DropShutdown)
			headDl := now.Add(slo)
			for bs := 1; bs <= 20; bs++ {
				enq := now
				cand := enqueue().Candidate
				if cand.BatchSize != bs || cand.Deadline != headDl {
					t.Fatalf("bs %d: candidate %+v, want the whole queue behind dl %v", bs, cand, headDl)
				}
				want := enq // earliest start: no delays
				if bs <= c.waitUpTo {
					want = headDl.Add(-linear5(0).Latency(bs + 1))
				}
				if cand.ExecAt != want {
					t.Errorf("%d queued: ExecAt %v, want %v", bs, cand.ExecAt, want)
				}
			}
		})
	}
}

func TestGrantPlansBatch(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, ID: 3})
	// Deadlines out of order; the queue sorts them: 30 (id 2), 35 (id 4),
	// 40 (id 1), 50 (id 3).
	m.Enqueue(0, mkReqs(1, 40*ms, 30*ms))
	out := m.Enqueue(0, mkReqs(3, 50*ms, 35*ms))
	// dl = 30ms; k=4 fits: 0 + ℓ(4) = 9 ≤ 30.
	wantCand(t, "enqueued", out.Candidate, 4, 0, at(21*ms), at(30*ms))
	v := out.Candidate.Version

	// A GPU granted at 1ms that frees at 2ms: earliest = max(1, 2) = 2ms,
	// the batch of four still fits: FinishAt = 2 + ℓ(4) = 11ms.
	out = m.Grant(at(ms), Grant{GPU: 7, FreeAt: at(2 * ms)})
	if len(out.Plans) != 1 || len(out.Returns) != 1 || len(out.Drops) != 0 {
		t.Fatalf("grant: %d plans, %d returns, %d drops; want 1, 1, 0", len(out.Plans), len(out.Returns), len(out.Drops))
	}
	p := out.Plans[0]
	if got, want := ids(p.Requests), []RequestID{2, 4, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("plan requests %v, want deadline order %v", got, want)
	}
	if p.Model != 3 || p.GPU != 7 || p.GrantedAt != at(ms) || p.ExecAt != at(2*ms) || p.FinishAt != at(11*ms) {
		t.Errorf("plan %+v, want model 3 GPU 7 granted 1ms exec 2ms finish 11ms", p)
	}
	r := out.Returns[0]
	if r.Model != 3 || r.GPU != 7 || r.FreeAt != at(11*ms) || !r.Used {
		t.Errorf("return %+v, want model 3 GPU 7 free at 11ms used", r)
	}
	if r.Candidate.Valid() || r.Candidate.Version <= v || !out.CandidateChanged {
		t.Errorf("return candidate %+v (changed %v), want empty with a version after %d", r.Candidate, out.CandidateChanged, v)
	}
	if m.Queued() != 0 || m.WakeAt() != Never {
		t.Errorf("after grant: %d queued, WakeAt %v; want 0, never", m.Queued(), m.WakeAt())
	}

	// A second grant finds nothing: the GPU goes back unused, free at
	// max(now, gpuFreeAt).
	out = m.Grant(at(3*ms), Grant{GPU: 7, FreeAt: at(11 * ms)})
	if len(out.Plans) != 0 || len(out.Returns) != 1 {
		t.Fatalf("empty grant: %d plans, %d returns", len(out.Plans), len(out.Returns))
	}
	if r := out.Returns[0]; r.Used || r.FreeAt != at(11*ms) {
		t.Errorf("empty grant returned %+v, want unused free at 11ms", r)
	}
	out = m.Grant(at(4*ms), Grant{GPU: 7, FreeAt: Past})
	if r := out.Returns[0]; r.Used || r.FreeAt != at(4*ms) {
		t.Errorf("empty grant of a free GPU returned %+v, want unused free at now = 4ms", r)
	}
}

func TestGrantRespectsMaxBatch(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Profile: linear5(3)})
	m.Enqueue(0, mkReqs(1, 50*ms, 50*ms, 50*ms, 50*ms, 50*ms))
	// MaxBatch 3: the candidate is 3 even though all 5 fit by deadline.
	if c := m.Candidate(); c.BatchSize != 3 {
		t.Fatalf("candidate %+v, want bs 3", c)
	}
	out := m.Grant(0, Grant{GPU: 0, FreeAt: Past})
	if got := ids(out.Plans[0].Requests); !slices.Equal(got, []RequestID{1, 2, 3}) {
		t.Errorf("plan %v, want [1 2 3]", got)
	}
	if c := out.Returns[0].Candidate; c.BatchSize != 2 || c.ExecAt != 0 {
		t.Errorf("candidate after grant %+v, want the 2 left, at once", c)
	}
}

func TestGrantDropsWhatCannotFit(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving})
	m.Enqueue(0, mkReqs(1, 10*ms))
	// The GPU frees at 5ms: 5 + ℓ(1) = 11 > 10, the request cannot make it
	// even alone. It is dropped and the GPU goes back unused, free at 5ms.
	out := m.Grant(at(ms), Grant{GPU: 2, FreeAt: at(5 * ms)})
	if len(out.Plans) != 0 {
		t.Fatalf("planned %+v", out.Plans)
	}
	if got := dropIDs(out.Drops, DropDeadline, t); !slices.Equal(got, []RequestID{1}) {
		t.Errorf("drops %v, want [1]", got)
	}
	if r := out.Returns[0]; r.Used || r.FreeAt != at(5*ms) || r.GPU != 2 {
		t.Errorf("return %+v, want GPU 2 unused free at 5ms", r)
	}
}

func TestGrantShrinksBatchForLateGPU(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropTimeout})
	m.Enqueue(0, mkReqs(1, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms))
	// A GPU free now: k + 5 ≤ 20 for k ≤ 15, so all 5.
	wantCand(t, "free GPU", m.Candidate(), 5, 0, at(10*ms), at(20*ms))
	// A GPU free at 12ms: 12 + k + 5 ≤ 20 for k ≤ 3.
	out := m.Grant(0, Grant{GPU: 0, FreeAt: at(12 * ms)})
	p := out.Plans[0]
	if got := ids(p.Requests); !slices.Equal(got, []RequestID{1, 2, 3}) || p.ExecAt != at(12*ms) || p.FinishAt != at(20*ms) {
		t.Errorf("plan %v exec %v finish %v, want [1 2 3] exec 12ms finish 20ms", got, p.ExecAt, p.FinishAt)
	}
	if r := out.Returns[0]; !r.Used || r.FreeAt != at(20*ms) {
		t.Errorf("return %+v", r)
	}
	// The two left form the next candidate for any GPU, now.
	wantCand(t, "after grant", out.Returns[0].Candidate, 2, 0, at(13*ms), at(20*ms))
	if len(out.Drops) != 0 {
		t.Errorf("dropped %v", out.Drops)
	}
}

func TestDropTimeoutKeepsFittingPrefix(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropTimeout})
	// At t=0 a request needs ℓ(1) = 6ms alone. Deadlines 5 and 5.9 cannot
	// make it (dropped, DropDeadline); 6 fits exactly alone; with dl=6 no
	// batch of 2 fits (7 > 6), so the candidate is just that head.
	out := m.Enqueue(0, mkReqs(1, 5*ms, 5900*time.Microsecond, 6*ms, 7*ms, 8*ms, 20*ms, 30*ms))
	if got := dropIDs(out.Drops, DropDeadline, t); !slices.Equal(got, []RequestID{1, 2}) {
		t.Errorf("drops %v, want [1 2]", got)
	}
	wantCand(t, "timeout", out.Candidate, 1, 0, 0, at(6*ms))
	if m.Queued() != 5 {
		t.Errorf("%d queued, want 5", m.Queued())
	}
}

// enqueueAndGrant enqueues rs at now and grants a GPU free at gpuFreeAt at
// the same instant. It returns every drop of both calls and the plan, if
// any. DropWindow may prune when the candidate is built or only once a GPU
// is in hand; collecting both calls' drops keeps these tests neutral.
func enqueueAndGrant(m *ModelCore, now Time, rs []Request, gpuFreeAt Time) ([]Drop, *BatchPlan) {
	drops := slices.Clone(m.Enqueue(now, rs).Drops)
	out := m.Grant(now, Grant{GPU: 0, FreeAt: gpuFreeAt})
	drops = append(drops, out.Drops...)
	if len(out.Plans) == 0 {
		return drops, nil
	}
	p := out.Plans[0]
	p.Requests = slices.Clone(p.Requests)
	return drops, &p
}

func TestDropWindowPrunesHead(t *testing.T) {
	// Head dl=10ms limits the batch to k0 = 5 (5 + 5 ≤ 10). Behind it,
	// twenty requests with dl=20ms form a window of 15 (15 + 5 ≤ 20) that
	// its deadline, not the queue, limits: drop the head, run fifteen.
	deadlines := []time.Duration{10 * ms}
	for range 20 {
		deadlines = append(deadlines, 20*ms)
	}
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropWindow})
	drops, p := enqueueAndGrant(m, 0, mkReqs(1, deadlines...), Past)
	if got := dropIDs(drops, DropPruned, t); !slices.Equal(got, []RequestID{1}) {
		t.Errorf("drops %v, want the head [1]", got)
	}
	var fifteen []RequestID
	for id := RequestID(2); id <= 16; id++ {
		fifteen = append(fifteen, id)
	}
	if p == nil || !slices.Equal(ids(p.Requests), fifteen) || p.FinishAt != at(20*ms) {
		t.Errorf("window plan %+v, want requests 2..16 finishing at 20ms", p)
	}

	// The same queue under DropTimeout serves the head's five.
	m = newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropTimeout})
	drops, p = enqueueAndGrant(m, 0, mkReqs(1, deadlines...), Past)
	if len(drops) != 0 || p == nil || !slices.Equal(ids(p.Requests), []RequestID{1, 2, 3, 4, 5}) {
		t.Errorf("timeout: drops %v, plan %+v; want the first five", drops, p)
	}

	// DropDefault resolves to DropWindow for symphony and work-conserving,
	// and to DropTimeout for clockwork.
	for pol, wantDrops := range map[Policy]int{PolicyWorkConserving: 1, PolicySymphony: 1, PolicyClockwork: 0} {
		m = newModel(t, ModelConfig{Policy: pol})
		if drops, _ := enqueueAndGrant(m, 0, mkReqs(1, deadlines...), Past); len(drops) != wantDrops {
			t.Errorf("%v default drop policy: %d drops, want %d", pol, len(drops), wantDrops)
		}
	}
}

// A later window that the queue's length limits could still grow, so
// pruning would trade the head for a wait (under symphony, with the GPU
// already granted): the head is kept.
func TestDropWindowKeepsHeadWhenWindowCouldGrow(t *testing.T) {
	// Head dl=6ms fits only alone; behind it ten requests with dl=20ms,
	// which would still fit an eleventh (11 + 5 ≤ 20).
	deadlines := []time.Duration{6 * ms}
	for range 10 {
		deadlines = append(deadlines, 20*ms)
	}
	for _, pol := range []Policy{PolicyWorkConserving, PolicySymphony} {
		m := newModel(t, ModelConfig{Policy: pol, Drop: DropWindow})
		drops, p := enqueueAndGrant(m, 0, mkReqs(1, deadlines...), Past)
		if len(drops) != 0 || p == nil || !slices.Equal(ids(p.Requests), []RequestID{1}) || p.ExecAt != 0 {
			t.Errorf("%v: drops %v, plan %+v; want the head alone at once", pol, drops, p)
		}
	}
}

func TestDropWindowLateGPU(t *testing.T) {
	deadlines := []time.Duration{6 * ms}
	for range 10 {
		deadlines = append(deadlines, 20*ms)
	}
	tail := []RequestID{2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	// A GPU free only at 9ms: the head cannot make it (9 + 6 > 6), whether
	// or not it was pruned before; 9 + k + 5 ≤ 20 leaves room for six.
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropWindow})
	drops, p := enqueueAndGrant(m, 0, mkReqs(1, deadlines...), at(9*ms))
	if len(drops) != 1 || drops[0].Request.ID != 1 {
		t.Errorf("late GPU: drops %v, want the head", drops)
	}
	if p == nil || !slices.Equal(ids(p.Requests), tail[:6]) || p.ExecAt != at(9*ms) {
		t.Errorf("late GPU plan %+v, want six from 9ms", p)
	}
}

func TestDropWindowKeepsHead(t *testing.T) {
	// Whole queue fits (dl 20: 5 + 5 ≤ 20): nothing pruned.
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropWindow})
	drops, p := enqueueAndGrant(m, 0, mkReqs(1, 20*ms, 21*ms, 22*ms, 23*ms, 24*ms), Past)
	if len(drops) != 0 || p == nil || len(p.Requests) != 5 {
		t.Errorf("whole queue fits: drops %v, plan %+v", drops, p)
	}

	// Deadlines 13, 13, then ten of 14: the head's batch is k0 = 8
	// (8 + 5 ≤ 13); dropping both 13s gives 9 (9 + 5 ≤ 14). Dropping two
	// requests to gain one, with a head batch nearly as big: keep the head.
	deadlines := []time.Duration{13 * ms, 13 * ms}
	for range 10 {
		deadlines = append(deadlines, 14*ms)
	}
	m = newModel(t, ModelConfig{Policy: PolicyWorkConserving, Drop: DropWindow})
	drops, p = enqueueAndGrant(m, 0, mkReqs(1, deadlines...), Past)
	if len(drops) != 0 || p == nil || !slices.Equal(ids(p.Requests), []RequestID{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("near-equal windows: drops %v, plan %+v; want the first eight", drops, p)
	}
	// The four left (dl 14) form the next candidate.
	wantCand(t, "after keep", m.Candidate(), 4, 0, at(5*ms), at(14*ms))
}

// TestDropWindowPrunesToKeepUp works one backlog by hand. Requests arrive
// every millisecond from 1ms to 100ms with a 20ms SLO; the rate window is
// 100ms, so at 100ms λ = 100 requests / 99ms ≈ 1010 req/s. ℓ(b) = b + 5ms
// and no network delays. By 100ms the requests that arrived before 86ms
// cannot make it even alone; fifteen wait, deadlines 106..120ms, and the
// head's batch on a GPU free now is k0 = 1 (100 + ℓ(1) ≤ 106).
//
// On 2 GPUs, batches of 5 serve 2·5/10ms = 1000 req/s < λ and batches of
// 6 serve 1091 req/s: the keep-up batch is 6. The fewest heads to drop for
// a window of 6 that fits is five (the window behind 91, dl 111: 100 +
// ℓ(6) ≤ 111). Six then run, and the pruneWindow rule keeps that head:
// the best later window (8, behind 93) gains two for two dropped.
//
// Without the rule (a grant that carries no GPU count, or eight GPUs on
// which a batch of one keeps up), pruneWindow alone finds the window of 8
// behind 93 (100 + ℓ(8) ≤ 113) and, since the head's batch of 1 is far
// below it, drops seven. On one GPU not even the 15 that a request
// arriving now could join (100 + ℓ(15) ≤ 120) keep up (750 req/s): that
// overload takes the largest window, the same one here.
func TestDropWindowPrunesToKeepUp(t *testing.T) {
	type want struct{ pruned, planned []RequestID }
	span := func(lo, hi RequestID) []RequestID {
		var out []RequestID
		for id := lo; id <= hi; id++ {
			out = append(out, id)
		}
		return out
	}
	windowOnly := want{span(86, 92), span(93, 100)}
	for gpus, w := range map[int]want{
		0: windowOnly,
		1: windowOnly,
		2: {span(86, 90), span(91, 96)},
		8: windowOnly,
	} {
		m := newModel(t, ModelConfig{Policy: PolicySymphony, RateWindow: 100 * ms})
		var expired []RequestID
		for a := RequestID(1); a <= 100; a++ {
			now := at(time.Duration(a) * ms)
			out := m.Enqueue(now, []Request{{ID: a, Arrival: now, Deadline: now.Add(20 * ms)}})
			expired = append(expired, dropIDs(out.Drops, DropDeadline, t)...)
		}
		if !slices.Equal(expired, span(1, 85)) {
			t.Fatalf("%d GPUs: expired %v, want 1..85", gpus, expired)
		}
		out := m.Grant(at(100*ms), Grant{GPU: 0, FreeAt: Past, GPUs: gpus})
		if got := dropIDs(out.Drops, DropPruned, t); !slices.Equal(got, w.pruned) {
			t.Errorf("%d GPUs: pruned %v, want %v", gpus, got, w.pruned)
		}
		if len(out.Plans) != 1 || !slices.Equal(ids(out.Plans[0].Requests), w.planned) || out.Plans[0].ExecAt != at(100*ms) {
			t.Errorf("%d GPUs: plans %+v, want %v at 100ms", gpus, out.Plans, w.planned)
		}
	}
}

// TestDropWindowOverloadTakesLargestWindow: when not even the largest batch
// a request arriving now could join keeps up with λ, the heads go for the
// largest window even where pruneWindow would keep them. λ comes from
// requests every millisecond from 1ms to 100ms (≈ 1010 req/s over the
// 100ms window); the first ninety have a 5ms SLO, less than ℓ(1) = 6ms, so
// they end on arrival; the last ten (91..100ms) have 20ms. At 100ms the
// head's batch is 6 (100 + ℓ(6) ≤ 111), and the best window, 8 behind 93
// (100 + ℓ(8) ≤ 113), gains two for two dropped: pruneWindow keeps the
// head. A fresh request could join 15 (100 + ℓ(15) ≤ 120): on one GPU that
// serves 750 req/s, below λ, so the load is an overload and the two heads
// go; on two GPUs a batch of 6 already keeps up (1091 req/s).
func TestDropWindowOverloadTakesLargestWindow(t *testing.T) {
	span := func(lo, hi RequestID) []RequestID {
		var out []RequestID
		for id := lo; id <= hi; id++ {
			out = append(out, id)
		}
		return out
	}
	type want struct{ pruned, planned []RequestID }
	keepHead := want{[]RequestID{}, span(91, 96)}
	for gpus, w := range map[int]want{
		0: keepHead,
		1: {span(91, 92), span(93, 100)},
		2: keepHead,
	} {
		m := newModel(t, ModelConfig{Policy: PolicySymphony, RateWindow: 100 * ms})
		for a := RequestID(1); a <= 100; a++ {
			now := at(time.Duration(a) * ms)
			slo := 5 * ms
			if a > 90 {
				slo = 20 * ms
			}
			out := m.Enqueue(now, []Request{{ID: a, Arrival: now, Deadline: now.Add(slo)}})
			if got := dropIDs(out.Drops, DropDeadline, t); a <= 90 && !slices.Equal(got, []RequestID{a}) || a > 90 && len(got) != 0 {
				t.Fatalf("%d GPUs: enqueue of %d dropped %v", gpus, a, got)
			}
		}
		out := m.Grant(at(100*ms), Grant{GPU: 0, FreeAt: Past, GPUs: gpus})
		if got := dropIDs(out.Drops, DropPruned, t); !slices.Equal(got, w.pruned) {
			t.Errorf("%d GPUs: pruned %v, want %v", gpus, got, w.pruned)
		}
		if len(out.Plans) != 1 || !slices.Equal(ids(out.Plans[0].Requests), w.planned) {
			t.Errorf("%d GPUs: plans %+v, want %v", gpus, out.Plans, w.planned)
		}
	}
}

func TestOutOfOrderDeadlinesAndDropAll(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving})
	m.Enqueue(0, mkReqs(1, 90*ms, 30*ms, 60*ms))
	m.Enqueue(at(ms), mkReqs(4, 45*ms, 30*ms)) // ties keep arrival order
	if c := m.Candidate(); c.Deadline != at(30*ms) || c.BatchSize != 5 {
		t.Errorf("candidate %+v, want dl 30ms bs 5", c)
	}
	out := m.DropAll(at(2*ms), DropShutdown)
	if got, want := dropIDs(out.Drops, DropShutdown, t), []RequestID{2, 5, 4, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("DropAll order %v, want deadline order %v", got, want)
	}
	if out.Candidate.Valid() || !out.CandidateChanged || m.WakeAt() != Never || m.Queued() != 0 {
		t.Errorf("after DropAll: candidate %+v changed %v WakeAt %v queued %d", out.Candidate, out.CandidateChanged, m.WakeAt(), m.Queued())
	}
	out = m.DropAll(at(3*ms), DropShutdown)
	if len(out.Drops) != 0 || out.CandidateChanged {
		t.Errorf("second DropAll: drops %v changed %v", out.Drops, out.CandidateChanged)
	}
}

func TestWakeAtShrinksThenDrops(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving})
	if m.WakeAt() != Never {
		t.Fatalf("empty core wakes at %v", m.WakeAt())
	}
	m.Enqueue(0, mkReqs(1, 25*ms, 40*ms))
	// bs=2, InvalidAfter = 25 − ℓ(2) = 18ms, WakeAt = 18ms − 0 + 1ns.
	wake := at(18*ms) + 1
	if m.WakeAt() != wake {
		t.Fatalf("WakeAt %v, want %v", m.WakeAt(), wake)
	}
	// One nanosecond early the pair still fits: nothing changes except
	// ExecAt (work-conserving: now).
	out := m.Tick(wake - 1)
	if out.Candidate.BatchSize != 2 || len(out.Drops) != 0 {
		t.Errorf("tick before WakeAt: %+v drops %v", out.Candidate, out.Drops)
	}
	// At WakeAt the pair no longer fits: 18ms+1ns + ℓ(2) > 25. It shrinks
	// to the head alone: InvalidAfter = 25 − 6 = 19ms.
	out = m.Tick(wake)
	wantCand(t, "shrunk", out.Candidate, 1, wake, at(19*ms), at(25*ms))
	if len(out.Drops) != 0 {
		t.Errorf("shrink dropped %v", out.Drops)
	}
	// At 19ms+1ns the head cannot make it even alone: dropped; the 40ms
	// request is the candidate, InvalidAfter = 34ms.
	out = m.Tick(m.WakeAt())
	if got := dropIDs(out.Drops, DropDeadline, t); !slices.Equal(got, []RequestID{1}) {
		t.Errorf("drops %v, want [1]", got)
	}
	wantCand(t, "next", out.Candidate, 1, at(19*ms)+1, at(34*ms), at(40*ms))
	if got, want := m.WakeAt(), at(34*ms)+1; got != want {
		t.Errorf("WakeAt %v, want %v", got, want)
	}
	m.Tick(m.WakeAt())
	if m.Queued() != 0 || m.WakeAt() != Never {
		t.Errorf("after last deadline: %d queued, WakeAt %v", m.Queued(), m.WakeAt())
	}
}

func TestTimeGoingBackwardsIsClamped(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicyWorkConserving})
	m.Enqueue(at(10*ms), mkReqs(1, 50*ms))
	// A caller whose clock reading is older: treated as 10ms.
	out := m.Enqueue(at(5*ms), mkReqs(2, 50*ms))
	if out.Candidate.ExecAt != at(10*ms) {
		t.Errorf("ExecAt %v after an earlier now, want 10ms", out.Candidate.ExecAt)
	}
	out = m.Grant(at(3*ms), Grant{GPU: 0, FreeAt: Past})
	p := out.Plans[0]
	if p.GrantedAt != at(10*ms) || p.ExecAt != at(10*ms) || p.FinishAt != at(17*ms) {
		t.Errorf("plan granted %v exec %v finish %v, want 10ms 10ms 17ms", p.GrantedAt, p.ExecAt, p.FinishAt)
	}
}

// bruteFit is the dumb oracle for DropTimeout: from the requests (sorted by
// deadline, ties in arrival order), drop those that cannot finish in time
// even alone, then try every k and keep the largest whose k earliest
// requests all finish by their deadlines on a GPU free at gpuFreeAt.
func bruteFit(rs []Request, now, gpuFreeAt Time, prof profile.Profile, d Delays) (dropped []Request, kept []Request, k int) {
	finish := func(k int) Time {
		return MaxTime(now.Add(d.Dispatch(k)), gpuFreeAt).Add(prof.Latency(k))
	}
	i := 0
	for i < len(rs) && finish(1) > rs[i].Deadline.Add(-d.Result) {
		i++
	}
	dropped, kept = rs[:i], rs[i:]
	for c := 1; c <= len(kept) && c <= prof.MaxBatch(); c++ {
		ok := true
		for _, r := range kept[:c] {
			if finish(c) > r.Deadline.Add(-d.Result) {
				ok = false
			}
		}
		if ok {
			k = c
		}
	}
	return dropped, kept, k
}

func TestCandidateMatchesBruteForce(t *testing.T) {
	const seed = 20240917
	rng := rand.New(rand.NewPCG(seed, 1))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	// Counts of the interesting cases, so that a change to the generator
	// cannot quietly stop exercising them.
	var drops, holds, shrunk, big, betaHeld, betaFree int
	for iter := range 3000 {
		alpha := dur(0, 3*ms)
		beta := dur(0, 8*ms)
		if alpha == 0 && beta == 0 {
			beta = ms
		}
		maxBatch := 0
		if rng.IntN(2) == 0 {
			maxBatch = 1 + rng.IntN(12)
		}
		prof := profile.MustLinear(alpha, beta, maxBatch)
		var d Delays
		if rng.IntN(2) == 0 {
			d = Delays{Ctrl: dur(0, ms), DataPerRequest: dur(0, 200*time.Microsecond), Result: dur(0, 2*ms)}
		}
		window := time.Duration(0)
		if rng.IntN(2) == 0 {
			window = dur(ms, 100*ms)
		}
		pol := []Policy{PolicySymphony, PolicyWorkConserving, PolicyClockwork}[rng.IntN(3)]
		sched := Schedulable(rng.IntN(3))
		m := newModel(t, ModelConfig{Profile: prof, Policy: pol, Schedulable: sched, Drop: DropTimeout, Delays: d, RateWindow: window})

		n := rng.IntN(13)
		rs := make([]Request, n)
		for i := range rs {
			// Half-millisecond steps make ties common.
			rs[i] = Request{ID: RequestID(i + 1), Deadline: at(time.Duration(rng.IntN(120)) * ms / 2)}
		}
		now := at(dur(0, 20*ms))
		free := Past
		if rng.IntN(3) > 0 {
			free = at(dur(0, 40*ms))
		}
		sorted := slices.Clone(rs)
		slices.SortStableFunc(sorted, func(a, b Request) int { return int(a.Deadline - b.Deadline) })

		// λ after n arrivals at one instant: the window's covered span is
		// clamped to one bucket.
		bucket := window / rateBuckets
		if window == 0 {
			bucket = DefaultRateWindow / rateBuckets
		}
		held := func(k int) bool {
			lambda := float64(n) / bucket.Seconds()
			return pol == PolicySymphony && (sched != SchedulableBetaLambda || float64(k) < prof.Beta().Seconds()*lambda)
		}
		// wantExec is the ExecAt a batch of k starting no earlier than start
		// must have: start, or sched_at while fewer than βλ are queued.
		wantExec := func(k int, dl, start Time) Time {
			if held(k) {
				return MaxTime(start, dl.Add(-prof.Latency(k+1)))
			}
			return start
		}
		checkDrops := func(step string, drops []Drop, want []Request) {
			t.Helper()
			if got, want := dropIDs(drops, DropDeadline, t), ids(want); !slices.Equal(got, want) {
				t.Fatalf("iter %d %s: dropped %v, want %v", iter, step, got, want)
			}
		}

		out := m.Enqueue(now, rs)
		dropped, kept, k := bruteFit(sorted, now, Past, prof, d)
		checkDrops("enqueue", out.Drops, dropped)
		c := out.Candidate
		if c.BatchSize != k {
			t.Fatalf("iter %d enqueue: bs %d, brute force %d (now %v, ℓ(1) %v, queue %v)", iter, c.BatchSize, k, now, prof.Latency(1), kept)
		}
		if k > 0 {
			dl := kept[0].Deadline.Add(-d.Result)
			exec := wantExec(k, dl, now.Add(d.Dispatch(k)))
			if c.Deadline != dl || c.InvalidAfter != dl.Add(-prof.Latency(k)) || c.ExecAt != exec {
				t.Fatalf("iter %d enqueue: candidate %+v, want dl %v invalid %v exec %v", iter, c, dl, dl.Add(-prof.Latency(k)), exec)
			}
		}

		if len(out.Drops) > 0 {
			drops++
		}
		if k >= 4 {
			big++
		}
		if k > 0 && held(k) {
			holds++
		}
		if k > 0 && pol == PolicySymphony && sched == SchedulableBetaLambda {
			if held(k) {
				betaHeld++
			} else {
				betaFree++
			}
		}

		out = m.Grant(now, Grant{GPU: 0, FreeAt: free})
		kEnq := k
		dropped, kept, k = bruteFit(kept, now, free, prof, d)
		if k < kEnq {
			shrunk++
		}
		checkDrops("grant", out.Drops, dropped)
		if k == 0 {
			if len(out.Plans) != 0 || out.Returns[0].Used {
				t.Fatalf("iter %d: planned with nothing fitting", iter)
			}
			continue
		}
		if len(out.Plans) != 1 {
			t.Fatalf("iter %d: %d plans, brute force fits %d", iter, len(out.Plans), k)
		}
		p := out.Plans[0]
		if got, want := ids(p.Requests), ids(kept[:k]); !slices.Equal(got, want) {
			t.Fatalf("iter %d: planned %v, want the %d earliest %v", iter, got, k, want)
		}
		for _, r := range p.Requests {
			if p.FinishAt.Add(d.Result) > r.Deadline {
				t.Fatalf("iter %d: request %d answered at %v after its deadline %v", iter, r.ID, p.FinishAt.Add(d.Result), r.Deadline)
			}
		}
		start := MaxTime(now.Add(d.Dispatch(k)), free)
		if want := wantExec(k, kept[0].Deadline.Add(-d.Result), start); p.ExecAt != want {
			t.Fatalf("iter %d: plan starts at %v, want %v (inputs at %v, GPU free at %v)", iter, p.ExecAt, want, now.Add(d.Dispatch(k)), free)
		}
		if ret := out.Returns[0]; !ret.Used || ret.FreeAt != p.FinishAt {
			t.Fatalf("iter %d: return %+v, plan finishes at %v", iter, ret, p.FinishAt)
		}
		if m.Queued() != len(kept)-k {
			t.Fatalf("iter %d: %d queued after grant, want %d", iter, m.Queued(), len(kept)-k)
		}
	}
	if drops < 100 || holds < 100 || shrunk < 100 || big < 100 || betaHeld < 20 || betaFree < 20 {
		t.Errorf("generator too tame: %d with drops, %d held for sched_at, %d shrunk by a late GPU, %d with bs ≥ 4, βλ held %d and met %d",
			drops, holds, shrunk, big, betaHeld, betaFree)
	}
}

// TestDropWindowNeverWorseThanTimeout checks DropWindow against the same
// brute force: its batch is at least the timeout batch, it prunes only from
// the head, and the batch it plans fits.
func TestDropWindowNeverWorseThanTimeout(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	pruned := 0
	for iter := range 3000 {
		prof := profile.MustLinear(time.Duration(rng.IntN(3000))*time.Microsecond, time.Duration(1+rng.IntN(8000))*time.Microsecond, 0)
		m := newModel(t, ModelConfig{Profile: prof, Policy: PolicyWorkConserving, Drop: DropWindow})
		n := 1 + rng.IntN(12)
		rs := make([]Request, n)
		for i := range rs {
			rs[i] = Request{ID: RequestID(i + 1), Deadline: at(time.Duration(rng.IntN(80)) * ms / 2)}
		}
		sorted := slices.Clone(rs)
		slices.SortStableFunc(sorted, func(a, b Request) int { return int(a.Deadline - b.Deadline) })
		now := at(time.Duration(rng.IntN(10)) * ms)
		drops, p := enqueueAndGrant(m, now, rs, Past)
		_, kept, k := bruteFit(sorted, now, Past, prof, Delays{})
		np := 0
		for _, d := range drops {
			if d.Reason == DropPruned {
				if d.Request.ID != kept[np].ID {
					t.Fatalf("iter %d: pruned %d, want the head %d", iter, d.Request.ID, kept[np].ID)
				}
				np++
			}
		}
		if np > 0 {
			pruned++
		}
		if k == 0 {
			if p != nil {
				t.Fatalf("iter %d: planned %v with nothing fitting", iter, ids(p.Requests))
			}
			continue
		}
		if p == nil || len(p.Requests) < k {
			t.Fatalf("iter %d: window plan %+v, timeout batch %d", iter, p, k)
		}
		if want := ids(kept[np : np+len(p.Requests)]); !slices.Equal(ids(p.Requests), want) {
			t.Fatalf("iter %d: planned %v, want the earliest after pruning %v", iter, ids(p.Requests), want)
		}
		for _, r := range p.Requests {
			if p.FinishAt > r.Deadline {
				t.Fatalf("iter %d: request %d finishes at %v after its deadline %v", iter, r.ID, p.FinishAt, r.Deadline)
			}
		}
	}
	if pruned < 100 {
		t.Errorf("only %d of 3000 queues pruned", pruned)
	}
}

// TestTailFactor: a tail factor f plans every deadline with f·ℓ(b) (the
// batch that fits, InvalidAfter, sched_at, the head that cannot make it
// even alone), while the plan's FinishAt, the GPU's occupancy, stays ℓ(b).
func TestTailFactor(t *testing.T) {
	m := newModel(t, ModelConfig{Policy: PolicySymphony})
	// Ten requests due at 20ms. ℓ(10) = 15ms fits: bs 10, InvalidAfter
	// 20 − 15 = 5ms, ExecAt = sched_at = 20 − ℓ(11) = 4ms.
	out := m.Enqueue(0, mkReqs(1, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms, 20*ms))
	wantCand(t, "factor 1", out.Candidate, 10, at(4*ms), at(5*ms), at(20*ms))
	// f = 2: 2·ℓ(k) ≤ 20ms holds up to k = 5; InvalidAfter = 20 − 2·ℓ(5)
	// = 0, sched_at = 20 − 2·ℓ(6) = −2ms, so ExecAt is now.
	out = m.SetTailFactor(0, 2)
	if !out.CandidateChanged {
		t.Error("a new tail factor that changes the candidate did not publish it")
	}
	wantCand(t, "factor 2", out.Candidate, 5, 0, 0, at(20*ms))
	if got := m.TailFactor(); got != 2 {
		t.Errorf("TailFactor() = %v, want 2", got)
	}
	// The plan occupies its GPU for ℓ(5) = 10ms, not 2·ℓ(5).
	out = m.Grant(0, Grant{GPU: 3, FreeAt: Past})
	if len(out.Plans) != 1 || len(out.Plans[0].Requests) != 5 {
		t.Fatalf("grant planned %+v, want one batch of 5", out.Plans)
	}
	if p := out.Plans[0]; p.FinishAt != p.ExecAt.Add(10*ms) {
		t.Errorf("plan runs %v..%v, want ℓ(5) = 10ms", p.ExecAt, p.FinishAt)
	}
	// At 1ms the five left, due at 20ms, fit with 2·ℓ(k) ≤ 19ms only up
	// to k = 4.
	out = m.Tick(at(ms))
	if out.Candidate.BatchSize != 4 {
		t.Errorf("after the grant, at 1ms: batch of %d, want 4", out.Candidate.BatchSize)
	}
	// A request that cannot make its deadline alone under 2·ℓ(1) = 12ms
	// is dropped, though ℓ(1) = 6ms would still fit it.
	out = m.Enqueue(at(ms), mkReqs(20, 12*ms))
	if got := dropIDs(out.Drops, DropDeadline, t); !slices.Equal(got, []RequestID{20}) {
		t.Errorf("dropped %v, want [20]: 1ms + 2·ℓ(1) > 12ms", got)
	}
	// A factor under 1 counts as 1: the profile is the least planned for.
	m.SetTailFactor(at(ms), 0.5)
	if got := m.TailFactor(); got != 1 {
		t.Errorf("TailFactor() after 0.5 = %v, want 1", got)
	}
	if c := m.Candidate(); c.BatchSize != 5 || c.InvalidAfter != at(10*ms) {
		t.Errorf("factor 1 again: candidate %+v, want 5 requests, InvalidAfter 20 − ℓ(5) = 10ms", c)
	}
}

// TestTailFactorPlansHold: under any tail factor, every batch the core
// plans finishes by its earliest deadline (less the result delay) even
// when it runs f·ℓ(b).
func TestTailFactorPlansHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	plans := 0
	for iter := range 500 {
		f := 1 + rng.Float64()
		d := Delays{Ctrl: time.Duration(rng.IntN(500)) * time.Microsecond, Result: time.Duration(rng.IntN(2000)) * time.Microsecond}
		pol := []Policy{PolicySymphony, PolicyWorkConserving, PolicyClockwork}[rng.IntN(3)]
		m := newModel(t, ModelConfig{Profile: profile.MustLinear(time.Duration(1+rng.IntN(2000))*time.Microsecond, time.Duration(rng.IntN(5000))*time.Microsecond, 32),
			Policy: pol, Drop: DropPolicy(rng.IntN(3)), Delays: d})
		m.SetTailFactor(0, f)
		now, free := Time(0), Past
		var next RequestID
		for step := 0; step < 60; step++ {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Microsecond)
			if rng.IntN(3) > 0 {
				k := 1 + rng.IntN(4)
				rs := make([]Request, k)
				for i := range rs {
					next++
					rs[i] = Request{ID: next, Arrival: now, Deadline: now.Add(time.Duration(5+rng.IntN(60)) * ms)}
				}
				m.Enqueue(now, rs)
				continue
			}
			out := m.Grant(now, Grant{GPU: 0, FreeAt: free, GPUs: 1})
			for _, p := range out.Plans {
				plans++
				dl := Never
				for _, r := range p.Requests {
					dl = MinTime(dl, r.Deadline.Add(-d.Result))
				}
				run := time.Duration(f * float64(p.FinishAt.Sub(p.ExecAt)))
				if p.ExecAt.Add(run) > dl {
					t.Fatalf("iteration %d, factor %.3f: a batch of %d from %v runs %v to %v, past its deadline %v",
						iter, f, len(p.Requests), p.ExecAt, run, p.ExecAt.Add(run), dl)
				}
			}
			free = out.Returns[0].FreeAt
		}
	}
	if plans < 1000 {
		t.Fatalf("only %d plans: the generator no longer exercises the rule", plans)
	}
}
