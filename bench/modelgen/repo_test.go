package modelgen

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/symphony-serving/symphony/scheduler/serving"
)

// WriteBenchmark lays the benchmark model out as a repository model the
// scheduler reads, and is idempotent: a second run writes nothing, a
// profile added to the config survives it, and a model file that differs
// from the generator's is rewritten with a fresh config (its profile
// measured another model).
func TestWriteBenchmark(t *testing.T) {
	repo := t.TempDir()
	model := filepath.Join(repo, BenchmarkResNet, "1", "model.onnx")
	config := filepath.Join(repo, BenchmarkResNet, "config.yaml")
	wrote, err := WriteBenchmark(repo)
	if err != nil || !slices.Equal(wrote, []string{model, config}) {
		t.Fatalf("first run wrote %v, %v; want %v", wrote, err, []string{model, config})
	}
	rm, err := serving.ReadRepoModel(repo, BenchmarkResNet)
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := Benchmark().Sizes(); rm.SLO != BenchmarkSLO || rm.MaxBatch != BenchmarkMaxBatch || rm.InputBytes != int64(4*in) || rm.Profiled() {
		t.Errorf("config read as slo %v, max_batch %d, input_size %d, profiled %v", rm.SLO, rm.MaxBatch, rm.InputBytes, rm.Profiled())
	}
	profiled := append(mustRead(t, config), "profile: {alpha: 1ms, beta: 100us, max_batch: 32}\n"...)
	if err := os.WriteFile(config, profiled, 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote, err := WriteBenchmark(repo); err != nil || len(wrote) != 0 {
		t.Fatalf("second run wrote %v, %v; want nothing", wrote, err)
	}
	if got := mustRead(t, config); string(got) != string(profiled) {
		t.Errorf("second run changed the config:\n%s", got)
	}
	if err := os.WriteFile(model, []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote, err := WriteBenchmark(repo); err != nil || len(wrote) != 2 {
		t.Fatalf("run over a stale model wrote %v, %v; want the model and its config", wrote, err)
	}
	if rm, err := serving.ReadRepoModel(repo, BenchmarkResNet); err != nil || rm.Profiled() {
		t.Errorf("after a stale model the config kept its profile (%v)", err)
	}
	if got := mustRead(t, model); string(got) != string(Benchmark().ONNX()) {
		t.Error("the stale model was not replaced by the generator's")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
