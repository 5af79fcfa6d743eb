package backend

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Close ends pulls in flight instead of leaving them to run until their
// plan's deadline: here a frontend takes the Read and never answers, the
// plan's deadline is a minute away, and when Close returns no pull task is
// left running.
func TestCloseStopsPullsInFlight(t *testing.T) {
	n := inproc.New()
	reads := make(chan struct{}, 1)
	front, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{Message: func(_ transport.Conn, m wire.Message) {
			if m.Kind() == wire.KindRead {
				select {
				case reads <- struct{}{}:
				default:
				}
			}
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	model := wire.ModelSpec{ID: 0, Name: "m", SLO: time.Minute, Latency: []time.Duration{time.Millisecond}}
	plans := make(chan transport.Conn, 1)
	sched, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version, Models: []wire.ModelSpec{model}, Frontends: []wire.FrontendUp{{ID: 1, DataAddr: front.Addr()}}},
			transport.HandlerFuncs{Message: func(c transport.Conn, m wire.Message) {
				if m.Kind() == wire.KindBackendReady {
					plans <- c
				}
			}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Close()
	cfg := Default()
	cfg.SchedulerAddr, cfg.Network, cfg.DataPath = sched.Addr(), n, rdma.Config{Mode: rdma.ModeTCP}
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := <-plans
	deadline := time.Now().Add(time.Minute).UnixNano()
	if err := c.Send(&wire.Plan{ID: 1, GPU: 0, Model: 0, ExecAt: time.Now().UnixNano(), Deadline: deadline,
		Tasks: []wire.PlanTask{{ID: 7, Frontend: 1, Input: wire.InputRef{Region: 0, Length: 8, Key: 7}}}}); err != nil {
		t.Fatal(err)
	}
	<-reads // the pull is in flight, waiting for an answer that never comes
	a.Close()
	if r := a.pool.Running(); r != 0 {
		t.Fatalf("%d pull tasks still running after Close", r)
	}
}
