package frontend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// routeNet is the in-process network with a view of the frontends'
// scheduler sessions: a test can hold dials to an address until it opens
// its gate, and hears of each dial and each closed session.
type routeNet struct {
	transport.Network
	// dialed gets the address of each frontend dial, closed the address
	// of each frontend session that closed (sends never block).
	dialed, closed chan string
	// onClose, if set, runs as a session to addr closes, before the
	// client hears of it.
	onClose atomic.Pointer[func(addr string)]

	mu    sync.Mutex
	gates map[string]chan struct{}
}

func newRouteNet() *routeNet {
	return &routeNet{Network: inproc.New(), dialed: make(chan string, 1024), closed: make(chan string, 64), gates: map[string]chan struct{}{}}
}

// hold makes frontend dials to addr wait until the returned function runs.
func (n *routeNet) hold(addr string) (open func()) {
	g := make(chan struct{})
	n.mu.Lock()
	n.gates[addr] = g
	n.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(g) }) }
}

func (n *routeNet) Dial(ctx context.Context, addr string, hello *wire.Hello, h transport.Handler) (transport.Conn, *wire.Welcome, error) {
	if hello.Role != wire.RoleFrontend {
		return n.Network.Dial(ctx, addr, hello, h)
	}
	select {
	case n.dialed <- addr:
	default:
	}
	n.mu.Lock()
	g := n.gates[addr]
	n.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	inner := h
	h = transport.HandlerFuncs{Message: inner.OnMessage, Closed: func(c transport.Conn, err error) {
		if f := n.onClose.Load(); f != nil {
			(*f)(addr)
		}
		inner.OnClose(c, err)
		select {
		case n.closed <- addr:
		default:
		}
	}}
	return n.Network.Dial(ctx, addr, hello, h)
}

// waitAddr waits for addr on ch.
func waitAddr(t *testing.T, ch <-chan string, addr, what string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case a := <-ch:
			if a == addr {
				return
			}
		case <-timeout:
			t.Fatalf("no %s for %s", what, addr)
		}
	}
}

// startPart starts a scheduler of models, with one backend of one
// emulated GPU, and waits until the GPU is online.
func startPart(t *testing.T, n transport.Network, models ...string) *service.Service {
	t.Helper()
	sc := service.Default()
	sc.Network, sc.Policy = n, scheduler.PolicyWorkConserving
	// Generous SLOs and slack: the load must run without a drop on a
	// loaded 2-core machine under the race detector.
	sc.WakeupSlack = 20 * time.Millisecond
	for _, m := range models {
		sc.Models = append(sc.Models, service.Model{Name: m, Profile: profile.MustLinear(200*time.Microsecond, 200*time.Microsecond, 16), SLO: 5 * time.Second})
	}
	svc, err := service.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	bc := backend.Default()
	bc.SchedulerAddr, bc.Network, bc.DataPath = svc.Addr(), n, rdma.Config{Mode: rdma.ModeTCP}
	bc.Backoff = transport.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond, Factor: 2}
	a, err := backend.Start(bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	poll(t, "the backend's GPU online", func() bool { return svc.Snapshot().OnlineGPUs == 1 })
	return svc
}

// poll waits, bounded, for a condition no event tells of.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	timeout := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// newRoutedClient starts a client with fast redials on n.
func newRoutedClient(t *testing.T, n transport.Network, schedAddr string) *Client {
	t.Helper()
	fc := Default()
	fc.SchedulerAddr, fc.Network, fc.Name = schedAddr, n, "routed"
	fc.DataPath = rdma.Config{Mode: rdma.ModeTCP}
	fc.Backoff = transport.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond, Factor: 2}
	c, err := New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// appliedCh reports c's applied revisions.
func appliedCh(c *Client) <-chan int64 {
	ch := make(chan int64, 64)
	c.OnRoutesApplied(func(rev int64) { ch <- rev })
	return ch
}

func waitApplied(t *testing.T, ch <-chan int64, rev int64) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-ch:
			if r >= rev {
				if r != rev {
					t.Fatalf("revision %d applied, want %d", r, rev)
				}
				return
			}
		case <-timeout:
			t.Fatalf("revision %d never applied", rev)
		}
	}
}

// infer runs one request for model and returns the ID of the model at the
// scheduler that ran it, read off the emulated output.
func infer(t *testing.T, c *Client, model string, i int) (uint32, error) {
	t.Helper()
	in := []byte(fmt.Sprintf("%s-%d", model, i))
	out, err := c.Infer(context.Background(), model, in)
	if err != nil {
		return 0, err
	}
	for id := range uint32(4) {
		if bytes.Equal(out, backend.EmulatedOutput(id, in)) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("output %x is no model's output for %q", out, in)
}

// modelTasks is the number of tasks svc got for its i-th model.
func modelTasks(svc *service.Service, i int) uint64 { return svc.Snapshot().Models[i].Tasks }

// load runs workers that each send requests for model one after another
// until stopped, checking each answer: a request sent once AppliedRevision
// reached afterRev must be run by the model of ID afterID.
type load struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	answers chan struct{}
	bad     atomic.Pointer[error]
}

