package backend

import (
	"strings"
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
}

const step = 20 * time.Millisecond

func newLateRig(t *testing.T) *lateRig {
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
				r.results <- m
			}
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	model := wire.ModelSpec{ID: 0, Name: "m", SLO: time.Minute, Latency: []time.Duration{step, 2 * step, 3 * step, 4 * step}}
	ready := make(chan transport.Conn, 1)
	sched, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version, Models: []wire.ModelSpec{model}, Frontends: []wire.FrontendUp{{ID: 1, DataAddr: front.Addr()}}},
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
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	r.sched = <-ready
	return r
}

// plan sends a plan whose task i finishes by now + finishBy[i].
func (r *lateRig) plan(t *testing.T, finishBy ...time.Duration) time.Time {
	t.Helper()
	now := time.Now()
	p := &wire.Plan{ID: 1, ExecAt: now.UnixNano(), Deadline: now.Add(finishBy[0]).UnixNano()}
	for i, d := range finishBy {
		p.Tasks = append(p.Tasks, wire.PlanTask{ID: uint64(i), Frontend: 1,
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
		if res.ID != uint64(i) || res.Code != wire.EndDropDeadline || !strings.Contains(res.Detail, "behind the plan") || res.StartedAt != 0 {
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

// A plan that reaches its GPU too late for every request ends them all at
// once, and tells the scheduler the GPU gave it up (free from then).
func TestPlanTooLateForAllIsGivenUp(t *testing.T) {
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
	free := <-r.frees
	if free.Ran != 0 || free.FinishedAt == 0 || free.FinishedAt != free.StartedAt {
		t.Errorf("GPUFree %+v: want nothing run, and the moment the GPU gave the plan up", free)
	}
}

// The lag histogram's quantiles are the bounds of the buckets they fall
// in, and snapshots of several backends merge.
func TestLagHistogram(t *testing.T) {
	var h LagHistogram
	for range 98 {
		h.Record(3 * time.Microsecond) // bucket [2µs, 4µs)
	}
	h.Record(3 * time.Millisecond)
	h.Record(-time.Second) // early counts as on time
	s := h.Snapshot()
	if s.Total() != 100 || s.Quantile(0.5) != 4*time.Microsecond || s.Quantile(0.99) != 4096*time.Microsecond {
		t.Errorf("total %d p50 %v p99 %v", s.Total(), s.Quantile(0.5), s.Quantile(0.99))
	}
	if s.Counts[0] != 1 {
		t.Errorf("a batch started early is not counted as on time: %v", s.Counts)
	}
	var other LagHistogram
	other.Record(10 * time.Second) // past the last bound
	s.Merge(other.Snapshot())
	if s.Total() != 101 || s.Quantile(1) != LagBound(LagBuckets-1) {
		t.Errorf("merged: total %d max %v", s.Total(), s.Quantile(1))
	}
	if (LagSnapshot{}).Quantile(0.5) != 0 {
		t.Error("empty histogram has a quantile")
	}
}
