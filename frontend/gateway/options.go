package gateway

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Per-request options, as Triton spells them in an inference request's
// parameters (HTTP and gRPC alike):
//   - timeout_ms, Symphony's, in milliseconds (a fraction allowed);
//   - timeout, Triton's, in microseconds;
//   - priority, Triton's: 0 the default, 1 the highest, larger numbers
//     lower.
//
// The shortest timeout given, of these and X-Symphony-Timeout (or the gRPC
// deadline), bounds the request. A priority becomes the frontend's level
// (PriorityFrom), where a higher level is planned first and dropped last:
// 0 is level 0, the default and lowest, and Triton's p in 1..MaxPriority is
// level 256 − p, so that 1 ranks above 2 and every explicit priority above
// the default.

// MaxPriority is the largest priority the gateway takes: Triton's levels 1
// (highest) to 255.
const MaxPriority = 255

// maxTimeoutUS bounds the timeout parameter as maxTimeoutMS does
// timeout_ms.
const maxTimeoutUS = maxTimeoutMS * 1000

// requestOptions checks and converts an inference request's timeout_ms,
// timeout and priority parameters (nil: not given) into its timeout (0
// for none) and priority level. Each error names the parameter.
func requestOptions(timeoutMS, timeoutUS, priority *float64) (time.Duration, uint8, error) {
	var timeout time.Duration
	if t := timeoutMS; t != nil {
		if !(*t > 0) || *t > maxTimeoutMS {
			return 0, 0, fmt.Errorf("parameter timeout_ms %v is not a positive number of milliseconds", *t)
		}
		timeout = time.Duration(math.Ceil(*t * float64(time.Millisecond)))
	}
	if t := timeoutUS; t != nil {
		if !(*t > 0) || *t > maxTimeoutUS || *t != math.Trunc(*t) {
			return 0, 0, fmt.Errorf("parameter timeout %v is not a positive whole number of microseconds", *t)
		}
		timeout = shorter(timeout, time.Duration(*t)*time.Microsecond)
	}
	var level uint8
	if p := priority; p != nil {
		if !(*p >= 0) || *p > MaxPriority || *p != math.Trunc(*p) {
			return 0, 0, fmt.Errorf("parameter priority %v is not a whole number from 0 (the default) to %d (1 is the highest)", *p, MaxPriority)
		}
		if *p > 0 {
			level = uint8(256 - int(*p))
		}
	}
	return timeout, level, nil
}

// priorityKey is the context key of a request's priority level.
type priorityKey struct{}

// WithPriority returns ctx carrying a request's priority level: how the
// gateway hands an Inferer the level its caller asked for, without a
// parameter that every Inferer must take.
func WithPriority(ctx context.Context, level uint8) context.Context {
	if level == 0 {
		return ctx
	}
	return context.WithValue(ctx, priorityKey{}, level)
}

// PriorityFrom is the priority level ctx carries (WithPriority); 0, the
// default, if none. An Inferer passes it on to the frontend
// (frontend.WithPriority).
func PriorityFrom(ctx context.Context) uint8 {
	level, _ := ctx.Value(priorityKey{}).(uint8)
	return level
}
