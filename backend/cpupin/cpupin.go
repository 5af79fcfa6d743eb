// Package cpupin gives an executor's batches CPUs of their own: each GPU's
// runner thread is pinned to one CPU (Pin), and the process's other
// threads are kept off those CPUs (Reserve).
//
// A GPU runs one batch at a time and nothing else. A CPU executor (ONNX
// Runtime on the CPU, backend/onnx) emulates one with a CPU core, and only
// behaves like one when the core is its alone: where the backend's own
// network goroutines, the scheduler or a load generator share the core, the
// kernel preempts the batch for them, its run time spreads far beyond the
// profile's ℓ(b), and the scheduler's plans stop holding
// (docs/benchmarks.md, "The benchmark ResNet", has the figures with and
// without). Triton's host policies pin their CPU instances for the same
// reason.
package cpupin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Parse reads a list of CPU numbers: "1", "2,3", "4-7" or a mix
// ("0,2-3"), in the order given, as taskset -c and cgroups' cpusets write
// them. A CPU may appear only once.
func Parse(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("cpupin: %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, fmt.Errorf("cpupin: %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpupin: %q: range %s runs backwards", s, part)
			}
		}
		for c := a; c <= b; c++ {
			if slices.Contains(cpus, c) {
				return nil, fmt.Errorf("cpupin: %q: CPU %d given twice", s, c)
			}
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// MaxCPU bounds the CPU numbers Parse accepts: the kernel's default
// CPU_SETSIZE, as far as sched_setaffinity(2) reaches through a cpu_set_t.
const MaxCPU = 1023

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > MaxCPU {
		return 0, fmt.Errorf("%q is not a CPU number (0..%d)", s, MaxCPU)
	}
	return n, nil
}
