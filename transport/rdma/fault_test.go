package rdma

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// blockReads makes the network's READs wait (before copying) until the
// returned release is called; started gets a token as each READ begins,
// and reads counts them.
func blockReads(t *testing.T, net *MemNetwork) (started chan struct{}, release func(), reads *atomic.Int32) {
	t.Helper()
	started, gate := make(chan struct{}, 64), make(chan struct{})
	reads = new(atomic.Int32)
	net.SetReadHook(func(n int, copyPart func(int, int)) {
		reads.Add(1)
		started <- struct{}{}
		<-gate
		copyPart(0, n)
	})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return started, release, reads
}

// recv waits for a value that the code under test sends without delay.
func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// waitAsync runs b.Wait on a goroutine of its own.
func waitAsync(b *Batch) <-chan []Outcome {
	out := make(chan []Outcome, 1)
	go func() { out <- b.Wait(context.Background()) }()
	return out
}

// A READ still running at the end of its acceptance window would be
// refused anyway: Wait gives up on it then, rather than waiting for the
// NIC to give up on a vanished frontend (or for ctx), and its buffer stays
// out until the READ completes. The late completion is not judged: the
// preprocessed slot is not READ a second time.
func TestSessionWaitGivesUpAtTheDeadline(t *testing.T) {
	p := newPair(t, 64)
	ref := p.put(0, 1, []byte("tensor"), SlotPreprocessed)
	started, release, reads := blockReads(t, p.net)
	b := p.sess.Start([]wire.InputRef{ref})
	recv(t, started, "READ")
	out := waitAsync(b)
	p.clock.waitArmed(t)
	p.clock.Advance(testReuse / 2)
	o := recv(t, out, "outcome: Wait did not give up at the deadline")[0]
	var slow *SlowReadError
	if !errors.As(o.Fallback, &slow) || !slow.Pending || slow.Window != testReuse/2 || slow.Took != testReuse/2 || o.Data != nil {
		t.Fatalf("READ past its deadline: %q, %v", o.Data, o.Fallback)
	}
	st := p.reader.Stats()
	if st.SlowReads.Load() != 1 || st.Fallbacks.Load() != 1 {
		t.Fatalf("%d slow reads, %d fallbacks", st.SlowReads.Load(), st.Fallbacks.Load())
	}
	if p.reader.PoolStats().InUse == 0 {
		t.Fatal("buffer returned while its READ may still write it")
	}
	if !p.sess.Up() {
		t.Fatal("a slow READ broke the session")
	}
	release()
	p.sess.Close() // waits for the READ to complete
	if n := p.reader.PoolStats().InUse; n != 0 {
		t.Fatalf("%d bytes still out after the READ completed", n)
	}
	if reads.Load() != 1 || st.SecondReads.Load() != 0 || st.SlowReads.Load() != 1 {
		t.Fatalf("after the late completion: %d READs, %d second, %d slow", reads.Load(), st.SecondReads.Load(), st.SlowReads.Load())
	}
}

// Wait does not give up on a READ before its deadline.
func TestSessionWaitKeepsAReadWithinItsWindow(t *testing.T) {
	p := newPair(t, 64)
	ref := p.put(0, 1, []byte("in time"), SlotReady)
	started, release, _ := blockReads(t, p.net)
	b := p.sess.Start([]wire.InputRef{ref})
	recv(t, started, "READ")
	out := waitAsync(b)
	p.clock.waitArmed(t)
	p.clock.Advance(testReuse/2 - time.Nanosecond)
	release()
	if o := recv(t, out, "outcome")[0]; o.Fallback != nil || string(o.Data) != "in time" {
		t.Fatalf("READ within its window: %q, %v", o.Data, o.Fallback)
	}
}

