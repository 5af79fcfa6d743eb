//go:build cgo

package modelgen_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/transport/wire"
)

// ONNX Runtime's answers for the committed MLP equal this package's own
// evaluation of the same weights to within 1e-5, for batches of every size
// up to 8: the model file says what the generator meant, and the executor
// puts each request's output back in its place.
func TestRuntimeMatchesReference(t *testing.T) {
	onnxtest.NeedRuntime(t)
	e, err := onnx.New(onnx.Config{Repository: "../../testdata/models", IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Load([]wire.ModelSpec{{ID: 0, Name: "mlp"}}); err != nil {
		t.Fatal(err)
	}
	m := modelgen.Committed()["mlp/1/model.onnx"]
	for b := 1; b <= 8; b++ {
		xs := make([][]float32, b)
		inputs := make([][]byte, b)
		for i := range xs {
			xs[i] = make([]float32, m.In)
			inputs[i] = make([]byte, 4*m.In)
			for j := range xs[i] {
				xs[i][j] = float32(math.Cos(float64(b*100 + i*m.In + j)))
				binary.LittleEndian.PutUint32(inputs[i][4*j:], math.Float32bits(xs[i][j]))
			}
		}
		outs, err := e.Execute(context.Background(), 0, 0, inputs)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range xs {
			want, err := m.Forward(x)
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range want {
				got := math.Float32frombits(binary.LittleEndian.Uint32(outs[i][4*k:]))
				if d := math.Abs(float64(got - w)); d > 1e-5 {
					t.Errorf("batch %d, request %d, output %d: runtime %v, reference %v", b, i, k, got, w)
				}
			}
		}
	}
}
