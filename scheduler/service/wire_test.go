package service

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/overrun"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service/servicetest"
	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// The tests here play frontends and backends by hand over a fake network
// (servicetest): each message a test sends has been handled when Send
// returns, and each answer is read from its connection in order.
//
// Time is real: the service runs the real-time scheduler (scheduler/rt)
// and its stall watch on the wall clock. The symphony policy would hold
// a batch to the last moment that still meets its earliest deadline, less
// the rank loop's lead; the tests make the lead a minute, so that every
// task is planned as soon as a GPU can take it, and give tasks deadlines
// of a second, so that a loaded test machine (whose timers and goroutines
// can run hundreds of milliseconds late under -race) drops none. A test
// that needs a task to stay queued takes the GPUs out of rotation; one
// that needs a stall sets a short stall timeout and waits for what the
// stall sends.

// lead is the tests' Config.WakeupSlack: how early the rank loop grants.
const lead = time.Minute

// soon is the deadline of the tasks that the tests expect planned: model
// m's SLO.
const soon = time.Second

// fake is a service on a transporttest.Network, with its log to wait on.
type fake struct {
	s   *Service
	net *transporttest.Network
	log *servicetest.Log
	cfg Config
}

// startFake runs a service of two models on a fake network: "m" (1ms a
// request plus 1ms, SLO 1s) and "n" (the same, SLO 2s). tune adjusts the
// configuration first.
func startFake(t *testing.T, tune func(*Config)) *fake {
	t.Helper()
	f := &fake{net: transporttest.NewNetwork(), log: servicetest.NewLog()}
	c := Default()
	c.Network, c.Log, c.WakeupSlack = f.net, zerolog.New(f.log), lead
	c.Models = startFakeModels()
	if tune != nil {
		tune(&c)
	}
	s, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("counters at the failure: %+v\nthe service's log:\n%s", s.Snapshot(), f.log)
		}
	})
	f.s, f.cfg = s, c
	return f
}

// startFakeModels are startFake's models.
func startFakeModels() []Model {
	return []Model{
		{Name: "m", Profile: profile.MustLinear(time.Millisecond, time.Millisecond, 8), SLO: time.Second},
		{Name: "n", Profile: profile.MustLinear(time.Millisecond, time.Millisecond, 8), SLO: 2 * time.Second},
	}
}

func (f *fake) frontend(t *testing.T, name string) *servicetest.Frontend {
	t.Helper()
	return servicetest.ConnectFrontend(t, f.net, f.s.Addr(), name)
}

func (f *fake) backend(t *testing.T, name string, gpus int) *servicetest.Backend {
	t.Helper()
	return servicetest.ConnectBackend(t, f.net, f.s.Addr(), name, gpus)
}

// readyBackend connects a backend whose GPUs are online at once.
func (f *fake) readyBackend(t *testing.T, name string, gpus int) *servicetest.Backend {
	t.Helper()
	b := f.backend(t, name, gpus)
	b.Ready(t)
	return b
}

// stats is the service's counters.
func (f *fake) stats() Stats { return f.s.Snapshot() }

