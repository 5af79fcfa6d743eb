// The gateway's slow-client acceptance test runs here, as an external test
// of bench/slowclient: it drives the gateway with the slow client, and the
// frontend's tests may not import bench/ (bench imports the frontend,
// never the other way round).
package slowclient_test

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/slowclient"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

// echo is a frontend that serves no model and is connected: the slow
// clients never get as far as an inference.
type echo struct{}

func (echo) Infer(_ context.Context, _ string, input []byte, _ time.Time) ([]byte, error) {
	return input, nil
}
func (echo) Model(string) (gateway.ModelInfo, bool) { return gateway.ModelInfo{}, false }
func (echo) Ready() bool                            { return true }

// serveGateway runs g behind its own Server and Listener on loopback, as
// `symphony frontend` does, and returns its address.
func serveGateway(t *testing.T, g *gateway.Gateway) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := g.Server(g)
	go func() { _ = srv.Serve(g.Listener(ln)) }() // ErrServerClosed at cleanup
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// heapInUse is the in-process memory a slow client test watches: heap
// spans and goroutine stacks in use (RSS would also count what the runtime
// has not yet returned to the OS).
func heapInUse() (uint64, error) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse, nil
}

// TestSlowClientsAreClosed is acceptance A in small: connections that
// announce large bodies and go silent, slowloris headers and idle
// keep-alives are each closed within their timeout, and hundreds of them
// cost the gateway a few tens of KiB each, not their announced bodies.
// (`symphony bench slowclients` runs the full 1000-connection version
// with the default timeouts against a real gateway.)
func TestSlowClientsAreClosed(t *testing.T) {
	const conns = 200
	cfg := gateway.Default()
	cfg.ReadHeaderTimeout, cfg.ReadTimeout, cfg.IdleTimeout = 300*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond
	g, err := gateway.New(echo{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveGateway(t, g)
	// The closes come from the server's deadlines, which fire on time but
	// are served by a loaded 2-core CI machine running -race: allow slack.
	const slack = 3 * time.Second
	for _, tc := range []struct {
		mode    slowclient.Mode
		timeout time.Duration
		status  int
	}{
		{slowclient.ModeBody, cfg.ReadTimeout, http.StatusRequestTimeout},
		{slowclient.ModeHeader, cfg.ReadHeaderTimeout, 0},
		{slowclient.ModeIdle, cfg.IdleTimeout, 0},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			o := slowclient.Default()
			o.Addr, o.Mode, o.Conns = addr, tc.mode, conns
			// 8 MiB announced: before bodies were streamed, each such
			// connection took its announced size at once.
			o.BodyBytes, o.Interval, o.Wait = 8<<20, 50*time.Millisecond, tc.timeout+slack
			o.Memory, o.SampleEvery = heapInUse, 20*time.Millisecond
			res, err := slowclient.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Opened != conns || res.Closed != conns || res.StillOpen != 0 {
				t.Fatalf("opened %d (%d dial errors: %s), server closed %d, %d still open after %v",
					res.Opened, res.DialErrors, res.DialError, res.Closed, res.StillOpen, o.Wait)
			}
			// Server deadlines start at accept, after the client's dial; an
			// idle connection's after the answer's write, just before the
			// client reads it. No close can come much before its timeout.
			if res.LifetimeMin < tc.timeout/2 || res.LifetimeMax > tc.timeout+slack {
				t.Errorf("connections lived %v to %v; want about the %v timeout", res.LifetimeMin, res.LifetimeMax, tc.timeout)
			}
			if tc.status != 0 && res.Statuses[tc.status] != conns {
				t.Errorf("answers before the close %v; want %d × %d", res.Statuses, conns, tc.status)
			}
			const perConn = 64 << 10 // client and server side together
			if grew := int64(res.MemPeak) - int64(res.MemBefore); grew > conns*perConn {
				t.Errorf("heap and stacks grew %d KiB for %d connections (%d KiB each); want at most %d KiB each",
					grew>>10, conns, grew/conns>>10, perConn>>10)
			}
			t.Logf("%s: lived %v-%v (median %v), memory +%d KiB at peak (%d KiB per connection)", tc.mode,
				res.LifetimeMin, res.LifetimeMax, res.LifetimeMedian, (res.MemPeak-res.MemBefore)>>10, (res.MemPeak-res.MemBefore)/conns>>10)
		})
	}
}
