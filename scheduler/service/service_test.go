package service

import (
	"context"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/wire"
)

// start runs a service of one model on an in-process network.
func start(t *testing.T, stallAfter time.Duration) (*Service, transport.Network) {
	t.Helper()
	n := inproc.New()
	c := Default()
	c.Network, c.StallAfter = n, stallAfter
	c.Models = []Model{{Name: "m", Profile: profile.MustLinear(time.Millisecond, time.Millisecond, 8), SLO: time.Second}}
	s, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, n
}

// fakeBackend dials s as a backend of gpus GPUs; what the scheduler sends
// it comes out on the channel.
func fakeBackend(t *testing.T, s *Service, n transport.Network, gpus int) (transport.Conn, <-chan wire.Message) {
	t.Helper()
	got := make(chan wire.Message, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := n.Dial(ctx, s.Addr(), &wire.Hello{Version: wire.Version, Role: wire.RoleBackend, Name: "fake", GPUs: uint32(gpus)},
		transport.HandlerFuncs{Message: func(_ transport.Conn, m wire.Message) { got <- m }})
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

// until polls the service's counters for cond, for up to 5s: the service
// answers on goroutines of its own, which no channel announces.
func until(t *testing.T, s *Service, what string, cond func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond(s.Snapshot()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s; counters %+v", what, s.Snapshot())
		}
		<-tick.C
	}
}

// A backend that says Leaving before its GPUs are ready is told LeaveOK
// and never has a GPU brought online.
func TestLeavingBeforeReadyBringsNoGPUOnline(t *testing.T) {
	s, n := start(t, 0)
	c, got := fakeBackend(t, s, n, 2)
	if err := c.Send(&wire.Leaving{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(&wire.BackendReady{GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Kind() != wire.KindLeaveOK {
		t.Fatalf("got %v, want LeaveOK", m.Kind())
	}
	until(t, s, "the backend counted", func(st Stats) bool { return st.Backends == 1 })
	if st := s.Snapshot(); st.OnlineGPUs != 0 {
		t.Errorf("%d GPUs online of a backend that left before it was ready", st.OnlineGPUs)
	}
	c.Close(nil)
	until(t, s, "the backend gone", func(st Stats) bool { return st.Backends == 0 && st.OnlineGPUs == 0 && st.StalledGPUs == 0 })
}

// A backend's GPUs stall when it falls silent; if it then drains and
// answers again, none of them counts as stalled or online, and nothing is
// left counted once it is gone.
func TestStalledBackendThatDrainsLeavesNoCount(t *testing.T) {
	s, n := start(t, 50*time.Millisecond)
	c, got := fakeBackend(t, s, n, 2)
	if err := c.Send(&wire.BackendReady{GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	until(t, s, "GPUs online", func(st Stats) bool { return st.OnlineGPUs == 2 })
	// No heartbeat: silent past the stall timeout.
	until(t, s, "GPUs stalled", func(st Stats) bool { return st.StalledGPUs == 2 && st.OnlineGPUs == 0 && st.Stalls == 2 })
	if err := c.Send(&wire.Leaving{}); err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.Kind() != wire.KindLeaveOK {
		t.Fatalf("got %v, want LeaveOK", m.Kind())
	}
	if err := c.Send(&wire.Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	until(t, s, "GPUs answered", func(st Stats) bool { return st.StalledGPUs == 0 })
	if st := s.Snapshot(); st.OnlineGPUs != 0 || st.Backends != 1 {
		t.Errorf("a draining backend that answered again: %d GPUs online, %d backends; want 0 and 1", st.OnlineGPUs, st.Backends)
	}
	c.Close(nil)
	until(t, s, "the backend gone", func(st Stats) bool { return st.Backends == 0 && st.OnlineGPUs == 0 && st.StalledGPUs == 0 })
}
