package service

import (
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/service/servicetest"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// ctl sends a model-control op from fe and returns its answer, after the
// state changes the scheduler announced on the way (as their states).
func ctl(t *testing.T, fe *servicetest.Frontend, seq uint64, op wire.ControlOp, model uint32) (*wire.ControlDone, []wire.ModelState) {
	t.Helper()
	if err := fe.Send(&wire.Control{Seq: seq, Op: op, Model: model}); err != nil {
		t.Fatal(err)
	}
	return awaitDone(t, fe, seq)
}

// awaitDone reads fe's messages up to the ControlDone of seq.
func awaitDone(t *testing.T, fe *servicetest.Frontend, seq uint64) (*wire.ControlDone, []wire.ModelState) {
	t.Helper()
	var states []wire.ModelState
	for {
		m, err := fe.Next()
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *wire.ModelStates:
			for _, s := range m.States {
				states = append(states, s.State)
			}
		case *wire.ControlDone:
			if m.Seq != seq {
				t.Fatalf("ControlDone %+v, want seq %d", m, seq)
			}
			return m, states
		default:
			t.Fatalf("frontend got %v %+v while waiting for ControlDone", m.Kind(), m)
		}
	}
}

// nextState reads fe's next message, which must announce one model state.
func nextState(t *testing.T, fe *servicetest.Frontend) wire.ModelStatus {
	t.Helper()
	m := transporttest.Expect[*wire.ModelStates](t, fe.Peer)
	if len(m.States) != 1 {
		t.Fatalf("ModelStates %+v, want one", m)
	}
	return m.States[0]
}

// controls returns the Controls among b's queued messages, without
// waiting: what the scheduler has sent it so far.
func controls(b *servicetest.Backend) []*wire.Control {
	var out []*wire.Control
	for _, m := range b.Pending() {
		if c, ok := m.(*wire.Control); ok {
			out = append(out, c)
		}
	}
	return out
}

