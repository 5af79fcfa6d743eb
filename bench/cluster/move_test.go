package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// The tests of backend.Agent's MoveTo and Park. They run whole parts (a
// scheduler service and a frontend each) over the in-process network,
// with SLOs far above the batch latencies and a work-conserving policy:
// they check that moves lose nothing, not the policy's timing, and must
// hold on a loaded 2-core machine under the race detector. (Drain of a
// parked agent, which needs no frontend, is tested in package backend.)

// moveWait bounds every wait in these tests: far above what any step
// takes, so that it only ever ends a hung test.
const moveWait = 60 * time.Second

// moveNet is the in-process network, counting the backends' dials to
// each scheduler address: a new scheduler session is a new dial.
type moveNet struct {
	*inproc.Network
	mu    sync.Mutex
	dials map[string]int
}

func newMoveNet() *moveNet { return &moveNet{Network: inproc.New(), dials: map[string]int{}} }

func (n *moveNet) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	if hello.Role == wire.RoleBackend {
		n.mu.Lock()
		n.dials[addr]++
		n.mu.Unlock()
	}
	return n.Network.Dial(ctx, addr, hello, h)
}

// backendDials is how many times backends have dialed addr.
func (n *moveNet) backendDials(addr string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials[addr]
}

// movePart is one part of the serving system: a scheduler and one
// frontend connected to it. Every part serves the same model, "m".
type movePart struct {
	svc   *service.Service
	front *frontend.Client
}

func (p movePart) addr() string { return p.svc.Addr() }

func startMovePart(t *testing.T, n transport.Network) movePart {
	t.Helper()
	sc := service.Default()
	sc.Network, sc.Policy = n, scheduler.PolicyWorkConserving
	sc.Models = []service.Model{{Name: "m", Profile: profile.MustLinear(200*time.Microsecond, time.Millisecond, 8), SLO: 10 * time.Second}}
	sc.Delays = scheduler.Delays{Ctrl: 200 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, Result: 300 * time.Microsecond}
	sc.WakeupSlack = 20 * time.Millisecond
	svc, err := service.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Network, fc.DataPath = svc.Addr(), n, rdma.Config{Mode: rdma.ModeTCP}
	f, err := frontend.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), moveWait)
	defer cancel()
	if err := f.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return movePart{svc: svc, front: f}
}

// startMovable starts an agent called name registered with the scheduler
// at addr, or parked if addr is "", and waits for its registration.
func startMovable(t *testing.T, n transport.Network, name, addr string, exec backend.Executor) *backend.Agent {
	t.Helper()
	cfg := backend.Default()
	cfg.Name, cfg.SchedulerAddr, cfg.Parked, cfg.Network = name, addr, addr == "", n
	cfg.DataPath, cfg.Executor = rdma.Config{Mode: rdma.ModeTCP}, exec
	cfg.Backoff = transport.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond, Factor: 2}
	a, err := backend.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if addr != "" {
		ctx, cancel := context.WithTimeout(context.Background(), moveWait)
		defer cancel()
		if err := a.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func moveCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), moveWait)
	t.Cleanup(cancel)
	return ctx
}

func moveInput(i int) []byte { return fmt.Appendf(nil, "move-request-%d", i) }

// moveServe sends n requests to p and checks that each is answered with
// its own result.
func moveServe(t *testing.T, p movePart, n int) {
	t.Helper()
	calls := make([]*frontend.Call, n)
	for i := range calls {
		calls[i] = p.front.Go(moveCtx(t), "m", moveInput(i))
	}
	checkMoveAnswered(t, calls)
}

// checkMoveAnswered waits for calls[i] (made with moveInput(i)) and
// checks each got its result.
func checkMoveAnswered(t *testing.T, calls []*frontend.Call) {
	t.Helper()
	for i, c := range calls {
		select {
		case <-c.Done():
		case <-time.After(moveWait):
			t.Fatalf("request %d never ended", i)
		}
		if c.Err != nil {
			t.Fatalf("request %d: %v; want its result", i, c.Err)
		}
		if want := backend.EmulatedOutput(0, moveInput(i)); !bytes.Equal(c.Output, want) {
			t.Fatalf("request %d: output %x, want %x", i, c.Output, want)
		}
	}
}

// moveEventually polls cond, for conditions no event announces (what a
// scheduler counts), until it holds or moveWait passes.
func moveEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(moveWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", moveWait, what)
		}
		<-tick.C
	}
}

