package profile

import (
	"testing"
	"time"
)

// Exactly linear latencies fit exactly; noisy ones within their noise; a
// curve the line cannot follow keeps its table, made non-decreasing.
func TestFromMeasured(t *testing.T) {
	us := time.Microsecond
	lin := []time.Duration{300 * us, 400 * us, 500 * us, 600 * us}
	p, f, err := FromMeasured(lin, 0.1)
	if err != nil || !f.Kept || f.Alpha != 100*us || f.Beta != 200*us || f.MaxRelErr > 1e-9 || p.Latency(4) != 600*us {
		t.Fatalf("linear: %+v %v, ℓ(4) = %v", f, err, p.Latency(4))
	}
	noisy := []time.Duration{310 * us, 390 * us, 505 * us, 598 * us}
	if _, f, _ := FromMeasured(noisy, 0.1); f.MaxRelErr > 0.05 || f.Alpha < 90*us || f.Alpha > 110*us {
		t.Errorf("noisy: %+v", f)
	}
	// A step at b = 3 (a new kernel, say): no line is within 10%.
	step := []time.Duration{100 * us, 100 * us, 400 * us, 390 * us}
	p, f, err = FromMeasured(step, 0.1)
	if err != nil || f.Kept || f.MaxRelErr <= 0.1 {
		t.Fatalf("step: %+v %v", f, err)
	}
	if p.Latency(3) != 400*us || p.Latency(4) != 400*us || p.MaxBatch() != 4 {
		t.Errorf("step table: ℓ(3) = %v, ℓ(4) = %v (want 400µs, kept non-decreasing), max batch %d", p.Latency(3), p.Latency(4), p.MaxBatch())
	}
	if _, _, err := FromMeasured(nil, 0.1); err == nil {
		t.Error("no latencies accepted")
	}
}