func startLoad(t *testing.T, c *Client, model string, workers int, afterRev int64, afterID uint32) *load {
	l := &load{stop: make(chan struct{}), answers: make(chan struct{}, 1<<16)}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				after := c.AppliedRevision() >= afterRev
				id, err := infer(t, c, model, w<<20|i)
				if err == nil && after && id != afterID {
					err = fmt.Errorf("a request sent after revision %d was applied ran as model %d, want %d (the new scheduler's)", afterRev, id, afterID)
				}
				if err != nil {
					l.bad.CompareAndSwap(nil, &err)
					return
				}
				select {
				case l.answers <- struct{}{}:
				default:
				}
			}
		}()
	}
	return l
}

// await waits for n more answers.
func (l *load) await(t *testing.T, n int) {
	t.Helper()
	for len(l.answers) > 0 {
		<-l.answers
	}
	timeout := time.After(20 * time.Second)
	for range n {
		select {
		case <-l.answers:
		case <-timeout:
			t.Fatalf("the load stalled (%v)", l.err())
		}
	}
}

func (l *load) err() error {
	if e := l.bad.Load(); e != nil {
		return *e
	}
	return nil
}

func (l *load) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// pendingOn counts c's pending calls sent on a session to addr.
func pendingOn(c *Client, addr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.pending {
		if call.sess != nil && call.sess.link.addr == addr {
			n++
		}
	}
	return n
}

// A model moves from scheduler A to scheduler B under steady load: its
// requests keep going to A until the session to B has connected, then go
// to B (with B's model ID); the revision is applied then, the session to
// A closes once the calls sent on it have ended, and no request fails.
func TestRoutesMoveAModelUnderLoad(t *testing.T) {
	n := newRouteNet()
	a := startPart(t, n, "m")          // m is model 0 at A
	b := startPart(t, n, "other", "m") // and model 1 at B
	var pendingAtClose atomic.Int64
	pendingAtClose.Store(-1)
	c := newRoutedClient(t, n, a.Addr())
	onClose := func(addr string) {
		if addr == a.Addr() {
			pendingAtClose.Store(int64(pendingOn(c, addr)))
		}
	}
	n.onClose.Store(&onClose)
	applied := appliedCh(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Model("m"); !ok || m.SLO != 5*time.Second {
		t.Fatalf("model m: %+v %v", m, ok)
	}
	ld := startLoad(t, c, "m", 4, 1, 1)
	ld.await(t, 20)

	// B's session is held: the model stays on A, whose requests succeed.
	openB := n.hold(b.Addr())
	c.SetRoutes(Routes{Revision: 1, Models: map[string]string{"m": b.Addr()}})
	waitAddr(t, n.dialed, b.Addr(), "dial")
	ld.await(t, 20)
	if got := c.AppliedRevision(); got != 0 {
		t.Fatalf("revision %d applied before B's session connected", got)
	}
	if got := modelTasks(b, 1); got != 0 {
		t.Fatalf("B got %d tasks before its session connected", got)
	}

	openB()
	waitApplied(t, applied, 1)
	if c.AppliedRevision() != 1 {
		t.Fatalf("AppliedRevision %d, want 1", c.AppliedRevision())
	}
	// No model goes to A any more: its session closes once the calls sent
	// on it have ended.
	waitAddr(t, n.closed, a.Addr(), "closed session")
	if p := pendingAtClose.Load(); p != 0 {
		t.Fatalf("the session to A closed with %d calls sent on it pending", p)
	}
	poll(t, "A to see the frontend go", func() bool { return a.Snapshot().Frontends == 0 })
	aTasks, bTasks := modelTasks(a, 0), modelTasks(b, 1)
	ld.await(t, 50)
	if got := modelTasks(a, 0); got != aTasks {
		t.Errorf("A got %d more tasks after the move", got-aTasks)
	}
	if got := modelTasks(b, 1); got <= bTasks {
		t.Errorf("B got no task after the move (%d)", got)
	}
	if got := modelTasks(b, 0); got != 0 {
		t.Errorf("B got %d tasks for its model 0: the client sent A's model ID", got)
	}
	if m, ok := c.Model("m"); !ok || len(c.Models()) != 1 || c.Models()[0].Name != "m" {
		t.Errorf("after the move: Model(m) %+v %v, Models %+v", m, ok, c.Models())
	}
	ld.end(t)
	st := c.Stats()
	t.Logf("submitted %d answered %d; tasks A %d B %d", st.Submitted.Load(), st.Answered.Load(), modelTasks(a, 0), modelTasks(b, 1))
	if st.Failed.Load() != 0 || st.Dropped.Load() != 0 || st.Answered.Load() != st.Submitted.Load() {
		t.Errorf("submitted %d answered %d dropped %d failed %d", st.Submitted.Load(), st.Answered.Load(), st.Dropped.Load(), st.Failed.Load())
	}
	c.mu.Lock()
	_, hasA := c.links[a.Addr()]
	c.mu.Unlock()
	if hasA {
		t.Error("the link to A is still held")
	}
}

// Without a scheduler address the client waits for a routing table: until
// the session its table routes a model to connects, requests for it fail
// at once with ErrNotConnected; then they run there.
func TestRoutesWithoutSchedulerAddr(t *testing.T) {
	n := newRouteNet()
	a := startPart(t, n, "m")
	b := startPart(t, n, "x", "y")
	c := newRoutedClient(t, n, "")
	applied := appliedCh(c)
	if _, err := infer(t, c, "m", 0); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("before any table: %v, want ErrNotConnected", err)
	}
	openA := n.hold(a.Addr())
	c.SetRoutes(Routes{Revision: 1, Models: map[string]string{"m": a.Addr(), "y": b.Addr()}})
	waitAddr(t, n.dialed, a.Addr(), "dial")
	if _, err := infer(t, c, "m", 1); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("before A connected: %v, want ErrNotConnected", err)
	}
	if c.AppliedRevision() != 0 {
		t.Fatalf("revision %d applied before A connected", c.AppliedRevision())
	}
	openA()
	waitApplied(t, applied, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if id, err := infer(t, c, "m", i); err != nil || id != 0 {
			t.Fatalf("m: model %d, %v", id, err)
		}
		if id, err := infer(t, c, "y", i); err != nil || id != 1 {
			t.Fatalf("y: model %d, %v", id, err)
		}
	}
	// x is B's, but no table routes it and no scheduler is the default.
	if _, err := infer(t, c, "x", 0); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("unrouted model: %v, want ErrUnknownModel", err)
	}
	if _, ok := c.Model("x"); ok {
		t.Error("the unrouted model x is listed")
	}
	if ms := c.Models(); len(ms) != 2 {
		t.Errorf("Models %+v, want m and y", ms)
	}
	// (The tasks are counted as the scheduler takes them in, which can
	// trail their answers.)
	poll(t, "10 tasks of m at A and of y at B", func() bool { return modelTasks(a, 0) == 10 && modelTasks(b, 1) == 10 })
	if modelTasks(b, 0) != 0 {
		t.Errorf("B got %d tasks of x", modelTasks(b, 0))
	}
}

