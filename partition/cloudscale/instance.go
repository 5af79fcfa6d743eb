package cloudscale

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// InstanceType is one kind of cloud instance a policy may launch: GPUs
// of one kind, or a CPU machine. Types differ in how many GPUs they hold,
// their price, how long they take to boot, whether the cloud may take them
// back (spot), and, in a run whose models are pinned to hardware kinds (a
// provision's export: a pipeline's CPU decoder and GPU detector), which
// kind they bring.
type InstanceType struct {
	Name string
	// GPUs is how many GPUs one instance brings to the rank loop.
	GPUs int
	// CPUs, for a CPU machine (GPUs 0), is its vCPUs. It serves CPU
	// modules, which run one input at a time, up to their concurrency at
	// once (at most CPUs), and brings the rank loop one device: the
	// machine.
	CPUs int
	// Hardware is the kind of device the instance brings: the gpu_type of
	// the run's cluster whose models it serves, where each model is pinned
	// to one (an export of `symphony provision`). Empty: the cluster's one
	// kind, to which no model is pinned.
	Hardware string
	// PricePerHour is what one instance costs per hour while billed.
	PricePerHour float64
	// Launch is the time from the launch request to the GPUs serving:
	// boot, container start and model load. It is billed.
	Launch time.Duration
	// BillingMinimum is the least time an instance is billed for
	// (EC2: 60 s), and BillingIncrement the unit billed time is rounded up
	// to (EC2: 1 s; 0 means exact).
	BillingMinimum   time.Duration
	BillingIncrement time.Duration
	// Spot instances may be interrupted by the cloud, after a warning
	// (SpotWarning, EC2: 2 min); InterruptionsPerHour is the rate at which
	// one running spot instance is interrupted (exponential).
	Spot                 bool
	SpotWarning          time.Duration
	InterruptionsPerHour float64
	// Memory is one GPU's memory in bytes; 0: not known, and taken to hold
	// any set of models.
	Memory int64
}

// maxCPUs bounds a CPU machine's vCPUs (the largest EC2 machines have
// a few hundred).
const maxCPUs = 1024

// Devices is how many devices one instance brings to its rank loop: its
// GPUs, or the one CPU machine.
func (t InstanceType) Devices() int {
	if t.GPUs == 0 {
		return 1
	}
	return t.GPUs
}

// Holds reports whether one of the type's GPUs holds bytes of models.
func (t InstanceType) Holds(bytes int64) bool { return t.Memory == 0 || bytes <= t.Memory }

// Validate reports the first invalid field.
func (t InstanceType) Validate() error {
	switch {
	case t.Name == "":
		return errors.New("cloudscale: an instance type needs a name")
	case t.GPUs == 0 && (t.CPUs < 1 || t.CPUs > maxCPUs):
		return fmt.Errorf("cloudscale: instance type %q: a CPU machine (gpus 0) needs cpus in 1..%d, not %d", t.Name, maxCPUs, t.CPUs)
	case t.GPUs != 0 && (t.GPUs < 1 || t.GPUs > 64):
		return fmt.Errorf("cloudscale: instance type %q: gpus %d is outside 1..64", t.Name, t.GPUs)
	case t.GPUs != 0 && t.CPUs != 0:
		return fmt.Errorf("cloudscale: instance type %q: has %d GPUs and %d CPUs; set cpus only for a CPU machine, which serves CPU modules", t.Name, t.GPUs, t.CPUs)
	case !(t.PricePerHour > 0) || math.IsInf(t.PricePerHour, 0):
		return fmt.Errorf("cloudscale: instance type %q: price per hour %v is not a positive number", t.Name, t.PricePerHour)
	case t.Memory < 0:
		return fmt.Errorf("cloudscale: instance type %q: negative memory", t.Name)
	case t.Launch < 0 || t.BillingMinimum < 0 || t.BillingIncrement < 0 || t.SpotWarning < 0:
		return fmt.Errorf("cloudscale: instance type %q: negative duration", t.Name)
	case t.InterruptionsPerHour < 0 || math.IsNaN(t.InterruptionsPerHour) || math.IsInf(t.InterruptionsPerHour, 0):
		return fmt.Errorf("cloudscale: instance type %q: interruptions per hour %v is not a non-negative number", t.Name, t.InterruptionsPerHour)
	case !t.Spot && t.InterruptionsPerHour > 0:
		return fmt.Errorf("cloudscale: instance type %q: only spot instances are interrupted", t.Name)
	}
	return nil
}

// Billed is the time an instance that ran for d is billed for: at least
// the minimum, rounded up to the increment.
func (t InstanceType) Billed(d time.Duration) time.Duration {
	d = max(d, t.BillingMinimum, 0)
	if inc := t.BillingIncrement; inc > 0 && d%inc != 0 {
		d += inc - d%inc
	}
	return d
}

// Cost is what an instance that ran for d costs.
func (t InstanceType) Cost(d time.Duration) float64 {
	return t.PricePerHour * t.Billed(d).Hours()
}

// PricePerGPUHour is the type's price per GPU and hour.
func (t InstanceType) PricePerGPUHour() float64 { return t.PricePerHour / float64(t.GPUs) }

// InstanceID names one instance for the life of a run.
type InstanceID uint64

// Instance is one instance of the fleet as a policy sees it.
type Instance struct {
	ID   InstanceID
	Type int // index into the policy's instance types
	// LaunchedAt is when it was requested; ReadyAt when its GPUs serve (in
	// the future while it boots).
	LaunchedAt, ReadyAt time.Duration
	// InterruptAt is when the cloud takes a warned spot instance back; 0
	// while no warning has come.
	InterruptAt time.Duration
}

// Ready reports whether the instance's GPUs serve at now.
func (in Instance) Ready(now time.Duration) bool { return in.ReadyAt <= now }

// Warned reports whether the cloud announced the instance's interruption.
func (in Instance) Warned() bool { return in.InterruptAt > 0 }

// turnOff times each instance's surplus: an instance is released only
// once it has been surplus to every plan for the turn-off delay (MArk's
// cool-down, Scrooge's turn-off delay), so a dip shorter than the delay
// costs no relaunch.
type turnOff struct {
	delay time.Duration
	since map[InstanceID]time.Duration
}

func newTurnOff(delay time.Duration) turnOff {
	return turnOff{delay: delay, since: map[InstanceID]time.Duration{}}
}

// needed records that the instance serves a plan again, or is released.
func (t turnOff) needed(id InstanceID) { delete(t.since, id) }

// surplus records that the instance is surplus at now and reports whether
// it has been for the whole delay.
func (t turnOff) surplus(id InstanceID, now time.Duration) bool {
	since, ok := t.since[id]
	if !ok {
		since = now
		t.since[id] = since
	}
	return now-since >= t.delay
}
