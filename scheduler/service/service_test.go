package service

import (
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/service/servicetest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// A backend that says Leaving before its GPUs are ready is told LeaveOK
// and never has a GPU brought online.
func TestLeavingBeforeReadyBringsNoGPUOnline(t *testing.T) {
	f := startFake(t, nil)
	b := f.backend(t, "b1", 2)
	b.Leave(t)
	b.Ready(t)
	servicetest.Expect[*wire.LeaveOK](t, b)
	if st := f.stats(); st.Backends != 1 || st.OnlineGPUs != 0 {
		t.Errorf("a backend that left before it was ready: %d backends, %d GPUs online; want 1 and 0", st.Backends, st.OnlineGPUs)
	}
	b.Close()
	if st := f.stats(); st.Backends != 0 || st.OnlineGPUs != 0 || st.StalledGPUs != 0 {
		t.Errorf("after it left: counters %+v, want no backend and no GPU", st)
	}
}

// A backend's GPUs stall when it falls silent; if it then drains and
// answers again, none of them counts as stalled or online, and nothing is
// left counted once it is gone.
func TestStalledBackendThatDrainsLeavesNoCount(t *testing.T) {
	f := startFake(t, func(c *Config) { c.StallAfter = 50 * time.Millisecond })
	b := f.readyBackend(t, "b1", 2)
	if st := f.stats(); st.OnlineGPUs != 2 {
		t.Fatalf("%d GPUs online, want 2", st.OnlineGPUs)
	}
	// No heartbeat: silent past the stall timeout. A stall without plans
	// sends nothing; the log says it, once per GPU.
	f.log.Await(t, "GPU stalled")
	f.log.Await(t, "GPU stalled")
	if st := f.stats(); st.StalledGPUs != 2 || st.OnlineGPUs != 0 || st.Stalls != 2 {
		t.Fatalf("stalled: counters %+v, want both GPUs stalled", st)
	}
	b.Leave(t)
	servicetest.Expect[*wire.LeaveOK](t, b)
	b.Heartbeat(t)
	if st := f.stats(); st.StalledGPUs != 0 || st.OnlineGPUs != 0 || st.Backends != 1 {
		t.Errorf("a draining backend that answered again: counters %+v; want 1 backend, no GPU stalled or online", st)
	}
	b.Close()
	if st := f.stats(); st.Backends != 0 || st.OnlineGPUs != 0 || st.StalledGPUs != 0 {
		t.Errorf("after it left: counters %+v, want no backend and no GPU", st)
	}
}
