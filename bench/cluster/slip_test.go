package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// slowed runs every batch twice as long as its profile says.
type slowed struct{ *backend.Emulated }

func (e slowed) Execute(ctx context.Context, gpu int, model uint32, in [][]byte) ([][]byte, error) {
	start := time.Now()
	out, err := e.Emulated.Execute(ctx, gpu, model, in)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(time.Since(start)):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return out, nil
}

// A GPU that keeps running late loses grants in proportion: the scheduler
// learns its slip from its reports and plans it later, so the GPU that
// runs at half speed gets clearly fewer batches, though it has the lower
// GPU ID and wins every tie. And the backend judges its batches by how
// long they really take there: what the slow GPU cannot finish in time it
// drops before running, so that next to no answer comes late (expired).
func TestSlowGPUGetsFewerGrants(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 2, 1)
	var started atomic.Int32
	cfg.Executor = func() backend.Executor {
		if started.Add(1) == 1 { // backend-0, started first
			return slowed{backend.NewEmulated()}
		}
		return backend.NewEmulated()
	}
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	l := newLedger(t, cfg.Models)
	stop := make(chan struct{})
	l.load(f, []string{"slow"}, time.Millisecond, stop)
	waitFor(t, func() bool { return c.Backends[0].Stats().Plans.Load()+c.Backends[1].Stats().Plans.Load() >= 400 })
	close(stop)
	o := l.check(t)
	if o.failed != 0 {
		t.Errorf("%d failed: %v", o.failed, o.kinds)
	}
	if n, all := o.matching("expired"), o.answered+o.dropped; n*100 > all {
		t.Errorf("%d of %d requests expired: the slow GPU answered late (%v)", n, all, o.kinds)
	}
	slow, fast := c.Backends[0].Stats().Plans.Load(), c.Backends[1].Stats().Plans.Load()
	t.Logf("plans: %d on the slow GPU, %d on the fast one", slow, fast)
	if float64(slow) > 0.8*float64(fast) {
		t.Errorf("the half-speed GPU got %d plans to the other's %d: want clearly fewer", slow, fast)
	}
}
