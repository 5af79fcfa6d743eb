package frontend

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// recordingRegions is Go memory that remembers which regions are out.
type recordingRegions struct {
	mu     sync.Mutex
	out    map[uint32]bool
	shared map[uint32]bool
}

func (r *recordingRegions) AllocRegion(id uint32, size int, shared bool) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.out[id], r.shared[id] = true, shared
	return make([]byte, size)
}

func (r *recordingRegions) FreeRegion(id uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.out[id] {
		panic("region freed twice")
	}
	delete(r.out, id)
}

func (r *recordingRegions) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.out)
}

const testSeal = 0x5eed_5eed_5eed_5eed

func framedStore(t *testing.T, regionSize int, maxBytes int64, delay time.Duration, c *clock, alloc RegionAllocator) *InputStore {
	t.Helper()
	s, err := NewInputStoreWith(StoreConfig{RegionSize: regionSize, MaxBytes: maxBytes, Regions: alloc, Seal: testSeal, ReuseDelay: delay, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// slotState reads the header of ref's slot as a backend would.
func slotState(s *InputStore, ref wire.InputRef) (rdma.SlotState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off := ref.Offset - rdma.HeaderSize
	return rdma.CheckHeader(s.regions[ref.Region].buf[off:off+rdma.HeaderSize], testSeal, ref)
}

// A framed store writes a sealed header before each input and keeps it in
// step with the input's life; reads over TCP still see only the input.
func TestFramedStoreSlotHeaders(t *testing.T) {
	s := framedStore(t, 1024, 4096, time.Millisecond, newClock(), nil)
	a, err := s.Put(1, []byte("abc"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Offset != rdma.HeaderSize {
		t.Fatalf("first input at %d, want after its header", a.Offset)
	}
	if st, err := slotState(s, a); err != nil || st != rdma.SlotReady {
		t.Fatalf("put: %v %v", st, err)
	}
	if got, err := readInput(s, a); err != nil || string(got) != "abc" {
		t.Fatalf("TCP read: %q %v", got, err)
	}
	b, buf, ready, _ := s.Reserve(2, 5)
	if b.Offset != uint64(rdma.SlotSize(3))+rdma.HeaderSize {
		t.Fatalf("second slot at %d", b.Offset)
	}
	if st, _ := slotState(s, b); st != rdma.SlotPending {
		t.Fatalf("reserved: %v", st)
	}
	copy(buf, "hello")
	ready(nil)
	if st, _ := slotState(s, b); st != rdma.SlotPreprocessed {
		t.Fatalf("preprocessed: %v", st)
	}
	c, _, readyC, _ := s.Reserve(3, 5)
	readyC(errors.New("bad image"))
	if st, _ := slotState(s, c); st != rdma.SlotFailed {
		t.Fatalf("failed preprocessing: %v", st)
	}
	s.Release(1)
	var se *rdma.SlotError
	if _, err := slotState(s, a); !errors.As(err, &se) || se.Reason != "released" {
		t.Fatalf("released slot: %v", err)
	}
	// Released while preprocessing: the header stays until ready.
	d, _, readyD, _ := s.Reserve(4, 5)
	s.Release(4)
	if st, _ := slotState(s, d); st != rdma.SlotPending {
		t.Fatalf("released while pending: %v", st)
	}
	readyD(nil)
	if _, err := slotState(s, d); !errors.As(err, &se) || se.Reason != "released" {
		t.Fatalf("given back after ready: %v", err)
	}
}

// Space given back is not reused before the reuse delay has passed: the
// store sheds a request rather than reuse it early.
func TestFramedStoreReuseDelay(t *testing.T) {
	c := newClock()
	slot := rdma.SlotSize(60)
	s := framedStore(t, slot, int64(2*slot), 10*time.Millisecond, c, nil)
	a, _ := s.Put(1, bytes.Repeat([]byte{1}, 60))
	s.Release(1)
	b, err := s.Put(2, bytes.Repeat([]byte{2}, 60))
	if err != nil || b.Region == a.Region {
		t.Fatalf("reused released space at once: %+v, %v", b, err)
	}
	s.Release(2)
	c.Advance(9 * time.Millisecond)
	if _, err := s.Put(3, bytes.Repeat([]byte{3}, 60)); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("only quarantined space left, got %v", err)
	}
	c.Advance(time.Millisecond)
	d, err := s.Put(3, bytes.Repeat([]byte{3}, 60))
	if err != nil || d.Offset != rdma.HeaderSize {
		t.Fatalf("after the delay: %+v, %v", d, err)
	}
	if st, err := slotState(s, d); err != nil || st != rdma.SlotReady {
		t.Fatalf("reused slot: %v %v", st, err)
	}
}

// Close hands every region back to its allocator once nothing lives in it;
// a preprocessing still writing keeps its region until it is done.
func TestStoreCloseReleasesRegions(t *testing.T) {
	alloc := &recordingRegions{out: map[uint32]bool{}, shared: map[uint32]bool{}}
	s := framedStore(t, 256, 4096, time.Millisecond, newClock(), alloc)
	s.Put(1, make([]byte, 200))
	s.Put(2, make([]byte, 200)) // a second region
	big, _ := s.Put(3, make([]byte, 1000))
	_, buf, ready, _ := s.Reserve(4, 10)
	if alloc.count() != 4 || alloc.shared[big.Region] || !alloc.shared[0] {
		t.Fatalf("regions %v shared %v", alloc.out, alloc.shared)
	}
	s.Release(3) // the oversized input's region goes with it
	if alloc.count() != 3 {
		t.Fatalf("oversized region kept: %v", alloc.out)
	}
	s.Release(1)
	s.Release(2)
	s.Release(4) // still being preprocessed
	s.Close()
	if alloc.count() != 1 {
		t.Fatalf("after Close: %v", alloc.out)
	}
	copy(buf, "late write") // allowed until ready
	ready(nil)
	if alloc.count() != 0 {
		t.Fatalf("after the last ready: %v", alloc.out)
	}
	if _, err := s.Put(5, []byte("x")); !errors.Is(err, ErrStoreClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
}

// The store's half of the reuse argument, end to end over an emulated
// fabric: a READ that overlaps the release of its input either returns
// that input's bytes (the store did not reuse the space) or is refused
// (the store reused it, which it did only after the reuse delay, longer
// than the acceptance window).
func TestRDMAReadNeverReturnsAReusedSlot(t *testing.T) {
	c := newClock()
	net := rdma.NewMemNetwork()
	exp, err := rdma.NewExporter(rdma.ExporterConfig{Fabric: net.Open("fe"), ReuseDelay: 20 * time.Millisecond, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	slot := rdma.SlotSize(100)
	s, err := NewInputStoreWith(StoreConfig{RegionSize: slot, MaxBytes: int64(slot), Regions: exp, Seal: exp.Seal(), ReuseDelay: exp.ReuseDelay(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	one, two := bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 100)
	ref, _ := s.Put(1, one)

	rc := rdma.DefaultReaderConfig(net.Open("be"))
	rc.ReceiveBytes, rc.Now = 1<<20, c.Now
	reader, err := rdma.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	sess, hello, err := reader.Dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := &transporttest.RecordingConn{Remote: "backend"}
	exp.Connect(conn, hello)
	if err := sess.Accept(conn.Take()[0].(*wire.RDMAAccept)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sess.Close()
		if err := reader.Close(); err != nil {
			t.Error(err)
		}
		exp.Close()
		s.Close()
	}()
	read := func() rdma.Outcome {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return sess.Start([]wire.InputRef{ref}).Wait(ctx)[0]
	}

	// Released mid-READ, and the store will not reuse the space yet: the
	// READ gets request 1's bytes, intact.
	var putErr error
	net.SetReadHook(func(n int, copyPart func(int, int)) {
		copyPart(0, rdma.HeaderSize)
		s.Release(1)
		_, putErr = s.Put(2, two)
		copyPart(rdma.HeaderSize, n)
	})
	if o := read(); o.Fallback != nil || !bytes.Equal(o.Data, one) || !errors.Is(putErr, ErrStoreFull) {
		t.Fatalf("READ across a release: %d bytes, %v; Put: %v", len(o.Data), o.Fallback, putErr)
	}

	// The space is reused once the delay has passed; a READ that saw the
	// old header before that is too slow to be believed.
	c.Advance(exp.ReuseDelay())
	if ref, err = s.Put(3, one); err != nil {
		t.Fatal(err)
	}
	net.SetReadHook(func(n int, copyPart func(int, int)) {
		copyPart(0, rdma.HeaderSize)
		s.Release(3)
		c.Advance(exp.ReuseDelay())
		if _, err := s.Put(4, two); err != nil {
			t.Errorf("reuse after the delay: %v", err)
		}
		copyPart(rdma.HeaderSize, n)
	})
	var slow *rdma.SlowReadError
	if o := read(); !errors.As(o.Fallback, &slow) || o.Data != nil {
		t.Fatalf("READ across a reuse: %v, %v", o.Data, o.Fallback)
	}
	net.SetReadHook(nil)
	// And a READ after the reuse sees request 2's header, not request 1's.
	var se *rdma.SlotError
	if o := read(); !errors.As(o.Fallback, &se) || se.Reason != "holds input 4" {
		t.Fatalf("READ of the reused slot: %v", o.Fallback)
	}
}

// A store read by one-sided READs without a reuse delay could hand a READ
// in flight the bytes of the next request in the same space: refused.
func TestSealedStoreNeedsReuseDelay(t *testing.T) {
	if _, err := NewInputStoreWith(StoreConfig{RegionSize: 1024, MaxBytes: 4096, Seal: testSeal}); err == nil || !strings.Contains(err.Error(), "needs a positive one") {
		t.Fatalf("sealed store with no reuse delay: %v, want a refusal", err)
	}
}
