package backend

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// lateRig is a backend between a fake scheduler and a fake frontend, for
// the rules about time: the model's batch of b takes b×step, the frontend
// answers reads once gate is closed, and every Results message the
// frontend gets and every GPUFree the scheduler gets comes out on a
// channel.
type lateRig struct {
	sched   transport.Conn
	gate    chan struct{}
	results chan *wire.Results
	frees   chan *wire.GPUFree
	// sender records which frontend (1 or 2) received each Results.
	sender sync.Map
}

const step = 20 * time.Millisecond

func newLateRig(t *testing.T, opts ...func(*Config)) *lateRig {
	t.Helper()
	n := inproc.New()
	r := &lateRig{gate: make(chan struct{}), results: make(chan *wire.Results, 16), frees: make(chan *wire.GPUFree, 16)}
	front, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{Message: func(c transport.Conn, m wire.Message) {
			switch m := m.(type) {
			case *wire.Read:
				go func() {
					<-r.gate
					reply := &wire.ReadReply{Seq: m.Seq}
					for _, op := range m.Ops {
						reply.Data = append(reply.Data, []byte{byte(op.Key)})
					}
					_ = c.Send(reply)
				}()
			case *wire.Results:
				r.sender.Store(m, uint32(1))
				r.results <- m
			}
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	// Frontend 2 takes reads and never answers them (a hung host).
	mute, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{Message: func(c transport.Conn, m wire.Message) {
			if res, ok := m.(*wire.Results); ok {
				r.sender.Store(res, uint32(2))
				r.results <- res
			}
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mute.Close() })
	model := wire.ModelSpec{ID: 0, Name: "m", SLO: time.Minute, Latency: []time.Duration{step, 2 * step, 3 * step, 4 * step}}
	ready := make(chan transport.Conn, 1)
	sched, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version, Models: []wire.ModelSpec{model},
				Frontends: []wire.FrontendUp{{ID: 1, DataAddr: front.Addr()}, {ID: 2, DataAddr: mute.Addr()}}},
			transport.HandlerFuncs{Message: func(c transport.Conn, m wire.Message) {
				switch m := m.(type) {
				case *wire.BackendReady:
					ready <- c
				case *wire.GPUFree:
					r.frees <- m
				}
			}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Close() })
	cfg := Default()
	cfg.SchedulerAddr, cfg.Network, cfg.DataPath = sched.Addr(), n, rdma.Config{Mode: rdma.ModeTCP}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	r.sched = <-ready
	return r
}

// plan sends a plan whose task i finishes by now + finishBy[i], all held
// by frontend 1.
func (r *lateRig) plan(t *testing.T, finishBy ...time.Duration) time.Time {
	t.Helper()
	return r.planFrom(t, make([]uint32, len(finishBy)), finishBy...)
}

// planFrom is plan with task i held by frontend 1+frontends[i] (0 for
// frontend 1, 1 for the mute frontend 2).
func (r *lateRig) planFrom(t *testing.T, frontends []uint32, finishBy ...time.Duration) time.Time {
	t.Helper()
	now := time.Now()
	p := &wire.Plan{ID: 1, ExecAt: now.UnixNano(), Deadline: now.Add(finishBy[0]).UnixNano()}
	for i, d := range finishBy {
		p.Tasks = append(p.Tasks, wire.PlanTask{ID: uint64(i), Frontend: 1 + frontends[i],
			Input: wire.InputRef{Length: 1, Key: uint64(i)}, FinishBy: now.Add(d).UnixNano()})
	}
	if err := r.sched.Send(p); err != nil {
		t.Fatal(err)
	}
	return now
}

// next waits for the next Results message.
func (r *lateRig) next(t *testing.T) *wire.Results {
	t.Helper()
	select {
	case m := <-r.results:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no results")
		return nil
	}
}

