package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// incast is the paper's §5.5 incast: one backend pulls one batch whose
// inputs sit on several frontends at once. The frontends' data addresses
// are transporttest.Inputs, which answer reads as the frontend's input
// server does: backend tests may not import the frontend.
type incast struct {
	puller *tcpPuller
	refs   []wire.InputRef // refs[i] lives on frontend i+1
	want   [][]byte
}

func newIncast(tb testing.TB, n transport.Network, addr string, frontends, size int) *incast {
	tb.Helper()
	ic := &incast{puller: newTCPPuller(n, "bench-backend", transport.DefaultBackoff(), zerolog.Nop())}
	tb.Cleanup(ic.puller.closeAll)
	for f := 1; f <= frontends; f++ {
		inputs := transporttest.NewMemInputs()
		at := serveInputs(tb, n, addr, inputs, nil)
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(f + i)
		}
		ic.refs = append(ic.refs, inputs.Put(uint64(f), buf))
		ic.want = append(ic.want, buf)
		ic.puller.up(uint32(f), at)
	}
	return ic
}

// serveInputs serves a fake frontend's data address with src's inputs
// (and rdma's queue pairs, if not nil) on addr of n until the test ends,
// and returns the address.
func serveInputs(tb testing.TB, n transport.Network, addr string, src transporttest.InputSource, rdma transporttest.RDMAPeer) string {
	tb.Helper()
	ln, err := transporttest.ServeInputs(n, addr, src, rdma)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	return ln.Addr()
}

// pull reads every frontend's input at once, as startPlan does, and
// returns when all are in.
func (ic *incast) pull(ctx context.Context) ([][]byte, error) {
	reads := make([]PullRead, len(ic.refs))
	for i := range ic.refs {
		reads[i] = PullRead{Frontend: uint32(i + 1), Ops: ic.refs[i : i+1], Dst: make([][]byte, 1)}
	}
	out := make([][]byte, len(ic.refs))
	for i, err := range ic.puller.ReadAll(ctx, reads) {
		if err != nil {
			return nil, err
		}
		out[i] = reads[i].Dst[0]
	}
	return out, nil
}

func TestPullReadsTheRightBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		net  transport.Network
		addr string
	}{{"inproc", inproc.New(), ""}, {"tcp", tcp.New(tcp.Default()), "127.0.0.1:0"}} {
		t.Run(tc.name, func(t *testing.T) {
			ic := newIncast(t, tc.net, tc.addr, 4, 150_000)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := ic.pull(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if !bytes.Equal(got[i], ic.want[i]) {
					t.Fatalf("frontend %d: got %d bytes, not the input", i+1, len(got[i]))
				}
			}
			// A read of a slot whose key does not match is missing, not
			// another request's bytes.
			stale := ic.refs[0]
			stale.Key++
			dst := make([][]byte, 1)
			if err := ic.puller.Read(ctx, 1, []wire.InputRef{stale}, dst); err != nil || dst[0] != nil {
				t.Fatalf("stale read: %v, %d bytes", err, len(dst[0]))
			}
		})
	}
}

