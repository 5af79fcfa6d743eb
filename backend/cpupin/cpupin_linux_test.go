package cpupin

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func affinity(t *testing.T, tid int) unix.CPUSet {
	t.Helper()
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReserveAndPin: after Reserve, no thread of the process may run on
// the reserved CPU; a pinned goroutine's thread runs there and only there.
func TestReserveAndPin(t *testing.T) {
	start := affinity(t, 0)
	if start.Count() < 2 {
		t.Skipf("needs two CPUs, the process may use %d", start.Count())
	}
	cpu := -1
	for c := MaxCPU; c >= 0 && cpu < 0; c-- {
		if start.IsSet(c) {
			cpu = c
		}
	}
	if err := Reserve([]int{cpu}); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		var s unix.CPUSet
		if unix.SchedGetaffinity(tid, &s) != nil {
			continue // gone since
		}
		if s.IsSet(cpu) || s.Count() != start.Count()-1 {
			t.Fatalf("after Reserve(%d), thread %d may run on %v", cpu, tid, s)
		}
	}
	pinned := make(chan unix.CPUSet)
	errs := make(chan error, 1)
	go func() {
		if err := Pin(cpu); err != nil {
			errs <- err
			return
		}
		var s unix.CPUSet
		errs <- unix.SchedGetaffinity(0, &s)
		pinned <- s
	}()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if s := <-pinned; s.Count() != 1 || !s.IsSet(cpu) {
		t.Fatalf("the pinned thread may run on %v, want CPU %d alone", s, cpu)
	}
}

func TestReserveRefuses(t *testing.T) {
	all := affinity(t, 0)
	var every []int
	for c := 0; c <= MaxCPU; c++ {
		if all.IsSet(c) {
			every = append(every, c)
		}
	}
	if err := Reserve(every); err == nil || !strings.Contains(err.Error(), "leaves none") {
		t.Errorf("Reserve(every CPU) = %v, want an error that none is left", err)
	}
	outside := -1
	for c := 0; c <= MaxCPU && outside < 0; c++ {
		if !all.IsSet(c) {
			outside = c
		}
	}
	if err := Reserve([]int{outside}); err == nil || !strings.Contains(err.Error(), "not one this process may run on") {
		t.Errorf("Reserve([%d]) = %v, want an error naming a CPU the process may not use", outside, err)
	}
	if s := affinity(t, 0); s != all {
		t.Errorf("a refused Reserve changed this thread's CPUs: %v, was %v", s, all)
	}
}
