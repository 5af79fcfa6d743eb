package loadgen

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/serving"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

const msec = time.Millisecond

type model struct {
	name string
	slo  time.Duration
	rate float64
}

func newWorkload(warmup, duration time.Duration, models ...model) *workload.Workload {
	w := &workload.Workload{Source: "test", Seed: 7, Warmup: warmup, Duration: duration, Cluster: workload.Cluster{GPUs: 2}}
	for _, m := range models {
		w.Models = append(w.Models, workload.Model{Model: serving.Model{Name: m.name, SLO: m.slo, Profile: profile.MustLinear(msec, 100*time.Microsecond, 32)}, Rates: []workload.RatePhase{{Rate: m.rate}}})
	}
	return w
}

// arrivals lists each model's arrival offsets, as the load generator issues
// them.
func arrivals(w *workload.Workload) [][]time.Duration {
	out := make([][]time.Duration, len(w.Models))
	g := workload.NewGenerator(w, w.Warmup+w.Duration)
	for {
		m, at, ok := g.Peek()
		if !ok {
			return out
		}
		g.Pop()
		out[m] = append(out[m], time.Duration(at))
	}
}

// result is how a fake call ends: latency is the synthetic Ended−Submitted,
// delay the real time before Done closes.
type result struct {
	err               error
	latency, delay    time.Duration
	started, finished time.Time
	batch             int
}

type fakeCall struct {
	done chan struct{}
	err  error
	t    frontend.Timing
}

func (c *fakeCall) Done() <-chan struct{}            { return c.done }
func (c *fakeCall) Result() (frontend.Timing, error) { return c.t, c.err }

// fake is a target whose k-th request for a model ends as behave says.
type fake struct {
	mu     sync.Mutex
	n      map[string]int
	behave func(model string, k int) result
	// cancelable calls end only when their context is canceled.
	cancelable bool
	stall      func(k int)
}

func (f *fake) start(ctx context.Context, model string, input []byte, _ uint8) Call {
	f.mu.Lock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	k := f.n[model]
	f.n[model]++
	f.mu.Unlock()
	if f.stall != nil {
		f.stall(k)
	}
	now := time.Now()
	c := &fakeCall{done: make(chan struct{})}
	if f.cancelable {
		context.AfterFunc(ctx, func() {
			c.err = &frontend.DropError{Model: model, Reason: frontend.DropCanceled}
			c.t = frontend.Timing{Submitted: now, Ended: time.Now()}
			close(c.done)
		})
		return c
	}
	res := f.behave(model, k)
	end := func() {
		c.err = res.err
		c.t = frontend.Timing{Submitted: now, Ended: now.Add(res.latency), Started: res.started, Finished: res.finished, BatchSize: res.batch}
		close(c.done)
	}
	if res.delay > 0 {
		time.AfterFunc(res.delay, end)
	} else {
		end()
	}
	return c
}