// A backend and a frontend register: each gets its Welcome with the
// models, backends learn of frontends as they come and go, GPUs count
// once their backend is ready.
func TestRegistration(t *testing.T) {
	f := startFake(t, nil)
	b1 := f.backend(t, "b1", 2)
	if b1.FirstGPU != 0 || len(b1.Welcome.Frontends) != 0 {
		t.Errorf("first backend: first GPU %d, frontends %v; want 0 and none", b1.FirstGPU, b1.Welcome.Frontends)
	}
	checkSpecs(t, b1.Welcome.Models)
	if st := f.stats(); st.Backends != 0 || st.OnlineGPUs != 0 {
		t.Errorf("before Ready: %d backends, %d GPUs online; want none", st.Backends, st.OnlineGPUs)
	}
	b1.Ready(t)
	if st := f.stats(); st.Backends != 1 || st.OnlineGPUs != 2 {
		t.Errorf("after Ready: %d backends, %d GPUs online; want 1 and 2", st.Backends, st.OnlineGPUs)
	}

	fe := f.frontend(t, "f1")
	if fe.ID != 1 {
		t.Errorf("first frontend ID %d, want 1", fe.ID)
	}
	checkSpecs(t, fe.Welcome.Models)
	if up := transporttest.Expect[*wire.FrontendUp](t, b1.Peer); up.ID != fe.ID || up.DataAddr != "f1:data" {
		t.Errorf("backend told %+v, want frontend %d at f1:data", up, fe.ID)
	}

	// A later backend gets the GPUs after b1's, and the live frontends.
	b2 := f.backend(t, "b2", 1)
	if want := []wire.FrontendUp{{ID: fe.ID, DataAddr: "f1:data"}}; b2.FirstGPU != 2 || !slices.Equal(b2.Welcome.Frontends, want) {
		t.Errorf("second backend: first GPU %d, frontends %+v; want 2 and %+v", b2.FirstGPU, b2.Welcome.Frontends, want)
	}
	if st := f.stats(); st.Frontends != 1 {
		t.Errorf("%d frontends counted, want 1", st.Frontends)
	}

	fe.Close()
	for _, b := range []*servicetest.Backend{b1, b2} {
		if down := transporttest.Expect[*wire.FrontendDown](t, b.Peer); down.ID != fe.ID {
			t.Errorf("backend told %+v, want frontend %d down", down, fe.ID)
		}
	}
	if st := f.stats(); st.Frontends != 0 {
		t.Errorf("%d frontends counted after it left, want 0", st.Frontends)
	}
}

// checkSpecs checks the models a Welcome describes against startFake's.
func checkSpecs(t *testing.T, specs []wire.ModelSpec) {
	t.Helper()
	if len(specs) != 2 || specs[0].Name != "m" || specs[0].SLO != time.Second || specs[1].Name != "n" || specs[1].ID != 1 {
		t.Fatalf("models %+v, want m and n", specs)
	}
	if lat := specs[0].Latency; len(lat) != 8 || lat[0] != 2*time.Millisecond || lat[7] != 9*time.Millisecond {
		t.Errorf("m's latencies %v, want 2ms..9ms for batches 1..8", lat)
	}
}

// Dialers the scheduler cannot take are refused with a reason that says
// what to do; a backend's GPUs count against MaxGPUs until it leaves.
func TestRefusals(t *testing.T) {
	f := startFake(t, func(c *Config) { c.MaxGPUs = 2 })
	addr := f.s.Addr()
	for _, tc := range []struct {
		name  string
		hello *wire.Hello
		want  string
	}{
		{"too many GPUs", servicetest.BackendHello("big", 3), "no room for 3 more GPUs (max 2: raise the scheduler's --max-gpus)"},
		{"no data address", &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "f"}, "a frontend must give its data address"},
		{"a puller", &wire.Hello{Version: wire.Version, Role: wire.RolePuller, Name: "p"}, "the scheduler takes frontends and backends"},
		{"another version", &wire.Hello{Version: wire.Version + 1, Role: wire.RoleBackend, Name: "old", GPUs: 1}, "protocol version"},
	} {
		if got := servicetest.Refusal(t, f.net, addr, tc.hello); !strings.Contains(got, tc.want) {
			t.Errorf("%s: refused with %q, want %q", tc.name, got, tc.want)
		}
	}
	if st := f.stats(); st.Rejects != 3 {
		t.Errorf("%d rejects counted, want 3 (the version is the transport's to refuse)", st.Rejects)
	}

	b1 := f.backend(t, "b1", 2)
	if got := servicetest.Refusal(t, f.net, addr, servicetest.BackendHello("b2", 1)); !strings.Contains(got, "no room for 1 more GPUs") {
		t.Errorf("a backend beyond MaxGPUs refused with %q", got)
	}
	b1.Close()
	if b2 := f.backend(t, "b2", 1); b2.FirstGPU != 0 {
		t.Errorf("after b1 left, b2 got first GPU %d, want 0", b2.FirstGPU)
	}
}

