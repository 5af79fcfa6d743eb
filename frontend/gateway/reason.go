package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/symphony-serving/symphony/frontend"
)

// Reasons are the machine-readable "reason" field of every error body, next
// to the protocol's human-readable "error": clients branch on them instead
// of parsing messages, and a Go client turns them back into the frontend
// package's typed errors with ResponseError, so that a load generator
// reports the same outcome names through the gateway as through an
// embedded client.
const (
	ReasonBadRequest    = "bad request"        // malformed request (400)
	ReasonTooLarge      = "body too large"     // over Config.MaxBodyBytes (413)
	ReasonReadTimeout   = "read timeout"       // the body did not arrive within Config.ReadTimeout (408)
	ReasonNotFound      = "not found"          // no such endpoint (404)
	ReasonMethod        = "method not allowed" // wrong method on a known path (405)
	ReasonUnknownModel  = "unknown model"      // frontend.ErrUnknownModel (404)
	ReasonNotConnected  = "not connected"      // frontend.ErrNotConnected (503)
	ReasonSchedulerLost = "scheduler lost"     // frontend.ErrSchedulerLost (503)
	ReasonClosed        = "closed"             // frontend.ErrClosed (503)
	ReasonBadDeadline   = "bad deadline"       // frontend.ErrBadDeadline (400)
	ReasonBadInput      = "bad input"          // frontend.ErrBadInput (400)
	ReasonRefused       = "refused"            // frontend.ErrRefused (500)
	ReasonNotLoaded     = "model not loaded"   // frontend.ErrModelNotLoaded (503)
	ReasonControl       = "model control"      // frontend.ErrControl: a load or unload refused or failed (400)
	ReasonNoRepo        = "no repository"      // the Inferer has no Repository (501)
	ReasonTimeout       = "timeout"            // the request's own timeout expired with no drop reported (504)
	ReasonInternal      = "internal"           // anything else (500)

	// ReasonDropPrefix starts the reason of a request that ended without
	// running: "drop: " and its frontend.DropReason ("drop: overload").
	ReasonDropPrefix = "drop: "
	// ReasonBackend is the reason of a frontend.BackendError, followed by
	// ": " and its cause's kind when it has one ("backend: input
	// unavailable"), as the load generator's reports name them.
	ReasonBackend = "backend"
)

// DropBusy is the gateway's own drop reason: a request it turned away at
// its MaxConnections or MaxInFlight cap. The frontend never reports it; it
// is a drop reason so that clients and reports count such requests among
// the drops, as the overload they are, under a name of their own.
const DropBusy frontend.DropReason = "gateway busy"

// errorBody is the protocol's error object with the gateway's reason.
type errorBody struct {
	Error  string `json:"error"`
	Reason string `json:"reason,omitempty"`
}

// classify maps an Infer error (or a model control's, repository.go) to
// its status code, whether a Retry-After hint fits (the condition
// passes), and its reason. ctx is the request's
// context, whose state tells a request that timed out (504) from one whose
// caller left (499); ownDeadline says that the request's own timeout was
// shorter than its model's SLO, so that a deadline drop means the timeout
// the caller chose could not be met, not that the cluster is short of time.
func classify(ctx context.Context, err error, ownDeadline bool) (status int, retry bool, reason string) {
	var be *frontend.BackendError
	switch {
	case errors.Is(err, frontend.ErrUnknownModel):
		return http.StatusNotFound, false, ReasonUnknownModel
	case errors.Is(err, frontend.ErrModelNotLoaded):
		// Served but not loaded: unavailable, as Triton answers, until
		// someone loads it; no Retry-After, since waiting alone won't do.
		return http.StatusServiceUnavailable, false, ReasonNotLoaded
	case errors.Is(err, frontend.ErrControl):
		return http.StatusBadRequest, false, ReasonControl
	case errors.Is(err, frontend.ErrNotConnected):
		return http.StatusServiceUnavailable, true, ReasonNotConnected
	case errors.Is(err, frontend.ErrSchedulerLost):
		return http.StatusServiceUnavailable, true, ReasonSchedulerLost
	case errors.Is(err, frontend.ErrClosed):
		return http.StatusServiceUnavailable, false, ReasonClosed
	case errors.Is(err, frontend.ErrBadInput):
		return http.StatusBadRequest, false, ReasonBadInput
	case errors.Is(err, frontend.ErrBadDeadline):
		return http.StatusBadRequest, false, ReasonBadDeadline
	case errors.Is(err, frontend.ErrRefused):
		return http.StatusInternalServerError, false, ReasonRefused
	case errors.As(err, &be):
		reason = ReasonBackend
		if kind, _, _ := strings.Cut(be.Cause, ":"); kind != "" {
			reason += ": " + kind
		}
		return http.StatusBadGateway, false, reason
	}
	if drop, ok := frontend.IsDrop(err); ok {
		reason = ReasonDropPrefix + string(drop)
		switch drop {
		case frontend.DropCanceled:
			status, retry = canceledStatus(ctx)
			return status, retry, reason
		case frontend.DropDeadline:
			if ownDeadline || ctx.Err() == context.DeadlineExceeded {
				return http.StatusGatewayTimeout, false, reason
			}
			return http.StatusServiceUnavailable, true, reason
		case frontend.DropExpired:
			// The deadline passed without an answer: the gateway timed
			// out waiting on the cluster. Retrying the same deadline is
			// no likelier to be answered.
			return http.StatusGatewayTimeout, false, reason
		case frontend.DropOverload, frontend.DropShutdown, DropBusy:
			return http.StatusServiceUnavailable, true, reason
		}
		return http.StatusServiceUnavailable, false, reason
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		status, retry = canceledStatus(ctx)
		return status, retry, ReasonTimeout
	case errors.Is(err, context.Canceled):
		status, retry = canceledStatus(ctx)
		return status, retry, ReasonDropPrefix + string(frontend.DropCanceled)
	}
	return http.StatusInternalServerError, false, ReasonInternal
}

