package backend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
)

// The tests of MoveTo and Park with frontends (that moves lose no
// request) are in bench/cluster; this one needs no frontend, and looks
// at the agent's done channel, which no exported API shows.

// Drain of a parked agent has nothing to leave: it returns at once and
// closes the agent, and moves fail from then on.
func TestDrainWhileParked(t *testing.T) {
	n := inproc.New()
	sc := service.Default()
	sc.Network, sc.Policy = n, scheduler.PolicyWorkConserving
	sc.Models = []service.Model{{Name: "m", Profile: profile.MustLinear(200*time.Microsecond, time.Millisecond, 8), SLO: 10 * time.Second}}
	sc.WakeupSlack = 20 * time.Millisecond
	svc, err := service.Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	for _, startParked := range []bool{true, false} {
		cfg := Default()
		cfg.Name, cfg.Network, cfg.DataPath = "b0", n, rdma.Config{Mode: rdma.ModeTCP}
		cfg.Backoff = transport.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond, Factor: 2}
		if startParked {
			cfg.Parked = true
		} else {
			cfg.SchedulerAddr = svc.Addr()
		}
		ag, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ag.Close)
		if !startParked {
			if err := ag.WaitReady(ctx()); err != nil {
				t.Fatal(err)
			}
			if err := ag.Park(ctx()); err != nil {
				t.Fatal(err)
			}
		}
		if err := ag.Drain(ctx()); err != nil {
			t.Fatalf("started parked %v: Drain: %v", startParked, err)
		}
		select {
		case <-ag.done:
		default:
			t.Errorf("started parked %v: Drain returned before the agent closed", startParked)
		}
		err = ag.MoveTo(ctx(), svc.Addr())
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("started parked %v: MoveTo after Drain: %v; want the agent closed", startParked, err)
		}
	}
}
