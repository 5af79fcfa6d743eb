//go:build cgo

package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// The committed CNN, unloaded at start, is loaded on an ONNX Runtime
// backend through the model-control API and answers a request within
// loadWithin of the load; unloaded again, it refuses requests.
func TestONNXLoadServesWithinBound(t *testing.T) {
	onnxtest.NeedRuntime(t)
	in, _ := modelgen.Committed()["cnn/1/model.onnx"].Sizes()
	cfg := testConfig(inproc.New(), "", 1, 1)
	cfg.Models = []service.Model{{Name: "cnn", Profile: profile.MustLinear(100*time.Microsecond, 100*time.Microsecond, 8), SLO: time.Second, InputBytes: int64(4 * in)}}
	cfg.Unloaded = []string{"cnn"}
	cfg.Executor = committedModels(t)
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	ctx := context.Background()
	x := make([]byte, 4*in)
	if _, err := f.Infer(ctx, "cnn", x); !errors.Is(err, frontend.ErrModelNotLoaded) {
		t.Fatalf("request before the load: %v, want ErrModelNotLoaded", err)
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, loadWithin)
	defer cancel()
	if err := f.LoadModel(lctx, "cnn"); err != nil {
		t.Fatal(err)
	}
	loaded := time.Since(start)
	if _, err := f.Infer(ctx, "cnn", x); err != nil {
		t.Fatalf("request after the load: %v", err)
	}
	if took := time.Since(start); took > loadWithin {
		t.Errorf("load and first answer took %v, want under %v", took, loadWithin)
	} else {
		t.Logf("load took %v, load to first answer %v", loaded, took)
	}
	if err := f.UnloadModel(ctx, "cnn"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Infer(ctx, "cnn", x); !errors.Is(err, frontend.ErrModelNotLoaded) {
		t.Errorf("request after the unload: %v, want ErrModelNotLoaded", err)
	}
}