// syncBuffer is a bytes.Buffer safe for the progress goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAccountingAndClassification(t *testing.T) {
	w := newWorkload(100*msec, 300*msec, model{"a", 50 * msec, 800}, model{"b", 20 * msec, 400})
	slo := map[string]time.Duration{"a": 50 * msec, "b": 20 * msec}
	outcome := func(model string, k int) result {
		r := result{delay: time.Duration(k%3) * msec, latency: slo[model] / 2}
		switch k % 8 {
		case 0:
			r.err = &frontend.DropError{Model: model, Reason: frontend.DropOverload}
		case 1:
			r.err = &frontend.BackendError{Model: model, Cause: "executor failed"}
		case 2:
			r.latency = 2 * slo[model] // late
		case 3:
			r.err = frontend.ErrNotConnected
		case 4:
			r.latency = slo[model] // exactly at the SLO is good
		}
		return r
	}
	f := &fake{behave: outcome}
	var progress syncBuffer
	var lat Lateness
	rep, err := run(context.Background(), f.start, w, Options{Progress: &progress, Interval: 100 * msec, Lateness: func(l Lateness) { lat = l }})
	if err != nil {
		t.Fatal(err)
	}
	var issued, offered uint64
	for i, arr := range arrivals(w) {
		name := w.Models[i].Name
		want := report.Stats{}
		reasons := map[string]uint64{}
		for k, at := range arr {
			issued++
			if at < w.Warmup || at >= w.Warmup+w.Duration {
				continue
			}
			want.Offered++
			switch k % 8 {
			case 0:
				want.Dropped++
				reasons["overload"]++
			case 1:
				want.Failed++
				reasons["failed: backend: executor failed"]++
			case 2:
				want.Late++
			case 3:
				want.Failed++
				reasons["failed: not connected"]++
			default:
				want.Good++
			}
		}
		offered += want.Offered
		got := rep.Models[i]
		if got.Name != name || got.Offered != want.Offered || got.Good != want.Good || got.Late != want.Late ||
			got.Dropped != want.Dropped || got.Failed != want.Failed {
			t.Errorf("model %s: got %+v, want %+v", name, got.Stats, want)
		}
		if got.Offered != got.Good+got.Late+got.Dropped+got.Failed {
			t.Errorf("model %s: accounting identity broken", name)
		}
		for k, n := range reasons {
			if got.DropReasons[k] != n {
				t.Errorf("model %s: drop reasons %v, want %v", name, got.DropReasons, reasons)
			}
		}
		if wantBad := float64(want.Offered-want.Good) / float64(want.Offered); math.Abs(got.BadRate-wantBad) > 1e-12 {
			t.Errorf("model %s: bad rate %g, want %g", name, got.BadRate, wantBad)
		}
		if wantRPS := float64(want.Offered) / 0.3; math.Abs(got.OfferedRPS-wantRPS) > 1e-9 {
			t.Errorf("model %s: offered %g req/s, want %g", name, got.OfferedRPS, wantRPS)
		}
		if p50, want := got.LatencyP50, float64(slo[name]/2)/1e6; math.Abs(p50-want) > 0.01*want {
			t.Errorf("model %s: p50 %gms, want %gms", name, p50, want)
		}
		if p99, want := got.LatencyP99, float64(2*slo[name])/1e6; math.Abs(p99-want) > 0.01*want {
			t.Errorf("model %s: p99 %gms, want %gms", name, p99, want)
		}
	}
	if rep.Offered != offered || rep.Offered != rep.Good+rep.Late+rep.Dropped+rep.Failed {
		t.Errorf("total: %+v, want %d offered", rep.Stats, offered)
	}
	if lat.Issued != issued {
		t.Errorf("issued %d, want %d", lat.Issued, issued)
	}
	if len(rep.TimeSeries) != 4 {
		t.Fatalf("%d time points, want 4", len(rep.TimeSeries))
	}
	var seriesOffered float64
	for _, p := range rep.TimeSeries {
		seriesOffered += p.OfferedRPS * 0.1
	}
	if math.Abs(seriesOffered-float64(issued)) > 1e-6 {
		t.Errorf("time series holds %g requests, want %d", seriesOffered, issued)
	}
	out := progress.String()
	for _, s := range []string{"\r", "offered", "goodput", "bad", "in flight", "generator lag"} {
		if !strings.Contains(out, s) {
			t.Errorf("progress %q lacks %q", out, s)
		}
	}
}

