package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/wire"
)

// An emulated backend with a GPU memory capacity refuses a model load
// that the models' declared sizes do not fit, and the model-control flow
// turns the refusal into a failed load: the model is UNAVAILABLE, with
// the backend's reason, at the scheduler and the frontend, and the
// loaded model keeps serving. Once that model is unloaded, its memory is
// free and the load succeeds.
func TestLoadRefusedForGPUMemory(t *testing.T) {
	const gib = 1 << 30
	cfg := testConfig(inproc.New(), "", 2, 1)
	// fast: 2GiB + 1GiB; slow: 2GiB + 512MiB. Either fits a 4GiB GPU
	// alone; both need 4GiB static + 1GiB dynamic.
	cfg.Models[0].StaticMemory, cfg.Models[0].DynamicMemory = 2*gib, gib
	cfg.Models[1].StaticMemory, cfg.Models[1].DynamicMemory = 2*gib, gib/2
	cfg.Unloaded = []string{"slow"}
	cfg.Executor = func() backend.Executor { return backend.NewEmulatedWithMemory(4 * gib) }
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	const why = `emulated executor: model "slow" needs 2.5GiB of GPU memory (static 2GiB + dynamic 512MiB), but 3GiB is in use (static 2GiB + largest dynamic 1GiB): with it a GPU would hold 5GiB, over its capacity of 4GiB`
	err := f.LoadModel(ctx, "slow")
	if !errors.Is(err, frontend.ErrControl) || !strings.Contains(err.Error(), why) {
		t.Fatalf("load over the GPUs' memory: %v, want ErrControl with %q", err, why)
	}
	for _, b := range []string{"backend-0", "backend-1"} {
		if !strings.Contains(err.Error(), b+": "+why) {
			t.Errorf("load error %q does not give %s's refusal", err, b)
		}
	}
	st := c.Sched().ModelStates()[1]
	if st.State != wire.ModelUnavailable || !strings.Contains(st.Reason, "load failed: ") || !strings.Contains(st.Reason, why) {
		t.Errorf("scheduler's state of slow %+v, want UNAVAILABLE with the backends' reason", st)
	}
	if m, _ := f.Model("slow"); m.State != frontend.StateUnavailable || !strings.Contains(m.Reason, why) {
		t.Errorf("frontend's state of slow %q (%q), want UNAVAILABLE with the reason", m.State, m.Reason)
	}
	if _, err := f.Infer(ctx, "slow", input(0)); !errors.Is(err, frontend.ErrModelNotLoaded) {
		t.Errorf("request of the refused model: %v, want ErrModelNotLoaded", err)
	}
	if out, err := f.Infer(ctx, "fast", input(1)); err != nil || !bytes.Equal(out, backend.EmulatedOutput(0, input(1))) {
		t.Errorf("the loaded model after the refusal: %v", err)
	}

	// The unload frees fast's memory on every backend: slow now fits.
	if err := f.UnloadModel(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	if err := f.LoadModel(ctx, "slow"); err != nil {
		t.Fatalf("load once the memory is free: %v", err)
	}
	if out, err := f.Infer(ctx, "slow", input(2)); err != nil || !bytes.Equal(out, backend.EmulatedOutput(1, input(2))) {
		t.Errorf("slow after its load: %v", err)
	}
	if m, _ := f.Model("slow"); m.State != frontend.StateReady {
		t.Errorf("slow's state %q after the load, want READY", m.State)
	}
	// And now fast is the one that does not fit.
	if err := f.LoadModel(ctx, "fast"); err == nil || !strings.Contains(err.Error(), `model "fast" needs 3GiB`) {
		t.Errorf("fast beside slow: %v, want refused", err)
	}
}
