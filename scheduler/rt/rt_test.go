package rt

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// guard bounds every wait on the scheduler. It is a failure guard, never a
// way to let time pass: the tests wait on channels.
const guard = 20 * time.Second

// event is one Sink call: a copied plan, or a drop.
type event struct {
	model scheduler.ModelID
	plan  *scheduler.BatchPlan
	drop  *scheduler.Drop
}

// chanSink sends every decision on a channel large enough never to block
// the scheduling path in these tests.
// Its GPUs run late by late after each plan, as Planned says.
type chanSink struct {
	events chan event
	late   time.Duration
}

func newSink() *chanSink { return &chanSink{events: make(chan event, 1<<16)} }

func (s *chanSink) Planned(p *scheduler.BatchPlan) scheduler.Time {
	c := *p
	c.Requests = slices.Clone(p.Requests) // only valid during the call
	s.events <- event{model: p.Model, plan: &c}
	return p.FinishAt.Add(s.late)
}

func (s *chanSink) Dropped(model scheduler.ModelID, d *scheduler.Drop) {
	c := *d
	s.events <- event{model: model, drop: &c}
}

// ledger records how each request ended and checks the plans.
type ledger struct {
	t       *testing.T
	modelOf map[scheduler.RequestID]scheduler.ModelID
	ended   map[scheduler.RequestID]int
	reasons map[scheduler.DropReason]int
	plans   []*scheduler.BatchPlan
	planned int
}

func newLedger(t *testing.T) *ledger {
	return &ledger{t: t, modelOf: map[scheduler.RequestID]scheduler.ModelID{}, ended: map[scheduler.RequestID]int{}, reasons: map[scheduler.DropReason]int{}}
}

func (l *ledger) record(e event) {
	l.t.Helper()
	end := func(r scheduler.Request) {
		l.ended[r.ID]++
		if n := l.ended[r.ID]; n > 1 {
			l.t.Errorf("request %d ended %d times", r.ID, n)
		}
		if m, ok := l.modelOf[r.ID]; !ok || m != e.model {
			l.t.Errorf("request %d of model %d (submitted: %v) ended by model %d", r.ID, m, ok, e.model)
		}
	}
	if e.drop != nil {
		end(e.drop.Request)
		l.reasons[e.drop.Reason]++
		return
	}
	l.plans = append(l.plans, e.plan)
	for _, r := range e.plan.Requests {
		end(r)
		l.planned++
	}
}

// await records events until n requests have ended.
func (l *ledger) await(s *chanSink, n int) {
	l.t.Helper()
	timeout := time.After(guard)
	for len(l.ended) < n {
		select {
		case e := <-s.events:
			l.record(e)
		case <-timeout:
			l.t.Fatalf("only %d of %d requests ended within %v", len(l.ended), n, guard)
		}
	}
}

// drain records whatever is left after Stop, which has returned, so every
// Sink call has been made.
func (l *ledger) drain(s *chanSink) {
	for {
		select {
		case e := <-s.events:
			l.record(e)
		default:
			return
		}
	}
}

// checkPlans verifies that no GPU runs two batches at once and that every
// batch finishes in time for its requests.
func (l *ledger) checkPlans(cfg Config) {
	l.t.Helper()
	byGPU := map[scheduler.GPUID][]*scheduler.BatchPlan{}
	for _, p := range l.plans {
		byGPU[p.GPU] = append(byGPU[p.GPU], p)
		prof := cfg.Models[p.Model].Profile
		if p.FinishAt != p.ExecAt.Add(prof.Latency(len(p.Requests))) {
			l.t.Errorf("plan %d: %d requests from %v to %v", p.ID, len(p.Requests), p.ExecAt, p.FinishAt)
		}
		if p.ExecAt < p.GrantedAt.Add(cfg.Rank.Delays.Dispatch(len(p.Requests))) {
			l.t.Errorf("plan %d starts at %v, before its inputs arrive", p.ID, p.ExecAt)
		}
		for _, r := range p.Requests {
			if p.FinishAt.Add(cfg.Rank.Delays.Result) > r.Deadline {
				l.t.Errorf("request %d answered at %v after its deadline %v", r.ID, p.FinishAt, r.Deadline)
			}
		}
	}
	for g, ps := range byGPU {
		slices.SortFunc(ps, func(a, b *scheduler.BatchPlan) int { return int(a.ExecAt - b.ExecAt) })
		for i := 1; i < len(ps); i++ {
			if ps[i].ExecAt < ps[i-1].FinishAt {
				l.t.Errorf("GPU %d runs plan %d (from %v) while plan %d runs until %v", g, ps[i].ID, ps[i].ExecAt, ps[i-1].ID, ps[i-1].FinishAt)
			}
		}
	}
}