// A model routed to an address that never answers keeps its route, and
// the revision is not applied; a later table routing it back applies at
// once and drops the dead address.
func TestRoutesToADeadAddressKeepTheOldRoute(t *testing.T) {
	n := newRouteNet()
	a := startPart(t, n, "m")
	c := newRoutedClient(t, n, "")
	applied := appliedCh(c)
	c.SetRoutes(Routes{Revision: 1, Models: map[string]string{"m": a.Addr()}})
	waitApplied(t, applied, 1)
	c.SetRoutes(Routes{Revision: 2, Models: map[string]string{"m": "nowhere:1"}})
	for range 3 { // three failed dials: it never answers
		waitAddr(t, n.dialed, "nowhere:1", "dial")
	}
	for i := range 10 {
		if id, err := infer(t, c, "m", i); err != nil || id != 0 {
			t.Fatalf("m: model %d, %v", id, err)
		}
	}
	if c.AppliedRevision() != 1 {
		t.Fatalf("applied %d, want 1 still", c.AppliedRevision())
	}
	poll(t, "A to count its 10 tasks", func() bool { return modelTasks(a, 0) == 10 })
	c.SetRoutes(Routes{Revision: 3, Models: map[string]string{"m": a.Addr()}})
	if c.AppliedRevision() != 3 {
		t.Fatalf("routing back to A: applied %d, want 3 at once", c.AppliedRevision())
	}
	waitApplied(t, applied, 3)
	c.mu.Lock()
	_, dead := c.links["nowhere:1"]
	c.mu.Unlock()
	if dead {
		t.Error("the dead address is still dialed")
	}
	if _, err := infer(t, c, "m", 10); err != nil {
		t.Fatal(err)
	}
}

// A table of an older or the same revision as the one held is ignored.
func TestRoutesOlderRevisionIgnored(t *testing.T) {
	n := newRouteNet()
	a := startPart(t, n, "m")
	b := startPart(t, n, "m")
	c := newRoutedClient(t, n, "")
	applied := appliedCh(c)
	c.SetRoutes(Routes{Revision: 5, Models: map[string]string{"m": a.Addr()}})
	waitApplied(t, applied, 5)
	c.SetRoutes(Routes{Revision: 4, Models: map[string]string{"m": b.Addr()}})
	c.SetRoutes(Routes{Revision: 5, Models: map[string]string{"m": b.Addr()}})
	c.mu.Lock()
	_, hasB := c.links[b.Addr()]
	c.mu.Unlock()
	if hasB || c.AppliedRevision() != 5 {
		t.Fatalf("after older tables: B dialed %v, applied %d", hasB, c.AppliedRevision())
	}
	for i := range 5 {
		if _, err := infer(t, c, "m", i); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "A to count its 5 tasks", func() bool { return modelTasks(a, 0) == 5 })
	if modelTasks(b, 0) != 0 {
		t.Errorf("B got %d tasks, want 0", modelTasks(b, 0))
	}
}
