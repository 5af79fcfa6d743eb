package frontend

import (
	"testing"
	"time"
)

// An answer that comes after its request's deadline ends the request as
// expired: the caller gets no late answer. One in time is an answer.
func TestLateAnswerEndsAsExpired(t *testing.T) {
	c := &Client{pending: map[uint64]*Call{}, store: NewInputStore(1<<16, 1<<16)}
	now := time.Now()
	late := &Call{Model: "m", done: make(chan struct{}), deadline: now.Add(-time.Millisecond)}
	onTime := &Call{Model: "m", done: make(chan struct{}), deadline: now.Add(time.Hour)}
	c.pending[1], c.pending[2] = late, onTime
	c.finish(1, []byte("out"), nil, Timing{BatchSize: 3})
	c.finish(2, []byte("out"), nil, Timing{BatchSize: 3})
	if r, ok := IsDrop(late.Err); !ok || r != DropExpired || late.Output != nil {
		t.Errorf("late answer: err %v output %q, want an expired drop without output", late.Err, late.Output)
	}
	if late.Timing.BatchSize != 3 {
		t.Errorf("late answer lost its batch timing: %+v", late.Timing)
	}
	if onTime.Err != nil || string(onTime.Output) != "out" {
		t.Errorf("answer in time: err %v output %q", onTime.Err, onTime.Output)
	}
	st := c.Stats()
	if st.Expired.Load() != 1 || st.Dropped.Load() != 1 || st.Answered.Load() != 1 {
		t.Errorf("expired %d dropped %d answered %d, want 1 each", st.Expired.Load(), st.Dropped.Load(), st.Answered.Load())
	}
}
