package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/rdma/rdmatest"
	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// rdmaCluster is a backend's RDMA puller and frontends whose stores it
// READs, each frontend and the backend on a fabric of their own, with
// queue pairs brought up over the data connections of n. The frontends
// are rdmatest stores behind transporttest data addresses: backend tests
// may not import the frontend.
type rdmaCluster struct {
	puller *rdmaPuller
	stores []*rdmatest.Store // stores[i] is frontend i+1's
}

// newRDMACluster starts frontends with RDMA (their stores registered with
// open's fabrics) and tcpOnly more without, and a backend that has brought
// up (or been refused) a queue pair with each.
func newRDMACluster(tb testing.TB, n transport.Network, addr string, open func(name string) (rdma.Fabric, error), frontends, tcpOnly int) *rdmaCluster {
	tb.Helper()
	fab, err := open("backend")
	if err != nil {
		tb.Fatal(err)
	}
	// Registered memory is pinned: 4 MiB of receive buffers and a 1 MiB
	// region per frontend, 9 MiB here and 12 MiB in the benchmark, over
	// the default 8 MiB locked-memory limit of unprivileged users (raise
	// ulimit -l, or run as root: CAP_IPC_LOCK lifts it).
	rc := rdma.DefaultReaderConfig(fab)
	rc.ReceiveBytes = 4 << 20
	reader, err := rdma.NewReader(rc)
	if err != nil {
		_ = fab.Close()
		tb.Fatal(err)
	}
	tp := newTCPPuller(n, "rdma-backend", transport.DefaultBackoff(), zerolog.Nop())
	rc2 := &rdmaCluster{puller: newRDMAPuller(tp, reader, transport.DefaultBackoff(), zerolog.Nop())}
	tb.Cleanup(func() {
		tp.closeAll()
		rc2.puller.close()
	})
	for f := 1; f <= frontends+tcpOnly; f++ {
		var store *rdmatest.Store
		var exp *rdma.Exporter // nil: the frontend refuses RDMA
		if f <= frontends {
			ffab, err := open(fmt.Sprintf("frontend-%d", f))
			if err != nil {
				tb.Fatal(err)
			}
			if exp, err = rdma.NewExporter(rdma.ExporterConfig{Fabric: ffab, Log: zerolog.Nop()}); err != nil {
				tb.Fatal(err)
			}
			store = rdmatest.NewStore(exp, 1<<20)
			tb.Cleanup(func() { exp.Close(); store.Close() })
		} else {
			store = rdmatest.NewStore(nil, 1<<20)
		}
		var peer transporttest.RDMAPeer
		if exp != nil {
			peer = exp
		}
		at := serveInputs(tb, n, addr, store, peer)
		rc2.stores = append(rc2.stores, store)
		// The region exists before the backend connects: it comes with
		// the accept.
		if _, err := store.Put(1<<40+uint64(f), []byte("warm")); err != nil {
			tb.Fatal(err)
		}
		tp.up(uint32(f), at)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for f := 1; f <= frontends+tcpOnly; f++ {
		if err := rc2.puller.waitSettled(ctx, uint32(f)); err != nil {
			tb.Fatalf("frontend %d: RDMA exchange: %v", f, err)
		}
		if up := rc2.puller.session(uint32(f)) != nil; up != (f <= frontends) {
			tb.Fatalf("frontend %d: RDMA session up = %v", f, up)
		}
	}
	return rc2
}

// pull reads one input per frontend, all at once, as startPlan does.
func (c *rdmaCluster) pull(ctx context.Context, refs []wire.InputRef) ([][]byte, []error) {
	reads := make([]PullRead, len(refs))
	for i := range refs {
		reads[i] = PullRead{Frontend: uint32(i + 1), Ops: refs[i : i+1], Dst: make([][]byte, 1)}
	}
	errs := c.puller.ReadAll(ctx, reads)
	out := make([][]byte, len(refs))
	for i := range reads {
		out[i] = reads[i].Dst[0]
	}
	return out, errs
}

// checkRDMAPull runs real reads through the Puller interface: bytes and
// keys checked, RDMA and TCP frontends side by side, stale keys, inputs
// preprocessed before and during the pull.
func checkRDMAPull(t *testing.T, c *rdmaCluster, frontends, tcpOnly int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stats := c.puller.reader.Stats()
	var refs []wire.InputRef
	var want [][]byte
	for i, s := range c.stores {
		in := bytes.Repeat([]byte{byte(i + 1)}, 150_000)
		in[0], in[len(in)-1] = 0xaa, 0xbb
		ref, err := s.Put(uint64(i+1), in)
		if err != nil {
			t.Fatal(err)
		}
		refs, want = append(refs, ref), append(want, in)
	}
	got, errs := c.pull(ctx, refs)
	for i := range got {
		if errs[i] != nil || !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frontend %d: %d bytes, %v", i+1, len(got[i]), errs[i])
		}
	}
	if n := stats.Reads.Load(); n != uint64(frontends) || stats.Fallbacks.Load() != 0 {
		t.Fatalf("%d RDMA reads, %d fallbacks; want %d and 0", n, stats.Fallbacks.Load(), frontends)
	}

	// A stale key: the RDMA read refuses the slot, and TCP says the
	// input is gone, for every frontend.
	stale := slices.Clone(refs)
	for i := range stale {
		stale[i].Key += 1000
	}
	got, errs = c.pull(ctx, stale)
	for i := range got {
		if errs[i] != nil || got[i] != nil {
			t.Fatalf("stale read from frontend %d: %d bytes, %v", i+1, len(got[i]), errs[i])
		}
	}
	if stats.Fallbacks.Load() != uint64(frontends) {
		t.Fatalf("%d fallbacks after %d stale RDMA reads", stats.Fallbacks.Load(), frontends)
	}

	if frontends == 0 {
		return
	}
	// Preprocessed before the pull: READ twice. Preprocessed during it:
	// the READ finds it pending and TCP waits for it.
	s := c.stores[0]
	done, buf, ready, err := s.Reserve(100, 6)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "tensor")
	ready(nil)
	late, lateBuf, lateReady, err := s.Reserve(101, 4)
	if err != nil {
		t.Fatal(err)
	}
	second := stats.SecondReads.Load()
	result := make(chan [][]byte, 1)
	go func() {
		dst := make([][]byte, 2)
		errs := c.puller.ReadAll(ctx, []PullRead{{Frontend: 1, Ops: []wire.InputRef{done, late}, Dst: dst}})
		if errs[0] != nil {
			t.Error(errs[0])
		}
		result <- dst
	}()
	copy(lateBuf, "late")
	lateReady(nil)
	dst := <-result
	if string(dst[0]) != "tensor" || string(dst[1]) != "late" {
		t.Fatalf("preprocessed inputs: %q %q", dst[0], dst[1])
	}
	if stats.SecondReads.Load() < second+1 {
		t.Fatal("a preprocessed slot was not READ twice")
	}
}