// canceledStatus is the status of a request that ended because a context
// ended: 504 if its own timeout expired, 499 (nothing written) if its
// caller left, and 503 if neither, when something else canceled it.
func canceledStatus(ctx context.Context) (int, bool) {
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return http.StatusGatewayTimeout, false
	case context.Canceled:
		return statusClientGone, false
	}
	return http.StatusServiceUnavailable, false
}

// StatusError is an error answer that maps to none of the frontend
// package's errors: the gateway's own refusals (a malformed request, a
// body too large or too slow, a wrong path) and answers without a reason.
type StatusError struct {
	Status  int    // the HTTP status code
	Reason  string // the body's reason; "" if it had none
	Message string // the body's error message, or the body itself if it was not an error object
}

func (e *StatusError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("gateway: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("gateway: HTTP %d (%s): %s", e.Status, e.Reason, e.Message)
}

// ParseErrorBody reads an error answer's body: the protocol's message and
// the gateway's reason ("" from a server that gives none). ok is false when
// the body is not an error object, so that a client can quote it whole
// instead. Clients that want the reason itself, not only the typed error
// ResponseError maps it to, read it here rather than decode the body
// their own way.
func ParseErrorBody(body []byte) (message, reason string, ok bool) {
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		return "", "", false
	}
	return eb.Error, eb.Reason, true
}

// ResponseError is the error a client of the gateway should see for an
// error answer: the status and body of a response that was not 200, for a
// request for model. It reads the body's reason and returns the frontend
// package's typed error the gateway reported (a *frontend.DropError with
// its reason, a *frontend.BackendError with its cause's kind,
// frontend.ErrSchedulerLost, ...), so that callers and reports classify a
// remote request as they would an embedded one; anything else is a
// *StatusError. It never fails on a malformed body.
func ResponseError(model string, status int, body []byte) error {
	msg, reason, ok := ParseErrorBody(body)
	if !ok {
		return &StatusError{Status: status, Message: strings.TrimSpace(string(body))}
	}
	if err := reasonError(model, reason, msg); err != nil {
		return err
	}
	return &StatusError{Status: status, Reason: reason, Message: msg}
}

// reasonError is the frontend package's typed error that an error
// answer's reason stands for, with the answer's message; nil for a reason
// with none (a malformed request, a body too large, ...).
func reasonError(model, reason, msg string) error {
	if drop, ok := strings.CutPrefix(reason, ReasonDropPrefix); ok {
		return &frontend.DropError{Model: model, Reason: frontend.DropReason(drop)}
	}
	if reason == ReasonBackend {
		return &frontend.BackendError{Model: model}
	}
	if kind, ok := strings.CutPrefix(reason, ReasonBackend+": "); ok {
		return &frontend.BackendError{Model: model, Cause: kind + ": " + msg}
	}
	switch reason {
	case ReasonUnauthenticated:
		return fmt.Errorf("%w: %s", ErrUnauthenticated, msg)
	case ReasonUnknownModel:
		return fmt.Errorf("%w %q", frontend.ErrUnknownModel, model)
	case ReasonNotLoaded:
		return fmt.Errorf("%w: %s", frontend.ErrModelNotLoaded, msg)
	case ReasonControl:
		return fmt.Errorf("%w: %s", frontend.ErrControl, msg)
	case ReasonNotConnected:
		return frontend.ErrNotConnected
	case ReasonSchedulerLost:
		return frontend.ErrSchedulerLost
	case ReasonClosed:
		return frontend.ErrClosed
	case ReasonBadDeadline:
		return fmt.Errorf("%w: %s", frontend.ErrBadDeadline, msg)
	case ReasonBadInput:
		return fmt.Errorf("%w: %s", frontend.ErrBadInput, msg)
	case ReasonRefused:
		return fmt.Errorf("%w: %s", frontend.ErrRefused, msg)
	case ReasonTimeout:
		return fmt.Errorf("gateway: %s: %w", msg, context.DeadlineExceeded)
	}
	return nil
}
