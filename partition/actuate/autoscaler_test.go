package actuate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// fakeActuator records the resizes asked of it.
type fakeActuator struct {
	size               int
	resizes            []int
	sizeErr, resizeErr error
}

func (f *fakeActuator) Size(context.Context) (int, error) { return f.size, f.sizeErr }

func (f *fakeActuator) Resize(_ context.Context, n int) error {
	if f.resizeErr != nil {
		return f.resizeErr
	}
	f.resizes = append(f.resizes, n)
	f.size = n
	return nil
}

func TestAutoscalerApply(t *testing.T) {
	pol, err := NewPolicy(PolicyConfig{WarmPool: 1, ScaleInDelay: 20 * time.Second, Min: 1, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	act := &fakeActuator{size: 3}
	a := &Autoscaler{Policy: pol, Actuator: act}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	steps := []struct {
		at      time.Duration
		want    int
		target  int
		resizes []int
	}{
		{0, 2, 3, nil},                        // already 3: no request
		{10 * time.Second, 5, 6, []int{6}},    // out at once
		{20 * time.Second, 5, 6, []int{6}},    // hold: no request
		{30 * time.Second, 1, 6, []int{6}},    // lower, within the delay
		{50 * time.Second, 1, 2, []int{6, 2}}, // 20s lower: in
		{60 * time.Second, 30, 10, []int{6, 2, 10}},
	}
	for i, s := range steps {
		got, err := a.Apply(ctx, t0.Add(s.at), s.want)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got != s.target || !slices.Equal(act.resizes, s.resizes) {
			t.Fatalf("step %d: target %d, resizes %v; want %d, %v", i, got, act.resizes, s.target, s.resizes)
		}
	}
}

// TestAutoscalerResizesAfterDrift checks Apply compares with the actuator's
// own size, not with its last target: a backend that died (or a manual
// scale) is made up for at the next epoch.
func TestAutoscalerResizesAfterDrift(t *testing.T) {
	pol, _ := NewPolicy(PolicyConfig{Max: 10})
	act := &fakeActuator{}
	a := &Autoscaler{Policy: pol, Actuator: act}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := a.Apply(context.Background(), t0, 4); err != nil {
		t.Fatal(err)
	}
	act.size = 3 // one failed to start
	if _, err := a.Apply(context.Background(), t0.Add(time.Second), 4); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(act.resizes, []int{4, 4}) {
		t.Fatalf("resizes %v, want [4 4]", act.resizes)
	}
}

func TestAutoscalerErrors(t *testing.T) {
	pol, _ := NewPolicy(PolicyConfig{Max: 10})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	boom := errors.New("boom")

	act := &fakeActuator{sizeErr: boom}
	got, err := (&Autoscaler{Policy: pol, Actuator: act}).Apply(ctx, t0, 3)
	if !errors.Is(err, boom) || got != 3 || len(act.resizes) != 0 {
		t.Fatalf("Size failing: target %d, err %v, resizes %v", got, err, act.resizes)
	}
	act = &fakeActuator{resizeErr: boom}
	got, err = (&Autoscaler{Policy: pol, Actuator: act}).Apply(ctx, t0, 5)
	if !errors.Is(err, boom) || got != 5 {
		t.Fatalf("Resize failing: target %d, err %v", got, err)
	}
	if _, err := (&Autoscaler{Actuator: act}).Apply(ctx, t0, 1); err == nil {
		t.Fatal("no policy: no error")
	}
	if _, err := (&Autoscaler{Policy: pol}).Apply(ctx, t0, 1); err == nil {
		t.Fatal("no actuator: no error")
	}
}

// TestAutoscalerWithProcess drives a Process actuator: booting backends
// count towards the size, so epochs during a boot ask for nothing more.
func TestAutoscalerWithProcess(t *testing.T) {
	h := newProcHarness(t, nil)
	pol, _ := NewPolicy(PolicyConfig{WarmPool: 1, Max: 10})
	a := &Autoscaler{Policy: pol, Actuator: h.p}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 { // three epochs within one boot
		if n, err := a.Apply(context.Background(), t0.Add(time.Duration(i)*time.Second), 2); err != nil || n != 3 {
			t.Fatalf("epoch %d: target %d, %v", i, n, err)
		}
	}
	h.status(ProcessStatus{Booting: 3})
	h.clock.Advance(boot)
	h.status(ProcessStatus{Running: 3})
}
