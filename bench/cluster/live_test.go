package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/backend/backendagent"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/frontendagent"
	"github.com/symphony-serving/symphony/partition/epoch"
	"github.com/symphony-serving/symphony/partition/live"
	"github.com/symphony-serving/symphony/partition/registry"
	"github.com/symphony-serving/symphony/partition/registry/etcdtest"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/scheduler/service/schedagent"
	"github.com/symphony-serving/symphony/scheduler/serving"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/wire"
)

// testCluster is an in-process live cluster: an embedded etcd, scheduler
// services, parked backends and one frontend, each with its own etcd
// client (a process of its own), joined by the agents of this package.
type testCluster struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	etcd   *etcdtest.Server
	net    *inproc.Network
	prefix string
	models []serving.Model
	// reg is the test's (and the controller's) view of the registry.
	reg      *registry.Registry
	fe       *frontend.Client
	backends []string
	wg       sync.WaitGroup
}

type testScheduler struct {
	svc    *service.Service
	client *clientv3.Client
	cancel context.CancelFunc
	done   chan error
}

func newLiveCluster(t *testing.T, nModels int) *testCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := &testCluster{t: t, ctx: ctx, cancel: cancel, etcd: etcdtest.Start(t), net: inproc.New(), prefix: "/live-" + t.Name() + "/"}
	t.Cleanup(cancel)
	for i := range nModels {
		c.models = append(c.models, serving.Model{Name: fmt.Sprintf("m%d", i),
			Profile: profile.MustLinear(200*time.Microsecond, 2*time.Millisecond, 32), SLO: 60 * time.Millisecond})
	}
	c.reg = c.registry(c.etcd.Client(t))
	return c
}