// BenchmarkPullIncast pulls a batch of 8 inputs of 150 KB from 8 frontends
// over loopback TCP (the paper's §5.5 incast) and reports the batch pull
// time's p50, p99 and p99.99 in microseconds.
//
//	go test -run '^$' -bench PullIncast -benchtime 20000x ./backend/
func BenchmarkPullIncast(b *testing.B) {
	ic := newIncast(b, tcp.New(tcp.Default()), "127.0.0.1:0", 8, 150_000)
	ctx := context.Background()
	if _, err := ic.pull(ctx); err != nil { // connect and warm up
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(8 * 150_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := ic.pull(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// quantilesµs sorts lat and returns its quantiles, in microseconds.
func quantilesµs(lat []time.Duration) func(p float64) float64 {
	slices.Sort(lat)
	return func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
}

// reportLatency reports the p50, p99 and p99.99 of batch pull times.
func reportLatency(b *testing.B, lat []time.Duration) {
	q := quantilesµs(lat)
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(0.999), "p99.9-µs")
	b.ReportMetric(q(0.9999), "p99.99-µs")
	if len(lat) >= 10000 {
		b.Logf("%d batches: p50 %.0fµs p99 %.0fµs p99.9 %.0fµs p99.99 %.0fµs (p99.99/p50 = %.2f)", len(lat), q(0.5), q(0.99), q(0.999), q(0.9999), q(0.9999)/q(0.5))
	}
}

// BenchmarkMachineHiccups measures the machine, not Symphony: one goroutine
// on its own OS thread reads the clock in a loop for b.N milliseconds and
// counts the gaps between readings, the times the thread did not run
// (jHiccup's idea). An incast's p99.99 over 20,000 batches (about ten
// seconds) is set by its two slowest batches, so a machine that stops a
// running thread for milliseconds a few times in ten seconds puts a floor
// under that tail that no data path can beat. Run it beside the incast:
//
//	go test -run '^$' -bench MachineHiccups -benchtime 10000x ./backend/
func BenchmarkMachineHiccups(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var gaps []time.Duration
	b.ResetTimer()
	start := time.Now()
	prev := start
	for end := start.Add(time.Duration(b.N) * time.Millisecond); prev.Before(end); {
		now := time.Now()
		if g := now.Sub(prev); g > 100*time.Microsecond {
			gaps = append(gaps, g)
		}
		prev = now
	}
	b.StopTimer()
	secs := prev.Sub(start).Seconds()
	over := func(t time.Duration) float64 {
		n := 0
		for _, g := range gaps {
			if g > t {
				n++
			}
		}
		return float64(n) / secs
	}
	worst := time.Duration(0)
	for _, g := range gaps {
		worst = max(worst, g)
	}
	b.ReportMetric(over(time.Millisecond), "gaps>1ms/s")
	b.ReportMetric(over(2*time.Millisecond), "gaps>2ms/s")
	b.ReportMetric(float64(worst.Microseconds()), "worst-gap-µs")
}

// BenchmarkMachineWakeups measures the machine, not Symphony: how long a
// thread blocked in the kernel takes to run again once another thread
// wakes it. One OS thread writes a timestamp into a pipe every 500µs and
// another, blocked in read(2), takes it; the wake-up latency is the gap.
// Every message of the incast wakes a blocked thread (the frontends'
// poller on the Read, the backend's on the reply), so a machine whose
// wake-ups stall for milliseconds now and then (a virtual CPU that the host
// is slow to resume from idle) puts that stall into the incast's tail
// while a spinning thread (BenchmarkMachineHiccups) sees none of it:
//
//	go test -run '^$' -bench MachineWakeups -benchtime 20000x ./backend/
func BenchmarkMachineWakeups(b *testing.B) {
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		b.Skipf("no pipe: %v", err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	base := time.Now()
	lat := make([]time.Duration, 0, b.N)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var buf [8]byte
		for range b.N {
			if _, err := syscall.Read(fds[0], buf[:]); err != nil {
				done <- err
				return
			}
			lat = append(lat, time.Since(base)-time.Duration(binary.LittleEndian.Uint64(buf[:])))
		}
		done <- nil
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var buf [8]byte
	b.ResetTimer()
	for range b.N {
		time.Sleep(500 * time.Microsecond)
		binary.LittleEndian.PutUint64(buf[:], uint64(time.Since(base)))
		if _, err := syscall.Write(fds[1], buf[:]); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	q := quantilesµs(lat)
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(q(0.9999), "p99.99-µs")
	b.ReportMetric(q(1), "worst-µs")
}

// Reads of more bytes than one reply frame may carry are split, and all
// come back.
func TestPullSplitsLargeReads(t *testing.T) {
	n := inproc.New()
	inputs := transporttest.NewMemInputs()
	at := serveInputs(t, n, "", inputs, nil)
	p := newTCPPuller(n, "b", transport.DefaultBackoff(), zerolog.Nop())
	defer p.closeAll()
	p.up(1, at)
	var ops []wire.InputRef
	for i := 0; i < 5; i++ { // 5 × 10 MiB: two reads of 30 and 20 MiB
		ops = append(ops, inputs.Put(uint64(i+1), bytes.Repeat([]byte{byte(i)}, 10<<20)))
	}
	dst := make([][]byte, len(ops))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Read(ctx, 1, ops, dst); err != nil {
		t.Fatal(err)
	}
	for i, b := range dst {
		if len(b) != 10<<20 || b[0] != byte(i) || b[len(b)-1] != byte(i) {
			t.Fatalf("input %d: %d bytes", i, len(b))
		}
	}
}
