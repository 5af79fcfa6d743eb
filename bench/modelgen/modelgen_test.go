package modelgen

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
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

// A strided, padded convolution reads the input where ONNX's Conv does:
// output (i, j) covers rows i·stride−pad ... +K−1, zeros outside.
func TestConvStridePad(t *testing.T) {
	cv := Conv{In: 1, Out: 1, K: 3, Stride: 2, Pad: 1, W: []float32{1, 1, 1, 1, 1, 1, 1, 1, 1}, B: []float32{0.5}}
	x := tensor{c: 1, h: 4, w: 4, v: make([]float64, 16)}
	for i := range x.v {
		x.v[i] = float64(i + 1)
	}
	y := cv.apply(x)
	// Windows centred on (0,0), (0,2), (2,0), (2,2) of the 4×4 grid 1..16.
	want := []float64{14.5, 30.5, 57.5, 99.5}
	if y.c != 1 || y.h != 2 || y.w != 2 || len(y.v) != 4 {
		t.Fatalf("output %d×%d×%d, want 1×2×2", y.c, y.h, y.w)
	}
	for i := range want {
		if y.v[i] != want[i] {
			t.Errorf("output %d = %v, want %v", i, y.v, want)
			break
		}
	}
}

// The benchmark ResNet has the shape its doc states (an identity block,
// then two strided blocks with 1×1 projections), its weights keep the
// activations finite and of order one through the residual sums, and
// its output depends on its input.
func TestBenchmarkResNet(t *testing.T) {
	m := Benchmark()
	if !bytes.Equal(m.ONNX(), Benchmark().ONNX()) {
		t.Fatal("the same seed gave two models")
	}
	if len(m.Blocks) != 3 || m.Blocks[0].Proj != nil || m.Blocks[1].Proj == nil || m.Blocks[2].Proj == nil ||
		m.Blocks[1].C1.Stride != 2 || m.Blocks[2].C2.Out != 4*m.Width {
		t.Fatalf("blocks %+v do not have the benchmark's shape", m.Blocks)
	}
	in, out := m.Sizes()
	if in != 3*32*32 || out != 10 {
		t.Fatalf("Sizes() = %d, %d; want 3072, 10", in, out)
	}
	y := make([][]float32, 2)
	for s := range y {
		x := make([]float32, in)
		for i := range x {
			x[i] = float32(math.Cos(float64(i*(s+1)) / 7))
		}
		var err error
		if y[s], err = m.Forward(x); err != nil {
			t.Fatal(err)
		}
		var peak float64
		for _, v := range y[s] {
			peak = math.Max(peak, math.Abs(float64(v)))
		}
		if math.IsNaN(peak) || peak < 1e-3 || peak > 1e3 {
			t.Errorf("input %d: largest |output| %v, want finite and of order one (%v)", s, peak, y[s])
		}
	}
	if slices.Equal(y[0], y[1]) {
		t.Errorf("two inputs gave the same output %v", y[0])
	}
	if _, err := m.Forward(make([]float32, in-1)); err == nil {
		t.Error("Forward took an input of the wrong size")
	}
}