// Request IDs are unique per frontend only: two frontends' requests with
// the same ID in one plan each get their own end, at their own frontend.
func TestSameIDFromTwoFrontends(t *testing.T) {
	r := newLateRig(t)
	close(r.gate)
	now := time.Now()
	// Frontend 1's request is due in 150ms, so the batch starts without
	// the mute frontend's input, as in TestHungFrontendCostsOnlyItsOwnRequests.
	p := &wire.Plan{ID: 1, ExecAt: now.UnixNano(), Deadline: now.Add(150 * time.Millisecond).UnixNano(), Tasks: []wire.PlanTask{
		{ID: 5, Frontend: 1, Input: wire.InputRef{Length: 1, Key: 1}, FinishBy: now.Add(150 * time.Millisecond).UnixNano()},
		{ID: 5, Frontend: 2, Input: wire.InputRef{Length: 1, Key: 2}, FinishBy: now.Add(time.Minute).UnixNano()},
	}}
	if err := r.sched.Send(p); err != nil {
		t.Fatal(err)
	}
	got := map[uint32][]wire.Result{}
	for n := 0; n < 2; {
		m := r.next(t)
		from, _ := r.sender.Load(m)
		got[from.(uint32)] = append(got[from.(uint32)], m.Results...)
		n += len(m.Results)
	}
	if f1 := got[1]; len(f1) != 1 || f1[0].ID != 5 || f1[0].Code != 0 {
		t.Errorf("frontend 1 got %+v, want its request 5 answered", f1)
	}
	if f2 := got[2]; len(f2) != 1 || f2[0].ID != 5 || f2[0].Code != wire.EndInputUnavailable {
		t.Errorf("the mute frontend 2 got %+v, want its request 5 ended as input unavailable", f2)
	}
}

// A GPU that starts a batch too late for its earliest deadlines drops
// those requests at once, before the batch runs, and runs the rest.
func TestLateStartDropsTheHeadsAtOnce(t *testing.T) {
	r := newLateRig(t)
	close(r.gate) // inputs at once
	// At once, 4 requests take 80ms and 3 take 60ms: neither meets the
	// 10ms and 50ms deadlines; 2 take 40ms and meet the others.
	r.plan(t, 10*time.Millisecond, 50*time.Millisecond, time.Minute, time.Minute)
	drops := r.next(t)
	if len(drops.Results) != 2 {
		t.Fatalf("first message holds %d results, want the 2 drops, sent before the batch runs", len(drops.Results))
	}
	for i, res := range drops.Results {
		if res.ID != uint64(i) || res.Code != wire.EndDropDeadline || !strings.Contains(res.Detail, "could no longer finish in time") || res.StartedAt != 0 {
			t.Errorf("drop %d: %+v, want request %d dropped for its deadline, never run", i, res, i)
		}
	}
	ran := r.next(t)
	if len(ran.Results) != 2 {
		t.Fatalf("then %d results, want the 2 that ran", len(ran.Results))
	}
	for i, res := range ran.Results {
		if res.ID != uint64(i+2) || res.Code != 0 || res.BatchSize != 2 || len(res.Output) == 0 {
			t.Errorf("result %d: %+v, want request %d answered in a batch of 2", i, res, i+2)
		}
		if took := time.Duration(res.FinishedAt - res.StartedAt); took < 2*step {
			t.Errorf("batch of 2 ran %v, want its ℓ(2) = %v", took, 2*step)
		}
	}
	free := <-r.frees
	if free.Ran != 2 || free.Failed != 0 || free.FinishedAt <= free.StartedAt {
		t.Errorf("GPUFree %+v: want 2 ran, none failed (drops are not failures), a real run", free)
	}
}