// The RDMA data path end to end on the emulated fabric (no NIC): queue
// pairs brought up over the data connections, READs of the frontends'
// stores, checks and TCP fallbacks.
func TestRDMAPullEmulated(t *testing.T) {
	mem := rdma.NewMemNetwork()
	open := func(name string) (rdma.Fabric, error) { return mem.Open(name), nil }
	c := newRDMACluster(t, inproc.New(), "", open, 4, 1)
	checkRDMAPull(t, c, 4, 1)
	if st := c.puller.reader.PoolStats(); st.InUse != 0 {
		t.Fatalf("%d receive bytes still out", st.InUse)
	}
}

// deviceOrSkip returns how to open the machine's RDMA device, or skips,
// saying why and how to get one.
func deviceOrSkip(tb testing.TB) func(string) (rdma.Fabric, error) {
	cfg := rdma.DefaultDeviceConfig()
	dev, err := rdma.Available(cfg)
	if err != nil {
		tb.Skipf("no RDMA here (%v). To run: on a machine with an RDMA NIC, or Soft-RoCE "+
			"(modprobe rdma_rxe; rdma link add rxe0 type rxe netdev eth0), "+
			"go test -tags rdma -run RDMA -v ./backend/", err)
	}
	tb.Logf("RDMA device %s", dev)
	return func(string) (rdma.Fabric, error) { return rdma.Open(cfg) }
}

// The same reads over the machine's RDMA device (Soft-RoCE or an HCA),
// with the queue pairs brought up over loopback TCP data connections.
func TestRDMAPullOverDevice(t *testing.T) {
	open := deviceOrSkip(t)
	c := newRDMACluster(t, tcp.New(tcp.Default()), "127.0.0.1:0", open, 4, 1)
	checkRDMAPull(t, c, 4, 1)
}

