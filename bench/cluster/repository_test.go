package cluster

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/wire"
)

// loadWithin is the acceptance bound: a model loaded through the
// repository API serves requests within 2 s of the load.
const loadWithin = 2 * time.Second

// A model that starts unloaded refuses requests with ErrModelNotLoaded;
// loaded, it serves them (within loadWithin of the load); unloaded while
// requests are out, it loses none: those the scheduler took before the
// unload are answered, the rest end as not loaded, each exactly once.
func TestLoadServeUnload(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 1, 2)
	cfg.Unloaded = []string{"slow"}
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	ctx := context.Background()
	if m, _ := f.Model("slow"); m.State != frontend.StateUnavailable {
		t.Fatalf("slow's state %q, want UNAVAILABLE", m.State)
	}
	if _, err := f.Infer(ctx, "slow", input(0)); !errors.Is(err, frontend.ErrModelNotLoaded) {
		t.Fatalf("request of an unloaded model: %v, want ErrModelNotLoaded", err)
	}

	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, loadWithin)
	defer cancel()
	if err := f.LoadModel(lctx, "slow"); err != nil {
		t.Fatal(err)
	}
	out, err := f.Infer(ctx, "slow", input(1))
	took := time.Since(start)
	if err != nil || !bytes.Equal(out, backend.EmulatedOutput(1, input(1))) {
		t.Fatalf("request after the load: %v", err)
	}
	if took > loadWithin {
		t.Errorf("load and first answer took %v, want under %v", took, loadWithin)
	}
	t.Logf("load to first answer: %v", took)
	if m, _ := f.Model("slow"); m.State != frontend.StateReady {
		t.Errorf("slow's state %q after the load, want READY", m.State)
	}

	// Requests made before an unload, which the scheduler takes before
	// it (UnloadModel sends them first), with more requests sent while
	// it runs.
	const n = 200
	var before, during []*frontend.Call
	for i := range n {
		before = append(before, f.Go(ctx, "slow", input(i)))
	}
	unloaded := make(chan error, 1)
	go func() { unloaded <- f.UnloadModel(ctx, "slow") }()
	for i := range n {
		during = append(during, f.Go(ctx, "slow", input(n+i)))
	}
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	if got := c.Sched().Snapshot().Tasks; got < n+2 { // +2: the two requests above
		t.Fatalf("the scheduler had taken %d tasks when the unload ended, want the %d made before it", got, n+2)
	}
	for i, call := range before {
		<-call.Done()
		if call.Err != nil || !bytes.Equal(call.Output, backend.EmulatedOutput(1, input(i))) {
			t.Errorf("request %d, taken before the unload: %v", i, call.Err)
		}
	}
	answered, refused := 0, 0
	for i, call := range during {
		<-call.Done()
		switch {
		case call.Err == nil && bytes.Equal(call.Output, backend.EmulatedOutput(1, input(n+i))):
			answered++
		case errors.Is(call.Err, frontend.ErrModelNotLoaded):
			refused++
		default:
			t.Errorf("request %d, sent during the unload: %v", n+i, call.Err)
		}
	}
	t.Logf("during the unload: %d answered, %d refused as not loaded", answered, refused)
	if _, err := f.Infer(ctx, "slow", input(0)); !errors.Is(err, frontend.ErrModelNotLoaded) {
		t.Errorf("request after the unload: %v, want ErrModelNotLoaded", err)
	}
	if _, err := f.Infer(ctx, "fast", input(0)); err != nil {
		t.Errorf("the other model after the unload: %v", err)
	}
	st := f.Stats()
	if sub, ended := st.Submitted.Load(), st.Answered.Load()+st.Dropped.Load()+st.Failed.Load(); sub != ended || st.Duplicates.Load() != 0 {
		t.Errorf("%d requests submitted, %d ended, %d duplicates: want each ended exactly once", sub, ended, st.Duplicates.Load())
	}
	if s := c.Sched().ModelStates()[1]; s.State != wire.ModelUnavailable {
		t.Errorf("scheduler's state of slow %+v, want UNAVAILABLE", s)
	}
	if m, _ := f.Model("slow"); m.State != frontend.StateUnavailable || m.Reason != "unloaded" {
		t.Errorf("slow's state %q (%q) after the unload, want UNAVAILABLE (unloaded)", m.State, m.Reason)
	}
	if err := f.LoadModel(ctx, "nope"); !errors.Is(err, frontend.ErrUnknownModel) {
		t.Errorf("load of an unknown model: %v", err)
	}
}
