package actuate

import (
	"slices"
	"sync"
	"time"
)

// fakeClock is a Clock that moves only when the test advances it. Unlike
// time.AfterFunc it runs the due calls synchronously, in Advance, so a
// test knows they ran once Advance returns.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Duration
	f    func()
	done bool
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	return true
}

// Advance moves the clock by d and runs the calls that fall due, in time
// order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	var due []*fakeTimer
	for _, t := range c.timers {
		if !t.done && t.at <= c.now {
			t.done = true
			due = append(due, t)
		}
	}
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t.done })
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return int(a.at - b.at) })
	for _, t := range due {
		t.f()
	}
}