// Submitted tasks become plans on a GPU: the backend is told which model,
// which tasks (with their frontend and input, in deadline order), when to
// start, and when each task must be done for its result to reach its
// frontend in time. (The scheduler may batch the three tasks in one plan
// or split them, as its timers fell.)
func TestTasksBecomePlans(t *testing.T) {
	f := startFake(t, nil)
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	before := time.Now().UnixNano()
	tasks := []wire.Task{servicetest.Task(11, 0, soon+2*time.Millisecond), servicetest.Task(12, 0, soon), servicetest.Task(13, 0, soon+time.Millisecond)}
	fe.Submit(t, tasks...)
	want := []wire.Task{tasks[1], tasks[2], tasks[0]} // by deadline
	trip := f.cfg.ResultTrip
	if trip == 0 {
		trip = DefaultResultTrip
	}
	var plans []*wire.Plan
	for planned := 0; planned < len(want); {
		p := b.Plan(t)
		plans = append(plans, p)
		if p.Model != 0 || p.GPU != b.FirstGPU || len(p.Tasks) == 0 {
			t.Fatalf("plan %+v, want tasks of model 0 on GPU %d", p, b.FirstGPU)
		}
		for i, pt := range p.Tasks {
			if planned+i >= len(want) {
				t.Fatalf("plan %+v: more tasks than were sent", p)
			}
			w := want[planned+i]
			if pt.ID != w.ID || pt.Frontend != fe.ID || pt.Input != w.Input {
				t.Errorf("task %d: %+v, want task %d of frontend %d with input %+v", planned+i, pt, w.ID, fe.ID, w.Input)
			}
			if pt.FinishBy != w.Deadline-int64(trip) {
				t.Errorf("task %d: finish by %d, want its deadline less the result trip (%d)", w.ID, pt.FinishBy, w.Deadline-int64(trip))
			}
		}
		if p.Deadline != want[planned].Deadline {
			t.Errorf("plan deadline %d, want its earliest task's %d", p.Deadline, want[planned].Deadline)
		}
		exec := f.cfg.Models[0].Profile.Latency(len(p.Tasks))
		if p.ExecAt < before || p.ExecAt+int64(exec) > p.Deadline-int64(f.cfg.Delays.Result) {
			t.Errorf("plan starts %dns after the submit and runs %v: not done a result delay (%v) before its deadline (%dns after the submit)",
				p.ExecAt-before, exec, f.cfg.Delays.Result, p.Deadline-before)
		}
		planned += len(p.Tasks)
	}
	if st := f.stats(); st.PlansInFlight != len(plans) || st.Planned != 3 || st.Plans != uint64(len(plans)) {
		t.Errorf("counters %+v, want %d plans of 3 tasks in flight", st, len(plans))
	}
	for _, p := range plans {
		b.Ran(t, p, p.ExecAt, p.ExecAt+int64(f.cfg.Models[0].Profile.Latency(len(p.Tasks))))
	}
	if st := f.stats(); st.PlansInFlight != 0 || st.Dropped != 0 || st.Failed != 0 {
		t.Errorf("after the reports: counters %+v, want nothing in flight, dropped or failed", st)
	}
}

// Tasks the scheduler cannot serve end at once, each with the reason.
func TestDropsSayWhy(t *testing.T) {
	f := startFake(t, nil)
	f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	fe.Submit(t,
		servicetest.Task(1, 7, soon),                            // no model 7
		wire.Task{ID: 2, Model: 0, Deadline: f.s.epochUnix + 1}, // already late
		servicetest.Task(3, 0, time.Second+2*time.Second),       // further off than the SLO allows
		wire.Task{ID: 4, Model: 0, Deadline: 1},                 // before the scheduler started
		servicetest.Task(5, 0, 2*time.Millisecond),              // too soon for any batch
	)
	ends := fe.Ends(t, 5)
	for _, w := range []struct {
		id     uint64
		code   wire.EndCode
		detail string
	}{
		{1, wire.EndUnknownModel, ""},
		{2, wire.EndDropDeadline, "deadline passed before the scheduler saw it"},
		{3, wire.EndBadRequest, "is the frontend's clock ahead?"},
		{4, wire.EndBadRequest, "is the frontend's clock behind?"},
		{5, wire.EndDropDeadline, ""},
	} {
		if e := ends[w.id]; e.Code != w.code || !strings.Contains(e.Detail, w.detail) {
			t.Errorf("task %d ended %v %q, want %v %q", w.id, e.Code, e.Detail, w.code, w.detail)
		}
	}
	if st := f.stats(); st.Tasks != 5 || st.Dropped != 5 || st.Planned != 0 {
		t.Errorf("counters %+v, want 5 tasks, all dropped", st)
	}
}