// READs queued behind a stalled send queue are given up too, a window
// after they were queued: never posted, their buffers return at once.
func TestSessionWaitGivesUpOnQueuedReads(t *testing.T) {
	p := newPair(t, 1)
	a := p.put(0, 1, []byte("posted"), SlotReady)
	b := p.put(64, 2, []byte("queued"), SlotReady)
	started, release, reads := blockReads(t, p.net)
	batch := p.sess.Start([]wire.InputRef{a, b})
	recv(t, started, "READ")
	out := waitAsync(batch)
	p.clock.waitArmed(t)
	p.clock.Advance(testReuse / 2)
	for i, o := range recv(t, out, "outcomes") {
		var slow *SlowReadError
		if !errors.As(o.Fallback, &slow) || !slow.Pending {
			t.Fatalf("read %d: %q, %v", i, o.Data, o.Fallback)
		}
	}
	if ps := p.reader.PoolStats(); ps.Buffers != 1 {
		t.Fatalf("%d buffers out, want the posted READ's only", ps.Buffers)
	}
	release()
	p.sess.Close()
	if reads.Load() != 1 || p.reader.PoolStats().InUse != 0 {
		t.Fatalf("%d READs (the queued one was posted after it was given up?), %d bytes out", reads.Load(), p.reader.PoolStats().InUse)
	}
}

// Without a fake clock, the Reader's own timer ends the wait: a READ that
// never completes costs the batch its window (20 ms here), not ctx's time.
func TestSessionWaitDeadlineOnTheRuntimeClock(t *testing.T) {
	net := NewMemNetwork()
	p := newPairOn(t, 64, func(name string) (Fabric, error) { return net.Open(name), nil },
		func(rc *ReaderConfig) { rc.Now, rc.Alarm = nil, nil })
	p.net = net
	ref := p.put(0, 1, []byte("never"), SlotReady)
	started, release, _ := blockReads(t, p.net)
	b := p.sess.Start([]wire.InputRef{ref})
	recv(t, started, "READ")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var slow *SlowReadError
	if o := b.Wait(ctx)[0]; !errors.As(o.Fallback, &slow) || !slow.Pending || slow.Took < testReuse/2 {
		t.Fatalf("READ that never completes: %v", o.Fallback)
	}
	release()
}

// The decision verbs' Close makes for the READs left when it destroyed a
// queue pair, or failed to.
func TestTeardownCompletions(t *testing.T) {
	for _, c := range teardownCompletions([]uint64{3, 4}, nil) {
		var ce *CompletionError
		if c.Stranded || !errors.As(c.Err, &ce) || !ce.Flushed() {
			t.Fatalf("destroyed: %+v", c)
		}
	}
	busy := &VerbsError{Op: "ibv_destroy_qp", Errno: syscall.EBUSY}
	cs := teardownCompletions([]uint64{3, 4}, busy)
	for i, c := range cs {
		if c.WRID != uint64(3+i) || !c.Stranded || !errors.Is(c.Err, syscall.EBUSY) {
			t.Fatalf("not destroyed: %+v", c)
		}
	}
}

