package actuate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// StartFunc starts the backend numbered index (0, 1, 2, ... in the order
// asked, never reused, so each backend can have a name of its own). It
// returns once the backend is up, with the function that stops it. The
// backend may run until ctx ends, which is at Process.Close at the latest.
type StartFunc func(ctx context.Context, index int) (stop StopFunc, err error)

// StopFunc stops a backend that StartFunc started, gracefully: it may
// drain the backend's work first.
type StopFunc func(ctx context.Context) error

// ProcessConfig configures a Process actuator.
type ProcessConfig struct {
	// Start starts one backend (required).
	Start StartFunc
	// Boot emulates a VM's or pod's boot: Start is called Boot after
	// Resize asks for the backend, so the backend registers, and the
	// controller sees it, only then. Size counts it from the request on.
	Boot time.Duration
	// Clock schedules the boots (RealClock if nil).
	Clock Clock
	// Idle, if set, names the running backends (by index) known to be
	// idle, e.g. those in the free pool: scale-in stops them before the
	// others. Resize calls it without holding the actuator's lock.
	Idle func() []int
	Log  zerolog.Logger
}

// ProcessStatus counts a Process actuator's backends.
type ProcessStatus struct {
	// Booting were asked for and have not started yet (their boot delay
	// runs, or Start has not returned).
	Booting int
	// Running started and were not asked to stop.
	Running int
	// Stopping were asked to stop and their StopFunc has not returned.
	Stopping int
	// Failed counts the starts that failed since the actuator was built.
	Failed int
}

// Process is an Actuator that runs backends in this process through the
// caller's StartFunc: the emulated cluster of `symphony-bench demo
// --controller`, where adding a GPU means starting one more emulated
// backend.
//
// Scale-in stops, in this order: backends still booting (nothing to
// drain), then the running ones Idle names, then the other running ones;
// the most recently asked for first within each group, since the oldest
// backends are the likeliest to hold loaded models in a part. Stops run in
// the background, so Resize never waits for a drain.
//
// A backend whose Start fails is dropped (and logged): Size falls, and the
// next Resize asks for a new one.
type Process struct {
	cfg    ProcessConfig
	log    zerolog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	next     int
	live     []*procBackend // in the order asked for
	stopping int
	failed   int
	// wg counts the Start and StopFunc calls under way.
	wg sync.WaitGroup
}

type procState int

const (
	procBooting  procState = iota // the boot delay runs
	procStarting                  // Start runs
	procRunning
)

type procBackend struct {
	index int
	state procState
	timer Timer
	stop  StopFunc
	// gone is set once it is asked to stop (or the actuator closes).
	gone bool
}

// NewProcess checks cfg and builds a Process actuator with no backends.
func NewProcess(cfg ProcessConfig) (*Process, error) {
	switch {
	case cfg.Start == nil:
		return nil, fmt.Errorf("actuate: process: no start function")
	case cfg.Boot < 0:
		return nil, fmt.Errorf("actuate: process: boot delay %v is negative", cfg.Boot)
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Process{cfg: cfg, log: cfg.Log.With().Str("component", "actuator").Str("actuator", "process").Logger(),
		ctx: ctx, cancel: cancel}, nil
}

// Size is the number of backends asked for and not asked to stop.
func (p *Process) Size(ctx context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	return len(p.live), nil
}

// Status counts the backends by state.
func (p *Process) Status() ProcessStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := ProcessStatus{Stopping: p.stopping, Failed: p.failed}
	for _, b := range p.live {
		if b.state == procRunning {
			st.Running++
		} else {
			st.Booting++
		}
	}
	return st
}

// Resize asks for n backends: new ones boot for ProcessConfig.Boot, then
// start; excess ones stop in the background (see Process for which).
func (p *Process) Resize(ctx context.Context, n int) error {
	if n < 0 {
		return fmt.Errorf("actuate: process: resize to %d backends", n)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var idle []int
	if p.cfg.Idle != nil {
		p.mu.Lock()
		shrink := len(p.live) > n
		p.mu.Unlock()
		if shrink {
			idle = p.cfg.Idle()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	from := len(p.live)
	for len(p.live) < n {
		b := &procBackend{index: p.next, state: procBooting}
		p.next++
		p.live = append(p.live, b)
		b.timer = p.cfg.Clock.AfterFunc(p.cfg.Boot, func() { p.boot(b) })
	}
	if len(p.live) > n {
		for _, b := range p.victims(len(p.live)-n, idle) {
			p.remove(b)
		}
	}
	if from != n {
		p.log.Info().Int("from", from).Int("to", n).Msg("resize")
	}
	return nil
}

// victims picks k backends to stop, in the order Process documents.
// Called with p.mu held.
func (p *Process) victims(k int, idle []int) []*procBackend {
	out := make([]*procBackend, 0, len(p.live))
	for _, b := range slices.Backward(p.live) {
		if b.state != procRunning {
			out = append(out, b)
		}
	}
	for _, b := range slices.Backward(p.live) {
		if b.state == procRunning && slices.Contains(idle, b.index) {
			out = append(out, b)
		}
	}
	for _, b := range slices.Backward(p.live) {
		if b.state == procRunning && !slices.Contains(idle, b.index) {
			out = append(out, b)
		}
	}
	return out[:k]
}

// remove asks backend b to stop. Called with p.mu held.
func (p *Process) remove(b *procBackend) {
	p.live = slices.DeleteFunc(p.live, func(x *procBackend) bool { return x == b })
	b.gone = true
	switch b.state {
	case procBooting:
		// If the timer already fired, boot sees gone and does nothing.
		b.timer.Stop()
	case procStarting:
		// boot stops it once Start returns.
	case procRunning:
		p.stopping++
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.halt(b)
		}()
	}
}

// halt calls b's StopFunc; p.stopping counts it already.
func (p *Process) halt(b *procBackend) {
	err := b.stop(p.ctx)
	p.mu.Lock()
	p.stopping--
	p.mu.Unlock()
	if err != nil {
		p.log.Warn().Err(err).Int("backend", b.index).Msg("backend stop failed")
		return
	}
	p.log.Info().Int("backend", b.index).Msg("backend stopped")
}

// boot runs once b's boot delay has passed: it starts b, unless b was
// asked to stop meanwhile.
func (p *Process) boot(b *procBackend) {
	p.mu.Lock()
	if b.gone || p.closed {
		p.mu.Unlock()
		return
	}
	b.state = procStarting
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	stop, err := p.cfg.Start(p.ctx, b.index)
	p.mu.Lock()
	if err != nil {
		p.failed++
		if !b.gone {
			b.gone = true
			p.live = slices.DeleteFunc(p.live, func(x *procBackend) bool { return x == b })
		}
		p.mu.Unlock()
		p.log.Warn().Err(err).Int("backend", b.index).Msg("backend start failed")
		return
	}
	if stop == nil {
		stop = func(context.Context) error { return nil }
	}
	b.stop = stop
	if b.gone {
		// Asked to stop while starting.
		p.stopping++
		p.mu.Unlock()
		p.halt(b)
		return
	}
	b.state = procRunning
	p.mu.Unlock()
	p.log.Info().Int("backend", b.index).Msg("backend started")
}

// Close stops every backend, waits (until ctx ends) for their StopFuncs
// and the starts under way, then ends the context the backends run in.
// Later calls of Size and Resize return ErrClosed.
func (p *Process) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for len(p.live) > 0 {
		p.remove(p.live[len(p.live)-1])
	}
	p.mu.Unlock()
	defer p.cancel()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actuate: process: close: %w", ctx.Err())
	}
}