// A backend that says Leaving gets no new plan, and is told LeaveOK once
// it has reported every plan it holds; the tasks that come meanwhile go
// to another backend.
func TestLeavingBackendFinishesItsPlans(t *testing.T) {
	f := startFake(t, nil)
	b1 := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	fe.Submit(t, servicetest.Task(1, 0, soon))
	p := b1.Plan(t)
	b1.Leave(t)
	if got := b1.Pending(); len(got) != 0 {
		t.Fatalf("a backend holding a plan was sent %v on Leaving, want nothing yet", got)
	}
	if st := f.stats(); st.OnlineGPUs != 0 || st.PlansInFlight != 1 {
		t.Errorf("draining: %d GPUs online, %d plans in flight; want 0 and 1", st.OnlineGPUs, st.PlansInFlight)
	}
	b2 := f.readyBackend(t, "b2", 1)
	fe.Submit(t, servicetest.Task(2, 0, soon))
	if p2 := b2.Plan(t); p2.GPU != b2.FirstGPU || len(p2.Tasks) != 1 || p2.Tasks[0].ID != 2 {
		t.Errorf("the task after Leaving went to %+v, want b2's GPU %d", p2, b2.FirstGPU)
	}
	b1.Ran(t, p, p.ExecAt, p.ExecAt+int64(2*time.Millisecond))
	servicetest.Expect[*wire.LeaveOK](t, b1)
	b1.Close()
	if st := f.stats(); st.Failed != 0 || st.Backends != 1 || st.Planned != 2 {
		t.Errorf("after b1 left: counters %+v, want nothing failed, 1 backend, 2 planned", st)
	}
}

// A plan that a grant made for a GPU whose backend has begun to drain
// (the grant was on its way when Leaving came) is not sent there: its
// tasks go back to their queue, with their deadlines, and another
// backend's GPU serves them.
func TestPlanForADrainingGPUIsRequeued(t *testing.T) {
	f := startFake(t, nil)
	b1 := f.readyBackend(t, "b1", 1)
	b2 := f.readyBackend(t, "b2", 1)
	fe := f.frontend(t, "f1")
	b1.Leave(t)
	servicetest.Expect[*wire.LeaveOK](t, b1)

	// The grant in flight, as the model thread would hand it to Planned.
	now := f.s.sched.Now()
	var reqs []scheduler.Request
	for _, id := range []uint64{7, 8} {
		key := f.s.table.put(entry{frontend: scheduler.FrontendID(fe.ID), id: id, input: wire.InputRef{Key: id, Length: 8}})
		reqs = append(reqs, scheduler.Request{ID: key, Frontend: scheduler.FrontendID(fe.ID), Arrival: now, Deadline: now.Add(soon)})
	}
	f.s.Planned(&scheduler.BatchPlan{ID: 1 << 40, Model: 0, GPU: scheduler.GPUID(b1.FirstGPU),
		GrantedAt: now, ExecAt: now, FinishAt: now.Add(3 * time.Millisecond), Requests: reqs})
	if got := b1.Pending(); len(got) != 0 {
		t.Fatalf("a backend told LeaveOK was sent %v", got)
	}
	var got []uint64
	for len(got) < 2 {
		p := b2.Plan(t)
		for _, pt := range p.Tasks {
			got = append(got, pt.ID)
		}
	}
	if slices.Sort(got); !slices.Equal(got, []uint64{7, 8}) {
		t.Errorf("b2 ran tasks %v, want 7 and 8", got)
	}
	if st := f.stats(); st.Resubmitted != 2 || st.Dropped != 0 {
		t.Errorf("counters %+v, want 2 resubmitted and none dropped", st)
	}
}

