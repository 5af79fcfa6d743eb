package modelgen

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// BenchmarkSLO and BenchmarkMaxBatch are the benchmark model's serving
// settings in the config.yaml WriteBenchmark writes. ℓ(b) of Benchmark()
// on one core of the 2-core development VM is b·0.88ms (the profile of the
// issue 16 run in docs/benchmarks.md), so the SLO leaves room for batches
// of up to 26 on one GPU (Eq. 2: 2·ℓ(b) plus the live delays within the
// SLO, as partition.SizeModel computes it): the profile's capacity comes
// from real batching, not batches of one, and a faster machine still
// batches up to max_batch within it.
const (
	BenchmarkSLO      = 50 * time.Millisecond
	BenchmarkMaxBatch = 32
)

// WriteBenchmark writes the benchmark model into the model repository
// repo, as serving/repository.go lays one out: repo/resnet/1/model.onnx
// and repo/resnet/config.yaml (slo, max_batch, input_size and memory; no
// profile: symphony-bench profile measures it on the machine that serves
// it and adds it). It is idempotent: a model file with the same bytes is
// left alone, and so is its config.yaml, which keeps a profile measured
// earlier; a model file that differs (the generator changed) is
// rewritten with a fresh config.yaml, because the old profile measured
// another model. It returns the files it wrote.
func WriteBenchmark(repo string) ([]string, error) {
	m := Benchmark()
	data := m.ONNX()
	dir := filepath.Join(repo, BenchmarkResNet)
	modelPath := filepath.Join(dir, "1", "model.onnx")
	configPath := filepath.Join(dir, "config.yaml")
	old, err := os.ReadFile(modelPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("modelgen: %w", err)
	}
	var wrote []string
	same := err == nil && bytes.Equal(old, data)
	if !same {
		if err := os.MkdirAll(filepath.Dir(modelPath), 0o755); err != nil {
			return nil, fmt.Errorf("modelgen: %w", err)
		}
		if err := writeAtomic(modelPath, data); err != nil {
			return nil, err
		}
		wrote = append(wrote, modelPath)
	}
	if _, err := os.Stat(configPath); same && err == nil {
		return wrote, nil
	}
	if err := writeAtomic(configPath, m.benchmarkConfig(len(data))); err != nil {
		return nil, err
	}
	return append(wrote, configPath), nil
}

// benchmarkConfig is the benchmark model's config.yaml. Its memory is
// for placement only: the weights (the model file's size) and, per batch
// of max_batch, the largest activations a sample holds at once (about
// four maps of the widest stage at full resolution).
func (m *ResNet) benchmarkConfig(modelBytes int) []byte {
	in, _ := m.Sizes()
	dynamic := int64(BenchmarkMaxBatch) * 4 * int64(m.Width*m.Side*m.Side) * 4
	return fmt.Appendf(nil, `# The benchmark ResNet (bench/modelgen.Benchmark: 3×%[1]d×%[1]d images, width
# %[2]d, %[3]d classes), written by make models (symphony-bench models). It has no
# profile until symphony-bench profile --model-repo REPO --model %[4]s measures
# one on the machine that serves it.
slo: %[5]v
max_batch: %[6]d
input_size: %[7]s
memory: {static: %[8]s, dynamic: %[9]s}
`, m.Side, m.Width, m.Classes, BenchmarkResNet, BenchmarkSLO, BenchmarkMaxBatch,
		strictyaml.FormatSize(int64(4*in)), strictyaml.FormatSize(int64(modelBytes)), strictyaml.FormatSize(dynamic))
}

// writeAtomic writes data to path through a temporary file and a rename,
// so that an interrupted run never leaves half a model behind, which a
// later run would take for a changed one and a backend would fail to
// load.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("modelgen: %w", err)
	}
	return nil
}
