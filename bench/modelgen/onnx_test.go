//go:build cgo

package modelgen_test

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/backend/onnx"
	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/transport/wire"
)

// ONNX Runtime's answers for every committed model (the MLP and the CNN) equal this package's own
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
	var specs []wire.ModelSpec
	var models []modelgen.Model
	for path, m := range modelgen.Committed() {
		specs = append(specs, wire.ModelSpec{ID: uint32(len(specs)), Name: strings.Split(path, "/")[0]})
		models = append(models, m)
	}
	if err := e.Load(specs); err != nil {
		t.Fatal(err)
	}
	for id, m := range models {
		in, _ := m.Sizes()
		for b := 1; b <= 8; b++ {
			xs := make([][]float32, b)
			inputs := make([][]byte, b)
			for i := range xs {
				xs[i] = make([]float32, in)
				inputs[i] = make([]byte, 4*in)
				for j := range xs[i] {
					xs[i][j] = float32(math.Cos(float64(b*100 + i*in + j)))
					binary.LittleEndian.PutUint32(inputs[i][4*j:], math.Float32bits(xs[i][j]))
				}
			}
			outs, err := e.Execute(context.Background(), 0, uint32(id), inputs)
			if err != nil {
				t.Fatalf("%s: %v", specs[id].Name, err)
			}
			for i, x := range xs {
				want, err := m.Forward(x)
				if err != nil {
					t.Fatal(err)
				}
				if len(outs[i]) != 4*len(want) {
					t.Fatalf("%s: %d output bytes, want %d", specs[id].Name, len(outs[i]), 4*len(want))
				}
				for k, w := range want {
					got := math.Float32frombits(binary.LittleEndian.Uint32(outs[i][4*k:]))
					if d := math.Abs(float64(got - w)); d > 1e-5 {
						t.Errorf("%s: batch %d, request %d, output %d: runtime %v, reference %v", specs[id].Name, b, i, k, got, w)
					}
				}
			}
		}
	}
}
