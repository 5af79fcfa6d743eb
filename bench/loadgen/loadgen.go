// Package loadgen offers a workload's load to a running Symphony cluster in
// real time, through the frontend client library, and reports the run in the
// simulator's report format (docs/workload-format.md, "Report"). It is the
// load generator behind `symphony demo` and `symphony bench`.
//
// The load is open loop: arrivals come from the workload's seeded generator
// and are issued at their wall-clock times whatever the cluster does, and a
// generator that falls behind catches up by issuing every due arrival at
// once, never skipping one. Only requests arriving in the measured window
// (after the warmup) are counted; every one of them ends exactly once, as
// good, late, dropped or failed.
package loadgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/scheduler"
)

// Target is where the load goes: an embedded frontend client (Client), a
// KServe gateway (GatewayTarget), a cluster whose frontends come and go
// (bench/cluster.Target).
type Target interface {
	// Start issues one request now at priority level priority (0, the
	// default, for a workload without a priority_mix; higher ranks
	// first: scheduler.Request.Priority); the Call ends with its outcome.
	Start(ctx context.Context, model string, input []byte, priority uint8) Call
}

// Call is one request in flight as the load generator sees it: when it
// ends, and how it ran.
type Call interface {
	Done() <-chan struct{}
	// Result is the request's timing and error, once Done is closed.
	Result() (frontend.Timing, error)
}

// Client is the target of an embedded frontend client: each request is
// one c.Go.
func Client(c *frontend.Client) Target { return clientTarget{c} }

type clientTarget struct{ c *frontend.Client }

func (t clientTarget) Start(ctx context.Context, model string, input []byte, priority uint8) Call {
	if priority > 0 {
		return clientCall{t.c.Go(ctx, model, input, frontend.WithPriority(priority))}
	}
	return clientCall{t.c.Go(ctx, model, input)}
}

// clientCall adapts *frontend.Call; being pointer-shaped, it fits in an
// interface without an allocation.
type clientCall struct{ *frontend.Call }

func (c clientCall) Result() (frontend.Timing, error) { return c.Timing, c.Err }

// Go runs fn, a request through another way of reaching a cluster (an
// HTTP client, say), on its own goroutine and returns its Call: its
// timing takes the batch (Started, Finished, BatchSize) from fn, and
// Submitted and Ended from the call itself.
func Go(fn func() (frontend.Timing, error)) Call {
	c := &asyncCall{done: make(chan struct{}), t: frontend.Timing{Submitted: time.Now()}}
	go func() {
		t, err := fn()
		c.t.Started, c.t.Finished, c.t.BatchSize, c.err = t.Started, t.Finished, t.BatchSize, err
		c.t.Ended = time.Now()
		close(c.done)
	}()
	return c
}

// Failed is a Call that has already ended with err, for a target with
// nowhere to send a request (a killed frontend).
func Failed(err error) Call {
	now := time.Now()
	c := &asyncCall{done: make(chan struct{}), t: frontend.Timing{Submitted: now, Ended: now}, err: err}
	close(c.done)
	return c
}

type asyncCall struct {
	done chan struct{}
	t    frontend.Timing
	err  error
}

func (c *asyncCall) Done() <-chan struct{}            { return c.done }
func (c *asyncCall) Result() (frontend.Timing, error) { return c.t, c.err }

// Options tune a run.
type Options struct {
	// InputBytes is the size of each request's input for a model (default
	// 1 KiB). Inputs are deterministic pseudo-random bytes, one buffer per
	// model shared by its requests (the client copies it).
	InputBytes func(model string) int
	// Progress, if set, receives a live progress line, rewritten with \r
	// about once a second, and a summary line at the end of each run.
	Progress io.Writer
	// Interval is the time-series interval (default: the workload's
	// autoscale window, else 1s).
	Interval time.Duration
	// GPUs is the cluster's GPU count, for busy fractions and autoscale
	// advice (0: w.Cluster.GPUs).
	GPUs int
	// Label, if set, is the report's policy label (default: the workload's
	// policy), e.g. "symphony (live)".
	Label string
	// SearchSteps caps the runs of a goodput search (default 8).
	SearchSteps int
	// Lateness, if set, is called at the end of each run with how far
	// behind schedule the generator issued requests.
	Lateness func(Lateness)
	// Profile, if set, returns the latency profile a model is scheduled
	// with, Profile(model)[b-1] being ℓ(b) (frontend.ModelInfo.Latency,
	// the scheduler's own table); the report then states how each model's
	// real batch times compared with it (report.ProfileFit). nil, or an
	// empty profile, leaves the comparison out.
	Profile func(model string) []time.Duration
	// Faults, if set, plays the workload's fault scenario against the
	// cluster: it is called as each run's clock starts, with that start,
	// and returns at once; the stop it returns is called once every
	// request of the run has ended. The report then shows the run's
	// fault phases and recoveries (report.FaultReport).
	Faults func(start time.Time) (stop func(), err error)
}

