package actuate

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// procHarness is a Process on a fake clock whose backends record their
// starts and stops.
type procHarness struct {
	t     *testing.T
	clock *fakeClock
	p     *Process

	mu      sync.Mutex
	started []int
	ctxs    map[int]context.Context
	// stopped receives each stopped backend's index.
	stopped chan int
	// fail makes the start of these indices fail.
	fail map[int]bool
}

const boot = 30 * time.Second

func newProcHarness(t *testing.T, idle func() []int) *procHarness {
	t.Helper()
	h := &procHarness{t: t, clock: &fakeClock{}, ctxs: map[int]context.Context{}, stopped: make(chan int, 100), fail: map[int]bool{}}
	p, err := NewProcess(ProcessConfig{Start: h.start, Boot: boot, Clock: h.clock, Idle: idle})
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return h
}

func (h *procHarness) start(ctx context.Context, index int) (StopFunc, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail[index] {
		return nil, errors.New("no capacity")
	}
	h.started = append(h.started, index)
	h.ctxs[index] = ctx
	return func(context.Context) error {
		h.stopped <- index
		return nil
	}, nil
}

func (h *procHarness) startedSoFar() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.started)
}

// stops receives n stops, in any order, sorted.
func (h *procHarness) stops(n int) []int {
	h.t.Helper()
	var out []int
	for range n {
		select {
		case i := <-h.stopped:
			out = append(out, i)
		case <-time.After(10 * time.Second):
			h.t.Fatalf("stopped %v, want %d stops", out, n)
		}
	}
	slices.Sort(out)
	return out
}

func (h *procHarness) resize(n int) {
	h.t.Helper()
	if err := h.p.Resize(context.Background(), n); err != nil {
		h.t.Fatal(err)
	}
	if got, err := h.p.Size(context.Background()); err != nil || got != n {
		h.t.Fatalf("after Resize(%d): Size %d, %v", n, got, err)
	}
}

func (h *procHarness) status(want ProcessStatus) {
	h.t.Helper()
	if got := h.p.Status(); got != want {
		h.t.Fatalf("status %+v, want %+v", got, want)
	}
}

func TestProcessBootDelay(t *testing.T) {
	h := newProcHarness(t, nil)
	h.resize(3)
	h.status(ProcessStatus{Booting: 3})
	h.clock.Advance(boot - time.Nanosecond)
	if s := h.startedSoFar(); len(s) != 0 {
		t.Fatalf("started %v before the boot delay", s)
	}
	h.clock.Advance(time.Nanosecond)
	if s := h.startedSoFar(); !slices.Equal(s, []int{0, 1, 2}) {
		t.Fatalf("started %v, want [0 1 2]", s)
	}
	h.status(ProcessStatus{Running: 3})

	// One more boots on its own schedule; the running ones are untouched.
	h.clock.Advance(10 * time.Second)
	h.resize(4)
	h.status(ProcessStatus{Booting: 1, Running: 3})
	h.clock.Advance(boot)
	if s := h.startedSoFar(); !slices.Equal(s, []int{0, 1, 2, 3}) {
		t.Fatalf("started %v, want [0 1 2 3]", s)
	}
	h.status(ProcessStatus{Running: 4})
}

func TestProcessScaleInOrder(t *testing.T) {
	idle := []int{1}
	h := newProcHarness(t, func() []int { return idle })
	h.resize(4)
	h.clock.Advance(boot) // 0..3 run
	h.resize(5)           // 4 boots
	// Three go: 4 (still booting), 1 (idle), then 3 (the newest running).
	h.resize(2)
	if got := h.stops(2); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("stopped %v, want [1 3]", got)
	}
	h.clock.Advance(boot)
	if s := h.startedSoFar(); slices.Contains(s, 4) {
		t.Fatalf("backend 4 started after it was cancelled while booting: %v", s)
	}
	// Without idle ones: the newest first; indices are never reused.
	idle = nil
	h.resize(3) // 5
	h.clock.Advance(boot)
	h.resize(1)
	if got := h.stops(2); !slices.Equal(got, []int{2, 5}) {
		t.Fatalf("stopped %v, want [2 5]", got)
	}
	if s := h.startedSoFar(); !slices.Equal(s, []int{0, 1, 2, 3, 5}) {
		t.Fatalf("started %v, want [0 1 2 3 5]", s)
	}
}

