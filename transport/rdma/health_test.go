package rdma

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// The device failure that the verbs poller reports: every queue pair
// watching hears of it once, one that stopped watching does not, and no
// queue pair watches (is made) afterwards.
func TestHealthTellsEveryQueuePairOnce(t *testing.T) {
	h := newHealth()
	heard := map[string]int{}
	watch := func(name string) func() {
		remove, err := h.watch(func(error) { heard[name]++ })
		if err != nil {
			t.Fatal(err)
		}
		return remove
	}
	watch("a")
	watch("b")
	watch("closed")()
	if _, err := h.watch(nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Dead():
		t.Fatal("dead before failing")
	default:
	}
	cause := &DeviceError{Device: "mlx5_0", Err: errors.New("poller stopped")}
	if !h.fail(cause) || h.fail(errors.New("again")) {
		t.Fatal("only the first failure counts")
	}
	if heard["a"] != 1 || heard["b"] != 1 || heard["closed"] != 0 {
		t.Fatalf("heard %v", heard)
	}
	<-h.Dead()
	if h.Err() != cause {
		t.Fatalf("Err %v", h.Err())
	}
	if _, err := h.watch(func(error) {}); err != cause {
		t.Fatalf("watch after the failure: %v", err)
	}
}

// What the poller makes of ibv_get_cq_event's errno on its nonblocking
// channel: only "none yet" and an interruption keep it going.
func TestCQEventErrno(t *testing.T) {
	for _, c := range []struct {
		errno syscall.Errno
		want  cqEventOutcome
	}{
		{syscall.EAGAIN, cqEventWait},
		{syscall.EWOULDBLOCK, cqEventWait},
		{syscall.EINTR, cqEventRetry},
		{syscall.EIO, cqEventFailed},
		{syscall.ENODEV, cqEventFailed},
		{0, cqEventFailed},
	} {
		got, err := cqEventErrno(c.errno)
		if got != c.want || (err != nil) != (c.want == cqEventFailed) {
			t.Errorf("errno %v: %v, %v", c.errno, got, err)
		}
		var ve *VerbsError
		if err != nil && (!errors.As(err, &ve) || ve.Errno == 0) {
			t.Errorf("errno %v: error %v names no errno", c.errno, err)
		}
	}
}

// Our queue pairs notice a dead peer within a few acceptance windows
// rather than after half a second, and a single retried try still fits
// in the default window.
func TestQueuePairTimeouts(t *testing.T) {
	window := DefaultReuseDelay / 2
	if try := ackTimeout(qpAckTimeout); try >= window || try < 4*time.Millisecond {
		t.Errorf("a try waits %v; the window is %v", try, window)
	}
	if d := deadPeerAfter(qpAckTimeout, qpRetryCount); d > 4*window {
		t.Errorf("a dead peer is noticed after %v, over 4 windows of %v", d, window)
	}
	if d := deadPeerAfter(14, 7); d < 500*time.Millisecond {
		t.Errorf("timeout 14, retry_cnt 7: %v", d) // what it was
	}
}
