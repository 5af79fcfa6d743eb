package frontend

import (
	"errors"
	"fmt"
)

// The errors an Infer call can end with. Every request ends exactly once:
// with its output, or with one of these. Test them with errors.Is and
// errors.As; the gateway maps them to HTTP status codes.
var (
	// ErrNotConnected: the frontend has no live connection to the
	// scheduler of the request's model, so the request was never queued.
	ErrNotConnected = errors.New("frontend: not connected to the scheduler")
	// ErrUnknownModel: the scheduler serves no model of that name.
	ErrUnknownModel = errors.New("frontend: unknown model")
	// ErrClosed: the client was closed before the request ended.
	ErrClosed = errors.New("frontend: client closed")
	// ErrBadDeadline: the request asked for a deadline that has already
	// passed, or a longer one than the model's SLO allows.
	ErrBadDeadline = errors.New("frontend: bad deadline")
	// ErrRefused: the scheduler refused the request's descriptor. This
	// client only sends deadlines within the model's SLO, so the cause is
	// a clock skew between the frontend's host and the scheduler's: a
	// fault of the deployment, not of the caller.
	ErrRefused = errors.New("frontend: the scheduler refused the request")
	// ErrSchedulerLost: the connection to the scheduler closed while the
	// request was waiting, and no result came by its deadline. The
	// scheduler forgets a departed frontend's queued requests and the
	// backends stop delivering to it, so only a batch that was already
	// running can still answer; the request waits for that until its
	// deadline, no longer.
	ErrSchedulerLost = errors.New("frontend: lost the scheduler connection before the request was answered")
	// ErrBadInput: the request's input cannot be sent: it is larger than
	// the protocol carries (wire.MaxInputSize), or the preprocessor gave
	// a negative size for it. The caller's fault, not the cluster's.
	ErrBadInput = errors.New("frontend: bad input")
)

// DropReason says why the scheduler (or the frontend on its behalf) ended a
// request without running it.
type DropReason string

const (
	// DropDeadline: no GPU could run the request early enough to meet
	// its deadline.
	DropDeadline DropReason = "deadline"
	// DropOverload: the request was shed under overload so that the
	// batch behind it could keep its size.
	DropOverload DropReason = "overload"
	// DropShutdown: the scheduler stopped while the request was queued.
	DropShutdown DropReason = "shutdown"
	// DropCanceled: the caller's context was canceled while the request
	// was queued.
	DropCanceled DropReason = "canceled"
	// DropExpired: the request's deadline passed without an answer: its
	// result came too late, or not at all (a backend that stopped, say).
	// The frontend ends every request by its deadline.
	DropExpired DropReason = "expired"
)

// DropError is a request that ended without running, and why.
type DropError struct {
	Model  string
	Reason DropReason
}

func (e *DropError) Error() string {
	return fmt.Sprintf("frontend: request for %q dropped: %s", e.Model, e.Reason)
}

// IsDrop reports whether err is a drop, and if so its reason.
func IsDrop(err error) (DropReason, bool) {
	var d *DropError
	if errors.As(err, &d) {
		return d.Reason, true
	}
	return "", false
}

// BackendError is a request that was sent to a GPU but did not come back
// with a result: its inputs could not be pulled in time, the executor
// failed, or the backend was lost mid-batch.
type BackendError struct {
	Model   string
	Backend string
	Cause   string
}

func (e *BackendError) Error() string {
	if e.Backend == "" {
		return fmt.Sprintf("frontend: request for %q failed on its backend: %s", e.Model, e.Cause)
	}
	return fmt.Sprintf("frontend: request for %q failed on backend %s: %s", e.Model, e.Backend, e.Cause)
}

// Outcome is how a request ended, as metrics count it: success, drop or
// failure.
type Outcome string

// The outcomes of a request.
const (
	OutcomeSuccess Outcome = "success"
	OutcomeDrop    Outcome = "drop"
	OutcomeFailure Outcome = "failure"
)

// Classify names how a call that ended with err ended: its outcome, and
// for a drop its DropReason, for a failure one word for its cause
// (backend, not_connected, unknown_model, not_loaded, closed,
// bad_deadline, refused, scheduler_lost, bad_input, store_full, other). The words are metric labels: a small,
// fixed set.
func Classify(err error) (Outcome, string) {
	if err == nil {
		return OutcomeSuccess, ""
	}
	if r, ok := IsDrop(err); ok {
		return OutcomeDrop, string(r)
	}
	var be *BackendError
	switch {
	case errors.As(err, &be):
		return OutcomeFailure, "backend"
	case errors.Is(err, ErrNotConnected):
		return OutcomeFailure, "not_connected"
	case errors.Is(err, ErrUnknownModel):
		return OutcomeFailure, "unknown_model"
	case errors.Is(err, ErrClosed):
		return OutcomeFailure, "closed"
	case errors.Is(err, ErrBadDeadline):
		return OutcomeFailure, "bad_deadline"
	case errors.Is(err, ErrRefused):
		return OutcomeFailure, "refused"
	case errors.Is(err, ErrSchedulerLost):
		return OutcomeFailure, "scheduler_lost"
	case errors.Is(err, ErrBadInput):
		return OutcomeFailure, "bad_input"
	case errors.Is(err, ErrModelNotLoaded):
		return OutcomeFailure, "not_loaded"
	case errors.Is(err, ErrStoreFull):
		return OutcomeFailure, "store_full"
	}
	return OutcomeFailure, "other"
}
