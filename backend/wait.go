package backend

import (
	"context"
	"runtime"
	"time"
)

// timerSlack is how late a Go timer may fire here: the runtime's poller
// sleeps in whole milliseconds, so a short timer fires up to ~1ms late.
const timerSlack = 1500 * time.Microsecond

// waitUntil returns at t (not before), or false if ctx ends first. It
// sleeps on a timer until timerSlack before t, then yields the processor in
// a loop for the rest: a batch must start no earlier than its exec_at, and
// a late start eats into a deadline the scheduler budgeted to the
// microsecond. The yielding loop lasts at most timerSlack per wait.
func waitUntil(ctx context.Context, t time.Time) bool {
	if d := time.Until(t) - timerSlack; d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return false
		}
	}
	for time.Now().Before(t) {
		if ctx.Err() != nil {
			return false
		}
		runtime.Gosched()
	}
	return true
}