// A read that stalls past the whole batch's latest start costs the batch
// its earliest-deadline request, not all of it: the backend waits on as
// long as a smaller batch can still make its deadlines.
func TestStalledReadCostsOnlyTheHeads(t *testing.T) {
	r := newLateRig(t)
	// All three could start until 10ms (3 take 60ms, the first is due at
	// 70ms); the last two until 110ms (40ms, due at 150ms). The inputs
	// come at 40ms.
	start := r.plan(t, 70*time.Millisecond, 150*time.Millisecond, time.Minute)
	time.AfterFunc(time.Until(start.Add(40*time.Millisecond)), func() { close(r.gate) })
	drops := r.next(t)
	if len(drops.Results) != 1 || drops.Results[0].ID != 0 || drops.Results[0].Code != wire.EndDropDeadline {
		t.Fatalf("first results %+v, want request 0 dropped for its deadline", drops.Results)
	}
	ran := r.next(t)
	if len(ran.Results) != 2 || ran.Results[0].Code != 0 || ran.Results[1].Code != 0 || ran.Results[0].BatchSize != 2 {
		t.Fatalf("then %+v, want requests 1 and 2 answered in a batch of 2", ran.Results)
	}
	if free := <-r.frees; free.Ran != 2 || free.Failed != 0 {
		t.Errorf("GPUFree %+v, want 2 ran and none failed", free)
	}
}

// One frontend that never answers its read costs only its own requests:
// the backend runs the ones whose inputs came, at the whole batch's latest
// start, instead of giving them up one by one while it waits.
func TestHungFrontendCostsOnlyItsOwnRequests(t *testing.T) {
	r := newLateRig(t)
	close(r.gate)
	// Requests 0 and 1 from frontend 1 (due at 70ms and 150ms), request
	// 2 from the mute frontend 2 (due in a minute). All three could
	// start until 10ms; the two that have their inputs then take 40ms.
	r.planFrom(t, []uint32{0, 0, 1}, 70*time.Millisecond, 150*time.Millisecond, time.Minute)
	got := map[uint64]wire.Result{}
	for len(got) < 3 {
		for _, res := range r.next(t).Results {
			got[res.ID] = res
		}
	}
	if got[0].Code != 0 || got[1].Code != 0 || got[0].BatchSize != 2 {
		t.Errorf("frontend 1's requests: %+v and %+v, want both answered in a batch of 2", got[0], got[1])
	}
	if got[2].Code != wire.EndInputUnavailable {
		t.Errorf("the mute frontend's request: %+v, want input unavailable", got[2])
	}
	if free := <-r.frees; free.Ran != 2 || free.Dropped != 0 {
		t.Errorf("GPUFree %+v, want 2 ran and none dropped", free)
	}
}

// A plan that reaches the backend too late for every request ends them
// all at once, without a pull and without taking a place in the GPU's
// queue: it never reached the GPU (FinishedAt 0).
func TestPlanDeadOnArrivalEndsAtOnce(t *testing.T) {
	r := newLateRig(t)
	close(r.gate)
	r.plan(t, -time.Millisecond, time.Millisecond)
	m := r.next(t)
	if len(m.Results) != 2 {
		t.Fatalf("%d results, want both requests", len(m.Results))
	}
	for _, res := range m.Results {
		if res.Code != wire.EndDropDeadline {
			t.Errorf("result %+v, want a deadline drop", res)
		}
	}
	if free := <-r.frees; free.Ran != 0 || free.FinishedAt != 0 || free.Dropped != 2 {
		t.Errorf("GPUFree %+v: want nothing run, never on the GPU, 2 dropped", free)
	}
}

// A plan that could run when it came, but not any more once the GPU gets
// to it (queued behind a long batch), is given up by the GPU: its
// requests end as deadline drops, and the GPU reports it free from then.
func TestPlanTooLateByItsTurnIsGivenUp(t *testing.T) {
	r := newLateRig(t)
	close(r.gate)
	now := time.Now()
	long := &wire.Plan{ID: 1, ExecAt: now.UnixNano(), Deadline: now.Add(time.Minute).UnixNano()}
	for i := range 4 { // 80ms on the GPU
		long.Tasks = append(long.Tasks, wire.PlanTask{ID: uint64(10 + i), Frontend: 1,
			Input: wire.InputRef{Length: 1, Key: uint64(10 + i)}, FinishBy: now.Add(time.Minute).UnixNano()})
	}
	// Feasible on arrival (20ms alone, due at 50ms), not after the 80ms.
	short := &wire.Plan{ID: 2, ExecAt: now.UnixNano(), Deadline: now.Add(50 * time.Millisecond).UnixNano(),
		Tasks: []wire.PlanTask{{ID: 1, Frontend: 1, Input: wire.InputRef{Length: 1, Key: 1}, FinishBy: now.Add(50 * time.Millisecond).UnixNano()}}}
	for _, p := range []*wire.Plan{long, short} {
		if err := r.sched.Send(p); err != nil {
			t.Fatal(err)
		}
	}
	for seen := 0; seen < 5; {
		for _, res := range r.next(t).Results {
			seen++
			if res.ID == 1 && res.Code != wire.EndDropDeadline {
				t.Errorf("the queued request: %+v, want a deadline drop", res)
			}
		}
	}
	<-r.frees // the long plan
	if free := <-r.frees; free.Plan != 2 || free.Ran != 0 || free.FinishedAt == 0 || free.FinishedAt != free.StartedAt || free.Dropped != 1 {
		t.Errorf("GPUFree %+v: want plan 2 given up on the GPU (free from then), 1 dropped", free)
	}
}