func (c *testCluster) registry(cl *clientv3.Client) *registry.Registry {
	cfg := registry.Default()
	cfg.Prefix, cfg.TTL = c.prefix, time.Second
	r, err := registry.New(cl, cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// run runs f on a goroutine the cluster's cleanup waits for, after
// ending the cluster's context and before closing what f uses (cleanups
// run last first).
func (c *testCluster) run(f func()) {
	c.t.Cleanup(func() {
		c.cancel()
		c.wg.Wait()
	})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// scheduler starts a scheduler service for part with every model
// unloaded, and its agent; the agent's error (or nil) arrives on done.
func (c *testCluster) scheduler(part int, name string) *testScheduler {
	c.t.Helper()
	cfg := service.Default()
	cfg.Addr, cfg.Network, cfg.Models = fmt.Sprintf("sched-%d-%s:1", part, name), c.net, c.models
	for _, m := range c.models {
		cfg.Unloaded = append(cfg.Unloaded, m.Name)
	}
	cfg.LoadTimeout = 10 * time.Second
	// A loaded CI machine may hold a backend's heartbeat past the default
	// stall timeout (100ms for these SLOs), and a stalled GPU fails its
	// requests: not what these tests are about.
	cfg.StallAfter = 5 * time.Second
	svc, err := service.Start(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(svc.Close)
	cl := c.etcd.Client(c.t)
	ctx, cancel := context.WithCancel(c.ctx)
	s := &testScheduler{svc: svc, client: cl, cancel: cancel, done: make(chan error, 1)}
	c.run(func() {
		s.done <- schedagent.Run(ctx, schedagent.Config{Registry: c.registry(cl), Service: svc, Part: part, Name: name,
			Address: cfg.Addr, ReportEvery: 50 * time.Millisecond, Log: zerolog.Nop()})
	})
	return s
}

// backend starts a parked one-GPU backend and its agent.
func (c *testCluster) backend(name string) *backend.Agent {
	c.t.Helper()
	cfg := backend.Default()
	cfg.Name, cfg.Network, cfg.Parked = name, c.net, true
	a, err := backend.Start(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(a.Close)
	r := c.registry(c.etcd.Client(c.t))
	c.run(func() {
		if err := backendagent.Run(c.ctx, backendagent.Config{Registry: r, Agent: a, Name: name, GPUs: 1, Log: zerolog.Nop()}); err != nil {
			c.t.Errorf("backend %s: %v", name, err)
		}
	})
	c.backends = append(c.backends, name)
	return a
}

// frontend starts the frontend, with no scheduler address, and its agent.
func (c *testCluster) frontend() *frontend.Client {
	c.t.Helper()
	cfg := frontend.Default()
	cfg.Name, cfg.Network, cfg.DataAddr, cfg.SchedulerAddr = "fe", c.net, "fe-data:1", ""
	fe, err := frontend.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = fe.Close() })
	r := c.registry(c.etcd.Client(c.t))
	c.run(func() {
		if err := frontendagent.Run(c.ctx, frontendagent.Config{Registry: r, Client: fe, Name: "fe", Log: zerolog.Nop()}); err != nil {
			c.t.Errorf("frontend: %v", err)
		}
	})
	c.fe = fe
	return fe
}

// controller builds a controller of parts over the cluster's models, each
// declared at rate.
func (c *testCluster) controller(parts int, rate float64, onEpoch func(live.EpochResult)) *live.Controller {
	c.t.Helper()
	cfg := live.ControllerConfig{OnEpoch: onEpoch, Registry: c.reg, Period: time.Second, SwitchTimeout: 20 * time.Second, Log: zerolog.Nop()}
	cfg.Epoch = epoch.Config{Parts: parts, Headroom: 0.2, MaxDisruption: -1, Engine: "heuristic",
		Network: serving.DefaultLiveFloor(), Autoscale: epoch.DefaultAutoscale(0.2)}
	for _, m := range c.models {
		cfg.Models = append(cfg.Models, epoch.Model{Model: m, DeclaredRate: rate})
	}
	ctl, err := live.NewController(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return ctl
}

// load sends requests for its models, round-robin, open-loop: Poisson
// arrivals at rate a second from one goroutine, each request on its own
// (a closed loop of callers in lockstep is no load a part is sized for).
type load struct {
	mu    sync.Mutex
	calls []*frontend.Call
	stop  chan struct{}
	done  chan struct{}
}

func (c *testCluster) startLoad(rate float64, models []string) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; ; i++ {
			gap := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
			select {
			case <-l.stop:
				return
			case <-time.After(gap):
			}
			call := c.fe.Go(c.ctx, models[i%len(models)], []byte(fmt.Sprintf("req-%d", i)))
			l.mu.Lock()
			l.calls = append(l.calls, call)
			l.mu.Unlock()
		}
	}()
	return l
}

// end stops the load, waits for every call to end, and returns those that
// ended with an error other than a drop, and the number of drops.
func (l *load) end() (errs []error, drops int) {
	close(l.stop)
	<-l.done
	for _, call := range l.calls {
		<-call.Done()
		if _, drop := frontend.IsDrop(call.Err); drop {
			drops++
		} else if call.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", call.Model, call.Err))
		}
	}
	return errs, drops
}

// waitFor polls cond every 10ms until it holds or the cluster's context
// ends; what it waits for is state in etcd or in another process, which
// sends the test no event.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	for !cond() {
		select {
		case <-c.ctx.Done():
			c.t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func modelTasks(svc *service.Service, name string) uint64 {
	for _, m := range svc.Snapshot().Models {
		if m.Name == name {
			return m.Tasks
		}
	}
	return 0
}

func modelState(svc *service.Service, name string) wire.ModelState {
	for _, st := range svc.ModelStates() {
		if svc.ModelName(int(st.Model)) == name {
			return st.State
		}
	}
	return 0
}

// A model moves between parts under steady load: the new part loads it,
// the frontend switches, the old part unloads it, and no request fails.
func TestModelMoveUnderLoadFailsNoRequest(t *testing.T) {
	c := newLiveCluster(t, 4)
	s0, s1 := c.scheduler(0, "a"), c.scheduler(1, "a")
	for i := range 4 {
		c.backend(fmt.Sprintf("gpu-%d", i))
	}
	fe := c.frontend()
	var first live.EpochResult
	ctl := c.controller(2, 50, func(r live.EpochResult) { first = r })
	if err := ctl.WaitCluster(c.ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Step(c.ctx); err != nil {
		t.Fatal(err)
	}
	if first.Epoch != 1 || !first.Decision.Preloaded {
		t.Fatalf("first epoch: %+v", first)
	}
	names := make([]string, len(c.models))
	for i, m := range c.models {
		names[i] = m.Name
	}
	// Every model is served once the frontend follows the first routes.
	_, routesRev, _ := c.reg.Routes(c.ctx)
	c.waitFor("the frontend to follow the first routes", func() bool { return fe.AppliedRevision() >= routesRev })
	// Every model is served: a request answered for each (one may be
	// dropped on a loaded machine, as its 60ms SLO allows; none may fail).
	for _, name := range names {
		for try := 1; ; try++ {
			_, err := fe.Infer(c.ctx, name, []byte("hello"))
			if err == nil {
				break
			}
			if _, drop := frontend.IsDrop(err); !drop || try == 20 {
				t.Fatalf("request %d to %s: %v", try, name, err)
			}
		}
	}

	// Move the first model of part 0 to part 1, under load.
	from, to := 0, 1
	mover := slices.Index(first.Decision.Assignment, from)
	if mover < 0 {
		from, to = 1, 0
		mover = slices.Index(first.Decision.Assignment, from)
	}
	src, dst := s0, s1
	if from == 1 {
		src, dst = s1, s0
	}
	name := names[mover]
	l := c.startLoad(200, names)
	c.waitFor("load on the mover", func() bool { return modelTasks(src.svc, name) > 20 })

	mv, err := ctl.Move(c.ctx, name, to)
	if err != nil || !mv.Switched {
		t.Fatalf("move: %+v, %v", mv, err)
	}
	c.waitFor("the old part to unload the model", func() bool { return modelState(src.svc, name) == wire.ModelUnavailable })
	dstBefore := modelTasks(dst.svc, name)
	c.waitFor("requests at the new part", func() bool { return modelTasks(dst.svc, name) > dstBefore+20 })
	errs, drops := l.end()
	for _, err := range errs {
		t.Errorf("request failed: %v", err)
	}
	st := fe.Stats()
	if got := st.Answered.Load() + st.Dropped.Load() + st.Failed.Load(); got != st.Submitted.Load() {
		t.Errorf("%d requests ended of %d submitted", got, st.Submitted.Load())
	}
	if n := st.Failed.Load(); n != 0 {
		t.Errorf("%d requests failed", n)
	}
	if st := src.svc.Snapshot(); st.Models[mover].Dropped["not_loaded"] != 0 {
		t.Errorf("old part refused %d requests as not loaded", st.Models[mover].Dropped["not_loaded"])
	}
	a, _, err := c.reg.Assignment(c.ctx)
	if err != nil || a.Models[name] != to || len(a.Keep) != 0 {
		t.Errorf("final assignment %+v, %v: want %s in part %d and nothing kept", a, err, name, to)
	}
	t.Logf("move of %s from part %d to %d: loaded in %v; %d requests, %d answered, %d dropped (%d under load)",
		name, from, to, mv.Loaded, st.Submitted.Load(), st.Answered.Load(), st.Dropped.Load(), drops)
}

// The active scheduler of a part dies (its etcd client and its service
// stop, as a killed process's would): the standby is elected once the
// lease expires, routes the part to itself, the backends and the frontend
// follow, and every request ends exactly once.
func TestSchedulerFailoverStandbyTakesOver(t *testing.T) {
	c := newLiveCluster(t, 2)
	active := c.scheduler(0, "a")
	c.waitFor("the first scheduler elected", func() bool {
		r, _, err := c.reg.Routes(c.ctx)
		return err == nil && r.Schedulers[0] == "sched-0-a:1"
	})
	standby := c.scheduler(0, "b")
	for i := range 2 {
		c.backend(fmt.Sprintf("gpu-%d", i))
	}
	fe := c.frontend()
	ctl := c.controller(1, 50, nil)
	if err := ctl.WaitCluster(c.ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Step(c.ctx); err != nil {
		t.Fatal(err)
	}
	_, routesRev, _ := c.reg.Routes(c.ctx)
	c.waitFor("the frontend to follow the first routes", func() bool { return fe.AppliedRevision() >= routesRev })
	c.waitFor("a backend online", func() bool { return active.svc.Snapshot().OnlineGPUs > 0 })
	l := c.startLoad(200, []string{"m0", "m1"})
	c.waitFor("load", func() bool { return modelTasks(active.svc, "m0") > 20 })

	killed := time.Now()
	_ = active.client.Close() // its keep-alives stop: the lease expires in a TTL
	active.svc.Close()
	c.waitFor("the standby to plan batches", func() bool { return standby.svc.Snapshot().Plans > 0 })
	takeover := time.Since(killed)
	before := modelTasks(standby.svc, "m0")
	c.waitFor("requests at the standby", func() bool { return modelTasks(standby.svc, "m0") > before+20 })
	errs, drops := l.end()
	lost := 0
	for _, err := range errs {
		var be *frontend.BackendError
		switch {
		case errors.Is(err, frontend.ErrSchedulerLost), errors.Is(err, frontend.ErrNotConnected), errors.As(err, &be):
			lost++ // ended with a reason: the kill's window
		default:
			t.Errorf("request failed: %v", err)
		}
	}
	st := fe.Stats()
	if got := st.Answered.Load() + st.Dropped.Load() + st.Failed.Load(); got != st.Submitted.Load() {
		t.Errorf("%d requests ended of %d submitted", got, st.Submitted.Load())
	}
	if err := <-active.done; err == nil {
		t.Error("the dead scheduler's agent returned no error")
	}
	r, _, err := c.reg.Routes(c.ctx)
	if err != nil || r.Schedulers[0] != "sched-0-b:1" {
		t.Errorf("routes after the takeover: %+v, %v", r, err)
	}
	t.Logf("takeover in %v (lease TTL 1s); %d requests, %d answered, %d dropped, %d ended in the kill's window with a reason",
		takeover.Round(time.Millisecond), st.Submitted.Load(), st.Answered.Load(), drops, lost)
}