func testConfig(models, gpus int, pol scheduler.Policy) Config {
	d := scheduler.Delays{Ctrl: 50 * time.Microsecond, DataPerRequest: 5 * time.Microsecond, Result: 50 * time.Microsecond}
	cfg := Config{Rank: scheduler.RankConfig{Models: models, GPUs: gpus, Policy: pol, Delays: d}}
	for i := range models {
		cfg.Models = append(cfg.Models, scheduler.ModelConfig{
			ID: scheduler.ModelID(i), Name: "m", Policy: pol, Delays: d,
			Profile: profile.MustLinear(200*time.Microsecond, time.Millisecond, 16),
		})
	}
	return cfg
}

func start(t *testing.T, cfg Config) (*Scheduler, *chanSink) {
	t.Helper()
	sink := newSink()
	s, err := Start(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s, sink
}

// TestEveryRequestPlanned submits requests with generous deadlines from
// several goroutines and receives every plan. The work-conserving policies
// plan at once, so with a 10s deadline every request is planned. Symphony
// sends full batches (16) at once but holds each model's last, partial batch
// until sched_at. Here all three models' last batches share one deadline and
// reach sched_at together on two GPUs, so the third can find no GPU in time
// and its requests are dropped for their deadline (4 of 400 in practice,
// with the rank loop's wake-up lead absorbing timer latency): every request
// must end once, and most are planned.
func TestEveryRequestPlanned(t *testing.T) {
	for _, pol := range []scheduler.Policy{scheduler.PolicyWorkConserving, scheduler.PolicyClockwork, scheduler.PolicySymphony} {
		t.Run(pol.String(), func(t *testing.T) {
			slo := 10 * time.Second
			if pol == scheduler.PolicySymphony {
				slo = 100 * time.Millisecond
			}
			cfg := testConfig(3, 2, pol)
			s, sink := start(t, cfg)
			l := newLedger(t)
			const submitters, perSubmitter = 4, 100
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := range submitters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perSubmitter; i += 4 {
						m := scheduler.ModelID((g + i) % 3)
						reqs := make([]scheduler.Request, 4)
						now := s.Now()
						for j := range reqs {
							id := scheduler.RequestID(g*perSubmitter + i + j)
							reqs[j] = scheduler.Request{ID: id, Arrival: now, Deadline: now.Add(slo)}
						}
						mu.Lock()
						for _, r := range reqs {
							l.modelOf[r.ID] = m
						}
						mu.Unlock()
						if err := s.Submit(m, reqs); err != nil {
							t.Errorf("Submit: %v", err)
						}
					}
				}()
			}
			wg.Wait() // every modelOf entry is written before recording
			l.await(sink, submitters*perSubmitter)
			s.Stop()
			l.drain(sink)
			n := submitters * perSubmitter
			switch {
			case len(l.ended) != n:
				t.Errorf("%d of %d requests ended", len(l.ended), n)
			case pol != scheduler.PolicySymphony && l.planned != n:
				t.Errorf("%d planned, drops %v; want all %d planned", l.planned, l.reasons, n)
			case l.planned < n/2 || l.reasons[scheduler.DropDeadline]+l.reasons[scheduler.DropPruned] != n-l.planned:
				t.Errorf("%d planned, drops %v; want most of %d planned, the rest dropped for their deadline", l.planned, l.reasons, n)
			}
			t.Logf("%d of %d planned, drops %v", l.planned, n, l.reasons)
			l.checkPlans(cfg)
			if busy, wall := s.RankStats(); busy <= 0 || busy > wall {
				t.Errorf("rank busy %v of %v", busy, wall)
			}
		})
	}
}