func TestBatchesAndBusy(t *testing.T) {
	w := newWorkload(0, 300*msec, model{"a", 50 * msec, 1000})
	t0 := time.Now()
	exec := 100 * time.Microsecond
	f := &fake{behave: func(_ string, k int) result {
		// Requests 4g..4g+3 share batch g.
		s := t0.Add(50*msec + time.Duration(k/4)*2*exec)
		return result{latency: 10 * msec, started: s, finished: s.Add(exec), batch: 4}
	}}
	rep, err := run(context.Background(), f.start, w, Options{Interval: 100 * msec})
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(arrivals(w)[0]))
	batches := (n + 3) / 4
	if rep.BatchSizeHist[4] != batches || len(rep.BatchSizeHist) != 1 {
		t.Errorf("batch hist %v, want {4: %d}", rep.BatchSizeHist, batches)
	}
	if rep.MeanBatchSize != 4 {
		t.Errorf("mean batch %g, want 4", rep.MeanBatchSize)
	}
	busy := float64(batches) * exec.Seconds() / 0.3 / 2 // two GPUs
	if math.Abs(rep.GPUBusyFraction-busy) > 1e-9 || math.Abs(rep.GPUIdleFraction-(1-busy)) > 1e-9 {
		t.Errorf("busy %g idle %g, want busy %g", rep.GPUBusyFraction, rep.GPUIdleFraction, busy)
	}
	if rep.Models[0].GPUBusyFraction != rep.GPUBusyFraction {
		t.Errorf("model busy %g, want %g", rep.Models[0].GPUBusyFraction, rep.GPUBusyFraction)
	}
	var seriesBusy float64
	for _, p := range rep.TimeSeries {
		seriesBusy += p.BusyGPUs * 0.1
	}
	if math.Abs(seriesBusy-busy*0.6) > 1e-9 {
		t.Errorf("time series busy %gs, want %gs", seriesBusy, busy*0.6)
	}
	if rep.Autoscale.Action != "remove" || rep.Autoscale.GPUs != 1 {
		t.Errorf("advice %+v, want to remove an idle GPU", rep.Autoscale)
	}
}

// TestCostPerHour: a live report carries the workload's cluster's price,
// as the simulator's does, unless the measured cluster is another size.
func TestCostPerHour(t *testing.T) {
	w := newWorkload(0, 100*msec, model{"a", 50 * msec, 100})
	w.Cluster.GPUTypes = []workload.GPUType{{Name: "v100", Count: 1, PricePerHour: 3.06}, {Name: "t4", Count: 1, PricePerHour: 0.5}}
	f := &fake{behave: func(string, int) result { return result{latency: msec} }}
	for _, c := range []struct {
		gpus int
		want float64
	}{{0, 3.56}, {2, 3.56}, {3, 0}} {
		rep, err := run(context.Background(), f.start, w, Options{GPUs: c.gpus})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(rep.CostPerHour-c.want) > 1e-12 {
			t.Errorf("%d GPUs measured: cost %v per hour, want %v", c.gpus, rep.CostPerHour, c.want)
		}
	}
}

func TestLateGeneratorCatchesUp(t *testing.T) {
	w := newWorkload(0, 300*msec, model{"a", 50 * msec, 2000})
	f := &fake{behave: func(string, int) result { return result{latency: msec} }}
	f.stall = func(k int) {
		if k == 10 {
			time.Sleep(50 * msec) // a client stalled for 50ms
		}
	}
	var lat Lateness
	rep, err := run(context.Background(), f.start, w, Options{Lateness: func(l Lateness) { lat = l }})
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(arrivals(w)[0]))
	if lat.Issued != n || rep.Offered != n || rep.Good != n {
		t.Errorf("issued %d, offered %d, good %d; want all %d", lat.Issued, rep.Offered, rep.Good, n)
	}
	if lat.Max < 40*msec {
		t.Errorf("max lag %v, want the 50ms stall", lat.Max)
	}
}

// A stopped run issues nothing more, gives the requests in flight their
// SLO plus a second to end (these never would, so they are canceled), and
// returns the report of the part of the window that ran with the
// context's error; stopped in the warmup, it has nothing to report.
func TestCancel(t *testing.T) {
	w := newWorkload(0, 10*time.Second, model{"a", 50 * msec, 500})
	ctx, cancel := context.WithTimeout(context.Background(), 100*msec)
	defer cancel()
	began := time.Now()
	rep, err := run(ctx, (&fake{cancelable: true}).start, w, Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("canceled run took %v", d)
	}
	if rep == nil {
		t.Fatal("no report of the part of the window that ran")
	}
	if rep.DurationSeconds <= 0 || rep.DurationSeconds > 1 {
		t.Errorf("partial report over %.3fs, want the ~0.1s that ran", rep.DurationSeconds)
	}
	if rep.Offered == 0 || rep.Dropped != rep.Offered {
		t.Errorf("offered %d, dropped %d: every request issued should end, here as a canceled drop", rep.Offered, rep.Dropped)
	}

	w = newWorkload(time.Minute, 10*time.Second, model{"a", 50 * msec, 500})
	ctx, cancel = context.WithTimeout(context.Background(), 50*msec)
	defer cancel()
	if rep, err := run(ctx, (&fake{behave: func(string, int) result { return result{latency: msec} }}).start, w, Options{}); rep != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stopped in the warmup: report %v, err %v; want no report and the context's error", rep != nil, err)
	}
}