// Lateness is the generator's own lateness over a run: how long after each
// arrival's scheduled time its request was issued.
type Lateness struct {
	Issued   uint64
	P99, Max time.Duration
}

func (o Options) withDefaults(w *workload.Workload) Options {
	if o.Interval <= 0 {
		o.Interval = w.AutoscaleWindow
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.GPUs <= 0 {
		o.GPUs = w.Cluster.GPUs
	}
	if o.Label == "" {
		o.Label = w.Policy.String()
	}
	if o.SearchSteps <= 0 {
		o.SearchSteps = 8
	}
	return o
}

// starter issues one request.
type starter func(ctx context.Context, model string, input []byte, priority uint8) Call

// Run offers w's load to t in real time: warmup, then the measured window.
// It waits for every request to end and returns the report of the window.
// Canceling ctx stops the run: no request is issued after it, those in
// flight get up to their model's SLO plus a second to end on their own
// (then they are canceled), and Run returns ctx's error together with the
// report of the part of the window that ran, or no report if the stop came
// during the warmup.
func Run(ctx context.Context, t Target, w *workload.Workload, o Options) (*report.Report, error) {
	return run(ctx, t.Start, w, o)
}

// slack is how early the pacer wakes before an arrival, and how early it may
// issue one. Go's timers on Linux overshoot by up to ~1ms (the netpoller
// sleeps in whole milliseconds), so arrivals go out in clumps of about that
// length, a little late; the run's Lateness measures it.
const slack = 200 * time.Microsecond

func run(ctx context.Context, start starter, w *workload.Workload, o Options) (*report.Report, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults(w)
	r := newRunner(w, o)
	inputs := makeInputs(w, o.InputBytes)
	gen := workload.NewGenerator(w, w.Warmup+w.Duration)

	// Requests outlive a stop (ctx), so that the partial report counts
	// how they really ended; cancelCalls ends the stragglers.
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	r.start = time.Now()
	if o.Faults != nil && len(w.Faults) > 0 {
		stopFaults, err := o.Faults(r.start)
		if err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		defer stopFaults()
	}
	var wg sync.WaitGroup
	for i := range r.collectors {
		wg.Go(r.collectors[i].loop)
	}
	stopProgress := r.progress(o.Progress)
	err := r.pace(ctx, gen, func(_ context.Context, model string, input []byte, priority uint8) Call {
		return start(callCtx, model, input, priority)
	}, inputs)
	stoppedAt := time.Since(r.start)
	if err != nil {
		var longest time.Duration
		for _, m := range w.Models {
			longest = max(longest, m.SLO)
		}
		defer time.AfterFunc(longest+time.Second, cancelCalls).Stop()
	}
	for i := range r.collectors {
		r.collectors[i].q.close()
	}
	wg.Wait()
	lateness := Lateness{Issued: r.issued.Load(), P99: r.lag.Quantile(0.99), Max: r.lag.Max()}
	stopProgress(lateness)
	if o.Lateness != nil {
		o.Lateness(lateness)
	}
	if err == nil {
		return r.build()
	}
	err = fmt.Errorf("loadgen: run stopped after %v: %w", stoppedAt.Round(time.Millisecond), err)
	if stoppedAt <= r.winStart {
		return nil, fmt.Errorf("%w (in the warmup: nothing measured)", err)
	}
	// Report the part of the window that ran: nothing was issued after
	// the stop, so the counts already cover just that part.
	r.winEnd = min(r.winEnd, stoppedAt)
	rep, berr := r.build()
	if berr != nil {
		return nil, errors.Join(err, berr)
	}
	return rep, fmt.Errorf("%w; the report covers the first %v of the window", err, (r.winEnd - r.winStart).Round(time.Millisecond))
}

// pace issues every arrival at its time, or as soon as it can when late.
func (r *runner) pace(ctx context.Context, gen *workload.Generator, start starter, inputs [][]byte) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for n := 0; ; n++ {
		m, at, ok := gen.Peek()
		if !ok {
			return nil
		}
		due := time.Duration(at)
		now := time.Since(r.start)
		if wait := due - now; wait > slack {
			timer.Reset(wait - slack)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
			continue
		}
		if n&255 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		gen.Pop()
		r.lag.Record(now - due) // early issues record as 0
		// The level the simulator gives the same request (PriorityOf).
		level := r.w.Models[m].PriorityOf(r.arrivals[m])
		r.arrivals[m]++
		p := start(ctx, r.w.Models[m].Name, inputs[m], uint8(level))
		if r.inWindow(due) {
			r.offered[m]++
		}
		r.issued.Add(1)
		r.collectors[m%len(r.collectors)].q.push(entry{p: p, model: int32(m), at: due, level: level})
	}
}