// A backend whose connection ends mid-plan fails the plan's tasks, each
// with one end naming the backend.
func TestLostBackendFailsItsPlans(t *testing.T) {
	f := startFake(t, nil)
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	fe.Submit(t, servicetest.Task(1, 0, soon), servicetest.Task(2, 0, soon))
	p := b.Plan(t)
	b.Close()
	ends := fe.Ends(t, len(p.Tasks))
	for _, pt := range p.Tasks {
		if e := ends[pt.ID]; e.Code != wire.EndBackendLost || e.Detail != "b1" {
			t.Errorf("task %d ended %v %q, want %v \"b1\"", pt.ID, e.Code, e.Detail, wire.EndBackendLost)
		}
	}
	if st := f.stats(); st.Failed != uint64(len(p.Tasks)) || st.PlansInFlight != 0 || st.OnlineGPUs != 0 {
		t.Errorf("counters %+v, want %d failed, nothing in flight or online", st, len(p.Tasks))
	}
}

// A backend that falls silent while it holds a plan has its GPU taken out
// of rotation: the backend is told to retire the plan, the plan's tasks
// end as "backend stalled", and the GPU comes back when the backend
// speaks again. The stall timeout is short (200ms) and the test waits
// for the stall's messages, not for the time.
func TestSilentBackendStalls(t *testing.T) {
	f := startFake(t, func(c *Config) { c.StallAfter = 200 * time.Millisecond })
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	fe.Submit(t, servicetest.Task(1, 0, soon))
	p := b.Plan(t)
	// No report, no heartbeat.
	if r := servicetest.Expect[*wire.Retire](t, b); !slices.Equal(r.Plans, []uint64{p.ID}) {
		t.Fatalf("got %+v, want Retire of plan %d", r, p.ID)
	}
	e := fe.Ends(t, 1)[1]
	if e.Code != wire.EndBackendStalled || !strings.HasPrefix(e.Detail, "b1: GPU 0 ") {
		t.Errorf("task ended %v %q, want %v naming b1's GPU 0", e.Code, e.Detail, wire.EndBackendStalled)
	}
	if st := f.stats(); st.Stalls != 1 || st.StalledGPUs != 1 || st.OnlineGPUs != 0 || st.Failed != 1 || st.PlansInFlight != 0 {
		t.Errorf("stalled: counters %+v, want 1 stall, 1 GPU out, 1 failed, nothing in flight", st)
	}
	b.Heartbeat(t)
	if st := f.stats(); st.StalledGPUs != 0 || st.OnlineGPUs != 1 {
		t.Errorf("after a heartbeat: %d GPUs stalled, %d online; want 0 and 1", st.StalledGPUs, st.OnlineGPUs)
	}
	// The retired plan's late report counts nothing twice.
	now := time.Now().UnixNano()
	b.Ran(t, p, now, now+int64(2*time.Millisecond))
	if st := f.stats(); st.Failed != 1 || st.PlansInFlight != 0 {
		t.Errorf("after the late report: counters %+v, want still 1 failed", st)
	}
}

// drainSetup is a service with a long stall timeout (a drain is not a
// stall), one backend holding a plan of task 1 and draining (so that its
// GPU is out of rotation), and task 2 of model n queued for want of a GPU.
func drainSetup(t *testing.T) (*fake, *servicetest.Backend, *servicetest.Frontend, *wire.Plan) {
	t.Helper()
	f := startFake(t, func(c *Config) { c.StallAfter, c.DrainTimeout = time.Minute, time.Minute })
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	fe.Submit(t, servicetest.Task(1, 0, soon))
	p := b.Plan(t)
	b.Leave(t)
	fe.Submit(t, servicetest.Task(2, 1, 2*time.Second))
	return f, b, fe, p
}

// closeAsync starts Close and returns a channel closed when it returns,
// once Close has reached its wait for the plans in flight.
func (f *fake) closeAsync(t *testing.T) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.s.Close()
	}()
	f.log.Await(t, "draining plans in flight")
	return done
}