// A model that starts unloaded refuses requests with "not loaded" until a
// frontend loads it; the load goes to every backend, the model is READY
// once they have answered, and requests then become plans.
func TestLoadUnloadedModel(t *testing.T) {
	f := startFake(t, func(c *Config) { c.Unloaded = []string{"n"} })
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	want := []wire.ModelStatus{{Model: 1, State: wire.ModelUnavailable}}
	for who, w := range map[string]*wire.Welcome{"backend": b.Welcome, "frontend": fe.Welcome} {
		if len(w.States) != 1 || w.States[0] != want[0] {
			t.Errorf("%s's Welcome states %+v, want %+v", who, w.States, want)
		}
	}
	fe.Submit(t, servicetest.Task(1, 1, soon))
	e := fe.Ends(t, 1)[1]
	if e.Code != wire.EndModelNotLoaded || !strings.Contains(e.Detail, "model n is not loaded") {
		t.Fatalf("request for an unloaded model ended %+v, want not loaded, naming n", e)
	}

	if err := fe.Send(&wire.Control{Seq: 7, Op: wire.OpLoad, Model: 1}); err != nil {
		t.Fatal(err)
	}
	if s := nextState(t, fe); s.Model != 1 || s.State != wire.ModelLoading {
		t.Fatalf("announced %+v, want n LOADING", s)
	}
	c := servicetest.Expect[*wire.Control](t, b)
	if c.Op != wire.OpLoad || c.Model != 1 {
		t.Fatalf("backend told %+v, want to load model 1", c)
	}
	// Still loading: requests are refused.
	fe.Submit(t, servicetest.Task(2, 1, soon))
	if e := fe.Ends(t, 1)[2]; e.Code != wire.EndModelNotLoaded || !strings.Contains(e.Detail, "LOADING") {
		t.Fatalf("request while loading ended %+v, want not loaded (LOADING)", e)
	}
	if err := b.Send(&wire.ControlDone{Seq: c.Seq, Memory: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	done, states := awaitDone(t, fe, 7)
	if done.Error != "" || len(states) != 1 || states[0] != wire.ModelReady {
		t.Fatalf("load answered %+v after states %v, want success after READY", done, states)
	}
	fe.Submit(t, servicetest.Task(3, 1, soon))
	if p := b.Plan(t); p.Model != 1 || len(p.Tasks) != 1 || p.Tasks[0].ID != 3 {
		t.Fatalf("plan %+v, want task 3 of model 1", p)
	}
	// A load of a loaded model is a no-op success, with nothing announced.
	if done, states := ctl(t, fe, 8, wire.OpLoad, 1); done.Error != "" || len(states) != 0 {
		t.Errorf("second load answered %+v after states %v, want success at once", done, states)
	}
	// A backend that joins gets the model as READY (no states listed).
	if b2 := f.backend(t, "b2", 1); len(b2.Welcome.States) != 0 {
		t.Errorf("later backend's Welcome states %+v, want none", b2.Welcome.States)
	}
}

// An unload loses no request: the model refuses new requests at once, but
// those it took run (here queued while no GPU was online, then planned
// once one came); only when every one of their plans has been reported
// are the backends told to unload it, and once they have, it is
// UNAVAILABLE.
func TestUnloadDrains(t *testing.T) {
	f := startFake(t, nil)
	b := f.backend(t, "b1", 1) // not ready: tasks stay queued
	fe := f.frontend(t, "f1")
	fe.Submit(t, servicetest.Task(1, 0, soon), servicetest.Task(2, 0, soon), servicetest.Task(3, 0, soon))
	if err := fe.Send(&wire.Control{Seq: 1, Op: wire.OpUnload, Model: 0}); err != nil {
		t.Fatal(err)
	}
	if s := nextState(t, fe); s.State != wire.ModelUnloading {
		t.Fatalf("announced %+v, want m UNLOADING", s)
	}
	fe.Submit(t, servicetest.Task(4, 0, soon))
	if e := fe.Ends(t, 1)[4]; e.Code != wire.EndModelNotLoaded || !strings.Contains(e.Detail, "model m is not loaded (UNLOADING)") {
		t.Fatalf("request during the unload ended %+v, want not loaded", e)
	}
	// A load while it unloads is refused, saying why.
	if done, _ := ctl(t, fe, 2, wire.OpLoad, 0); !strings.Contains(done.Error, "model m is UNLOADING") {
		t.Errorf("load during the unload answered %+v, want refused", done)
	}
	if cs := controls(b); len(cs) != 0 {
		t.Fatalf("backend told %+v with three requests queued", cs)
	}
	b.Ready(t)
	var plans []*wire.Plan
	for n := 0; n < 3; {
		p := b.Plan(t)
		plans = append(plans, p)
		n += len(p.Tasks)
	}
	for i, p := range plans {
		if cs := controls(b); len(cs) != 0 {
			t.Fatalf("backend told %+v with %d plans out", cs, len(plans)-i)
		}
		b.Ran(t, p, p.ExecAt, p.ExecAt+1)
	}
	c := servicetest.Expect[*wire.Control](t, b)
	if c.Op != wire.OpUnload || c.Model != 0 {
		t.Fatalf("backend told %+v, want to unload model 0", c)
	}
	if err := b.Send(&wire.ControlDone{Seq: c.Seq}); err != nil {
		t.Fatal(err)
	}
	done, states := awaitDone(t, fe, 1)
	if done.Error != "" || len(states) != 1 || states[0] != wire.ModelUnavailable {
		t.Fatalf("unload answered %+v after states %v, want success after UNAVAILABLE", done, states)
	}
	if st := f.stats(); st.Planned != 3 || st.PlansInFlight != 0 {
		t.Errorf("counters %+v: want the 3 requests taken before the unload planned and reported", st)
	}
	// Unloading again is a no-op success; a frontend that joins now sees
	// the model UNAVAILABLE.
	if done, states := ctl(t, fe, 3, wire.OpUnload, 0); done.Error != "" || len(states) != 0 {
		t.Errorf("second unload answered %+v after %v, want success at once", done, states)
	}
	if w := f.frontend(t, "f2").Welcome; len(w.States) != 1 || w.States[0].State != wire.ModelUnavailable || w.States[0].Reason != "unloaded" {
		t.Errorf("later frontend's Welcome states %+v, want m UNAVAILABLE (unloaded)", w.States)
	}
}

// Tasks that end as they arrive (bad or passed deadlines) and those the
// rank drops never hold an unload back: the model's backends are told to
// unload it as soon as nothing of it is queued or running.
func TestUnloadAfterTasksEnded(t *testing.T) {
	f := startFake(t, nil)
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	fe.Submit(t,
		wire.Task{ID: 1, Model: 0, Deadline: f.s.epochUnix + 1}, // already late
		servicetest.Task(2, 0, time.Second+2*time.Second),       // further off than the SLO allows
		servicetest.Task(3, 0, 2*time.Millisecond),              // too soon for any batch: the rank drops it
	)
	ends := fe.Ends(t, 3)
	for id, code := range map[uint64]wire.EndCode{1: wire.EndDropDeadline, 2: wire.EndBadRequest, 3: wire.EndDropDeadline} {
		if ends[id].Code != code {
			t.Fatalf("task %d ended %+v, want %v", id, ends[id], code)
		}
	}
	if err := fe.Send(&wire.Control{Seq: 1, Op: wire.OpUnload, Model: 0}); err != nil {
		t.Fatal(err)
	}
	if c := servicetest.Expect[*wire.Control](t, b); c.Op != wire.OpUnload || c.Model != 0 {
		t.Fatalf("backend told %+v, want to unload model 0 at once", c)
	}
}

// A load that a backend fails leaves the model UNAVAILABLE with the
// backend's error as the reason and the answer; backends let it go again.
func TestLoadFailure(t *testing.T) {
	f := startFake(t, func(c *Config) { c.Unloaded = []string{"m"} })
	b1, b2 := f.readyBackend(t, "b1", 1), f.readyBackend(t, "b2", 1)
	fe := f.frontend(t, "f1")
	if err := fe.Send(&wire.Control{Seq: 1, Op: wire.OpLoad, Model: 0}); err != nil {
		t.Fatal(err)
	}
	c1, c2 := servicetest.Expect[*wire.Control](t, b1), servicetest.Expect[*wire.Control](t, b2)
	if err := b1.Send(&wire.ControlDone{Seq: c1.Seq, Memory: 5}); err != nil {
		t.Fatal(err)
	}
	if err := b2.Send(&wire.ControlDone{Seq: c2.Seq, Error: "model.onnx: no such file"}); err != nil {
		t.Fatal(err)
	}
	done, states := awaitDone(t, fe, 1)
	if !strings.Contains(done.Error, "b2: model.onnx: no such file") || len(states) != 2 || states[1] != wire.ModelUnavailable {
		t.Fatalf("failed load answered %+v after %v, want b2's error after UNAVAILABLE", done, states)
	}
	for _, b := range []*servicetest.Backend{b1, b2} {
		if c := servicetest.Expect[*wire.Control](t, b); c.Op != wire.OpUnload || c.Model != 0 {
			t.Errorf("backend %s told %+v, want to unload model 0", b.Name, c)
		}
	}
	if st := f.s.ModelStates()[0]; st.State != wire.ModelUnavailable || !strings.Contains(st.Reason, "load failed: b2") {
		t.Errorf("state %+v, want UNAVAILABLE for b2's failure", st)
	}
}

// A backend that leaves during a load is not waited for; an unload
// during a load is refused; a Control for a model that does not exist is
// answered with an error.
func TestControlEdges(t *testing.T) {
	f := startFake(t, func(c *Config) { c.Unloaded = []string{"m"} })
	b := f.readyBackend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	if done, _ := ctl(t, fe, 1, wire.OpLoad, 9); !strings.Contains(done.Error, "unknown model 9") {
		t.Errorf("load of model 9 answered %+v", done)
	}
	if err := fe.Send(&wire.Control{Seq: 2, Op: wire.OpLoad, Model: 0}); err != nil {
		t.Fatal(err)
	}
	servicetest.Expect[*wire.Control](t, b)
	if done, _ := ctl(t, fe, 3, wire.OpUnload, 0); !strings.Contains(done.Error, "model m is LOADING") {
		t.Errorf("unload during the load answered %+v, want refused", done)
	}
	b.Close()
	if done, _ := awaitDone(t, fe, 2); done.Error != "" {
		t.Errorf("load answered %+v after its only backend left, want success", done)
	}
	if st := f.s.ModelStates()[0]; st.State != wire.ModelReady {
		t.Errorf("state %+v, want READY", st)
	}
}

// Unknown names in Config.Unloaded are refused at Start.
func TestUnloadedMustBeServed(t *testing.T) {
	c := Default()
	c.Network = transporttest.NewNetwork()
	c.Models = startFakeModels()
	c.Unloaded = []string{"nope"}
	if _, err := Start(c); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Start with an unknown unloaded model: %v", err)
	}
}
