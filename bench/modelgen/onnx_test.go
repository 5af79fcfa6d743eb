//go:build cgo

package modelgen_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
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
	models := map[string]modelgen.Model{}
	for path, m := range modelgen.Committed() {
		models[strings.Split(path, "/")[0]] = m
	}
	checkRuntime(t, "../../testdata/models", models, 8, 1e-5)
}

// ONNX Runtime's answers for a narrow ResNet (the benchmark model's
// shape: stem, an identity block, two strided blocks with 1×1
// projections, pooling and the dense layer, at 8 maps on 16×16 images)
// equal the plain-Go reference to within 1e-4: the Conv attributes
// (pads, strides) and the skip connections mean in the file what they
// mean in Forward. The benchmark model itself differs only in its sizes
// and seed; it is too slow for the reference to run per test.
func TestRuntimeMatchesReferenceResNet(t *testing.T) {
	onnxtest.NeedRuntime(t)
	repo := t.TempDir()
	m := modelgen.NewResNet(16, 8, 5, 3)
	dir := filepath.Join(repo, "resnet", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), m.ONNX(), 0o644); err != nil {
		t.Fatal(err)
	}
	checkRuntime(t, repo, map[string]modelgen.Model{"resnet": m}, 4, 1e-4)
}

// checkRuntime runs each model of repo (by name) on ONNX Runtime in
// batches of 1 to maxBatch and compares every output with the model's
// Forward, to within tol.
func checkRuntime(t *testing.T, repo string, byName map[string]modelgen.Model, maxBatch int, tol float64) {
	t.Helper()
	e, err := onnx.New(onnx.Config{Repository: repo, IntraOpThreads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var specs []wire.ModelSpec
	var models []modelgen.Model
	for name, m := range byName {
		specs = append(specs, wire.ModelSpec{ID: uint32(len(specs)), Name: name})
		models = append(models, m)
	}
	if err := e.Load(specs); err != nil {
		t.Fatal(err)
	}
	for id, m := range models {
		in, _ := m.Sizes()
		for b := 1; b <= maxBatch; b++ {
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
					if d := math.Abs(float64(got - w)); d > tol || math.IsNaN(d) {
						t.Errorf("%s: batch %d, request %d, output %d: runtime %v, reference %v", specs[id].Name, b, i, k, got, w)
					}
				}
			}
		}
	}
}
