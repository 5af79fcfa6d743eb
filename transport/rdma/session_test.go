package rdma

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// fakeClock is the Reader's clock and timer, moved by the test.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	alarms []*fakeAlarm
	armed  chan struct{} // gets a token whenever an alarm is set for later
}

type fakeAlarm struct {
	at time.Time
	c  chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1000, 0), armed: make(chan struct{}, 64)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Alarm is the Reader's timer: it goes off when Advance reaches at.
func (c *fakeClock) Alarm(at time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := &fakeAlarm{at: at, c: make(chan time.Time, 1)}
	if !c.now.Before(at) {
		a.c <- c.now
		return a.c, func() {}
	}
	c.alarms = append(c.alarms, a)
	select {
	case c.armed <- struct{}{}:
	default:
	}
	return a.c, func() {
		c.mu.Lock()
		c.alarms = slices.DeleteFunc(c.alarms, func(x *fakeAlarm) bool { return x == a })
		c.mu.Unlock()
	}
}

// Advance moves the clock and sets off the alarms it reaches.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.alarms = slices.DeleteFunc(c.alarms, func(a *fakeAlarm) bool {
		if c.now.Before(a.at) {
			return false
		}
		a.c <- c.now
		return true
	})
	c.mu.Unlock()
}

// Step moves the clock without setting off alarms, as when a timer fires
// late: whatever happens before they go off meets the completions' own
// checks.
func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// waitArmed waits until someone (Batch.Wait) sets an alarm for later.
func (c *fakeClock) waitArmed(t *testing.T) {
	t.Helper()
	select {
	case <-c.armed:
	case <-time.After(10 * time.Second):
		t.Fatal("no alarm set: Wait does not wait for a deadline")
	}
}

// pair is an Exporter and a Reader on one MemNetwork, with a Session
// between them, and one region of the exporter's.
type pair struct {
	net    *MemNetwork
	exp    *Exporter
	reader *Reader
	conn   *transporttest.RecordingConn
	sess   *Session
	clock  *fakeClock
	broken chan error
	region []byte // region 0
	// leaky: the test leaked receive buffers, so the Reader must refuse
	// to close.
	leaky bool
}

const testReuse = 40 * time.Millisecond

// newPair is a pair on a MemNetwork.
func newPair(t *testing.T, depth int) *pair {
	t.Helper()
	net := NewMemNetwork()
	p := newPairOn(t, depth, func(name string) (Fabric, error) { return net.Open(name), nil })
	p.net = net
	return p
}

