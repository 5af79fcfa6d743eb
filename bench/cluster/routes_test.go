package cluster_test

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
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// The tests of frontend.Client's routing tables (SetRoutes), against real
// schedulers and backends.

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
	// dials counts the frontend dials by address.
	dials map[string]int
}

func newRouteNet() *routeNet {
	return &routeNet{Network: inproc.New(), dialed: make(chan string, 1024), closed: make(chan string, 64),
		gates: map[string]chan struct{}{}, dials: map[string]int{}}
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

// frontendDials is how many times frontends have dialed addr.
func (n *routeNet) frontendDials(addr string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials[addr]
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
	n.dials[addr]++
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

// waitRouteAddr waits for addr on ch.
func waitRouteAddr(t *testing.T, ch <-chan string, addr, what string) {
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

// routeBackoff is the clients' and backends' redial backoff in these
// tests.
var routeBackoff = transport.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond, Factor: 2}

// waitNoMoreDials waits until frontends have not dialed addr for ten
// times routeBackoff.Max, as they do once no link to addr is held: a
// client that still held one would redial it (the address never
// answers) well within that.
func waitNoMoreDials(t *testing.T, n *routeNet, addr, why string) {
	t.Helper()
	quiet := 10 * routeBackoff.Max
	timeout := time.After(20 * time.Second)
	last, since := n.frontendDials(addr), time.Now()
	for time.Since(since) < quiet {
		select {
		case <-time.After(time.Millisecond):
		case <-timeout:
			t.Fatalf("%s: still dialed (%d dials)", why, n.frontendDials(addr))
		}
		if d := n.frontendDials(addr); d != last {
			last, since = d, time.Now()
		}
	}
}

// startRoutePart starts a scheduler of models, with one backend of one
// emulated GPU, and waits until the GPU is online.
func startRoutePart(t *testing.T, n transport.Network, models ...string) *service.Service {
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
	bc.Backoff = routeBackoff
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
	routePoll(t, "the backend's GPU online", func() bool { return svc.Snapshot().OnlineGPUs == 1 })
	return svc
}

// routePoll waits, bounded, for a condition no event tells of.
func routePoll(t *testing.T, what string, cond func() bool) {
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
func newRoutedClient(t *testing.T, n transport.Network, schedAddr string) *frontend.Client {
	t.Helper()
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Network, fc.Name = schedAddr, n, "routed"
	fc.DataPath = rdma.Config{Mode: rdma.ModeTCP}
	fc.Backoff = routeBackoff
	c, err := frontend.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// routesAppliedCh reports c's applied revisions.
func routesAppliedCh(c *frontend.Client) <-chan int64 {
	ch := make(chan int64, 64)
	c.OnRoutesApplied(func(rev int64) { ch <- rev })
	return ch
}

func waitRoutesApplied(t *testing.T, ch <-chan int64, rev int64) {
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

// routeCall runs one request for model and returns the ID of the model
// at the scheduler that ran it, read off the emulated output, and when
// the client ended it.
func routeCall(c *frontend.Client, model string, i int) (id uint32, ended time.Time, err error) {
	in := fmt.Appendf(nil, "%s-%d", model, i)
	call := c.Go(context.Background(), model, in)
	<-call.Done()
	if call.Err != nil {
		return 0, call.Timing.Ended, call.Err
	}
	for id := range uint32(4) {
		if bytes.Equal(call.Output, backend.EmulatedOutput(id, in)) {
			return id, call.Timing.Ended, nil
		}
	}
	return 0, call.Timing.Ended, fmt.Errorf("output %x is no model's output for %q", call.Output, in)
}

// routeInfer is routeCall without the end time.
func routeInfer(c *frontend.Client, model string, i int) (uint32, error) {
	id, _, err := routeCall(c, model, i)
	return id, err
}

// routeModelTasks is the number of tasks svc got for its i-th model.
func routeModelTasks(svc *service.Service, i int) uint64 { return svc.Snapshot().Models[i].Tasks }

// routeLoad runs workers that each send requests for model one after
// another until stopped, checking each answer: a request sent once
// AppliedRevision reached afterRev must be run by the model of ID
// afterID. It keeps, by the ID of the model that ran them, when the last
// of its requests ended.
type routeLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	answers chan struct{}
	bad     atomic.Pointer[error]

	mu        sync.Mutex
	lastEnded map[uint32]time.Time
}

func startRouteLoad(c *frontend.Client, model string, workers int, afterRev int64, afterID uint32) *routeLoad {
	l := &routeLoad{stop: make(chan struct{}), answers: make(chan struct{}, 1<<16), lastEnded: map[uint32]time.Time{}}
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
				id, ended, err := routeCall(c, model, w<<20|i)
				if err == nil && after && id != afterID {
					err = fmt.Errorf("a request sent after revision %d was applied ran as model %d, want %d (the new scheduler's)", afterRev, id, afterID)
				}
				if err != nil {
					l.bad.CompareAndSwap(nil, &err)
					return
				}
				l.mu.Lock()
				if ended.After(l.lastEnded[id]) {
					l.lastEnded[id] = ended
				}
				l.mu.Unlock()
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
func (l *routeLoad) await(t *testing.T, n int) {
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

func (l *routeLoad) err() error {
	if e := l.bad.Load(); e != nil {
		return *e
	}
	return nil
}

func (l *routeLoad) end(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if err := l.err(); err != nil {
		t.Fatal(err)
	}
}

// lastEndedBy is when the last request that the model of ID id ran
// ended; zero if none did.
func (l *routeLoad) lastEndedBy(id uint32) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastEnded[id]
}

// A model moves from scheduler A to scheduler B under steady load: its
// requests keep going to A until the session to B has connected, then go
// to B (with B's model ID); the revision is applied then, the session to
// A closes once the calls sent on it have ended, and no request fails.
// The client then holds no link to A: it dials A no more, and a table
// that routes the model back to A dials it anew.
func TestRoutesMoveAModelUnderLoad(t *testing.T) {
	n := newRouteNet()
	a := startRoutePart(t, n, "m")          // m is model 0 at A
	b := startRoutePart(t, n, "other", "m") // and model 1 at B
	// When the session to A closed, before the client heard of it: every
	// request sent on it (each run as A's model 0; none fails) must have
	// ended by then. (A request ends, Timing.Ended, before the client
	// takes it off its session's pending calls.)
	var closedA atomic.Pointer[time.Time]
	onClose := func(addr string) {
		if addr == a.Addr() {
			now := time.Now()
			closedA.CompareAndSwap(nil, &now)
		}
	}
	n.onClose.Store(&onClose)
	c := newRoutedClient(t, n, a.Addr())
	applied := routesAppliedCh(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Model("m"); !ok || m.SLO != 5*time.Second {
		t.Fatalf("model m: %+v %v", m, ok)
	}
	dialsA := n.frontendDials(a.Addr())
	ld := startRouteLoad(c, "m", 4, 1, 1)
	ld.await(t, 20)

	// B's session is held: the model stays on A, whose requests succeed.
	openB := n.hold(b.Addr())
	c.SetRoutes(frontend.Routes{Revision: 1, Models: map[string]string{"m": b.Addr()}})
	waitRouteAddr(t, n.dialed, b.Addr(), "dial")
	ld.await(t, 20)
	if got := c.AppliedRevision(); got != 0 {
		t.Fatalf("revision %d applied before B's session connected", got)
	}
	if got := routeModelTasks(b, 1); got != 0 {
		t.Fatalf("B got %d tasks before its session connected", got)
	}

	openB()
	waitRoutesApplied(t, applied, 1)
	if c.AppliedRevision() != 1 {
		t.Fatalf("AppliedRevision %d, want 1", c.AppliedRevision())
	}
	// No model goes to A any more: its session closes once the calls sent
	// on it have ended.
	waitRouteAddr(t, n.closed, a.Addr(), "closed session")
	closedAt := closedA.Load()
	if closedAt == nil {
		t.Fatal("the session to A closed unseen")
	}
	routePoll(t, "A to see the frontend go", func() bool { return a.Snapshot().Frontends == 0 })
	aTasks, bTasks := routeModelTasks(a, 0), routeModelTasks(b, 1)
	ld.await(t, 50)
	if got := routeModelTasks(a, 0); got != aTasks {
		t.Errorf("A got %d more tasks after the move", got-aTasks)
	}
	if got := routeModelTasks(b, 1); got <= bTasks {
		t.Errorf("B got no task after the move (%d)", got)
	}
	if got := routeModelTasks(b, 0); got != 0 {
		t.Errorf("B got %d tasks for its model 0: the client sent A's model ID", got)
	}
	if m, ok := c.Model("m"); !ok || len(c.Models()) != 1 || c.Models()[0].Name != "m" {
		t.Errorf("after the move: Model(m) %+v %v, Models %+v", m, ok, c.Models())
	}
	ld.end(t)
	if last := ld.lastEndedBy(0); last.IsZero() {
		t.Error("no request ran at A")
	} else if last.After(*closedAt) {
		t.Errorf("a request sent on the session to A ended %v after that session closed: it closed with calls sent on it pending", last.Sub(*closedAt))
	}
	st := c.Stats()
	t.Logf("submitted %d answered %d; tasks A %d B %d", st.Submitted.Load(), st.Answered.Load(), routeModelTasks(a, 0), routeModelTasks(b, 1))
	if st.Failed.Load() != 0 || st.Dropped.Load() != 0 || st.Answered.Load() != st.Submitted.Load() {
		t.Errorf("submitted %d answered %d dropped %d failed %d", st.Submitted.Load(), st.Answered.Load(), st.Dropped.Load(), st.Failed.Load())
	}
	// The link to A is let go: A is not redialed, and a table routing the
	// model back there dials it anew (a link still held, its dialing
	// stopped, would never connect again).
	if got := n.frontendDials(a.Addr()); got != dialsA || a.Snapshot().Frontends != 0 {
		t.Errorf("the link to A is still held: %d redials, %d frontends at A", got-dialsA, a.Snapshot().Frontends)
	}
	c.SetRoutes(frontend.Routes{Revision: 2, Models: map[string]string{"m": a.Addr()}})
	waitRoutesApplied(t, applied, 2)
	if got := n.frontendDials(a.Addr()); got <= dialsA {
		t.Error("routed back to A without dialing it anew: the link to A was still held")
	}
	if id, err := routeInfer(c, "m", 1<<30); err != nil || id != 0 {
		t.Errorf("routed back to A: model %d, %v; want A's model 0", id, err)
	}
}

// Without a scheduler address the client waits for a routing table: until
// the session its table routes a model to connects, requests for it fail
// at once with ErrNotConnected; then they run there.
func TestRoutesWithoutSchedulerAddr(t *testing.T) {
	n := newRouteNet()
	a := startRoutePart(t, n, "m")
	b := startRoutePart(t, n, "x", "y")
	c := newRoutedClient(t, n, "")
	applied := routesAppliedCh(c)
	if _, err := routeInfer(c, "m", 0); !errors.Is(err, frontend.ErrNotConnected) {
		t.Fatalf("before any table: %v, want ErrNotConnected", err)
	}
	openA := n.hold(a.Addr())
	c.SetRoutes(frontend.Routes{Revision: 1, Models: map[string]string{"m": a.Addr(), "y": b.Addr()}})
	waitRouteAddr(t, n.dialed, a.Addr(), "dial")
	if _, err := routeInfer(c, "m", 1); !errors.Is(err, frontend.ErrNotConnected) {
		t.Fatalf("before A connected: %v, want ErrNotConnected", err)
	}
	if c.AppliedRevision() != 0 {
		t.Fatalf("revision %d applied before A connected", c.AppliedRevision())
	}
	openA()
	waitRoutesApplied(t, applied, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if id, err := routeInfer(c, "m", i); err != nil || id != 0 {
			t.Fatalf("m: model %d, %v", id, err)
		}
		if id, err := routeInfer(c, "y", i); err != nil || id != 1 {
			t.Fatalf("y: model %d, %v", id, err)
		}
	}
	// x is B's, but no table routes it and no scheduler is the default.
	if _, err := routeInfer(c, "x", 0); !errors.Is(err, frontend.ErrUnknownModel) {
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
	routePoll(t, "10 tasks of m at A and of y at B", func() bool { return routeModelTasks(a, 0) == 10 && routeModelTasks(b, 1) == 10 })
	if routeModelTasks(b, 0) != 0 {
		t.Errorf("B got %d tasks of x", routeModelTasks(b, 0))
	}
}

// A model routed to an address that never answers keeps its route, and
// the revision is not applied; a later table routing it back applies at
// once and drops the dead address, which is dialed no more.
func TestRoutesToADeadAddressKeepTheOldRoute(t *testing.T) {
	n := newRouteNet()
	a := startRoutePart(t, n, "m")
	c := newRoutedClient(t, n, "")
	applied := routesAppliedCh(c)
	c.SetRoutes(frontend.Routes{Revision: 1, Models: map[string]string{"m": a.Addr()}})
	waitRoutesApplied(t, applied, 1)
	c.SetRoutes(frontend.Routes{Revision: 2, Models: map[string]string{"m": "nowhere:1"}})
	for range 3 { // three failed dials: it never answers
		waitRouteAddr(t, n.dialed, "nowhere:1", "dial")
	}
	for i := range 10 {
		if id, err := routeInfer(c, "m", i); err != nil || id != 0 {
			t.Fatalf("m: model %d, %v", id, err)
		}
	}
	if c.AppliedRevision() != 1 {
		t.Fatalf("applied %d, want 1 still", c.AppliedRevision())
	}
	routePoll(t, "A to count its 10 tasks", func() bool { return routeModelTasks(a, 0) == 10 })
	c.SetRoutes(frontend.Routes{Revision: 3, Models: map[string]string{"m": a.Addr()}})
	if c.AppliedRevision() != 3 {
		t.Fatalf("routing back to A: applied %d, want 3 at once", c.AppliedRevision())
	}
	waitRoutesApplied(t, applied, 3)
	// A dial under way as the table came may still end; none follows.
	waitNoMoreDials(t, n, "nowhere:1", "the dead address")
	if _, err := routeInfer(c, "m", 10); err != nil {
		t.Fatal(err)
	}
	// Dropped, not kept stopped: a table routing the model there again
	// dials it anew.
	dials := n.frontendDials("nowhere:1")
	c.SetRoutes(frontend.Routes{Revision: 4, Models: map[string]string{"m": "nowhere:1"}})
	routePoll(t, "the dead address dialed anew", func() bool { return n.frontendDials("nowhere:1") > dials })
}

// A table of an older or the same revision as the one held is ignored.
func TestRoutesOlderRevisionIgnored(t *testing.T) {
	n := newRouteNet()
	a := startRoutePart(t, n, "m")
	b := startRoutePart(t, n, "m")
	c := newRoutedClient(t, n, "")
	applied := routesAppliedCh(c)
	c.SetRoutes(frontend.Routes{Revision: 5, Models: map[string]string{"m": a.Addr()}})
	waitRoutesApplied(t, applied, 5)
	c.SetRoutes(frontend.Routes{Revision: 4, Models: map[string]string{"m": b.Addr()}})
	c.SetRoutes(frontend.Routes{Revision: 5, Models: map[string]string{"m": b.Addr()}})
	if c.AppliedRevision() != 5 {
		t.Fatalf("after older tables: applied %d", c.AppliedRevision())
	}
	for i := range 5 {
		if _, err := routeInfer(c, "m", i); err != nil {
			t.Fatal(err)
		}
	}
	routePoll(t, "A to count its 5 tasks", func() bool { return routeModelTasks(a, 0) == 5 })
	if routeModelTasks(b, 0) != 0 {
		t.Errorf("B got %d tasks, want 0", routeModelTasks(b, 0))
	}
	// B was never dialed (the requests above gave a dial started by the
	// older tables time to show), nor did it see a frontend.
	if d, f := n.frontendDials(b.Addr()), b.Snapshot().Frontends; d != 0 || f != 0 {
		t.Fatalf("after older tables: B dialed %d times, %d frontends at B", d, f)
	}
}
