package backend

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// startWithFakeScheduler starts an agent (TCP data path, fast redials)
// against a fake scheduler of one model, whose n-th Welcome (from 0) lists
// frontends(n). Each connection that reports its GPUs ready comes on ready.
func startWithFakeScheduler(t *testing.T, n transport.Network, frontends func(session int) []wire.FrontendUp) (*Agent, <-chan transport.Conn) {
	t.Helper()
	model := wire.ModelSpec{ID: 0, Name: "m", SLO: time.Minute, Latency: []time.Duration{time.Millisecond}}
	ready := make(chan transport.Conn, 1)
	session := 0 // accepts run one at a time
	sched, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		w := &wire.Welcome{Version: wire.Version, Models: []wire.ModelSpec{model}, Frontends: frontends(session)}
		session++
		return w, transport.HandlerFuncs{Message: func(c transport.Conn, m wire.Message) {
			if m.Kind() == wire.KindBackendReady {
				ready <- c
			}
		}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Close() })
	cfg := Default()
	cfg.SchedulerAddr, cfg.Network, cfg.DataPath = sched.Addr(), n, rdma.Config{Mode: rdma.ModeTCP}
	cfg.Backoff = transport.Backoff{Min: time.Millisecond, Max: time.Millisecond, Factor: 1}
	a, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, ready
}

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
	a, ready := startWithFakeScheduler(t, n, func(int) []wire.FrontendUp {
		return []wire.FrontendUp{{ID: 1, DataAddr: front.Addr()}}
	})
	c := <-ready
	deadline := time.Now().Add(time.Minute).UnixNano()
	if err := c.Send(&wire.Plan{ID: 1, GPU: 0, Model: 0, ExecAt: time.Now().UnixNano(), Deadline: deadline,
		Tasks: []wire.PlanTask{{ID: 7, Frontend: 1, Input: wire.InputRef{Region: 0, Length: 8, Key: 7}, FinishBy: deadline}}}); err != nil {
		t.Fatal(err)
	}
	<-reads // the pull is in flight, waiting for an answer that never comes
	a.Close()
	if r := a.pool.Running(); r != 0 {
		t.Fatalf("%d pull tasks still running after Close", r)
	}
}

// A backend that reconnects to the scheduler keeps only the frontends the
// new Welcome lists. Frontend 2 left while the backend was away, so its
// FrontendDown never reached it; kept, its data connection would be
// redialed forever.
func TestReconnectForgetsFrontendsThatLeft(t *testing.T) {
	n := inproc.New()
	var fronts []string
	for range 2 {
		ln, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
			return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		fronts = append(fronts, ln.Addr())
	}
	a, ready := startWithFakeScheduler(t, n, func(session int) []wire.FrontendUp {
		if session == 0 {
			return []wire.FrontendUp{{ID: 1, DataAddr: fronts[0]}, {ID: 2, DataAddr: fronts[1]}}
		}
		return []wire.FrontendUp{{ID: 1, DataAddr: fronts[0]}} // 2 left meanwhile
	})
	defer a.Close()
	first := <-ready
	if got := a.pull.peerIDs(); len(got) != 2 {
		t.Fatalf("first session: data connections to %v, want frontends 1 and 2", got)
	}
	first.Close(errors.New("scheduler restarting"))
	<-ready // registered again, after the second Welcome
	if got := a.pull.peerIDs(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after reconnecting: data connections to %v, want frontend 1 only", got)
	}
}

// peerIDs lists the frontends with a data connection (kept up or being
// dialed), in order.
func (p *tcpPuller) peerIDs() []uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.peers))
}
