package loadgen

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
)

// sweepTarget is a Target whose requests take serve of (emulated) service
// time, then are answered, or dropped for overload past capacity requests
// of a point; it counts the requests in flight and calls onIssue with the
// number issued so far in the point.
type sweepTarget struct {
	serve    time.Duration
	capacity int64
	issued   atomic.Int64
	inFlight *atomic.Int64
	onIssue  func(n int64)
}

func (f *sweepTarget) Start(_ context.Context, model string, _ []byte, _ uint8) Call {
	n := f.issued.Add(1)
	f.inFlight.Add(1)
	if f.onIssue != nil {
		f.onIssue(n)
	}
	return Go(func() (frontend.Timing, error) {
		defer f.inFlight.Add(-1)
		service := time.NewTimer(f.serve) // the emulated request's service time
		<-service.C
		if f.capacity > 0 && n > f.capacity {
			return frontend.Timing{}, &frontend.DropError{Model: model, Reason: frontend.DropOverload}
		}
		return frontend.Timing{}, nil
	})
}

// inWindow counts the arrivals of w in its measured window.
func inWindow(w *workload.Workload) uint64 {
	var n uint64
	for _, offs := range arrivals(w) {
		for _, at := range offs {
			if at >= w.Warmup && at < w.Warmup+w.Duration {
				n++
			}
		}
	}
	return n
}

// Each point runs the scaled load on a target of its own, released before
// the next starts, and only once every request of the previous point has
// ended; the points carry their outcomes.
func TestSweep(t *testing.T) {
	w := newWorkload(20*msec, 150*msec, model{"a", 50 * msec, 300}, model{"b", 50 * msec, 300})
	var inFlight atomic.Int64
	var made, released int
	target := func(context.Context) (Target, func(), error) {
		if made != released {
			t.Errorf("point %d's target asked for before point %d's was released", made+1, made)
		}
		if n := inFlight.Load(); n != 0 {
			t.Errorf("point %d starts with %d requests of the previous point in flight", made+1, n)
		}
		made++
		return &sweepTarget{serve: 5 * msec, capacity: 60, inFlight: &inFlight}, func() { released++ }, nil
	}
	var started []float64
	o := SweepOptions{Options: Options{Label: "fake (live)"}, Scale: 2, PeakGoodputRPS: 400,
		Started: func(i int, m float64, ws *workload.Workload) {
			started = append(started, m)
			if want := 2 * m * w.TotalRate(); math.Abs(ws.TotalRate()-want) > 1e-9 {
				t.Errorf("point %d runs %g req/s, want %g (scale 2 × %gx)", i, ws.TotalRate(), want, m)
			}
		}}
	mults := []float64{0.25, 0.5, 1}
	c, err := Sweep(context.Background(), target, w, mults, o)
	if err != nil {
		t.Fatal(err)
	}
	if made != 3 || released != 3 || len(started) != 3 || len(c.Points) != 3 {
		t.Fatalf("%d targets made, %d released, %d points started, %d measured; want 3 of each", made, released, len(started), len(c.Points))
	}
	if c.Policy != "fake (live)" || c.PeakGoodputRPS != 400 {
		t.Errorf("curve %q with peak %g", c.Policy, c.PeakGoodputRPS)
	}
	for i, p := range c.Points {
		o := p.Outcomes
		if o == nil {
			t.Fatalf("point %d has no outcomes", i)
		}
		if want := inWindow(w.Scaled(2 * mults[i])); o.Offered != want {
			t.Errorf("point %d: %d offered in the window, want the scaled workload's %d", i, o.Offered, want)
		}
		if o.Good+o.Late+o.Dropped+o.Failed != o.Offered || o.Dropped != o.DropReasons[string(frontend.DropOverload)] {
			t.Errorf("point %d: outcomes %+v do not add up", i, o)
		}
		if p.Partial {
			t.Errorf("point %d is partial", i)
		}
	}
	if last := c.Points[2]; last.Outcomes.Dropped == 0 || last.IdealBadRate == 0 {
		t.Errorf("the 1x point (1200 req/s against a capacity of 60 requests and a peak of 400 req/s): %+v", last)
	}
}

// A sweep stopped in a point keeps that point as partial and starts no
// more; stopped between points, it starts no more either; a target that
// cannot start ends it with its error. Each returns what was measured.
func TestSweepStopped(t *testing.T) {
	w := newWorkload(0, 10*time.Second, model{"a", 50 * msec, 400})
	short := newWorkload(0, 50*msec, model{"a", 50 * msec, 400})
	var inFlight atomic.Int64

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	points := 0
	target := func(context.Context) (Target, func(), error) {
		points++
		return &sweepTarget{inFlight: &inFlight, onIssue: func(n int64) {
			if n == 100 {
				cancel() // Ctrl-C, 100 requests into the first point
			}
		}}, func() {}, nil
	}
	began := time.Now()
	c, err := Sweep(ctx, target, w, []float64{1, 2}, SweepOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the stop", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the stopped sweep took %v", d)
	}
	if points != 1 || len(c.Points) != 1 || !c.Points[0].Partial || c.Points[0].Outcomes.Offered < 100 {
		t.Fatalf("%d points started, curve %+v; want one partial point of at least 100 requests", points, c.Points)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	points = 0
	target = func(context.Context) (Target, func(), error) {
		points++
		return &sweepTarget{inFlight: &inFlight}, func() {}, nil
	}
	c, err = Sweep(ctx, target, short, []float64{1, 2}, SweepOptions{Point: func(report.CurvePoint) { cancel() }})
	if !errors.Is(err, context.Canceled) || points != 1 || len(c.Points) != 1 || c.Points[0].Partial {
		t.Errorf("stopped between points: err %v, %d started, %d measured; want the stop after one whole point", err, points, len(c.Points))
	}

	down := errors.New("cluster did not start")
	points = 0
	target = func(context.Context) (Target, func(), error) {
		if points++; points == 2 {
			return nil, nil, down
		}
		return &sweepTarget{inFlight: &inFlight}, func() {}, nil
	}
	c, err = Sweep(context.Background(), target, short, []float64{1, 2, 3}, SweepOptions{})
	if !errors.Is(err, down) || len(c.Points) != 1 {
		t.Errorf("a target that fails: err %v with %d points; want its error after one point", err, len(c.Points))
	}
}