// Plans the scheduler retired (their GPU stalled, their requests ended)
// are not run, and a full queue makes room by taking them out: the plans
// that come after them are not refused.
func TestRetiredPlansAreSkippedAndMakeRoom(t *testing.T) {
	r := newLateRig(t, func(c *Config) { c.QueueDepth = 3 })
	close(r.gate)
	now := time.Now()
	plan := func(id uint64, n int) *wire.Plan {
		p := &wire.Plan{ID: id, ExecAt: now.UnixNano(), Deadline: now.Add(time.Minute).UnixNano()}
		for i := range n {
			tid := id*10 + uint64(i)
			p.Tasks = append(p.Tasks, wire.PlanTask{ID: tid, Frontend: 1, Input: wire.InputRef{Length: 1, Key: tid}, FinishBy: now.Add(time.Minute).UnixNano()})
		}
		return p
	}
	// Plan 1 holds the GPU for 80ms (or waits, with 2 and 3, in the
	// queue of 3); then the scheduler retires 2 and 3, and plan 4 comes:
	// it finds room, made by taking them out if the queue is full.
	for _, m := range []wire.Message{plan(1, 4), plan(2, 1), plan(3, 1), &wire.Retire{Plans: []uint64{2, 3}}, plan(4, 1)} {
		if err := r.sched.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]wire.Result{}
	for len(got) < 5 {
		for _, res := range r.next(t).Results {
			got[res.ID] = res
		}
	}
	for _, id := range []uint64{10, 11, 12, 13, 40} {
		if got[id].Code != 0 {
			t.Errorf("request %d: %+v, want answered", id, got[id])
		}
	}
	for _, id := range []uint64{20, 30} {
		if res, ok := got[id]; ok {
			t.Errorf("request %d of a retired plan: %+v, want nothing", id, res)
		}
	}
	for range 2 {
		if free := <-r.frees; free.Plan == 2 || free.Plan == 3 || free.Failed != 0 {
			t.Errorf("GPUFree %+v: want only plans 1 and 4, none failed", free)
		}
	}
}

// An input that arrives after the plan's earliest deadline still serves
// the requests due later: the pulls last until the last request's
// finish-by, not the first's. Only the head, which no input could save
// any more, is dropped.
func TestLateInputStillServesLaterDeadlines(t *testing.T) {
	r := newLateRig(t)
	now := r.plan(t, 30*time.Millisecond, 400*time.Millisecond)
	// The frontend answers only after the head's finish-by has passed.
	<-time.After(time.Until(now.Add(60 * time.Millisecond)))
	close(r.gate)
	got := map[uint64]wire.Result{}
	for len(got) < 2 {
		for _, res := range r.next(t).Results {
			got[res.ID] = res
		}
	}
	if head := got[0]; head.Code != wire.EndDropDeadline {
		t.Errorf("the head (due at 30ms, its input at 60ms): %+v, want a deadline drop", head)
	}
	if tail := got[1]; tail.Code != 0 || len(tail.Output) == 0 {
		t.Errorf("the request due at 400ms, its input at 60ms: %+v, want its result", tail)
	}
}