// newPairOn is a pair on the fabrics open returns; opts adjust the
// Reader's configuration.
func newPairOn(t *testing.T, depth int, open func(name string) (Fabric, error), opts ...func(*ReaderConfig)) *pair {
	t.Helper()
	p := &pair{conn: &transporttest.RecordingConn{Remote: "backend"}, clock: newFakeClock(), broken: make(chan error, 1)}
	fe, err := open("fe0")
	if err != nil {
		t.Fatal(err)
	}
	p.exp, err = NewExporter(ExporterConfig{Fabric: fe, ReuseDelay: testReuse, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p.region = p.exp.AllocRegion(0, 1<<16, true)
	if len(p.exp.Regions()) != 1 {
		t.Fatal("region not registered: see the log's locked-memory hint")
	}
	be, err := open("be0")
	if err != nil {
		t.Fatal(err)
	}
	rc := DefaultReaderConfig(be)
	rc.ReceiveBytes, rc.Depth, rc.Now, rc.Alarm = 1<<20, depth, p.clock.Now, p.clock.Alarm
	for _, o := range opts {
		o(&rc)
	}
	if p.reader, err = NewReader(rc); err != nil {
		t.Fatal(err)
	}
	s, hello, err := p.reader.Dial(func(_ *Session, err error) { p.broken <- err })
	if err != nil {
		t.Fatal(err)
	}
	p.exp.Connect(p.conn, hello)
	sent := p.conn.Take()
	acc, ok := sent[0].(*wire.RDMAAccept)
	if len(sent) != 1 || !ok {
		t.Fatalf("exporter answered %v", sent)
	}
	if len(acc.Regions) != 1 || acc.ReuseDelay != testReuse || acc.Seal != p.exp.Seal() {
		t.Fatalf("accept %+v", acc)
	}
	// The answer crosses the wire.
	m, err := wire.Decode(acc.Kind(), wire.Marshal(acc))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Accept(m.(*wire.RDMAAccept)); err != nil {
		t.Fatal(err)
	}
	p.sess = s
	t.Cleanup(func() {
		if p.net != nil {
			p.net.SetReadHook(nil)
		}
		s.Close()
		p.exp.Disconnect(p.conn)
		if err := p.reader.Close(); (err != nil) != p.leaky {
			t.Errorf("closing the reader: %v, with leaked buffers: %v", err, p.leaky)
		}
		p.exp.Close()
		for _, r := range p.exp.Regions() {
			p.exp.FreeRegion(r.ID)
		}
	})
	return p
}

// put writes a slot at off of region 0 as a store would.
func (p *pair) put(off int, key uint64, data []byte, st SlotState) wire.InputRef {
	PutHeader(p.region[off:], p.exp.Seal(), key, uint32(len(data)), st)
	copy(p.region[off+HeaderSize:], data)
	return wire.InputRef{Region: 0, Offset: uint64(off + HeaderSize), Length: uint32(len(data)), Key: key}
}

func (p *pair) read(t *testing.T, refs ...wire.InputRef) []Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.sess.Start(refs).Wait(ctx)
}

// onFabrics runs test on the emulated fabric, and on the machine's RDMA
// device where there is one (the rdma build on an HCA or Soft-RoCE).
func onFabrics(t *testing.T, test func(t *testing.T, open func(string) (Fabric, error))) {
	t.Run("emulated", func(t *testing.T) {
		net := NewMemNetwork()
		test(t, func(name string) (Fabric, error) { return net.Open(name), nil })
	})
	t.Run("device", func(t *testing.T) {
		cfg := DefaultDeviceConfig()
		dev, err := Available(cfg)
		if err != nil {
			t.Skipf("no RDMA here (%v). To run: Soft-RoCE (modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0) "+
				"or an HCA, then go test -tags rdma -run RDMA -v ./transport/rdma/", err)
		}
		t.Logf("RDMA device %s", dev)
		test(t, func(string) (Fabric, error) { return Open(cfg) })
	})
}

func TestRDMASessionReadsSlots(t *testing.T) { onFabrics(t, testSessionReadsSlots) }

func testSessionReadsSlots(t *testing.T, open func(string) (Fabric, error)) {
	p := newPairOn(t, 64, open)
	a := p.put(0, 7, []byte("first input"), SlotReady)
	// A region registered after the accept is announced on the connection.
	r1 := p.exp.AllocRegion(1, 1<<16, true)
	sent := p.conn.Take()
	if len(sent) != 1 || sent[0].(*wire.RDMARegions).Regions[0].ID != 1 {
		t.Fatalf("announcement %v", sent)
	}
	p.sess.AddRegions(sent[0].(*wire.RDMARegions).Regions)
	PutHeader(r1[64:], p.exp.Seal(), 8, 3, SlotReady)
	copy(r1[64+HeaderSize:], "two")
	b := wire.InputRef{Region: 1, Offset: 64 + HeaderSize, Length: 3, Key: 8}
	empty := p.put(128, 9, nil, SlotReady)
	out := p.read(t, a, b, empty)
	for i, want := range []string{"first input", "two", ""} {
		if out[i].Fallback != nil || out[i].Data == nil || string(out[i].Data) != want {
			t.Errorf("read %d: %q, %v", i, out[i].Data, out[i].Fallback)
		}
	}
	if st := p.reader.Stats(); st.Reads.Load() != 3 || st.Fallbacks.Load() != 0 || st.Bytes.Load() != 14 {
		t.Errorf("stats: %d reads, %d fallbacks, %d bytes", st.Reads.Load(), st.Fallbacks.Load(), st.Bytes.Load())
	}
	if ps := p.reader.PoolStats(); ps.InUse != 0 {
		t.Errorf("%d receive bytes still out", ps.InUse)
	}
	// An oversized input's region is Go memory, never registered.
	if big := p.exp.AllocRegion(2, 1<<17, false); len(big) != 1<<17 || len(p.exp.Regions()) != 2 || len(p.conn.Take()) != 0 {
		t.Error("a single-input region was registered or announced")
	}
}

// Everything the Session cannot vouch for goes to TCP, with the reason.
func TestRDMASessionFallbacks(t *testing.T) { onFabrics(t, testSessionFallbacks) }

func testSessionFallbacks(t *testing.T, open func(string) (Fabric, error)) {
	p := newPairOn(t, 64, open)
	pending := p.put(0, 1, []byte("not yet"), SlotPending)
	failed := p.put(64, 2, []byte("bad image"), SlotFailed)
	released := p.put(128, 3, []byte("gone"), SlotReady)
	ClearHeader(p.region[128:])
	reused := p.put(192, 4, []byte("old"), SlotReady)
	reused.Key = 44 // the slot holds request 4's input, not 44's
	unknown := wire.InputRef{Region: 9, Offset: 64, Length: 1, Key: 5}
	outside := wire.InputRef{Region: 0, Offset: 1<<16 - 2, Length: 10, Key: 6}
	// An input larger than the whole receive arena (1 MiB here).
	p.exp.AllocRegion(3, 2<<20, true)
	p.sess.AddRegions(p.conn.Take()[0].(*wire.RDMARegions).Regions)
	tooBig := wire.InputRef{Region: 3, Offset: 24, Length: 3 << 19, Key: 7}
	out := p.read(t, pending, failed, released, reused, unknown, outside, tooBig)
	var se *SlotError
	for i, want := range []func(error) bool{
		func(err error) bool { return errors.As(err, &se) && se.Reason == "input pending" },
		func(err error) bool { return errors.As(err, &se) && se.Reason == "input failed" },
		func(err error) bool { return errors.As(err, &se) && se.Reason == "released" },
		func(err error) bool { return errors.As(err, &se) && se.Reason == "holds input 4" },
		func(err error) bool {
			return err != nil && bytes.Contains([]byte(err.Error()), []byte("not announced"))
		},
		func(err error) bool {
			return err != nil && bytes.Contains([]byte(err.Error()), []byte("outside region"))
		},
		func(err error) bool { return errors.Is(err, ErrPoolExhausted) },
	} {
		if out[i].Data != nil || !want(out[i].Fallback) {
			t.Errorf("read %d: data %q, fallback %v", i, out[i].Data, out[i].Fallback)
		}
	}
	if st := p.reader.Stats(); st.Fallbacks.Load() != 7 || st.Reads.Load() != 0 {
		t.Errorf("%d fallbacks, %d reads", st.Fallbacks.Load(), st.Reads.Load())
	}
	if !p.sess.Up() {
		t.Error("slot mismatches broke the session")
	}
}

// A slot written by preprocessing after its task went out is READ twice:
// the second READ starts after the first saw it complete.
func TestRDMASessionReadsPreprocessedSlotsTwice(t *testing.T) {
	onFabrics(t, func(t *testing.T, open func(string) (Fabric, error)) {
		p := newPairOn(t, 64, open)
		ref := p.put(0, 1, []byte("tensor"), SlotPreprocessed)
		out := p.read(t, ref)
		if out[0].Fallback != nil || string(out[0].Data) != "tensor" || p.reader.Stats().SecondReads.Load() != 1 {
			t.Fatalf("%q %v after %d second READs", out[0].Data, out[0].Fallback, p.reader.Stats().SecondReads.Load())
		}
	})
}

// The reuse argument, as a backend sees it. A NIC may read a message's
// bytes in any order: if the slot is released and reused during the READ,
// either the header was read after the release (and says so), or the
// reuse, which the store allows only ReuseDelay after the release, came
// more than the acceptance window (ReuseDelay/2) after the READ began.
func TestSessionRejectsReadsOverlappingReuse(t *testing.T) {
	p := newPair(t, 64)
	ref := p.put(0, 1, []byte("request one's input"), SlotReady)

	// Input first, then the release, then the header: the header says so.
	p.net.SetReadHook(func(n int, copyPart func(int, int)) {
		copyPart(HeaderSize, n)
		ClearHeader(p.region[0:])
		copyPart(0, HeaderSize)
	})
	var se *SlotError
	if out := p.read(t, ref); !errors.As(out[0].Fallback, &se) || se.Reason != "released" {
		t.Fatalf("header read after the release: %q, %v", out[0].Data, out[0].Fallback)
	}

	// Header first, then release and reuse: reuse waits ReuseDelay, so the
	// READ outlasts its window, and its bytes are not used. (The clock
	// steps without waking Wait, whose deadline passes meanwhile: the
	// READ's own check at its completion refuses it, or, when Wait wakes
	// first on a loaded machine, Wait gives the READ up as still pending.
	// Either way the bytes are refused.)
	ref = p.put(0, 1, []byte("request one's input"), SlotReady)
	p.net.SetReadHook(func(n int, copyPart func(int, int)) {
		copyPart(0, HeaderSize)
		ClearHeader(p.region[0:])
		p.clock.Step(testReuse) // the store's reuse delay
		p.put(0, 2, []byte("request two's bytes"), SlotReady)
		copyPart(HeaderSize, n)
	})
	var slow *SlowReadError
	if out := p.read(t, ref); !errors.As(out[0].Fallback, &slow) || slow.Window != testReuse/2 || len(out[0].Data) != 0 {
		t.Fatalf("READ across a reuse: %q, %v", out[0].Data, out[0].Fallback)
	}
	if p.reader.Stats().SlowReads.Load() != 1 {
		t.Error("slow READ not counted")
	}
}

// A READ's error completion breaks the session: the owner hears of it and
// every later read goes to TCP.
func TestRDMASessionBreaksOnRemoteAccessError(t *testing.T) {
	onFabrics(t, testSessionBreaksOnRemoteAccessError)
}

func testSessionBreaksOnRemoteAccessError(t *testing.T, open func(string) (Fabric, error)) {
	p := newPairOn(t, 64, open)
	p.sess.AddRegions([]wire.RDMARegion{{ID: 5, Addr: 4096, Length: 1 << 16, RKey: 999}})
	out := p.read(t, wire.InputRef{Region: 5, Offset: 64, Length: 8, Key: 1})
	var ce *CompletionError
	if !errors.As(out[0].Fallback, &ce) || ce.Status != WCRemAccessErr {
		t.Fatalf("READ with a bad rkey: %v", out[0].Fallback)
	}
	if err := <-p.broken; !errors.As(err, &ce) {
		t.Fatalf("onBroken got %v", err)
	}
	if p.sess.Up() {
		t.Fatal("session still up")
	}
	ok := p.put(0, 2, []byte("x"), SlotReady)
	if out := p.read(t, ok); !errors.Is(out[0].Fallback, errNotUp) {
		t.Fatalf("read on a broken session: %v", out[0].Fallback)
	}
}

// A batch that stops waiting leaves its buffers with their READs, which
// return them when they complete.
func TestSessionAbandonedReadReturnsItsBuffer(t *testing.T) {
	p := newPair(t, 64)
	ref := p.put(0, 1, []byte("slow"), SlotReady)
	started, release := make(chan struct{}), make(chan struct{})
	p.net.SetReadHook(func(n int, copyPart func(int, int)) {
		close(started)
		<-release
		copyPart(0, n)
	})
	ctx, cancel := context.WithCancel(context.Background())
	b := p.sess.Start([]wire.InputRef{ref})
	<-started
	cancel()
	if out := b.Wait(ctx); !errors.Is(out[0].Fallback, context.Canceled) {
		t.Fatalf("abandoned read: %v", out[0].Fallback)
	}
	if p.reader.PoolStats().InUse == 0 {
		t.Fatal("buffer returned while its READ may still write it")
	}
	close(release)
	p.sess.Close() // waits for the READ to complete
	if n := p.reader.PoolStats().InUse; n != 0 {
		t.Fatalf("%d bytes still out after the READ completed", n)
	}
}

// More reads than the send queue holds wait their turn.
func TestRDMASessionQueuesBeyondItsDepth(t *testing.T) { onFabrics(t, testSessionQueuesBeyondItsDepth) }

func testSessionQueuesBeyondItsDepth(t *testing.T, open func(string) (Fabric, error)) {
	p := newPairOn(t, 2, open)
	var refs []wire.InputRef
	for i := 0; i < 20; i++ {
		refs = append(refs, p.put(i*64, uint64(i+1), []byte{byte(i)}, SlotReady))
	}
	for i, o := range p.read(t, refs...) {
		if o.Fallback != nil || len(o.Data) != 1 || o.Data[0] != byte(i) {
			t.Fatalf("read %d: %v %v", i, o.Data, o.Fallback)
		}
	}
}

func TestExporterLifecycle(t *testing.T) {
	net := NewMemNetwork()
	fab := net.Open("fe0")
	exp, err := NewExporter(ExporterConfig{Fabric: fab, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if exp.ReuseDelay() != DefaultReuseDelay || exp.Seal() == 0 {
		t.Fatalf("defaults: %v %#x", exp.ReuseDelay(), exp.Seal())
	}
	region := exp.AllocRegion(0, 4096, true)
	region[0] = 1
	exp.Close()
	c := &transporttest.RecordingConn{Remote: "backend"}
	exp.Connect(c, &wire.RDMAConnect{Endpoint: wire.RDMAEndpoint{QPN: 5, LID: 1, MTU: 5, ReadDepth: 1}})
	if sent := c.Take(); len(sent) != 1 || sent[0].(*wire.RDMARefuse).ForQPN != 5 {
		t.Fatalf("closed exporter answered %v", sent)
	}
	// The device stays open while the store still holds a region.
	qp, err := fab.NewQueuePair(1, nil, nil)
	if err != nil {
		t.Fatalf("device closed before its last region: %v", err)
	}
	_ = qp.Close()
	exp.FreeRegion(0)
	var ve *VerbsError
	if _, err := fab.NewQueuePair(1, nil, nil); !errors.As(err, &ve) || ve.Errno != syscall.ENODEV {
		t.Fatalf("device open after the last region: %v", err)
	}
}

func TestReaderCloseRefusesWhileBuffersAreOut(t *testing.T) {
	net := NewMemNetwork()
	r, err := NewReader(DefaultReaderConfig(net.Open("be0")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.pool.Get(100)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err == nil {
		t.Fatal("Close with a buffer out")
	}
	_ = r.pool.Put(b)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
