//go:build cgo

package cluster

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// A cluster whose backend runs the committed CNN with ONNX Runtime answers
// every request of two frontends with that request's own output (the
// model's plain-Go evaluation, to within 1e-5), in batches that mix the
// two frontends' requests.
func TestONNXClusterAnswersEachRequest(t *testing.T) {
	onnxtest.NeedRuntime(t)
	cnn := modelgen.Committed()["cnn/1/model.onnx"]
	in, out := cnn.Sizes()
	cfg := testConfig(inproc.New(), "", 1, 2)
	cfg.Models = []service.Model{{Name: "cnn", Profile: profile.MustLinear(100*time.Microsecond, time.Millisecond, 32), SLO: 3 * time.Second, InputBytes: int64(4 * in)}}
	cfg.Frontends = 2
	cfg.Executor = func() backend.Executor {
		ex, err := onnx.New(onnx.Config{Repository: "../../testdata/models", IntraOpThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ex.Close() })
		return ex
	}
	c := startCluster(t, cfg)
	const perFrontend = 150
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
