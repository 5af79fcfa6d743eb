//go:build cgo

package onnx

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

// repo is the committed test models (bench/modelgen writes them).
const repo = "../../testdata/models"

// newExecutor is an executor on the committed models, or a skip where
// ONNX Runtime's library is missing (a failure where CI requires it).
func newExecutor(t *testing.T, cfg Config) *Executor {
	t.Helper()
	if DefaultLibrary() == "" {
		if os.Getenv("SYMPHONY_REQUIRE_ONNXRUNTIME") != "" {
			t.Fatalf("no ONNX Runtime library (make onnxruntime)")
		}
		t.Skip("no ONNX Runtime library: make onnxruntime")
	}
	if cfg.Repository == "" {
		cfg.Repository = repo
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func sampleInput(seed, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(math.Sin(float64(seed*n+i)))))
	}
	return b
}

// A batch's outputs are each request's own: the same as the request run
// alone, whatever else was in the batch.
func TestBatchEqualsSingles(t *testing.T) {
	e := newExecutor(t, Config{IntraOpThreads: 1})
	if err := e.Load([]wire.ModelSpec{{ID: 3, Name: "mlp"}}); err != nil {
		t.Fatal(err)
	}
	inputs := [][]byte{sampleInput(1, 16), sampleInput(2, 16), sampleInput(3, 16)}
	batch, err := e.Execute(context.Background(), 0, 3, inputs)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 3 {
		t.Fatalf("%d outputs for 3 inputs", len(batch))
	}
	for i, in := range inputs {
		alone, err := e.Execute(context.Background(), 1, 3, [][]byte{in})
		if err != nil {
			t.Fatal(err)
		}
		a, b := floats(alone[0]), floats(batch[i])
		if len(a) != 4 || len(b) != 4 {
			t.Fatalf("outputs of %d and %d values, want 4", len(a), len(b))
		}
		for j := range a {
			if d := math.Abs(float64(a[j] - b[j])); d > 1e-6 {
				t.Errorf("request %d output %d: %v alone, %v in the batch", i, j, a[j], b[j])
			}
		}
	}
	tm := e.Timing()["mlp"]
	if tm.Batches != 4 || tm.Requests != 6 || tm.Busy <= 0 {
		t.Errorf("timing %+v, want 4 batches of 6 requests", tm)
	}
}

// Bad inputs and bad repositories fail with what is wrong, and nothing
// crashes.
func TestErrors(t *testing.T) {
	e := newExecutor(t, Config{})
	if err := e.Load([]wire.ModelSpec{{ID: 1, Name: "mlp"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(context.Background(), 0, 1, [][]byte{make([]byte, 10)}); err == nil || !strings.Contains(err.Error(), "has 10 bytes") {
		t.Errorf("short input: %v", err)
	}
	if _, err := e.Execute(context.Background(), 0, 9, [][]byte{sampleInput(1, 16)}); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Errorf("unknown model: %v", err)
	}
	if err := e.Load([]wire.ModelSpec{{ID: 1, Name: "resnet"}}); err == nil || !strings.Contains(err.Error(), "resnet") {
		t.Errorf("model not in the repository: %v", err)
	}
	// A corrupt model.onnx.
	bad := t.TempDir()
	if err := os.MkdirAll(filepath.Join(bad, "junk", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "junk", "1", "model.onnx"), []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	e2 := newExecutor(t, Config{Repository: bad})
	if err := e2.Load([]wire.ModelSpec{{ID: 1, Name: "junk"}}); err == nil || !strings.Contains(err.Error(), "not a model ONNX Runtime can read") {
		t.Errorf("corrupt model: %v", err)
	}
	// A failed Load keeps the models of the last good one.
	if _, err := e.Execute(context.Background(), 0, 1, [][]byte{sampleInput(1, 16)}); err != nil {
		t.Errorf("after a failed Load: %v", err)
	}
}

// A missing library is named, with how to get it.
func TestMissingLibrary(t *testing.T) {
	_, err := New(Config{Library: "/nonexistent/libonnxruntime.so", Repository: repo})
	if err == nil || !strings.Contains(err.Error(), "make onnxruntime") {
		t.Fatalf("error %v", err)
	}
}

// The repository serves the highest version, and refuses names that are
// not a directory of it.
func TestModelFile(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"1", "10", "2", "x"} {
		if err := os.MkdirAll(filepath.Join(dir, "m", v), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "m", v, "model.onnx"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := ModelFile(dir, "m")
	if err != nil || p != filepath.Join(dir, "m", "10", "model.onnx") {
		t.Errorf("ModelFile = %q, %v", p, err)
	}
	for _, name := range []string{"", "..", "a/b", "none"} {
		if _, err := ModelFile(dir, name); err == nil {
			t.Errorf("ModelFile(%q) accepted", name)
		}
	}
}
