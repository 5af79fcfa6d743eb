package ratelog

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestSampledLoggerPassesABurstAndCountsTheRest(t *testing.T) {
	var buf bytes.Buffer
	var suppressed atomic.Uint64
	log := New(zerolog.New(&buf), &suppressed)
	for i := range 100 {
		log.Warn().Int("i", i).Msg("results not delivered")
	}
	if n := strings.Count(buf.String(), "\n"); n != DefaultBurst {
		t.Errorf("%d lines logged, want the burst of %d", n, DefaultBurst)
	}
	if suppressed.Load() != 100-DefaultBurst {
		t.Errorf("suppressed %d, want %d", suppressed.Load(), 100-DefaultBurst)
	}
	// A new period passes a new burst.
	quick := NewSampler(2, time.Millisecond, nil)
	l2 := zerolog.New(&buf).Sample(quick)
	buf.Reset()
	for range 3 {
		l2.Warn().Msg("x")
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && strings.Count(buf.String(), "\n") < 3 {
		l2.Warn().Msg("x") // the period ends by itself; no event marks it
	}
	if strings.Count(buf.String(), "\n") < 3 {
		t.Error("no line passed in a later period")
	}
}