// BenchmarkPullIncastRDMA is BenchmarkPullIncast over RDMA READs: a batch
// of 8 inputs of 150 KB from 8 frontends (the paper's §5.5 incast), on the
// machine's RDMA device, reporting the batch pull time's p50, p99 and
// p99.99 in microseconds. It skips where there is no device.
//
//	go test -tags rdma -run '^$' -bench PullIncastRDMA -benchtime 20000x ./backend/
func BenchmarkPullIncastRDMA(b *testing.B) {
	open := deviceOrSkip(b)
	c := newRDMACluster(b, tcp.New(tcp.Default()), "127.0.0.1:0", open, 8, 0)
	var refs []wire.InputRef
	for i, s := range c.stores {
		ref, err := s.Put(uint64(i+1), bytes.Repeat([]byte{byte(i)}, 150_000))
		if err != nil {
			b.Fatal(err)
		}
		refs = append(refs, ref)
	}
	ctx := context.Background()
	if _, errs := c.pull(ctx, refs); slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		b.Fatal(errs)
	}
	stats := c.puller.reader.Stats()
	before := stats.Fallbacks.Load()
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(8 * 150_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, errs := c.pull(ctx, refs); errs[0] != nil {
			b.Fatal(errs[0])
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	if n := stats.Fallbacks.Load() - before; n > 0 {
		b.Logf("%d of %d reads fell back to TCP", n, 8*b.N)
	}
	reportLatency(b, lat)
}

// A frontend that predates RDMA (its Welcome has no FeatureRDMA) is never
// sent RDMAConnect, which it would take as a protocol error and answer by
// closing the data connection on every reconnect: the backend settles on
// TCP for it at once.
func TestRDMAPullerSkipsFrontendWithoutFeature(t *testing.T) {
	n := inproc.New()
	kinds := make(chan wire.Kind, 16)
	ln, err := n.Listen("", func(c transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{
			Message: func(_ transport.Conn, m wire.Message) { kinds <- m.Kind() },
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mem := rdma.NewMemNetwork()
	rc := rdma.DefaultReaderConfig(mem.Open("backend"))
	rc.ReceiveBytes = 1 << 20
	reader, err := rdma.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	tp := newTCPPuller(n, "rdma-backend", transport.DefaultBackoff(), zerolog.Nop())
	p := newRDMAPuller(tp, reader, transport.DefaultBackoff(), zerolog.Nop())
	defer func() { tp.closeAll(); p.close() }()
	tp.up(1, ln.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.waitSettled(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if p.session(1) != nil {
		t.Fatal("an RDMA session came up with a frontend that does not speak RDMA")
	}
	// A Read over TCP goes through the same connection after it: had an
	// RDMAConnect been sent, it would arrive first.
	pe := tp.peer(1)
	pe.mu.Lock()
	c := pe.conn // set before the exchange settles
	pe.mu.Unlock()
	if err := c.Send(&wire.Read{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if k := <-kinds; k != wire.KindRead {
		t.Fatalf("the frontend got %v first, want the Read: no RDMA message to an old frontend", k)
	}
}

// When the backend's device stops delivering completions, a batch whose
// READ is in flight gives up on it at the end of its acceptance window and
// asks over TCP, rather than waiting for its context; the session breaks,
// so later reads go straight to TCP.
func TestRDMAPullerFallsBackWhenTheDeviceFails(t *testing.T) {
	mem := rdma.NewMemNetwork()
	open := func(name string) (rdma.Fabric, error) { return mem.Open(name), nil }
	c := newRDMACluster(t, inproc.New(), "", open, 1, 0)
	stats := c.puller.reader.Stats()
	in := bytes.Repeat([]byte{7}, 1000)
	ref, err := c.stores[0].Put(1, in)
	if err != nil {
		t.Fatal(err)
	}
	// The READ's DMA waits until the end of the test.
	started, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	mem.SetReadHook(func(n int, copyPart func(int, int)) {
		once.Do(func() { close(started) })
		<-gate
		copyPart(0, n)
	})
	defer close(gate)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		got  [][]byte
		errs []error
	}
	res := make(chan result, 1)
	go func() {
		got, errs := c.pull(ctx, []wire.InputRef{ref})
		res <- result{got, errs}
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("no READ")
	}
	if !mem.FailDevice("backend", errors.New("injected: completion channel failed")) {
		t.Fatal("no backend device")
	}
	if c.puller.session(1) != nil {
		t.Fatal("RDMA session still up on a failed device")
	}
	r := <-res
	if r.errs[0] != nil || !bytes.Equal(r.got[0], in) {
		t.Fatalf("read during the failure: %d bytes, %v", len(r.got[0]), r.errs[0])
	}
	if stats.SlowReads.Load() != 1 || stats.Fallbacks.Load() != 1 || stats.Reads.Load() != 0 {
		t.Fatalf("%d slow reads, %d fallbacks, %d reads; want the READ given up at its deadline",
			stats.SlowReads.Load(), stats.Fallbacks.Load(), stats.Reads.Load())
	}
	ref2, err := c.stores[0].Put(2, []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	got, errs := c.pull(ctx, []wire.InputRef{ref2})
	if errs[0] != nil || string(got[0]) != "after" || stats.Fallbacks.Load() != 1 {
		t.Fatalf("read after the failure: %q, %v, %d fallbacks", got[0], errs[0], stats.Fallbacks.Load())
	}
}