// endsUntilClosed reads a frontend's connection to its end and returns
// every end it was told; a task ended twice fails t.
func endsUntilClosed(t *testing.T, fe *servicetest.Frontend) map[uint64]wire.End {
	t.Helper()
	out := map[uint64]wire.End{}
	for {
		m, err := fe.Next()
		if err != nil {
			if fe.Err() == nil {
				t.Fatal(err)
			}
			return out
		}
		ended, ok := m.(*wire.Ended)
		if !ok {
			t.Fatalf("frontend got %v, want only Ended", m.Kind())
		}
		for _, e := range ended.Ends {
			if prev, dup := out[e.ID]; dup {
				t.Fatalf("task %d ended twice: %+v and %+v", e.ID, prev, e)
			}
			out[e.ID] = e
		}
	}
}

// Close ends the queued tasks at once, waits for the plan out to be
// reported, then closes; every task gets exactly one end: a drop from the
// scheduler, or its plan's result.
func TestCloseWaitsForPlansOut(t *testing.T) {
	f, b, fe, p := drainSetup(t)
	closed := f.closeAsync(t)
	if got := servicetest.Refusal(t, f.net, f.s.Addr(), servicetest.FrontendHello("late")); got != "scheduler shutting down" {
		t.Errorf("a frontend during the drain refused with %q", got)
	}
	select {
	case <-closed:
		t.Fatal("Close returned with a plan in flight")
	default:
	}
	if st := f.stats(); st.PlansInFlight != 1 {
		t.Errorf("%d plans in flight during the drain, want 1", st.PlansInFlight)
	}
	b.Ran(t, p, p.ExecAt, p.ExecAt+int64(2*time.Millisecond))
	waitClosed(t, closed)
	ends := endsUntilClosed(t, fe)
	if e, ok := ends[2]; !ok || e.Code != wire.EndDropShutdown {
		t.Errorf("queued task 2 ended %+v, want a shutdown drop", e)
	}
	if e, ok := ends[1]; ok || len(ends) != 1 {
		t.Errorf("the planned task, which ran, was also ended %+v; ends %+v", e, ends)
	}
	if err := b.Send(&wire.Heartbeat{}); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("backend connection after Close: %v, want closed", err)
	}
}

// EndDrain cuts Close's wait short: the plan still out ends as a shutdown
// drop at once, and nothing else is ended twice.
func TestEndDrainCutsCloseShort(t *testing.T) {
	f, _, fe, p := drainSetup(t)
	closed := f.closeAsync(t)
	f.s.EndDrain()
	waitClosed(t, closed)
	ends := endsUntilClosed(t, fe)
	if e := ends[1]; e.Code != wire.EndDropShutdown || e.Detail != "plan unfinished when the scheduler stopped" {
		t.Errorf("task 1 of the unfinished plan %d ended %+v, want a shutdown drop", p.ID, e)
	}
	if e := ends[2]; e.Code != wire.EndDropShutdown || len(ends) != 2 {
		t.Errorf("ends %+v, want tasks 1 and 2 ended once each", ends)
	}
	if st := f.stats(); st.PlansInFlight != 0 {
		t.Errorf("%d plans in flight after Close, want 0", st.PlansInFlight)
	}
}

// An EndDrain before Close makes Close not wait at all.
func TestEndDrainBeforeClose(t *testing.T) {
	f, _, fe, _ := drainSetup(t)
	f.s.EndDrain()
	f.s.Close()
	if ends := endsUntilClosed(t, fe); len(ends) != 2 || ends[1].Code != wire.EndDropShutdown || ends[2].Code != wire.EndDropShutdown {
		t.Errorf("ends %+v, want tasks 1 and 2 ended as shutdown drops", ends)
	}
}

func waitClosed(t *testing.T, closed <-chan struct{}) {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(transporttest.Wait):
		t.Fatal("Close did not return")
	}
}

// A model's tensors reach frontends and backends in their Welcome, and a
// model without tensors announces none.
func TestWelcomeTensors(t *testing.T) {
	in := []tensor.Spec{{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}}}
	out := []tensor.Spec{{Name: "y", Datatype: "FP32", Shape: []int64{3}}}
	f := startFake(t, func(c *Config) {
		c.Models[0].Inputs, c.Models[0].Outputs, c.Models[0].InputBytes = in, out, 256
	})
	for _, w := range []*wire.Welcome{f.frontend(t, "f1").Welcome, f.backend(t, "b1", 1).Welcome} {
		m, n := w.Models[0], w.Models[1]
		if !tensor.EqualSpecs(m.Inputs, in) || !tensor.EqualSpecs(m.Outputs, out) || n.Inputs != nil || n.Outputs != nil {
			t.Errorf("announced %v → %v and %v → %v", m.Inputs, m.Outputs, n.Inputs, n.Outputs)
		}
	}
}

