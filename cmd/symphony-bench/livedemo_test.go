package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// liveWorkload has an epoch job: two parts, four models, epochs of a
// second, a pool of six GPUs.
const liveWorkload = `seed: 3
duration: 3s
warmup: 500ms
cluster: {gpus: 6}
epoch: {interval: 1s, parts: 2, model_load_time: 50ms}
models:
  - {name: ResNet50, profile: zoo:1080ti/ResNet50, rate: 60}
  - {name: MobileNet, profile: zoo:1080ti/MobileNet, rate: 40}
  - {name: VGG16, profile: zoo:1080ti/VGG16, rate: 30}
  - {name: InceptionV3, profile: zoo:1080ti/InceptionV3, rate: 50}
`

func writeLiveWorkload(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "live.yaml")
	if err := os.WriteFile(p, []byte(liveWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// `symphony demo --controller` runs the workload on the live control
// plane: the report carries the epochs the controller carried out, and
// every request ends once.
func TestDemoControllerReportsEpochs(t *testing.T) {
	code, out, stderr := runCLI(t, "demo", "-f", writeLiveWorkload(t), "--controller", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		demoReport
		Epochs []struct {
			Start    float64 `json:"start"`
			GPUs     int     `json:"gpus"`
			PartGPUs []int   `json:"part_gpus"`
		} `json:"epochs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	checkReport(t, r.demoReport, 3, "ResNet50", "MobileNet", "VGG16", "InceptionV3")
	// No test of failures here: on a loaded machine a GPU may stall (the
	// default stall timeout is the SLO or 100ms) and fail its requests;
	// bench/cluster's live tests check that moves fail none.
	if r.Policy != "symphony (live, controller)" {
		t.Errorf("policy %q", r.Policy)
	}
	// The first epoch placed the models before the load began; at least
	// two more ran during its 3.5 seconds.
	if len(r.Epochs) < 3 {
		t.Fatalf("%d epochs in a 3.5s run with 1s epochs", len(r.Epochs))
	}
	for _, e := range r.Epochs {
		sum := 0
		for _, n := range e.PartGPUs {
			sum += n
		}
		if len(e.PartGPUs) != 2 || sum != e.GPUs || e.GPUs < 2 || e.GPUs > 6 {
			t.Errorf("epoch at %.1fs: %d GPUs in parts %v; want 2 parts, within the pool of 6", e.Start, e.GPUs, e.PartGPUs)
		}
	}
	for _, want := range []string{"live control plane on embedded etcd", "epochs;", "part 1's scheduler"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

func TestDemoControllerFlagErrors(t *testing.T) {
	wl, plain := writeLiveWorkload(t), writeSweepWorkload(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-f", plain, "--controller"}, "needs a workload with an epoch section"},
		{[]string{"demo", "-f", wl, "--controller", "--sweep", "1,2"}, "runs the workload once"},
		{[]string{"demo", "-f", wl, "--controller", "--http-addr", "127.0.0.1:0"}, "serves no gateway yet"},
		{[]string{"demo", "-f", wl, "--autoscale"}, "--autoscale needs --controller"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// With --autoscale the pool starts at a backend per part plus the warm
// pool, and the controller's autoscaler starts more as the parts want
// them: by the end more than the first three have registered.
func TestDemoControllerAutoscale(t *testing.T) {
	code, out, stderr := runCLI(t, "demo", "-f", writeLiveWorkload(t), "--controller", "--autoscale",
		"--boot-delay", "200ms", "--warm-pool", "1", "--scale-in-delay", "10s", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		demoReport
		Epochs []struct {
			GPUs int `json:"gpus"`
		} `json:"epochs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if !r.addUp() {
		t.Errorf("ends %+v: want every request ended once", r.demoEnds)
	}
	if !strings.Contains(stderr, "an elastic pool of one-GPU backends, 3 up to 6") {
		t.Errorf("stderr does not announce the elastic pool:\n%s", stderr)
	}
	// The first epoch had the 3 backends up; a later one more.
	if len(r.Epochs) < 3 || r.Epochs[0].GPUs > 3 {
		t.Fatalf("epochs %+v: want the first on at most 3 GPUs, and more epochs after it", r.Epochs)
	}
	grew := false
	for _, e := range r.Epochs[1:] {
		grew = grew || e.GPUs > r.Epochs[0].GPUs
	}
	if !grew {
		t.Errorf("epochs %+v: the pool never grew past the first epoch's %d GPUs", r.Epochs, r.Epochs[0].GPUs)
	}
}

// --seed overrides the workload's seed for a live run, as sim --seed does:
// the report says which arrivals it ran.
func TestDemoSeedOverride(t *testing.T) {
	code, out, stderr := runCLI(t, shortRun("demo", "-f", writeSweepWorkload(t), "--seed", "5", "--json", "--quiet")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		Seed uint64 `json:"seed"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Seed != 5 {
		t.Errorf("seed %d (%v), want 5", r.Seed, err)
	}
}
