package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
)

// TestGPUTypeAndConcurrency: models pinned to gpu_types, with a
// concurrency, parse; every misuse is refused with a message that says
// what is wrong.
func TestGPUTypeAndConcurrency(t *testing.T) {
	const cluster = "cluster: {gpu_types: [{name: x, count: 1, price_per_hour: 2}, {name: y, count: 2, price_per_hour: 3}]}\n"
	w, err := Parse([]byte(cluster+`models:
  - {name: a, gpu_type: x, concurrency: 2, profile: {alpha: 0s, beta: 9ms, max_batch: 4}, slo: 50ms, rate: 60}
  - {name: b, gpu_type: y, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a := w.Models[0]; a.GPUType != "x" || a.Concurrency != 2 || a.Occupancy(4) != a.Profile.Latency(4)/2 {
		t.Errorf("model a: gpu_type %q, concurrency %d, occupancy %v of %v", a.GPUType, a.Concurrency, a.Occupancy(4), a.Profile.Latency(4))
	}
	if !w.Pinned() || !w.Concurrent() || w.Cluster.CostPerHour() != 8 {
		t.Errorf("pinned %v, concurrent %v, cost %v per hour (want 8)", w.Pinned(), w.Concurrent(), w.Cluster.CostPerHour())
	}
	if first, n := w.Cluster.GPUsOfType("y"); first != 1 || n != 2 {
		t.Errorf("GPUs of y: %d from %d, want 2 from 1", n, first)
	}
	for _, c := range []struct{ models, want string }{
		{"  - {name: a, gpu_type: z, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n", `no gpu_type named "z" in the cluster (it lists x, y)`},
		{"  - {name: a, concurrency: 0, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n", "concurrency"},
		{"  - {name: a, concurrency: 2000, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n", "concurrency"},
		{"  - {name: a, gpu_type: x, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n  - {name: b, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n", "give every model a gpu_type or none"},
		{"  - {name: a, gpu_type: [x], profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n", "gpu_type"},
	} {
		_, err := Parse([]byte(cluster+"models:\n"+c.models), "w.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.models, err, c.want)
		}
	}
	_, err = Parse([]byte(cluster+"epoch: {interval: 1s}\nmodels:\n  - {name: a, concurrency: 2, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n"), "w.yaml")
	if err == nil || !strings.Contains(err.Error(), "epoch job places models itself") {
		t.Errorf("concurrency under an epoch job: %v", err)
	}
}

// TestStreamDispatch: models that share a stream get its arrivals in runs
// of their stream_batch, in their rates' shares, at the stream's rate.
func TestStreamDispatch(t *testing.T) {
	w, err := Parse([]byte(`seed: 3
duration: 100s
cluster: {gpus: 1}
models:
  - {name: a, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 30, arrival: const, stream: s, stream_batch: 4}
  - {name: b, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 70, arrival: const, stream: s, stream_batch: 8}
  - {name: c, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 5}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g := NewGenerator(w, 100*time.Second)
	counts := make([]int, 3)
	var runs [][2]int // (model, length) of each run of a or b
	var lastStream scheduler.Time
	gaps := 0
	for {
		m, at, ok := g.Peek()
		if !ok {
			break
		}
		g.Pop()
		counts[m]++
		if m == 2 {
			continue
		}
		if n := len(runs); n > 0 && runs[n-1][0] == m {
			runs[n-1][1]++
		} else {
			runs = append(runs, [2]int{m, 1})
		}
		if lastStream > 0 && at.Sub(lastStream) != 10*time.Millisecond {
			gaps++
		}
		lastStream = at
	}
	if a, b := counts[0], counts[1]; a < 2990 || a > 3010 || b < 6990 || b > 7010 {
		t.Errorf("a got %d, b %d of the stream's 10000; want 3000 and 7000", a, b)
	}
	if c := counts[2]; c < 400 || c > 600 {
		t.Errorf("c, outside the stream, got %d, want about 500", c)
	}
	for i, r := range runs[:len(runs)-1] {
		if want := []int{4, 8}[r[0]]; r[1]%want != 0 {
			t.Fatalf("run %d: %d arrivals to model %d, not a multiple of its stream_batch %d", i, r[1], r[0], want)
		}
	}
	if gaps > 0 {
		t.Errorf("%d gaps in the stream other than 10 ms: a constant stream at 100 req/s", gaps)
	}
	for _, bad := range []struct{ models, want string }{
		{"  - {name: a, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1, stream_batch: 2}\n", "stream_batch without a stream"},
		{"  - {name: a, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rates: [{duration: 1s, rate: 1}, {rate: 2}], stream: s}\n", "one constant rate"},
		{"  - {name: a, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1, stream: s}\n  - {name: b, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1, stream: s, arrival: const}\n", "arrival process"},
		{"  - {name: a, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1, stream: s, stream_batch: 0}\n", "stream_batch"},
	} {
		if _, err := Parse([]byte("cluster: {gpus: 1}\nmodels:\n"+bad.models), "s.yaml"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want one saying %q", bad.models, err, bad.want)
		}
	}
}