// Batches that run three times their profile raise the model's tail
// factor to its cap, 2, and from then on every plan leaves room for a
// batch twice its ℓ(b) before its deadline: a batch that fits only on the
// profile's latency is not formed.
func TestOverrunsRaiseTheTailFactor(t *testing.T) {
	slow := profile.MustLinear(5*time.Millisecond, 5*time.Millisecond, 8) // ℓ(8) = 45ms
	f := startFake(t, func(c *Config) {
		c.Models = []Model{{Name: "slow", Profile: slow, SLO: time.Second}}
		c.Policy = scheduler.PolicyWorkConserving // a plan per task, at once
		// The fake backend sends no heartbeats, and a loaded CI machine
		// may hold the test between a plan and its report for longer
		// than the default stall timeout (the SLO, 1s): a stalled GPU
		// would take no plan, which is not what this test is about.
		c.StallAfter = time.Minute
	})
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	if got := f.stats().TailFactors["slow"]; got != 1 {
		t.Fatalf("tail factor before any batch: %v, want 1", got)
	}
	every := overrun.Default().Every
	for i := range every {
		fe.Submit(t, servicetest.Task(uint64(i+1), 0, soon))
		p := b.Plan(t)
		ran := 3 * slow.Latency(len(p.Tasks))
		now := time.Now().UnixNano()
		b.Ran(t, p, now-int64(ran), now)
	}
	if got := f.stats().TailFactors["slow"]; got != 2 {
		t.Fatalf("tail factor after %d batches at 3·ℓ(b): %v, want the cap 2", every, got)
	}
	// Eight tasks due in 80ms: on ℓ(b) all eight would fit (45ms), at
	// 2·ℓ(b) at most six.
	first := uint64(every + 1)
	var tasks []wire.Task
	for i := range 8 {
		tasks = append(tasks, servicetest.Task(first+uint64(i), 0, 80*time.Millisecond))
	}
	fe.Submit(t, tasks...)
	p := b.Plan(t)
	run := 2 * slow.Latency(len(p.Tasks))
	if p.ExecAt+int64(run) > p.Deadline-int64(f.cfg.Delays.Result) {
		t.Fatalf("plan of %d tasks starts %v before its deadline: no room for 2·ℓ(%d) = %v and the result delay %v",
			len(p.Tasks), time.Duration(p.Deadline-p.ExecAt), len(p.Tasks), run, f.cfg.Delays.Result)
	}
}

// A task's priority reaches its model's queue: with room for two, the two
// tasks sent at level 1 are planned before the two earlier-due ones at
// level 0, which follow in the next plan.
func TestPriorityOverTheWire(t *testing.T) {
	f := startFake(t, func(c *Config) {
		c.Policy = scheduler.PolicyWorkConserving
		c.Models[0].Profile = profile.MustLinear(time.Millisecond, time.Millisecond, 2)
	})
	b := f.backend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	low1, low2 := servicetest.Task(21, 0, soon), servicetest.Task(22, 0, soon+time.Millisecond)
	high1, high2 := servicetest.Task(23, 0, soon+5*time.Millisecond), servicetest.Task(24, 0, soon+6*time.Millisecond)
	high1.Priority, high2.Priority = 1, 1
	fe.Submit(t, low1, low2, high1, high2)
	b.Ready(t) // the GPU comes online with all four queued
	for _, want := range [][]uint64{{23, 24}, {21, 22}} {
		p := b.Plan(t)
		var got []uint64
		for _, pt := range p.Tasks {
			got = append(got, pt.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("plan of tasks %v, want %v", got, want)
		}
		b.Ran(t, p, p.ExecAt, p.ExecAt+int64(2*time.Millisecond+time.Millisecond))
	}
}