func TestProcessStopping(t *testing.T) {
	release := make(chan struct{})
	p, err := NewProcess(ProcessConfig{Clock: &fakeClock{}, Start: func(context.Context, int) (StopFunc, error) {
		return func(context.Context) error { <-release; return errors.New("drain failed") }, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = p.Resize(ctx, 2)
	p.cfg.Clock.(*fakeClock).Advance(0) // Boot 0: start at the next tick
	if got := p.Status(); got != (ProcessStatus{Running: 2}) {
		t.Fatalf("status %+v, want 2 running", got)
	}
	_ = p.Resize(ctx, 0)
	if got := p.Status(); got != (ProcessStatus{Stopping: 2}) {
		t.Fatalf("status %+v, want 2 stopping", got)
	}
	close(release)
	// Close waits for the stops; a stop's error is only logged.
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Status(); got != (ProcessStatus{}) {
		t.Fatalf("status %+v after close, want none", got)
	}
}

func TestProcessStartFails(t *testing.T) {
	h := newProcHarness(t, nil)
	h.fail[1] = true
	h.resize(3)
	h.clock.Advance(boot)
	if n, _ := h.p.Size(context.Background()); n != 2 {
		t.Fatalf("Size %d after a failed start, want 2", n)
	}
	h.status(ProcessStatus{Running: 2, Failed: 1})
	h.resize(3) // asks for a new one
	h.clock.Advance(boot)
	if s := h.startedSoFar(); !slices.Equal(s, []int{0, 2, 3}) {
		t.Fatalf("started %v, want [0 2 3]", s)
	}
}

func TestProcessStopWhileStarting(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	stopped := make(chan int, 1)
	clock := &fakeClock{}
	p, err := NewProcess(ProcessConfig{Boot: boot, Clock: clock, Start: func(_ context.Context, i int) (StopFunc, error) {
		close(entered)
		<-release
		return func(context.Context) error { stopped <- i; return nil }, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = p.Resize(ctx, 1)
	advanced := make(chan struct{})
	go func() {
		clock.Advance(boot) // runs Start, which blocks
		close(advanced)
	}()
	<-entered
	if got := p.Status(); got != (ProcessStatus{Booting: 1}) {
		t.Fatalf("status %+v while starting, want 1 booting", got)
	}
	_ = p.Resize(ctx, 0)
	if n, _ := p.Size(ctx); n != 0 {
		t.Fatalf("Size %d, want 0", n)
	}
	close(release)
	<-advanced
	if i := <-stopped; i != 0 {
		t.Fatalf("stopped %d, want 0", i)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestProcessClose(t *testing.T) {
	h := newProcHarness(t, nil)
	h.resize(2)
	h.clock.Advance(boot)
	h.resize(3) // 2 still booting at Close
	ctx := context.Background()
	if err := h.p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.stops(2); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("stopped %v, want [0 1]", got)
	}
	h.clock.Advance(boot)
	if s := h.startedSoFar(); !slices.Equal(s, []int{0, 1}) {
		t.Fatalf("started %v after close, want [0 1]", s)
	}
	if h.ctxs[0].Err() == nil {
		t.Fatal("the backends' context is still live after Close")
	}
	if _, err := h.p.Size(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Size after Close: %v, want ErrClosed", err)
	}
	if err := h.p.Resize(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Resize after Close: %v, want ErrClosed", err)
	}
	if err := h.p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestProcessConfigErrors(t *testing.T) {
	start := func(context.Context, int) (StopFunc, error) { return nil, nil }
	if _, err := NewProcess(ProcessConfig{}); err == nil {
		t.Error("no Start: no error")
	}
	if _, err := NewProcess(ProcessConfig{Start: start, Boot: -time.Second}); err == nil {
		t.Error("negative Boot: no error")
	}
	p, err := NewProcess(ProcessConfig{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if err := p.Resize(context.Background(), -1); err == nil {
		t.Error("Resize(-1): no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Resize(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Resize with an ended context: %v", err)
	}
}

// TestProcessRealClock runs a boot on the wall clock (no delay), with a
// nil StopFunc, to check the defaults.
func TestProcessRealClock(t *testing.T) {
	started := make(chan int, 1)
	p, err := NewProcess(ProcessConfig{Start: func(_ context.Context, i int) (StopFunc, error) {
		started <- i
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Resize(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if i := <-started; i != 0 {
		t.Fatalf("started %d, want 0", i)
	}
	if err := p.Resize(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