// syncBuffer is a log sink for tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// If its queue pair cannot be destroyed, a READ that did not complete may
// still be written by the NIC: its buffer is leaked (counted, logged),
// never handed out again, and the arena stays mapped.
func TestSessionLeaksBuffersOfAQueuePairNotDestroyed(t *testing.T) {
	var log syncBuffer
	net := NewMemNetwork()
	p := newPairOn(t, 64, func(name string) (Fabric, error) { return net.Open(name), nil },
		func(rc *ReaderConfig) { rc.Log = zerolog.New(&log) })
	p.net = net
	ref := p.put(0, 1, []byte("late DMA"), SlotReady)
	started, release, _ := blockReads(t, p.net)
	b := p.sess.Start([]wire.InputRef{ref})
	recv(t, started, "READ")
	busy := &VerbsError{Op: "ibv_destroy_qp", Errno: syscall.EBUSY}
	p.net.SetDestroyFault(busy)
	p.sess.Close() // does not wait for the READ, which goes on
	p.net.SetDestroyFault(nil)
	p.leaky = true
	if o := b.Wait(context.Background())[0]; !errors.Is(o.Fallback, syscall.EBUSY) || o.Data != nil {
		t.Fatalf("stranded READ: %q, %v", o.Data, o.Fallback)
	}
	ps := p.reader.PoolStats()
	if ps.Leaked != 1 || ps.LeakedBytes == 0 || ps.InUse != ps.LeakedBytes {
		t.Fatalf("pool after a stranded READ: %+v", ps)
	}
	if !strings.Contains(log.String(), "receive buffer leaked") {
		t.Errorf("leak not logged: %s", log.String())
	}
	// The next reads get other buffers.
	for range 4 {
		nb, err := p.reader.pool.Get(ps.LeakedBytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, leaked := p.reader.pool.leaked[nb.Off]; leaked {
			t.Fatalf("leaked buffer %+v handed out again", nb)
		}
		defer func() { _ = p.reader.pool.Put(nb) }()
	}
	release() // the late DMA lands in the leaked buffer
	if err := p.reader.Close(); err == nil || !strings.Contains(err.Error(), "leaked") {
		t.Fatalf("Reader.Close with a leaked buffer: %v", err)
	}
}

// dialAnother brings up one more session of p's reader with p's exporter,
// over a connection of its own.
func (p *pair) dialAnother(t *testing.T, broken chan<- error) *Session {
	t.Helper()
	s, hello, err := p.reader.Dial(func(_ *Session, err error) { broken <- err })
	if err != nil {
		t.Fatal(err)
	}
	c := &transporttest.RecordingConn{Remote: "backend"}
	p.exp.Connect(c, hello)
	if err := s.Accept(c.Take()[0].(*wire.RDMAAccept)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); p.exp.Disconnect(c) })
	return s
}

// When the device stops delivering completions, every session on it
// breaks (its owner goes to TCP and closes it), the failure is logged
// once, and no queue pair is made on it any more. Closing a session ends
// its READs, as flushed, once the NIC is done with them.
func TestSessionsBreakWhenTheDeviceFails(t *testing.T) {
	var log syncBuffer
	net := NewMemNetwork()
	p := newPairOn(t, 64, func(name string) (Fabric, error) { return net.Open(name), nil },
		func(rc *ReaderConfig) { rc.Log = zerolog.New(&log) })
	p.net = net
	other := make(chan error, 1)
	s2 := p.dialAnother(t, other)
	ref := p.put(0, 1, []byte("in flight"), SlotReady)
	started, release, _ := blockReads(t, p.net)
	b := p.sess.Start([]wire.InputRef{ref})
	recv(t, started, "READ")

	cause := errors.New("completion channel: input/output error")
	if !p.net.FailDevice("be0", cause) {
		t.Fatal("no device be0")
	}
	var de *DeviceError
	for _, c := range []chan error{p.broken, other} {
		if err := recv(t, c, "onBroken"); !errors.As(err, &de) || !errors.Is(err, cause) {
			t.Fatalf("onBroken got %v", err)
		}
	}
	if p.sess.Up() || s2.Up() {
		t.Fatal("a session is still up on a failed device")
	}
	if n := strings.Count(log.String(), "every session on it falls back to TCP"); n != 1 {
		t.Errorf("failure logged %d times: %s", n, log.String())
	}
	if _, _, err := p.reader.Dial(nil); !errors.As(err, &de) {
		t.Fatalf("Dial on a failed device: %v", err)
	}
	if o := s2.Start([]wire.InputRef{ref}).Wait(context.Background())[0]; !errors.Is(o.Fallback, errNotUp) {
		t.Fatalf("read on a broken session: %v", o.Fallback)
	}
	// The READ's DMA ends, but its completion never comes: closing the
	// session, as its owner does, flushes it.
	release()
	p.sess.Close()
	var ce *CompletionError
	if o := b.Wait(context.Background())[0]; !errors.As(o.Fallback, &ce) || !ce.Flushed() {
		t.Fatalf("READ in flight on a failed device: %v", o.Fallback)
	}
	if n := p.reader.PoolStats().InUse; n != 0 {
		t.Fatalf("%d bytes still out", n)
	}
}
