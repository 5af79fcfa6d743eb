//go:build cgo

package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/scheduler/serving/onnxmodel"
	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// A cluster whose backend runs the committed CNN with ONNX Runtime answers
// every request of two frontends with that request's own output (the
// model's plain-Go evaluation, to within 1e-5), in batches that mix the
// two frontends' requests.
//
// Unlike the other cluster tests it runs Symphony's delayed grants, not
// the work-conserving policy: a work-conserving scheduler runs whatever
// one frontend's message of task descriptors brought as soon as it lands,
// so whether a batch mixes frontends depends on goroutine timing (it did
// not, on a loaded CI machine). Here the profile's largest batch is the
// number of requests sent: the scheduler holds a smaller batch for more
// requests until about 1.47 s after the first, and sends the batch of all
// of them as soon as the last arrives, with more than a second to spare
// (a batch held to its last moment has only ℓ(b+1)−ℓ(b) of slack, which a
// starved CI machine's timers can overrun). β is well above α: a weak
// batcher (β ≤ α) may backfill an idle GPU at once (scheduler/README.md,
// "Backfill"), and the second GPU then ran each frontend's message of
// requests as a batch of its own.
func TestONNXClusterAnswersEachRequest(t *testing.T) {
	onnxtest.NeedRuntime(t)
	cnn := modelgen.Committed()["cnn/1/model.onnx"]
	in, out := cnn.Sizes()
	cfg := testConfig(inproc.New(), "", 1, 2)
	const perFrontend = 150
	cfg.Models = []service.Model{{Name: "cnn", Profile: profile.MustLinear(100*time.Microsecond, 2*time.Millisecond, 2*perFrontend), SLO: 1500 * time.Millisecond, InputBytes: int64(4 * in)}}
	cfg.Policy = scheduler.PolicySymphony
	cfg.Frontends = 2
	cfg.Executor = committedModels(t)
	c := startCluster(t, cfg)
	type sent struct {
		call *frontend.Call
		x    []float32
	}
	var reqs [2][]sent
	// Issue the two frontends' requests alternately, so that batches can
	// hold both.
	for i := range perFrontend {
		for f := range 2 {
			x := make([]float32, in)
			b := make([]byte, 4*in)
			for j := range x {
				x[j] = float32(math.Sin(float64(f*100000 + i*in + j)))
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x[j]))
			}
			reqs[f] = append(reqs[f], sent{c.Frontends[f].Go(context.Background(), "cnn", b), x})
		}
	}
	// A batch is known by its GPU run's start and finish, which every
	// request in it reports.
	type batchKey struct{ started, finished time.Time }
	batchesOf := [2]map[batchKey]bool{{}, {}}
	for f := range 2 {
		for i, r := range reqs[f] {
			<-r.call.Done()
			if r.call.Err != nil {
				t.Errorf("frontend %d request %d: %v", f, i, r.call.Err)
				continue
			}
			want, err := cnn.Forward(r.x)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != out || len(r.call.Output) != 4*len(want) {
				t.Errorf("frontend %d request %d: %d output bytes, want %d", f, i, len(r.call.Output), 4*len(want))
				continue
			}
			for k, w := range want {
				if got := math.Float32frombits(binary.LittleEndian.Uint32(r.call.Output[4*k:])); math.Abs(float64(got-w)) > 1e-5 {
					t.Errorf("frontend %d request %d output %d: %v, want %v", f, i, k, got, w)
				}
			}
			batchesOf[f][batchKey{r.call.Timing.Started, r.call.Timing.Finished}] = true
		}
	}
	mixed := 0
	for k := range batchesOf[0] {
		if batchesOf[1][k] {
			mixed++
		}
	}
	if mixed == 0 {
		t.Errorf("no batch held requests of both frontends (%d and %d batches): nothing was checked across frontends in a batch", len(batchesOf[0]), len(batchesOf[1]))
	}
}

// A model with the tensors its file declares, end to end: the Go client's
// InferTensors packs the named image, the ONNX executor runs it, and the
// named scores come back; a wrong shape never leaves the client.
func TestONNXClusterInferTensors(t *testing.T) {
	onnxtest.NeedRuntime(t)
	cnn := modelgen.Committed()["cnn/1/model.onnx"]
	in, _ := cnn.Sizes()
	sig, err := onnxmodel.ReadFile("../../testdata/models/cnn/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	ins, outs, err := sig.Specs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(inproc.New(), "", 1, 1)
	cfg.Models = []service.Model{{Name: "cnn", Profile: profile.MustLinear(100*time.Microsecond, 100*time.Microsecond, 8), SLO: 1500 * time.Millisecond,
		InputBytes: tensor.TotalBytes(ins), Inputs: ins, Outputs: outs}}
	cfg.Executor = committedModels(t)
	c := startCluster(t, cfg)
	fe := c.Frontends[0]
	if info, _ := fe.Model("cnn"); !tensor.EqualSpecs(info.Inputs, ins) || !tensor.EqualSpecs(info.Outputs, outs) {
		t.Fatalf("the frontend knows %v → %v", info.Inputs, info.Outputs)
	}
	x := make([]float32, in)
	for j := range x {
		x[j] = float32(math.Cos(float64(j)))
	}
	res, err := fe.InferTensors(context.Background(), "cnn", []frontend.Tensor{frontend.FP32Tensor("x", []int64{1, 1, 8, 8}, x)})
	if err != nil {
		t.Fatal(err)
	}
	want, err := cnn.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != "y" || !slices.Equal(res[0].Shape, []int64{1, 3}) {
		t.Fatalf("outputs %+v", res)
	}
	y, err := res[0].FP32()
	if err != nil || len(y) != len(want) {
		t.Fatalf("y = %v, %v", y, err)
	}
	for k := range want {
		if math.Abs(float64(y[k]-want[k])) > 1e-5 {
			t.Errorf("y[%d] = %v, want %v", k, y[k], want[k])
		}
	}
	_, err = fe.InferTensors(context.Background(), "cnn", []frontend.Tensor{frontend.FP32Tensor("x", []int64{8, 8}, x)})
	if !errors.Is(err, tensor.ErrShape) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("wrong shape: %v", err)
	}
}

// committedModels is an Executor factory for a cluster whose backends run
// the committed test models with ONNX Runtime, one thread a batch.
func committedModels(t *testing.T) func() backend.Executor {
	return func() backend.Executor {
		ex, err := onnx.New(onnx.Config{Repository: "../../testdata/models", IntraOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ex.Close() })
		return ex
	}
}
