package modelgen

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the committed models under testdata/models")

// The committed models are what this package writes: the generator is
// their source, and a change to one without the other fails here.
func TestCommittedModels(t *testing.T) {
	for path, m := range Committed() {
		file := filepath.Join("..", "..", "testdata", "models", path)
		want := m.ONNX()
		if *update {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (go test ./bench/modelgen -run TestCommittedModels -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what modelgen writes (rerun with -update)", file)
		}
		if len(got) > 100<<10 {
			t.Errorf("%s is %d bytes; committed models stay under 100 KB", file, len(got))
		}
	}
}

// The same seed gives the same model; Forward checks its input's size and
// computes relu layers as written.
func TestMLPForward(t *testing.T) {
	a, b := NewMLP(3, 2, 1, 7), NewMLP(3, 2, 1, 7)
	if !bytes.Equal(a.ONNX(), b.ONNX()) {
		t.Fatal("the same seed gave two models")
	}
	m := &MLP{In: 2, Hidden: 2, Out: 1, W1: []float32{1, -1, 1, -1}, B1: []float32{0, 0}, W2: []float32{2, 3}, B2: []float32{0.5}}
	// h = relu([x0+x1, -(x0+x1)]) = [3, 0] for x = [1, 2]; y = 2·3 + 0.5.
	y, err := m.Forward([]float32{1, 2})
	if err != nil || len(y) != 1 || y[0] != 6.5 {
		t.Fatalf("Forward = %v, %v; want [6.5]", y, err)
	}
	if _, err := m.Forward([]float32{1}); err == nil {
		t.Error("Forward took an input of the wrong size")
	}
}
