//go:build cgo

package cluster

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
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
	var wg sync.WaitGroup
	var mu sync.Mutex
	largest := 0
	for f := range 2 {
		client := c.Frontends[f]
		calls := make([]*frontend.Call, perFrontend)
		xs := make([][]float32, perFrontend)
		for i := range calls {
			xs[i] = make([]float32, in)
			b := make([]byte, 4*in)
			for j := range xs[i] {
				xs[i][j] = float32(math.Sin(float64(f*100000 + i*in + j)))
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(xs[i][j]))
			}
			calls[i] = client.Go(context.Background(), "cnn", b)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, call := range calls {
				<-call.Done()
				if call.Err != nil {
					t.Errorf("frontend %d request %d: %v", f, i, call.Err)
					continue
				}
				want, err := cnn.Forward(xs[i])
				if err != nil {
					t.Error(err)
					return
				}
				if len(want) != out || len(call.Output) != 4*len(want) {
					t.Errorf("frontend %d request %d: %d output bytes, want %d", f, i, len(call.Output), 4*len(want))
					continue
				}
				for k, w := range want {
					if got := math.Float32frombits(binary.LittleEndian.Uint32(call.Output[4*k:])); math.Abs(float64(got-w)) > 1e-5 {
						t.Errorf("frontend %d request %d output %d: %v, want %v", f, i, k, got, w)
					}
				}
				mu.Lock()
				largest = max(largest, call.Timing.BatchSize)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if largest < 2 {
		t.Errorf("no batch held more than one request (largest %d): nothing was checked across a batch", largest)
	}
}
