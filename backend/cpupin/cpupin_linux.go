package cpupin

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Supported says whether this platform can pin threads.
const Supported = true

// Reserve keeps every thread of the process off cpus, so that the threads
// later pinned to them (Pin) have them alone. It fails, changing nothing,
// unless each of cpus is one the process may run on and at least one such
// CPU is left for the other threads. Threads the process starts later
// inherit the mask from the thread that starts them; the Go runtime starts
// its threads from unpinned ones.
//
// It keeps GOMAXPROCS where it was. The runtime would lower it to the CPUs
// left to the process's threads (on a 2-core machine, to 1), yet each
// pinned thread needs a P of its own whenever it runs Go code between two
// batches: with one P fewer, the pinned threads and the network
// goroutines take turns at the same Ps.
func Reserve(cpus []int) error {
	// A positive value also stops the runtime's own updates of it.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return fmt.Errorf("cpupin: the process's CPUs: %w", err)
	}
	others := allowed
	for _, c := range cpus {
		if !allowed.IsSet(c) {
			return fmt.Errorf("cpupin: CPU %d is not one this process may run on (%s)", c, cpuList(&allowed))
		}
		others.Clear(c)
	}
	if others.Count() == 0 {
		return fmt.Errorf("cpupin: reserving CPUs %v leaves none of %s for the process's other threads", cpus, cpuList(&allowed))
	}
	// A thread started while the list is read may inherit the old mask:
	// go over the threads until a pass finds none left to move.
	for pass := 0; pass < 5; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("cpupin: the process's threads: %w", err)
		}
		moved := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			var cur unix.CPUSet
			if unix.SchedGetaffinity(tid, &cur) != nil || cur == others {
				continue // gone, or done
			}
			if err := unix.SchedSetaffinity(tid, &others); err != nil && err != unix.ESRCH {
				return fmt.Errorf("cpupin: thread %d: %w", tid, err)
			}
			moved++
		}
		if moved == 0 {
			return nil
		}
	}
	return nil
}

// Pin locks the calling goroutine to its thread and the thread to cpu, for
// good: the goroutine runs there, and nothing else of the process does.
// Call it first thing on the goroutine that runs a GPU's batches.
func Pin(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("cpupin: pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// cpuList writes a CPU set as a list, for messages.
func cpuList(s *unix.CPUSet) string {
	var out []byte
	for c := 0; c <= MaxCPU && len(out) < 200; c++ {
		if s.IsSet(c) {
			if len(out) > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendInt(out, int64(c), 10)
		}
	}
	return "CPUs " + string(out)
}
