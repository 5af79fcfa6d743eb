//go:build cgo

package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/scheduler/serving"
)

// symphony profile measures every batch size on the ONNX executor and
// writes a profile the repository then serves.
func TestProfileWritesTheConfig(t *testing.T) {
	onnxtest.NeedRuntime(t)
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "cnn", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile("../../testdata/models/cnn/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "cnn", "1", "model.onnx"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "cnn", "config.yaml"), []byte("slo: 20ms\nmax_batch: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := serving.ParseRepository(repo); err == nil {
		t.Fatal("an unprofiled model served")
	}
	code, stdout, stderr := runCLI(t, "profile", "--model-repo", repo, "--model", "cnn", "--runs", "5", "--warmup", "1", "--json", "--plot", filepath.Join(repo, "plots"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep profileReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 4 || !rep.Written || rep.Kept == "" {
		t.Fatalf("report %+v", rep)
	}
	for _, p := range rep.Points {
		if p.MedianMs <= 0 || p.P99Ms < p.MedianMs {
			t.Errorf("point %+v", p)
		}
	}
	c, err := serving.ParseRepository(repo)
	if err != nil || len(c.Models) != 1 || c.Models[0].Profile.MaxBatch() != 4 {
		t.Fatalf("after profiling: %+v, %v", c, err)
	}
	// The config serves what was measured: the line the report gives, or
	// the medians made non-decreasing (written to 10ns).
	served, floor := c.Models[0].Profile, 0.0
	for i, p := range rep.Points {
		floor = max(floor, p.MedianMs)
		want := floor
		if rep.Kept == "linear" {
			want = p.FitMs
		}
		if p.Batch != i+1 {
			t.Errorf("point %d is batch %d", i, p.Batch)
		}
		if got := report.Ms(served.Latency(i + 1)); math.Abs(got-want) > 1e-5 {
			t.Errorf("batch %d: the config serves %.5f ms, want the %s profile's %.5f ms", i+1, got, rep.Kept, want)
		}
	}
	if _, err := os.Stat(filepath.Join(repo, "plots", "profile-cnn.svg")); err != nil {
		t.Error(err)
	}
	if code, _, stderr := runCLI(t, "profile", "--model-repo", repo); code != 2 || !strings.Contains(stderr, "--model") {
		t.Errorf("no --model: exit %d, %q", code, stderr)
	}
}
