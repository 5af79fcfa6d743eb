package frontend_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/scheduler/service/servicetest"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// WithPriority and WithTimeout reach the scheduler: with room for two in a
// batch, the two calls made at level 1 are planned before the two made
// earlier at level 0, and a call's timeout is its deadline (its task's
// finish-by is the timeout less the result trip, not the model's SLO).
func TestCallOptionsReachTheScheduler(t *testing.T) {
	net := transporttest.NewNetwork()
	sc := service.Default()
	sc.Network, sc.Policy = net, scheduler.PolicyWorkConserving
	sc.DrainTimeout = -1 // the plans are never run: no wait for them at Close
	sc.Models = []service.Model{{Name: "m", Profile: profile.MustLinear(time.Millisecond, time.Millisecond, 2), SLO: 10 * time.Second}}
	svc, err := service.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	b := servicetest.ConnectBackend(t, net, svc.Addr(), "b1", 1) // not ready: the calls queue
	fc := frontend.Default()
	fc.SchedulerAddr, fc.Network = svc.Addr(), net
	c, err := frontend.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	low := []*frontend.Call{c.Go(ctx, "m", []byte("a")), c.Go(ctx, "m", []byte("b"), frontend.WithTimeout(3*time.Second))}
	high := []*frontend.Call{c.Go(ctx, "m", []byte("c"), frontend.WithPriority(1)), c.Go(ctx, "m", []byte("d"), frontend.WithPriority(1))}
	made := time.Now()
	// The calls' tasks go out through the client's submit queue; the GPU
	// comes online once the scheduler holds all four.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for ; svc.Snapshot().Tasks < 4; <-tick.C {
		if time.Since(made) > 10*time.Second {
			t.Fatalf("the scheduler got %d tasks of 4", svc.Snapshot().Tasks)
		}
	}
	b.Ready(t)
	first := b.Plan(t)
	second := b.Plan(t)
	if len(first.Tasks) != 2 || len(second.Tasks) != 2 {
		t.Fatalf("plans of %d and %d tasks, want 2 and 2", len(first.Tasks), len(second.Tasks))
	}
	// Task IDs follow the client's calls: base, base+1 (level 0), base+2,
	// base+3 (level 1).
	base := slices.Min([]uint64{first.Tasks[0].ID, first.Tasks[1].ID, second.Tasks[0].ID, second.Tasks[1].ID})
	rel := func(p *wire.Plan) []uint64 {
		out := []uint64{p.Tasks[0].ID - base, p.Tasks[1].ID - base}
		slices.Sort(out)
		return out
	}
	if got1, got2 := rel(first), rel(second); !slices.Equal(got1, []uint64{2, 3}) || !slices.Equal(got2, []uint64{0, 1}) {
		t.Errorf("plans hold calls %v then %v, want the level-1 calls 2, 3 first, then 0, 1", got1, got2)
	}
	for _, pt := range second.Tasks {
		finishBy := time.Unix(0, pt.FinishBy)
		if pt.ID == base+1 && finishBy.After(made.Add(3*time.Second)) {
			t.Errorf("the call with a 3s timeout must finish by %v, after its timeout", finishBy.Sub(start))
		}
		if pt.ID == base && finishBy.Before(start.Add(9*time.Second)) {
			t.Errorf("the call without options must finish by %v, before its 10s SLO", finishBy.Sub(start))
		}
	}
	for _, call := range append(low, high...) {
		select {
		case <-call.Done():
			t.Errorf("a call ended before its plan ran: %v", call.Err)
		default:
		}
	}
}
