package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// symphony-bench models writes the benchmark repository, and models
// workload writes a workload that serves the repository model exactly as
// the scheduler does (SLO, input size, ℓ(b) for every b) at the asked
// fraction of the profile's Eqs. 2-3 capacity.
func TestModelsWorkload(t *testing.T) {
	repo := t.TempDir()
	if code, _, stderr := runCLI(t, "models", "--out", repo); code != 0 {
		t.Fatalf("models: exit %d: %s", code, stderr)
	}
	config := filepath.Join(repo, modelgen.BenchmarkResNet, "config.yaml")
	if code, _, stderr := runCLI(t, "models", "workload", "--model-repo", repo); code == 0 || !strings.Contains(stderr, "no profile") {
		t.Errorf("an unprofiled model: exit %d, %q", code, stderr)
	}
	// ℓ(b) = 1ms·b + 1ms, and the live delays for a batch of b 12KiB
	// inputs are 0.3ms + b·43.4µs to dispatch and 1.5ms for the result.
	// Eq. 2 on one GPU, 2·ℓ(b) within the rest of the 50ms SLO, allows
	// b = 22 at most: 22/23ms ≈ 956.5 req/s. On two GPUs, (3/2)·ℓ(b)
	// within it allows b = 30: 2·30/31ms ≈ 1935.5 req/s.
	f, err := os.OpenFile(config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("profile: {alpha: 1ms, beta: 1ms, max_batch: 32}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rm, err := serving.ReadRepoModel(repo, modelgen.BenchmarkResNet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		gpus int
		want float64
	}{{1, 0.5 * 22 / 0.023}, {2, 0.5 * 60 / 0.031}} {
		out := filepath.Join(repo, fmt.Sprintf("w%d.yaml", tc.gpus))
		if code, _, stderr := runCLI(t, "models", "workload", "--model-repo", repo, "--gpus", fmt.Sprint(tc.gpus), "--load", "0.5", "--duration", "7s", "-o", out); code != 0 {
			t.Fatalf("models workload: exit %d: %s", code, stderr)
		}
		w, err := workload.ParseFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Models) != 1 || w.Duration != 7*time.Second || w.Cluster.GPUs != tc.gpus {
			t.Fatalf("workload %+v", w)
		}
		m := w.Models[0]
		if len(m.Rates) != 1 || math.Abs(m.Rates[0].Rate-tc.want) > 0.01 {
			t.Errorf("%d GPUs: rates %v, want %v", tc.gpus, m.Rates, tc.want)
		}
		if m.Name != rm.Name || m.SLO != rm.SLO || m.InputBytes != rm.InputBytes || m.Profile.MaxBatch() != 32 {
			t.Errorf("model %+v, the repository's %+v", m.Model, rm.Model)
		}
		for b := 1; b <= 32; b++ {
			if m.Profile.Latency(b) != rm.Profile.Latency(b) {
				t.Errorf("ℓ(%d) = %v, the repository's %v", b, m.Profile.Latency(b), rm.Profile.Latency(b))
			}
		}
	}
}