// A goodput search stopped after some steps reports its best passing
// step so far, with the steps done, and says it was stopped.
func TestGoodputSearchStopped(t *testing.T) {
	w := newWorkload(0, 10*msec, model{"a", 50 * msec, 100})
	good := &report.Report{}
	calls := 0
	rep, err := findGoodput(w, Options{}, func(*workload.Workload) (*report.Report, error) {
		calls++
		if calls == 3 {
			return nil, context.Canceled
		}
		return good, nil // every step passes
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want the stop", err)
	}
	if rep != good || rep.GoodputSearch == nil || len(rep.GoodputSearch.Steps) != 2 || rep.GoodputSearch.Multiplier != 2 {
		t.Fatalf("report %v with search %+v; want the best of the 2 steps done (2x)", rep != nil, rep.GoodputSearch)
	}
}

func TestGoodputSearch(t *testing.T) {
	w := newWorkload(50*msec, 150*msec, model{"a", 50 * msec, 500}, model{"b", 50 * msec, 500})
	const capacity = 1300.0
	var overloaded atomic.Bool
	f := &fake{behave: func(m string, k int) result {
		if m == "b" && overloaded.Load() && k%2 == 0 {
			return result{err: &frontend.DropError{Model: m, Reason: frontend.DropDeadline}}
		}
		return result{latency: msec}
	}}
	var progress syncBuffer
	o := Options{Progress: &progress}
	rep, err := findGoodput(w, o, func(w *workload.Workload) (*report.Report, error) {
		overloaded.Store(w.TotalRate() > capacity)
		return run(context.Background(), f.start, w, o)
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.GoodputSearch
	if s == nil || len(s.Steps) > 8 || s.TargetBadRate != 0.01 {
		t.Fatalf("search %+v", s)
	}
	if s.Multiplier > 1.3 || s.Multiplier < 1.3*0.98 {
		t.Errorf("multiplier %g, want within 2%% below 1.3", s.Multiplier)
	}
	for _, st := range s.Steps {
		if st.OK != (st.Multiplier*1000 <= capacity) || !st.OK && st.WorstModel != "b" {
			t.Errorf("step %+v", st)
		}
	}
	if s.GoodputRPS != rep.GoodputRPS || rep.GoodputRPS == 0 {
		t.Errorf("goodput %g, report %g", s.GoodputRPS, rep.GoodputRPS)
	}
	out := progress.String()
	if strings.Count(out, "goodput step ") != len(s.Steps) || !strings.Contains(out, "goodput step 1/8: 1x") {
		t.Errorf("progress:\n%s", out)
	}
}

func TestGoodputSearchNeverPasses(t *testing.T) {
	w := newWorkload(0, 50*msec, model{"a", 50 * msec, 400})
	f := &fake{behave: func(m string, k int) result {
		return result{err: &frontend.DropError{Model: m, Reason: frontend.DropOverload}}
	}}
	o := Options{SearchSteps: 3}
	_, err := findGoodput(w, o, func(w *workload.Workload) (*report.Report, error) {
		return run(context.Background(), f.start, w, o)
	})
	if err == nil || !strings.Contains(err.Error(), "even at 0.25x") {
		t.Fatalf("err %v", err)
	}
}

// deadNet is a network on which the scheduler can never be reached.
type deadNet struct{}

type deadListener struct{}

func (deadListener) Addr() string { return "dead:0" }
func (deadListener) Close() error { return nil }

func (deadNet) Listen(string, transport.Acceptor) (transport.Listener, error) {
	return deadListener{}, nil
}

func (deadNet) Dial(context.Context, string, *wire.Hello, transport.Handler) (transport.Conn, *wire.Welcome, error) {
	return nil, nil, errors.New("no route")
}

// TestRunClient runs against a real frontend client that never connects:
// every request fails at once, and is accounted for as such.
func TestRunClient(t *testing.T) {
	cfg := frontend.Default()
	cfg.SchedulerAddr, cfg.Network = "dead:1", deadNet{}
	c, err := frontend.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := newWorkload(50*msec, 200*msec, model{"a", 50 * msec, 500})
	rep, err := Run(context.Background(), Client(c), w, Options{Label: "live"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Offered == 0 || rep.Failed != rep.Offered || rep.DropReasons["failed: not connected"] != rep.Offered || rep.BadRate != 1 {
		t.Errorf("report %+v", rep.Stats)
	}
	if rep.Policy != "live" || rep.GPUs != 2 || rep.DurationSeconds != 0.2 {
		t.Errorf("labels %q %d %g", rep.Policy, rep.GPUs, rep.DurationSeconds)
	}
}

// BenchmarkRun20k offers 20k req/s for a second to a target that answers at
// once, and reports the generator's lateness.
func BenchmarkRun20k(b *testing.B) {
	w := newWorkload(0, time.Second, model{"a", 50 * msec, 10000}, model{"b", 20 * msec, 10000})
	f := &fake{behave: func(string, int) result { return result{latency: msec} }}
	for range b.N {
		var lat Lateness
		if _, err := run(context.Background(), f.start, w, Options{Lateness: func(l Lateness) { lat = l }}); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(lat.P99.Microseconds()), "lag-p99-µs")
		b.ReportMetric(float64(lat.Max.Microseconds()), "lag-max-µs")
	}
}

// With the scheduler's profile (Options.Profile) the report compares each
// distinct batch that started in the window with ℓ(b): a batch counts once
// however many of its requests the generator sees, and the quantiles are
// of real/ℓ(b). A model without a profile gets no comparison.
func TestProfileAdherence(t *testing.T) {
	w := newWorkload(100*msec, 300*msec, model{"a", 50 * msec, 1000}, model{"b", 50 * msec, 200})
	t0 := time.Now()
	prof := []time.Duration{msec, 2 * msec, 3 * msec, 4 * msec}
	f := &fake{behave: func(m string, k int) result {
		// Requests 4g..4g+3 share batch g, which starts at t0 + 4g ms,
		// about when they arrive, and takes ℓ(4)·(1 + (g mod 10)/10):
		// ratios 1.0, 1.1, ... 1.9.
		g := k / 4
		s := t0.Add(time.Duration(4*g) * msec)
		return result{latency: 10 * msec, started: s, finished: s.Add(4 * msec * time.Duration(10+g%10) / 10), batch: 4}
	}}
	profiles := func(m string) []time.Duration {
		if m == "a" {
			return prof
		}
		return nil
	}
	rep, err := run(context.Background(), f.start, w, Options{Interval: 100 * msec, Profile: profiles})
	if err != nil {
		t.Fatal(err)
	}
	a := rep.Models[0]
	if a.ProfileBatches == 0 || a.ProfileBatches != a.BatchSizeHist[4] {
		t.Fatalf("%d batches compared, %d batches of 4 in the window: want the same, and some", a.ProfileBatches, a.BatchSizeHist[4])
	}
	if a.ProfileBatches < 50 {
		t.Fatalf("only %d batches in the window; the quantiles below need more", a.ProfileBatches)
	}
	if math.Abs(a.ProfileRatioP50-1.4) > 0.1001 || math.Abs(a.ProfileRatioP99-1.9) > 1e-9 {
		t.Errorf("real/ℓ(b) p50 %v p99 %v, want about 1.4 and 1.9", a.ProfileRatioP50, a.ProfileRatioP99)
	}
	if b := rep.Models[1]; b.ProfileBatches != 0 || b.ProfileRatioP50 != 0 {
		t.Errorf("model without a profile: %d batches compared, p50 %v", b.ProfileBatches, b.ProfileRatioP50)
	}
}
