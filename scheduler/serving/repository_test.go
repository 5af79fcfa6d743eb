package serving

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/tensor"
)

func writeConfig(t *testing.T, repo, model, text string) string {
	t.Helper()
	dir := filepath.Join(repo, model)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A model is served once profiled: before, the repository names the
// command that profiles it; after WriteProfile, its config keeps its
// other keys and comments and serves the profile written.
func TestRepositoryProfileCycle(t *testing.T) {
	repo := t.TempDir()
	cfg := writeConfig(t, repo, "cnn", "# the test CNN\nslo: 50ms   # end to end\nmax_batch: 8\ninput_size: 256\n")
	if _, err := ParseRepository(repo); err == nil || !strings.Contains(err.Error(), "symphony profile --model-repo") {
		t.Fatalf("unprofiled: %v", err)
	}
	rm, err := ReadRepoModel(repo, "cnn")
	if err != nil || rm.Profiled() || rm.MaxBatch != 8 || rm.InputBytes != 256 || rm.SLO != 50*time.Millisecond {
		t.Fatalf("ReadRepoModel = %+v, %v", rm, err)
	}
	lin, fit, err := profile.FromMeasured([]time.Duration{300 * time.Microsecond, 400 * time.Microsecond}, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteProfile(cfg, lin, &fit); err != nil {
		t.Fatal(err)
	}
	c, err := ParseRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 1 || c.Models[0].Name != "cnn" || c.Models[0].Profile.Latency(2) != 400*time.Microsecond {
		t.Fatalf("models %+v", c.Models)
	}
	text, _ := os.ReadFile(cfg)
	for _, want := range []string{"# the test CNN", "# end to end", "profile: {alpha: 100µs, beta: 200µs, max_batch: 2}"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("config lacks %q:\n%s", want, text)
		}
	}
	// A table replaces the line.
	tab, err := profile.Table([]time.Duration{time.Millisecond, 3 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteProfile(cfg, tab, nil); err != nil {
		t.Fatal(err)
	}
	rm, err = ReadRepoModel(repo, "cnn")
	if err != nil || rm.Profile.Latency(2) != 3*time.Millisecond {
		t.Fatalf("after the table: %+v, %v", rm, err)
	}
}

// Bad configs are refused with the file, line and field.
func TestRepositoryErrors(t *testing.T) {
	repo := t.TempDir()
	writeConfig(t, repo, "a", "slo: 50ms\nmax_bach: 8\n")
	if _, err := ReadRepoModel(repo, "a"); err == nil || !strings.Contains(err.Error(), `did you mean "max_batch"`) {
		t.Errorf("typo: %v", err)
	}
	writeConfig(t, repo, "b", "max_batch: 8\n")
	if _, err := ReadRepoModel(repo, "b"); err == nil || !strings.Contains(err.Error(), "slo") {
		t.Errorf("no slo: %v", err)
	}
	writeConfig(t, repo, "c", "slo: 50ms\nprofile: zoo:1080ti/ResNet50\n")
	if _, err := ReadRepoModel(repo, "c"); err == nil || !strings.Contains(err.Error(), "its own measurement") {
		t.Errorf("zoo profile: %v", err)
	}
	for _, name := range []string{"..", "a/b", ""} {
		if _, err := ReadRepoModel(repo, name); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if _, err := ParseRepository(filepath.Join(repo, "none")); err == nil {
		t.Error("a missing repository accepted")
	}
}

// copyModel copies a committed model's model.onnx into repo/name/1.
func copyModel(t *testing.T, repo, name, from string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/models", from, "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, name, "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The committed models' tensors come from their model.onnx, and their
// input size is the inputs' bytes.
func TestRepositoryTensors(t *testing.T) {
	c, err := ParseRepository("../../testdata/models")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]tensor.Spec{
		"cnn": {{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}}, {Name: "y", Datatype: "FP32", Shape: []int64{3}}},
		"mlp": {{Name: "x", Datatype: "FP32", Shape: []int64{16}}, {Name: "y", Datatype: "FP32", Shape: []int64{4}}},
	}
	for _, m := range c.Models {
		w := want[m.Name]
		if len(m.Inputs) != 1 || !m.Inputs[0].Equal(w[0]) || len(m.Outputs) != 1 || !m.Outputs[0].Equal(w[1]) {
			t.Errorf("%s: %v → %v", m.Name, m.Inputs, m.Outputs)
		}
		if m.InputBytes != w[0].Bytes() {
			t.Errorf("%s: input size %d", m.Name, m.InputBytes)
		}
	}
}

// config.yaml's inputs and outputs are checked against the file's; a
// model without a file takes them as given; input_size must agree.
func TestRepositoryExplicitTensors(t *testing.T) {
	repo := t.TempDir()
	const io = "inputs: [{name: x, datatype: FP32, dims: [1, 8, 8]}]\noutputs: [{name: y, datatype: FP32, dims: [3]}]\n"
	for name, tc := range map[string]struct {
		file, config, want string
	}{
		"agree":       {"cnn", "slo: 50ms\ninput_size: 256\n" + io, ""},
		"no-file":     {"", "slo: 50ms\n" + io, ""},
		"wrong-dims":  {"cnn", "slo: 50ms\ninputs: [{name: x, datatype: FP32, dims: [8, 8]}]\noutputs: [{name: y, datatype: FP32, dims: [3]}]\n", "inputs[0]: x FP32 [8 8], but"},
		"wrong-type":  {"cnn", "slo: 50ms\ninputs: [{name: x, datatype: FP32, dims: [1, 8, 8]}]\noutputs: [{name: y, datatype: FP64, dims: [3]}]\n", "says y FP32 [3]"},
		"extra":       {"mlp", "slo: 50ms\ninputs: [{name: x, datatype: FP32, dims: [16]}, {name: z, datatype: INT64, dims: []}]\noutputs: [{name: y, datatype: FP32, dims: [4]}]\n", "lists 2 tensors"},
		"input_size":  {"cnn", "slo: 50ms\ninput_size: 100\n", "input_size: 100 bytes, but the inputs"},
		"dynamic-dim": {"", "slo: 50ms\ninputs: [{name: x, datatype: FP32, dims: [-1]}]\noutputs: [{name: y, datatype: FP32, dims: [3]}]\n", "without the (dynamic) batch dimension"},
		"bytes":       {"", "slo: 50ms\ninputs: [{name: s, datatype: BYTES, dims: [1]}]\noutputs: [{name: y, datatype: FP32, dims: [3]}]\n", "BYTES, whose elements vary"},
		"only-inputs": {"", "slo: 50ms\ninputs: [{name: x, datatype: FP32, dims: [1]}]\n", "gives inputs but not outputs"},
		"key-typo":    {"", "slo: 50ms\ninputs: [{name: x, datatyp: FP32, dims: [1]}]\noutputs: []\n", `did you mean "datatype"`},
	} {
		if tc.file != "" {
			copyModel(t, repo, name, tc.file)
		}
		writeConfig(t, repo, name, tc.config)
		rm, err := ReadRepoModel(repo, name)
		if tc.want == "" {
			if err != nil || len(rm.Inputs) != 1 || rm.Inputs[0].Bytes() != 256 || rm.InputBytes != 256 {
				t.Errorf("%s: %+v, %v", name, rm, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// A corrupt model file is named as such.
	copyModel(t, repo, "bad", "cnn")
	writeConfig(t, repo, "bad", "slo: 50ms\n")
	if err := os.MkdirAll(filepath.Join(repo, "bad", "2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "bad", "2", "model.onnx"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRepoModel(repo, "bad"); err == nil || !strings.Contains(err.Error(), "2/model.onnx: not an ONNX model") {
		t.Errorf("corrupt file: %v", err)
	}
}