// gatedExec runs its first free batches at once and holds every later one
// until open, announcing each one it holds.
type gatedExec struct {
	*backend.Emulated
	free    int64
	ran     atomic.Int64
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGatedExec(free int64) *gatedExec {
	return &gatedExec{Emulated: backend.NewEmulated(), free: free, started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *gatedExec) open() { g.once.Do(func() { close(g.release) }) }

func (g *gatedExec) Execute(ctx context.Context, gpu int, model uint32, in [][]byte) ([][]byte, error) {
	if g.ran.Add(1) <= g.free {
		return g.Emulated.Execute(ctx, gpu, model, in)
	}
	select {
	case g.started <- struct{}{}:
	default:
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Emulated.Execute(ctx, gpu, model, in)
}

// A backend under steady load moves from part A to part B while a batch
// of A's runs on it (its 20th: the ones before ran at once): the move
// waits for that batch, every request made on
// A (before, during and after the move; A keeps a second backend) ends
// exactly once with its result, and B's requests are then served by the
// moved backend, B's only one.
func TestMoveUnderLoadLosesNoRequest(t *testing.T) {
	n := inproc.New()
	a, b := startMovePart(t, n), startMovePart(t, n)
	startMovable(t, n, "stay", a.addr(), backend.NewEmulated())
	gate := newGatedExec(20)
	t.Cleanup(gate.open)
	mover := startMovable(t, n, "mover", a.addr(), gate)

	// Steady load on A until stop.
	stop := make(chan struct{})
	loaded := make(chan []*frontend.Call)
	go func() {
		var calls []*frontend.Call
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			calls = append(calls, a.front.Go(context.Background(), "m", moveInput(i)))
			select {
			case <-stop:
				loaded <- calls
				return
			case <-tick.C:
			}
		}
	}()
	select {
	case <-gate.started: // a batch of A's holds the mover's GPU
	case <-time.After(moveWait):
		t.Fatal("the mover never got a batch")
	}
	moved := make(chan error, 1)
	go func() { moved <- mover.MoveTo(moveCtx(t), b.addr()) }()
	// The move must wait for the held batch, leaving meanwhile.
	moveEventually(t, "the mover to start leaving", func() bool {
		select {
		case err := <-moved:
			t.Fatalf("MoveTo returned (%v) while a batch of A's still ran", err)
		default:
		}
		err := mover.Ready()
		return err != nil && strings.Contains(err.Error(), "moving from")
	})
	if got := mover.SchedulerAddr(); got != a.addr() {
		t.Errorf("while leaving, SchedulerAddr is %q; want A's %q", got, a.addr())
	}
	gate.open()
	select {
	case err := <-moved:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(moveWait):
		t.Fatal("MoveTo never returned")
	}
	if got := mover.SchedulerAddr(); got != b.addr() {
		t.Errorf("after the move, SchedulerAddr is %q; want B's %q", got, b.addr())
	}
	if err := mover.Ready(); err != nil {
		t.Errorf("after the move, Ready: %v", err)
	}
	close(stop)
	calls := <-loaded
	checkMoveAnswered(t, calls)
	t.Logf("%d requests on A; the mover ran %d plans of them", len(calls), mover.Stats().Plans.Load())
	st := a.front.Stats()
	if sub, ans, fail, drop := st.Submitted.Load(), st.Answered.Load(), st.Failed.Load(), st.Dropped.Load(); ans != sub || fail != 0 || drop != 0 {
		t.Errorf("part A's frontend: %d submitted, %d answered, %d failed, %d dropped; want all answered", sub, ans, fail, drop)
	}
	moveEventually(t, "A to see the mover leave", func() bool { return a.svc.Snapshot().Backends == 1 })
	if s := a.svc.Snapshot(); s.Failed != 0 {
		t.Errorf("scheduler A failed %d requests", s.Failed)
	}

	plans := mover.Stats().Plans.Load()
	moveServe(t, b, 50)
	if mover.Stats().Plans.Load() == plans {
		t.Error("B's requests were answered, but not by the moved backend")
	}
	st = b.front.Stats()
	if sub, ans := st.Submitted.Load(), st.Answered.Load(); ans != sub {
		t.Errorf("part B's frontend: %d submitted, %d answered", sub, ans)
	}
}

// Park leaves the scheduler for none, with the agent still running; a
// later MoveTo registers it again, with another part or the one it left.
func TestParkThenMoveTo(t *testing.T) {
	n := inproc.New()
	a, b := startMovePart(t, n), startMovePart(t, n)
	ag := startMovable(t, n, "b0", a.addr(), backend.NewEmulated())
	moveServe(t, a, 10)
	if err := ag.Park(moveCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := ag.Ready(); err == nil || !strings.Contains(err.Error(), "parked") {
		t.Errorf("parked, Ready says %v; want parked", err)
	}
	if got := ag.SchedulerAddr(); got != "" {
		t.Errorf("parked, SchedulerAddr is %q; want none", got)
	}
	moveEventually(t, "A to see the parked backend leave", func() bool { return a.svc.Snapshot().Backends == 0 })
	if err := ag.Park(moveCtx(t)); err != nil {
		t.Errorf("parking a parked agent: %v", err)
	}
	for _, p := range []movePart{b, a} {
		if err := ag.MoveTo(moveCtx(t), p.addr()); err != nil {
			t.Fatal(err)
		}
		if err := ag.Ready(); err != nil {
			t.Errorf("moved to %s, Ready: %v", p.addr(), err)
		}
		moveServe(t, p, 10)
		if err := ag.Park(moveCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.svc.Snapshot(); st.Failed != 0 {
		t.Errorf("scheduler A failed %d requests", st.Failed)
	}
}

// Moving to the scheduler the agent is registered with changes nothing:
// the same session goes on (the agent does not dial the scheduler again).
func TestMoveToCurrentSchedulerIsNoOp(t *testing.T) {
	n := newMoveNet()
	a := startMovePart(t, n)
	ag := startMovable(t, n, "b0", a.addr(), backend.NewEmulated())
	dials := n.backendDials(a.addr())
	if err := ag.MoveTo(moveCtx(t), a.addr()); err != nil {
		t.Fatal(err)
	}
	if got := n.backendDials(a.addr()); got != dials {
		t.Error("moving to the current scheduler started a new session")
	}
	if err := ag.Ready(); err != nil {
		t.Errorf("Ready: %v", err)
	}
	moveServe(t, a, 10)
}

// An agent may start parked, with no scheduler address; it registers
// nowhere until MoveTo. Without Parked an address is still required.
func TestStartParked(t *testing.T) {
	n := inproc.New()
	cfg := backend.Default()
	cfg.Network = n
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "no scheduler address") {
		t.Errorf("no address, not parked: %v; want an error", err)
	}
	cfg.Parked, cfg.SchedulerAddr = true, "somewhere"
	if err := cfg.Validate(); err == nil {
		t.Error("parked with an address: valid; want an error")
	}

	a := startMovePart(t, n)
	ag := startMovable(t, n, "pooled", "", backend.NewEmulated())
	if err := ag.Ready(); err == nil || !strings.Contains(err.Error(), "parked") {
		t.Errorf("started parked, Ready says %v; want parked", err)
	}
	if got := ag.SchedulerAddr(); got != "" {
		t.Errorf("started parked, SchedulerAddr is %q", got)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ag.WaitReady(done); err == nil {
		t.Error("WaitReady succeeded for an agent that never registered")
	}
	if err := ag.MoveTo(moveCtx(t), a.addr()); err != nil {
		t.Fatal(err)
	}
	if err := ag.WaitReady(moveCtx(t)); err != nil {
		t.Fatal(err)
	}
	moveServe(t, a, 10)
}

// A move whose caller gives up goes on: the agent keeps trying to register
// with a scheduler that is not there, and a later move still wins.
func TestMoveGoesOnAfterItsContextEnds(t *testing.T) {
	n := inproc.New()
	a, b := startMovePart(t, n), startMovePart(t, n)
	ag := startMovable(t, n, "b0", a.addr(), backend.NewEmulated())
	const nowhere = "inproc://nowhere"
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := ag.MoveTo(ctx, nowhere)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("moving to a scheduler that is not there: %v; want the context's end", err)
	}
	if err := ag.MoveTo(moveCtx(t), b.addr()); err != nil {
		t.Fatal(err)
	}
	if got := ag.SchedulerAddr(); got != b.addr() {
		t.Errorf("SchedulerAddr is %q; want B's %q", got, b.addr())
	}
	moveServe(t, b, 10)
	moveEventually(t, "A to see the backend leave", func() bool { return a.svc.Snapshot().Backends == 0 })
}

// Moves run one at a time: a MoveTo and a Park made at once both succeed,
// in some order, and leave the agent in the state of the later one.
func TestConcurrentMovesSerialize(t *testing.T) {
	n := inproc.New()
	a, b := startMovePart(t, n), startMovePart(t, n)
	ag := startMovable(t, n, "b0", a.addr(), backend.NewEmulated())
	errs := make(chan error, 2)
	go func() { errs <- ag.MoveTo(moveCtx(t), b.addr()) }()
	go func() { errs <- ag.Park(moveCtx(t)) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	switch addr, ready := ag.SchedulerAddr(), ag.Ready(); addr {
	case "":
		if ready == nil || !strings.Contains(ready.Error(), "parked") {
			t.Errorf("parked last, Ready says %v", ready)
		}
	case b.addr():
		if ready != nil {
			t.Errorf("moved to B last, Ready: %v", ready)
		}
		moveServe(t, b, 10)
	default:
		t.Errorf("SchedulerAddr is %q; want B's or none", addr)
	}
}
