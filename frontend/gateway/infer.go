package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/tensor"
)

// An inference request takes the same way through the gateway over HTTP
// and over gRPC: each protocol decodes it into an inferRequest (decode.go,
// grpc_decode.go), run hands it to the frontend under the in-flight cap
// and the request's deadlines, and a failure says what to answer, as an
// HTTP status and reason that the gRPC service maps to its codes
// (grpcCode). endInfer logs and observes it once it has ended.

// failure is how an inference request, or a model control, failed: what
// to answer, and what to log.
type failure struct {
	status int    // the HTTP status; statusClientGone if the caller left
	reason string // the error body's reason (the Reason constants)
	msg    string // the message for the caller
	retry  bool   // a Retry-After hint fits: the condition passes
	client bool   // the caller's mistake, or the caps': logged as bad_request
	err    error  // the error behind it, logged; nil for the caller's mistakes
}

// badRequest is the failure of a request the gateway refuses before it
// runs: a 400 with the message err's.
func badRequest(err error) *failure {
	return &failure{status: http.StatusBadRequest, reason: ReasonBadRequest, msg: err.Error(), client: true}
}

// inferLog is what the log line and the metrics of one inference request
// say of it, filled in as it goes.
type inferLog struct {
	start       time.Time
	model, id   string
	grpc        bool // it came over gRPC
	status      int  // the HTTP status (gRPC: the one its code stands for)
	nIn, nOut   int
	err         error
	clientError string
}

// failed records f as the request's end.
func (l *inferLog) failed(f *failure) {
	l.status, l.err = f.status, f.err
	if f.client {
		l.clientError = f.msg
	}
}

// endInfer logs one debug line for the request (an error line for a 500)
// and calls Config.Observe.
func (g *Gateway) endInfer(l *inferLog) {
	lvl := zerolog.DebugLevel
	if l.status == http.StatusInternalServerError {
		lvl = zerolog.ErrorLevel
	}
	ev := g.cfg.Log.WithLevel(lvl).Str("model", l.model).Str("id", l.id).Int("status", l.status).
		Int("bytes_in", l.nIn).Int("bytes_out", l.nOut).Float64("dur_ms", float64(time.Since(l.start).Microseconds())/1000)
	if l.grpc {
		ev = ev.Str("protocol", "grpc")
	}
	if l.clientError != "" {
		ev = ev.Str("bad_request", l.clientError)
	}
	ev.Err(l.err).Msg("infer")
	if g.cfg.Observe != nil {
		code, served := l.status, l.model
		if code == 0 { // the Inferer panicked; net/http answers 500
			code = http.StatusInternalServerError
		}
		if code != http.StatusOK {
			if _, ok := g.inf.Model(l.model); !ok {
				served = ""
			}
		}
		g.cfg.Observe(served, code, time.Since(l.start))
	}
}

// shorter is the shorter of two timeouts, 0 standing for none.
func shorter(a, b time.Duration) time.Duration {
	if b > 0 && (a == 0 || b < a) {
		return b
	}
	return a
}

// run runs a decoded request for the model l names, info being what the
// Inferer said of it (known: that it serves it), and returns its output
// tensors and batch, or how it failed; it records the outcome in l. ctx
// is the caller's: canceled when it leaves. timeout is the request's own,
// 0 for none. arrived, if set, is called with the moment the request's
// time starts, once it is past the in-flight cap: a slow upload is the
// read timeout's business, not the SLO's.
func (g *Gateway) run(ctx context.Context, l *inferLog, info ModelInfo, known bool, req *inferRequest, timeout time.Duration, arrived func(time.Time)) ([]tensor.Tensor, Batch, *failure) {
	if n := g.stats.InFlight.Add(1); n > int64(g.cfg.MaxInFlight) {
		g.stats.InFlight.Add(-1)
		g.stats.RejectedRequests.Add(1)
		g.busyLog.Warn().Int("max_in_flight", g.cfg.MaxInFlight).Uint64("rejected_total", g.stats.RejectedRequests.Load()).
			Msg("gateway at its in-flight cap: answering inference requests 503 (logged at most every 10s)")
		f := &failure{status: http.StatusServiceUnavailable, reason: ReasonDropPrefix + string(DropBusy),
			msg: fmt.Sprintf("the gateway has its %d requests in flight; retry later", g.cfg.MaxInFlight), retry: true, client: true}
		l.failed(f)
		return nil, Batch{}, f
	}
	defer g.stats.InFlight.Add(-1)
	now := time.Now()
	if arrived != nil {
		arrived(now)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, now.Add(timeout))
		defer cancel()
	}

	var out []byte
	var batch Batch
	var err error
	deadline := g.deadline(now, info.SLO, timeout)
	ctx = WithPriority(ctx, req.Priority)
	if ti, ok := g.inf.(TimedInferer); ok {
		out, batch, err = ti.InferTimed(ctx, l.model, req.Input, deadline)
	} else {
		out, err = g.inf.Infer(ctx, l.model, req.Input, deadline)
	}
	if err != nil {
		f := inferFailure(ctx, timeout, known && timeout > 0 && timeout < info.SLO, err)
		l.failed(f)
		return nil, Batch{}, f
	}
	l.nOut = len(out)
	tensors, err := outputTensors(info.Outputs, req, out)
	if err != nil {
		f := &failure{status: http.StatusInternalServerError, reason: ReasonInternal, msg: "internal error", err: err}
		l.failed(f)
		return nil, Batch{}, f
	}
	l.status = http.StatusOK
	return tensors, batch, nil
}

// inferFailure is the failure of a request that Infer ended with err.
// timeout is the request's own, 0 if it set none, and ownDeadline says it
// was shorter than the model's SLO.
func inferFailure(ctx context.Context, timeout time.Duration, ownDeadline bool, err error) *failure {
	code, retry, reason := classify(ctx, err, ownDeadline)
	msg := err.Error()
	switch {
	case code == http.StatusInternalServerError && reason != ReasonRefused:
		msg = "internal error" // ErrRefused is the one 500 whose cause the caller should read
	case code == http.StatusGatewayTimeout && ctx.Err() != nil:
		msg = fmt.Sprintf("request timed out after %v: %v", timeout, err)
	case code == http.StatusGatewayTimeout && timeout == 0:
		msg = fmt.Sprintf("no answer within the model's SLO: %v", err)
	case code == http.StatusGatewayTimeout:
		msg = fmt.Sprintf("the request's timeout of %v could not be met: %v", timeout, err)
	}
	return &failure{status: code, reason: reason, msg: msg, retry: retry, err: err}
}
