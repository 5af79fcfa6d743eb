package workload

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics on any input, that whatever it
// accepts is a valid workload, and that every rejection is an *Error or
// Validate's error rather than something unexplained.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed workloads in %s: %v", examplesDir, err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"---\n",
		"[1, 2",
		"cluster: {gpus: 1}\nmodels: &m [*m]\n",
		"cluster: &c {<<: *c}\n",
		"cluster: {gpus: 1}\nmodels:\n  - &m {name: a, profile: &p {alpha: 1ms, beta: 1ms}, slo: 1s, rate: 1}\n  - {<<: *m, name: b}\n",
		"cluster: {gpus: 1}\nzoo: {profiles: 1080ti, count: 70, total_rates: [{duration: 1s, rate: 5}, {rate: 1}], popularity: zipf:2, slo_scale: 0.5}\n",
		"cluster: {gpu_types: [{name: a, count: 2, memory: 1.5GiB, price_per_hour: 1}]}\nmodels:\n  - {name: m, profile: {batch_latency: [1ms, 2ms]}, slo: 9ms, rates: [{duration: 1s, rate: 1}], arrival: gamma:0.1}\n",
		"cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: zoo:a100/BERT, rate_trace: trace.csv}\n",
		"seed: 18446744073709551616\n",
		"duration: 9223372036854775807ns\nwarmup: 1ns\n",
		"cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: {alpha: 1h, beta: 1h, max_batch: 65536}, slo: 1s, rate: 1}\n",
		"cluster: {gpu_types: [{name: x, count: 1, price_per_hour: 2}, {name: y, count: 2}]}\nmodels:\n  - {name: a, gpu_type: x, concurrency: 2, profile: {alpha: 0s, beta: 9ms, max_batch: 4}, slo: 50ms, rate: 60, arrival: const}\n  - {name: b, gpu_type: y, profile: {alpha: 1ms, beta: 2ms}, slo: 1s, rate: 1}\n",
	} {
		f.Add([]byte(s))
	}
	// Relative rate_trace paths resolve next to the examples, so seeds that
	// name trace.csv load it.
	source := filepath.Join(examplesDir, "fuzz.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := Parse(data, source)
		if err != nil {
			if w != nil {
				t.Fatalf("Parse returned both a workload and %v", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := w.Validate(); err != nil {
			t.Fatalf("Parse accepted a workload that fails Validate: %v", err)
		}
		if w.Source != source || w.NexusFrontends < 1 || w.Cluster.GPUs < 1 {
			t.Fatalf("bad workload: %+v", w)
		}
		if w.Warmup+w.Duration < w.Duration {
			t.Fatalf("duration %v + warmup %v overflows", w.Duration, w.Warmup)
		}
		if len(w.Cluster.GPUTypes) > 0 {
			sum := 0
			for _, g := range w.Cluster.GPUTypes {
				sum += g.Count
			}
			if sum != w.Cluster.GPUs {
				t.Fatalf("gpu_types add up to %d, gpus is %d", sum, w.Cluster.GPUs)
			}
		}
		for _, m := range w.Models {
			if m.StaticMemory < 0 || m.DynamicMemory < 0 || m.Profile.MaxBatch() < 1 || m.Profile.Latency(1) <= 0 {
				t.Fatalf("model %+v", m)
			}
			for i, p := range m.Rates {
				if math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) {
					t.Fatalf("model %s: rate %g", m.Name, p.Rate)
				}
				if p.Duration == 0 && i != len(m.Rates)-1 {
					t.Fatalf("model %s: phase %d of %d lasts 0", m.Name, i, len(m.Rates))
				}
			}
			if r := m.MeanRate(w.Warmup, w.Warmup+w.Duration); math.IsNaN(r) || r < 0 {
				t.Fatalf("model %s: mean rate %g", m.Name, r)
			}
		}
	})
}

// FuzzParseRateTrace checks that ParseRateTrace never panics and returns
// only phases of one second (or all of one minute, under a minute header)
// with finite, non-negative rates.
func FuzzParseRateTrace(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join(examplesDir, "trace.csv")); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"", "rate\n1\n", "second,rate\n0,1\n1,2\n", "1,1\n2,2\n4,4\n", "5\n-1\n", "NaN\n", "1e999\n",
		"# c\n\n 3 , 4 \r\n", "a,b\n", "1,2,3\n", "0x10\n", "1_000\n", ",\n",
		"# day\nminute,rate\n0,1.5\n1,2\n", "minute,rate\n1,1\n3,2\n", "minute\n5\n", "MINUTE,rate\n0,1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ph, err := ParseRateTrace(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			if ph != nil {
				t.Fatalf("phases and error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(ph) == 0 || len(ph) > MaxTraceRows {
			t.Fatalf("%d phases", len(ph))
		}
		for _, p := range ph {
			if (p.Duration != time.Second && p.Duration != time.Minute) || p.Duration != ph[0].Duration || !(p.Rate >= 0) || math.IsInf(p.Rate, 0) {
				t.Fatalf("phase %+v", p)
			}
		}
	})
}
