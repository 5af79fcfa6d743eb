package actuate

import (
	"context"
	"errors"
	"time"
)

// Actuator starts and stops GPU backends. It deals in backends, not GPUs,
// because that is the unit a cloud or a cluster manager starts (a VM, a
// pod); Policy converts the controller's GPUs into backends.
//
// Resize only asks: a backend takes a while to boot (a VM, a pod pulling
// its image), and the controller must not stall its epoch waiting for it.
// Size therefore counts the backends asked for and not asked to stop,
// booting ones included; comparing it to a target says whether a request
// is still needed, not whether the backends serve yet (the registry says
// that: a backend serves once it has registered).
type Actuator interface {
	// Size is the number of backends it runs now, booting ones included
	// and stopping ones excluded.
	Size(ctx context.Context) (int, error)
	// Resize asks for n backends, starting or stopping the difference; it
	// returns once the request is made, not once the backends serve.
	Resize(ctx context.Context, n int) error
}

// ErrClosed is returned by an actuator used after Close.
var ErrClosed = errors.New("actuate: actuator closed")

// Clock schedules the Process actuator's boots. Injecting it lets tests
// run boots deterministically, without sleeping.
type Clock interface {
	// AfterFunc calls f in its own goroutine once d has passed, like
	// time.AfterFunc, unless the returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled call of Clock.AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports false if the call already ran or
	// is running.
	Stop() bool
}

// RealClock is the wall clock: time.AfterFunc.
type RealClock struct{}

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