// makeInputs returns each model's input: deterministic pseudo-random bytes.
func makeInputs(w *workload.Workload, size func(string) int) [][]byte {
	out := make([][]byte, len(w.Models))
	for i := range w.Models {
		n := 1 << 10
		if size != nil {
			n = max(size(w.Models[i].Name), 0)
		}
		var seed [32]byte
		binary.LittleEndian.PutUint64(seed[:], w.Seed)
		binary.LittleEndian.PutUint64(seed[8:], uint64(i))
		b := make([]byte, n)
		rand.NewChaCha8(seed).Read(b)
		out[i] = b
	}
	return out
}

// progress starts the live progress line and returns the function that
// stops it and prints the summary.
func (r *runner) progress(w io.Writer) (stop func(Lateness)) {
	if w == nil {
		return func(Lateness) {}
	}
	type snap struct {
		at                  time.Duration
		issued, good, ended uint64
	}
	take := func() snap {
		return snap{time.Since(r.start), r.issued.Load(), r.good.Load(), r.ended.Load()}
	}
	line := func(last, now snap) {
		dt := (now.at - last.at).Seconds()
		if dt <= 0 {
			dt = 1
		}
		good, ended := now.good-last.good, now.ended-last.ended
		bad := 0.0
		if ended > 0 {
			bad = float64(ended-good) / float64(ended)
		}
		fmt.Fprintf(w, "\r%7.1fs  offered %8.0f req/s  goodput %8.0f req/s  bad %6.2f%%  in flight %6d ",
			now.at.Seconds(), float64(now.issued-last.issued)/dt, float64(good)/dt, 100*bad, now.issued-now.ended)
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		var last snap
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			now := take()
			line(last, now)
			last = now
		}
	}()
	return func(l Lateness) {
		close(done)
		<-finished
		line(snap{}, take()) // whole-run averages
		fmt.Fprintf(w, "\n        issued %d requests, generator lag p99 %v max %v\n",
			l.Issued, l.P99.Round(time.Microsecond), l.Max.Round(time.Microsecond))
	}
}

// runner is one run's state. The pacer owns offered and lag; each collector
// owns the models it collects (model i goes to collector i mod n) and its
// own time series and batch set; the atomics feed the progress line.
type runner struct {
	w                *workload.Workload
	o                Options
	start            time.Time
	winStart, winEnd time.Duration
	offered          []uint64
	// arrivals counts each model's requests issued, for their levels.
	arrivals []uint64
	lag      report.Histogram
	models   []report.ModelCounts
	// profiles[i] is model i's ℓ(b) table (Options.Profile), nil if unknown.
	profiles   [][]time.Duration
	collectors []collector

	issued, good, ended atomic.Uint64
}

func newRunner(w *workload.Workload, o Options) *runner {
	r := &runner{
		w: w, o: o, winStart: w.Warmup, winEnd: w.Warmup + w.Duration,
		offered:  make([]uint64, len(w.Models)),
		arrivals: make([]uint64, len(w.Models)),
		models:   make([]report.ModelCounts, len(w.Models)),
	}
	r.profiles = make([][]time.Duration, len(w.Models))
	for i, m := range w.Models {
		r.models[i].Name, r.models[i].SLO = m.Name, m.SLO
		if o.Profile != nil {
			r.profiles[i] = o.Profile(m.Name)
		}
	}
	n := int((r.winEnd + o.Interval - 1) / o.Interval)
	r.collectors = make([]collector, min(len(w.Models), 16))
	for i := range r.collectors {
		c := &r.collectors[i]
		c.r, c.series = r, make([]report.Interval, n)
		if len(w.Faults) > 0 {
			c.faults = report.NewFaultTally(w, r.winStart, r.winEnd, r.winEnd)
		}
		c.q.wake = make(chan struct{}, 1)
		c.seen.cur, c.seen.old = map[batchKey]struct{}{}, map[batchKey]struct{}{}
	}
	return r
}

func (r *runner) inWindow(at time.Duration) bool { return at >= r.winStart && at < r.winEnd }

// entry is one issued request waiting to be collected.
type entry struct {
	p     Call
	model int32
	at    time.Duration // scheduled arrival, since the start
	level scheduler.Priority
}

// queue is an unbounded FIFO from the pacer to one collector, so that the
// pacer never blocks on a slow collector.
type queue struct {
	mu     sync.Mutex
	items  []entry
	closed bool
	wake   chan struct{} // capacity 1: "items or closed changed"
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *queue) push(e entry) {
	q.mu.Lock()
	q.items = append(q.items, e)
	q.mu.Unlock()
	q.signal()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// take waits for entries and returns them all, leaving spare in their place;
// ok is false once the queue is closed and empty.
func (q *queue) take(spare []entry) (items []entry, ok bool) {
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		if len(items) > 0 {
			q.items = spare[:0]
			q.mu.Unlock()
			return items, true
		}
		q.mu.Unlock()
		if closed {
			return nil, false
		}
		<-q.wake
	}
}
