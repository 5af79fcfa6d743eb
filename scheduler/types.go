// Package scheduler is Symphony's centralized batch scheduler: one ModelCore
// per model and one RankCore for the whole (sub-)cluster, as in §4.3-4.5 and
// Appendix C of the Symphony paper.
//
// Both cores are deterministic state machines. They never read a clock, start
// a goroutine or perform I/O: time comes in as an argument, and every decision
// comes back as data (grants, batch plans, drops, the next wake-up time). The
// real-time shell in scheduler/rt drives them with goroutines and Go timers;
// the discrete-event simulator in bench/sim drives the very same code with
// virtual time.
package scheduler

import (
	"fmt"
	"math"
	"time"
)

// Time is a point in time: nanoseconds since the driving clock's epoch. The
// simulator's epoch is the start of the simulation; the real-time shell's is
// the moment it started. A distinct type keeps points in time from being
// confused with durations.
type Time int64

const (
	// Never is later than every real point in time.
	Never Time = math.MaxInt64
	// Past is earlier than every real point in time; it stands for "no
	// constraint" (the paper's -inf), for example a GPU that is already free.
	Past Time = math.MinInt64
)

// Add returns t+d, saturating at Never and Past instead of overflowing.
func (t Time) Add(d time.Duration) Time {
	if t == Never || t == Past {
		return t
	}
	s := t + Time(d)
	if d > 0 && s < t {
		return Never
	}
	if d < 0 && s > t {
		return Past
	}
	return s
}

// Sub returns the duration t-u, saturating instead of overflowing (so that
// Never.Sub(now) is a huge positive duration and Past.Sub(now) a huge
// negative one).
func (t Time) Sub(u Time) time.Duration {
	d := t - u
	if u < 0 && d < t {
		return time.Duration(math.MaxInt64)
	}
	if u > 0 && d > t {
		return time.Duration(math.MinInt64)
	}
	return time.Duration(d)
}

// String prints the time since the epoch, for logs and test failures.
func (t Time) String() string {
	switch t {
	case Never:
		return "never"
	case Past:
		return "past"
	}
	return time.Duration(t).String()
}

// MaxTime returns the later of a and b.
func MaxTime(a, b Time) Time {
	if a > b {
		return a
	}
	return b
}

// MinTime returns the earlier of a and b.
func MinTime(a, b Time) Time {
	if a < b {
		return a
	}
	return b
}

// ModelID names a model within one scheduler. IDs are dense, starting at 0,
// so that cores can index slices with them.
type ModelID uint32

// GPUID names a GPU within one scheduler. IDs are dense, starting at 0.
type GPUID uint32

// RequestID names one inference request. The frontend that created it makes
// it unique together with its FrontendID.
type RequestID uint64

// FrontendID names the frontend that holds a request's input.
type FrontendID uint32

// PlanID names one batch plan sent to a GPU; it is unique per scheduler.
type PlanID uint64

// Request is the task descriptor the scheduler sees: never the input itself,
// only where it lives and when its result is due.
type Request struct {
	ID       RequestID
	Frontend FrontendID
	// Arrival is when the scheduler learned of the request.
	Arrival Time
	// Deadline is when the result must have reached the frontend. It must
	// be a real point in time, not Never: a request without a deadline could
	// never become schedulable under the symphony policy.
	Deadline Time
	// Priority is the request's level within its model's queue: a higher
	// level is planned first and dropped last (ModelCore). 0, the default,
	// is the lowest; a model whose requests all share one level is
	// scheduled exactly as if it had none.
	Priority Priority
}

// Priority is a request's level within its model's queue (Request.Priority).
type Priority uint8

// DropReason says why a request ended without a result.
type DropReason uint8

const (
	// DropDeadline: no GPU could run the request early enough to meet its
	// deadline, even in a batch of one.
	DropDeadline DropReason = iota + 1
	// DropPruned: under overload the request was dropped so that the batch
	// behind it could keep its size (DropWindow).
	DropPruned
	// DropShutdown: the scheduler stopped while the request was queued.
	DropShutdown

	// dropReasons is one past the last reason, for tables indexed by reason.
	dropReasons
)

// DropReasons is the number of drop reasons plus one: an array of this size
// can be indexed by any DropReason.
const DropReasons = int(dropReasons)

// String returns the reason as it appears in reports and errors.
func (r DropReason) String() string {
	switch r {
	case DropDeadline:
		return "deadline"
	case DropPruned:
		return "pruned"
	case DropShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}

// Drop is a request that ended without a result, and why.
type Drop struct {
	Request Request
	Reason  DropReason
}

// Delays are the network delays the scheduler budgets for (Appendix C:
// delay(bs) = d_ctrl + d_data*bs, plus the result's trip back).
type Delays struct {
	// Ctrl is the grant's trip from the scheduler to the backend.
	Ctrl time.Duration
	// DataPerRequest is the time to pull one request's input from its
	// frontend, whatever its size.
	DataPerRequest time.Duration
	// DataPerMiB is the time to pull each MiB of input on top of that:
	// the inverse of the data path's bandwidth. It counts for a model
	// whose input size is known (ForInput); d_data of a model with inputs
	// of s bytes is DataPerRequest + s/MiB × DataPerMiB.
	DataPerMiB time.Duration
	// Result is the result's trip from the backend to the frontend.
	Result time.Duration
}

// ForInput returns the delays of a model whose inputs take bytes each:
// DataPerMiB folded into DataPerRequest (and then zero), so that a batch
// of large inputs is granted early enough for its pulls to finish.
func (d Delays) ForInput(bytes int64) Delays {
	if bytes > 0 && d.DataPerMiB > 0 {
		d.DataPerRequest += time.Duration(float64(d.DataPerMiB) * float64(bytes) / (1 << 20))
	}
	d.DataPerMiB = 0
	return d
}

// Dispatch returns delay(bs): the time from a grant until a batch of bs
// inputs can start on the GPU.
func (d Delays) Dispatch(bs int) time.Duration {
	return d.Ctrl + time.Duration(bs)*d.DataPerRequest
}

// Validate rejects negative delays.
func (d Delays) Validate() error {
	if d.Ctrl < 0 || d.DataPerRequest < 0 || d.DataPerMiB < 0 || d.Result < 0 {
		return fmt.Errorf("scheduler: negative network delay %+v", d)
	}
	return nil
}