// TestPlannedFreeTimeHoldsTheGPU: when the sink says a GPU frees later
// than its plan (it runs late), the next plan on the GPU starts no earlier.
func TestPlannedFreeTimeHoldsTheGPU(t *testing.T) {
	cfg := testConfig(1, 1, scheduler.PolicyWorkConserving)
	sink := newSink()
	sink.late = 3 * time.Millisecond
	s, err := Start(cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	l := newLedger(t)
	now := s.Now()
	var reqs []scheduler.Request
	for i := range 64 { // four full batches, back to back on the one GPU
		id := scheduler.RequestID(i)
		l.modelOf[id] = 0
		reqs = append(reqs, scheduler.Request{ID: id, Arrival: now, Deadline: now.Add(10 * time.Second)})
	}
	if err := s.Submit(0, reqs); err != nil {
		t.Fatal(err)
	}
	l.await(sink, len(reqs))
	if l.planned != len(reqs) {
		t.Fatalf("%d of %d planned", l.planned, len(reqs))
	}
	slices.SortFunc(l.plans, func(a, b *scheduler.BatchPlan) int { return int(a.ExecAt - b.ExecAt) })
	for i := 1; i < len(l.plans); i++ {
		if prev, p := l.plans[i-1], l.plans[i]; p.ExecAt < prev.FinishAt.Add(sink.late) {
			t.Errorf("plan %d starts at %v, before the GPU really frees of plan %d at %v", p.ID, p.ExecAt, prev.ID, prev.FinishAt.Add(sink.late))
		}
	}
}

// TestStopDropsQueued: under the symphony policy a request with a distant
// deadline waits for sched_at, so it is still queued when Stop ends it
// with DropShutdown.
func TestStopDropsQueued(t *testing.T) {
	cfg := testConfig(2, 1, scheduler.PolicySymphony)
	s, sink := start(t, cfg)
	l := newLedger(t)
	var reqs []scheduler.Request
	now := s.Now()
	for i := range 10 {
		id := scheduler.RequestID(i)
		l.modelOf[id] = scheduler.ModelID(i % 2)
		reqs = append(reqs, scheduler.Request{ID: id, Arrival: now, Deadline: now.Add(time.Hour)})
	}
	for m := range scheduler.ModelID(2) {
		var mine []scheduler.Request
		for _, r := range reqs {
			if l.modelOf[r.ID] == m {
				mine = append(mine, r)
			}
		}
		if err := s.Submit(m, mine); err != nil {
			t.Fatal(err)
		}
	}
	s.Stop()
	l.drain(sink)
	if len(l.ended) != 10 || l.reasons[scheduler.DropShutdown] != 10 {
		t.Errorf("after Stop: %d ended, %d planned, drops %v; want 10 shutdown drops", len(l.ended), l.planned, l.reasons)
	}
	err := s.Submit(0, reqs[:1])
	if !errors.Is(err, ErrStopped) {
		t.Errorf("Submit after Stop: %v, want ErrStopped", err)
	}
	s.Stop() // idempotent
	if err := s.Submit(5, reqs[:1]); err == nil || errors.Is(err, ErrStopped) {
		t.Errorf("Submit to an unknown model: %v", err)
	}
}

// TestSubmitRacingStop: submitters keep going while the scheduler stops.
// Every request whose Submit succeeded ends exactly once; none whose Submit
// failed ever shows up.
func TestSubmitRacingStop(t *testing.T) {
	cfg := testConfig(2, 2, scheduler.PolicySymphony)
	s, sink := start(t, cfg)
	// Each submitter stops by itself after maxEach requests, so that the
	// sink's buffer can never fill and block the scheduler.
	const submitters, maxEach = 4, 5000
	accepted := make([][]scheduler.RequestID, submitters)
	models := make([]map[scheduler.RequestID]scheduler.ModelID, submitters)
	started := make(chan struct{}, submitters)
	var wg sync.WaitGroup
	for g := range submitters {
		wg.Add(1)
		models[g] = map[scheduler.RequestID]scheduler.ModelID{}
		go func() {
			defer wg.Done()
			for i := range maxEach {
				id := scheduler.RequestID(g<<32 | i)
				m := scheduler.ModelID(i % 2)
				now := s.Now()
				// Deadlines from tight to loose: some are planned, some
				// dropped for their deadline, the rest at shutdown.
				dl := now.Add(time.Duration(1+i%50) * time.Millisecond)
				err := s.Submit(m, []scheduler.Request{{ID: id, Arrival: now, Deadline: dl}})
				if errors.Is(err, ErrStopped) {
					return
				}
				if err != nil {
					t.Errorf("Submit: %v", err)
					return
				}
				accepted[g] = append(accepted[g], id)
				models[g][id] = m
				if i == 50 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range submitters {
		select {
		case <-started:
		case <-time.After(guard):
			t.Fatal("submitters did not start")
		}
	}
	s.Stop()
	wg.Wait()
	l := newLedger(t)
	n := 0
	for g := range submitters {
		n += len(accepted[g])
		for id, m := range models[g] {
			l.modelOf[id] = m
		}
	}
	l.drain(sink)
	if len(l.ended) != n {
		t.Errorf("%d requests accepted, %d ended (%d planned, drops %v)", n, len(l.ended), l.planned, l.reasons)
	}
	t.Logf("%d requests accepted: %d planned, drops %v", n, l.planned, l.reasons)
	l.checkPlans(cfg)
}

func TestStartRejectsBadConfig(t *testing.T) {
	cfg := testConfig(2, 1, scheduler.PolicySymphony)
	cfg.Rank.Models = 3
	if _, err := Start(cfg, newSink()); err == nil {
		t.Error("Start accepted 2 model configs for 3 models")
	}
	cfg = testConfig(2, 1, scheduler.PolicySymphony)
	cfg.Models[1].ID = 0
	if _, err := Start(cfg, newSink()); err == nil {
		t.Error("Start accepted a model at the wrong index")
	}
	cfg = testConfig(1, 1, scheduler.PolicyNexus)
	if _, err := Start(cfg, newSink()); err == nil {
		t.Error("Start accepted the nexus policy")
	}
}

func TestClock(t *testing.T) {
	cfg := testConfig(1, 1, scheduler.PolicySymphony)
	s, _ := start(t, cfg)
	a := s.Now()
	wall := time.Now()
	b := s.Now()
	if a < 0 || b < a {
		t.Errorf("clock went from %v to %v", a, b)
	}
	if got := s.Time(wall); got < a || got > b {
		t.Errorf("Time(now) = %v, outside [%v, %v]", got, a, b)
	}
}

// A request without a deadline could never become schedulable under the
// symphony policy; Submit refuses it instead of holding it forever.
func TestSubmitRejectsRequestWithoutDeadline(t *testing.T) {
	s, _ := start(t, testConfig(1, 1, scheduler.PolicySymphony))
	err := s.Submit(0, []scheduler.Request{{ID: 1, Arrival: s.Now(), Deadline: scheduler.Never}})
	if err == nil {
		t.Fatal("Submit accepted a request whose deadline is Never")
	}
}

// The measured lead is the median lateness of the last wakeupSamples timer
// firings (checked against a plain sort of the same samples), taken anew
// every quarter of that window, capped, and never negative.
func TestWakeupMeterLeadsByTheMedianLateness(t *testing.T) {
	var w wakeupMeter
	var all []time.Duration
	recomputed := 0
	for i := range 3 * wakeupSamples {
		// Firings late by 0..99µs, a 5ms stall every tenth, and an
		// early wake-up (negative lateness) every seventh.
		late := time.Duration(i%100) * time.Microsecond
		switch {
		case i%10 == 9:
			late = 5 * time.Millisecond
		case i%7 == 6:
			late = -time.Millisecond
		}
		all = append(all, max(late, 0))
		lead, ok := w.observe(late)
		if !ok {
			continue
		}
		recomputed++
		window := slices.Clone(all[max(len(all)-wakeupSamples, 0):])
		slices.Sort(window)
		if want := window[len(window)/2]; lead != want {
			t.Errorf("after %d firings: lead %v, want the window's median %v", i+1, lead, want)
		}
		if lead > 100*time.Microsecond {
			t.Errorf("lead %v: the stalls moved the median", lead)
		}
	}
	if recomputed != 12 {
		t.Errorf("recomputed %d times over %d firings, want 12", recomputed, 3*wakeupSamples)
	}
	var stalled wakeupMeter
	for i := range wakeupSamples {
		if lead, ok := stalled.observe(time.Second); ok && lead != maxMeasuredLead {
			t.Fatalf("after %d firings a second late: lead %v, want the cap %v", i+1, lead, maxMeasuredLead)
		}
	}
}

// TestSetTailFactor: the factor reaches the model's core before the
// requests submitted after it, and bad arguments are refused.
func TestSetTailFactor(t *testing.T) {
	cfg := testConfig(1, 1, scheduler.PolicyWorkConserving)
	s, sink := start(t, cfg)
	if err := s.SetTailFactor(1, 2); err == nil {
		t.Error("SetTailFactor accepted an unknown model")
	}
	for _, f := range []float64{0, -1, math.NaN()} {
		if err := s.SetTailFactor(0, f); err == nil {
			t.Errorf("SetTailFactor accepted the factor %v", f)
		}
	}
	if err := s.SetTailFactor(0, 2); err != nil {
		t.Fatal(err)
	}
	// ℓ(b) = 0.2ms·b + 1ms: 16 requests due in 6ms fit on the profile
	// (ℓ(16) = 4.2ms) but at twice it only 6 do (2·ℓ(6) = 4.4ms; 2·ℓ(7)
	// = 4.8ms leaves less than the dispatch and result delays).
	now := s.Now()
	reqs := make([]scheduler.Request, 16)
	for i := range reqs {
		reqs[i] = scheduler.Request{ID: scheduler.RequestID(i + 1), Arrival: now, Deadline: now.Add(6 * time.Millisecond)}
	}
	if err := s.Submit(0, reqs); err != nil {
		t.Fatal(err)
	}
	for ended := 0; ended < len(reqs); {
		e := <-sink.events
		if e.plan == nil {
			ended++
			continue
		}
		ended += len(e.plan.Requests)
		if run := 2 * cfg.Models[0].Profile.Latency(len(e.plan.Requests)); e.plan.ExecAt.Add(run) > now.Add(6*time.Millisecond-cfg.Models[0].Delays.Result) {
			t.Errorf("a batch of %d planned at %v: 2·ℓ = %v runs past the deadline", len(e.plan.Requests), e.plan.ExecAt.Sub(now), run)
		}
	}
}
