package sim

import (
	"fmt"
	"testing"

	"github.com/symphony-serving/symphony/bench/workload"
)

func parseWorkload(t *testing.T, src string) *workload.Workload {
	t.Helper()
	w, err := workload.Parse([]byte(src), "placement.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestConcurrencyDoublesAGPU: a GPU that runs two of a model's batches at
// once serves twice the rate one batch at a time does, and each request
// still takes its batch's whole latency.
func TestConcurrencyDoublesAGPU(t *testing.T) {
	const load = `seed: 1
duration: 20s
warmup: 2s
cluster: {gpus: 1}
models:
  - {name: m, profile: {alpha: 0s, beta: 100ms, max_batch: 1}, slo: 250ms, rate: 18, arrival: const%s}
`
	one, err := Run(parseWorkload(t, sprintf(load, "")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Run(parseWorkload(t, sprintf(load, ", concurrency: 2")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One at a time, a GPU serves 10 of the 18 req/s.
	if one.BadRate < 0.4 {
		t.Errorf("one batch at a time: bad rate %.2f, want about 0.44", one.BadRate)
	}
	if two.BadRate != 0 {
		t.Errorf("two at a time: bad rate %.4f, want 0", two.BadRate)
	}
	if two.LatencyP50 < 100 {
		t.Errorf("two at a time: p50 latency %.1f ms, below the batch's 100 ms", two.LatencyP50)
	}
	// Each batch holds the GPU 50 ms: 18 a second keep it 90% busy.
	if b := two.GPUBusyFraction; b < 0.88 || b > 0.92 {
		t.Errorf("two at a time: GPU busy %.3f, want 0.90", b)
	}
}

// TestGPUTypesPinModels: a model pinned to one GPU type never runs on
// another's GPUs, even when they idle.
func TestGPUTypesPinModels(t *testing.T) {
	const load = `seed: 1
duration: 20s
warmup: 2s
cluster: {gpu_types: [{name: x, count: 1, price_per_hour: 2}, {name: y, count: 1, price_per_hour: 3}]}
models:
  - {name: a, %s profile: {alpha: 0s, beta: 100ms, max_batch: 1}, slo: 250ms, rate: 15, arrival: const}
  - {name: b, %s profile: {alpha: 0s, beta: 100ms, max_batch: 1}, slo: 250ms, rate: 0}
`
	free, err := Run(parseWorkload(t, sprintf(load, "", "")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := Run(parseWorkload(t, sprintf(load, "gpu_type: x,", "gpu_type: y,")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if free.BadRate != 0 {
		t.Errorf("unpinned on two GPUs: bad rate %.4f, want 0", free.BadRate)
	}
	if pinned.BadRate < 0.25 || pinned.GPUBusy[1] != 0 {
		t.Errorf("pinned to x: bad rate %.3f (want about 1/3: x serves 10 of 15 req/s), y busy %.3f (want 0)", pinned.BadRate, pinned.GPUBusy[1])
	}
	if pinned.CostPerHour != 5 {
		t.Errorf("cost %v per hour, want 5", pinned.CostPerHour)
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
