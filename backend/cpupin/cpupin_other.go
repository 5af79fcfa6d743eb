//go:build !linux

package cpupin

import "errors"

// Supported says whether this platform can pin threads.
const Supported = false

var errUnsupported = errors.New("cpupin: pinning threads to CPUs needs Linux")

// Reserve fails: pinning needs Linux.
func Reserve([]int) error { return errUnsupported }

// Pin fails: pinning needs Linux.
func Pin(int) error { return errUnsupported }
