package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// gated holds every batch until release closes, announcing each start on
// started.
type gated struct {
	*backend.Emulated
	started chan struct{}
	release chan struct{}
	once    *sync.Once
}

func newGated() gated {
	return gated{Emulated: backend.NewEmulated(), started: make(chan struct{}, 64), release: make(chan struct{}), once: new(sync.Once)}
}

// open lets every batch, held or to come, run.
func (e gated) open() { e.once.Do(func() { close(e.release) }) }

func (e gated) Execute(ctx context.Context, gpu int, model uint32, in [][]byte) ([][]byte, error) {
	e.started <- struct{}{}
	select {
	case <-e.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.Emulated.Execute(ctx, gpu, model, in)
}

// gatedCluster is one backend of one GPU whose batches wait for the gate.
func gatedCluster(t *testing.T, drain time.Duration) (*Cluster, gated) {
	g := newGated()
	cfg := testConfig(inproc.New(), "", 1, 1)
	cfg.Executor = func() backend.Executor { return g }
	cfg.DrainTimeout = drain
	c := startCluster(t, cfg)
	t.Cleanup(g.open)
	return c, g
}

// Closing the scheduler lets the plans already at the backends finish:
// their requests are answered, not cut off and left to the frontends'
// safety timers; everything ends exactly once.
func TestSchedulerCloseDrainsPlansInFlight(t *testing.T) {
	c, g := gatedCluster(t, 0)
	f := c.Frontends[0]
	l := newLedger(t, c.cfg.Models)
	first := l.issue(f, "slow")
	<-g.started // a batch holds the GPU
	for range 3 {
		l.issue(f, "slow")
	}
	waitFor(t, func() bool { return c.Scheduler.Snapshot().Tasks == 4 })
	// The running batch's plan is in flight, as Snapshot (and so the
	// scheduler's metrics) reports.
	if st := c.Scheduler.Snapshot(); st.PlansInFlight < 1 || st.RankWall <= 0 {
		t.Errorf("snapshot %+v; want a plan in flight and the rank loop's running time", st)
	}

	closed := make(chan struct{})
	go func() {
		c.Scheduler.Close()
		close(closed)
	}()
	// A second Close waits for the first, which waits for the batch.
	second := make(chan struct{})
	go func() {
		c.Scheduler.Close()
		close(second)
	}()
	g.open()
	<-closed
	<-second
	o := l.check(t)
	if first.Err != nil {
		t.Errorf("the request whose batch was running when the scheduler closed: %v; want its result", first.Err)
	}
	for k, n := range o.kinds {
		if !strings.Contains(k, "shutdown") {
			t.Errorf("%d requests ended with %q; want results or shutdown drops", n, k)
		}
	}
}

// A plan that does not finish within the drain timeout (or at once, with a
// negative one) ends as a shutdown drop when Close gives up, long before
// its deadline.
func TestSchedulerCloseEndsStuckPlans(t *testing.T) {
	for _, drain := range []time.Duration{100 * time.Millisecond, -1} {
		c, g := gatedCluster(t, drain)
		f := c.Frontends[0]
		l := newLedger(t, c.cfg.Models)
		call := l.issue(f, "slow")
		<-g.started // and never released until cleanup
		began := time.Now()
		c.Scheduler.Close()
		<-call.Done()
		if r, ok := frontend.IsDrop(call.Err); !ok || r != frontend.DropShutdown {
			t.Fatalf("drain %v: stuck plan's request ended with %v; want a shutdown drop", drain, call.Err)
		}
		// Its deadline is the model's 4s SLO away; the safety timer would
		// have waited for it.
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("drain %v: ended %v after Close began; want about the drain timeout", drain, d)
		}
		if st := c.Scheduler.Snapshot(); st.Dropped != 1 {
			t.Errorf("drain %v: scheduler counts %d drops; want the stuck request's 1", drain, st.Dropped)
		}
		l.check(t)
	}
}

// EndDrain (an operator's second SIGTERM) cuts a long drain short: the
// stuck plan's request ends as a shutdown drop at once, not after the
// drain timeout, and Close returns.
func TestEndDrainCutsTheWaitShort(t *testing.T) {
	c, g := gatedCluster(t, time.Hour)
	f := c.Frontends[0]
	l := newLedger(t, c.cfg.Models)
	call := l.issue(f, "slow")
	<-g.started // and never released until cleanup
	closed := make(chan struct{})
	go func() {
		c.Scheduler.Close()
		close(closed)
	}()
	waitFor(t, func() bool { return c.Scheduler.Snapshot().PlansInFlight == 1 })
	c.Scheduler.EndDrain()
	<-closed
	<-call.Done()
	if r, ok := frontend.IsDrop(call.Err); !ok || r != frontend.DropShutdown {
		t.Fatalf("the stuck plan's request ended with %v; want a shutdown drop", call.Err)
	}
	l.check(t)
}
