package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// serve runs g behind its own Server and Listener on loopback, as
// `symphony frontend` does, and returns its address.
func serve(t *testing.T, g *Gateway) string {
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

// A connection past MaxConnections is answered 503 with Retry-After and
// the busy reason, readable by a stock client, and closed; once one of
// the open connections closes, a new one is served.
func TestConnectionCap(t *testing.T) {
	g := newGateway(t, newFake(), func(c *Config) { c.MaxConnections = 3 })
	addr := serve(t, g)
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if code := getLive(t, c); code != http.StatusOK {
			t.Fatalf("connection %d within the cap: status %d", len(held)+1, code)
		}
		held = append(held, c)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/v2/health/live")
	if err != nil {
		t.Fatalf("a connection past the cap got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		!bytes.Contains(body, []byte(`"reason":"drop: gateway busy"`)) {
		t.Fatalf("past the cap: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if err := ResponseError("m", resp.StatusCode, body); outcome(err) != "drop "+string(DropBusy) {
		t.Errorf("ResponseError reads the busy answer as %v", err)
	}
	st := g.Stats()
	if st.RejectedConns.Load() != 1 || st.OpenConns.Load() != 3 {
		t.Fatalf("rejected %d, open %d; want 1 and 3", st.RejectedConns.Load(), st.OpenConns.Load())
	}
	held[0].Close()
	// Only the server's read of the closed socket tells it: poll, bounded.
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); st.OpenConns.Load() != 2; <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections counted open after one of 3 closed", st.OpenConns.Load())
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if code := getLive(t, c); code != http.StatusOK {
		t.Fatalf("after a slot freed: status %d", code)
	}
}

// getLive sends GET /v2/health/live on c and returns the answer's status.
func getLive(t *testing.T, c net.Conn) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Requests past MaxInFlight are answered 503 with Retry-After and the busy
// reason without reaching the frontend; the slots come back as requests end.
func TestInFlightCap(t *testing.T) {
	f := newFake()
	entered, release := make(chan struct{}), make(chan struct{})
	f.infer = func(_ context.Context, _ string, in []byte) ([]byte, error) {
		entered <- struct{}{}
		<-release
		return in, nil
	}
	g := newGateway(t, f, func(c *Config) { c.MaxInFlight = 2 })
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() { codes[i] = do(g, "POST", "/v2/models/resnet/infer", reqBody, nil).Code })
		<-entered
	}
	w := do(g, "POST", "/v2/models/resnet/infer", reqBody, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || reasonOf(t, w) != "drop: gateway busy" {
		t.Fatalf("past the cap: %d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if st := g.Stats(); st.RejectedRequests.Load() != 1 || st.InFlight.Load() != 2 {
		t.Fatalf("rejected %d, in flight %d; want 1 and 2", st.RejectedRequests.Load(), st.InFlight.Load())
	}
	close(release)
	wg.Wait()
	if codes[0] != 200 || codes[1] != 200 || g.Stats().InFlight.Load() != 0 {
		t.Fatalf("held requests ended %v, %d still in flight", codes, g.Stats().InFlight.Load())
	}
	go func() { <-entered }()
	if w := do(g, "POST", "/v2/models/resnet/infer", reqBody, nil); w.Code != 200 {
		t.Fatalf("after the held requests ended: %d %s", w.Code, w.Body)
	}
}

// A body that announces 64 MiB and sends one byte costs kilobytes: the
// buffer follows the bytes that arrive, not the announcement.
func TestBodyBufferFollowsArrivals(t *testing.T) {
	g := newGateway(t, newFake(), nil)
	r := httptest.NewRequest("POST", "/v2/models/resnet/infer", strings.NewReader("{"))
	r.ContentLength = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("a one-byte body announced as 64 MiB allocated %d KiB", alloc>>10)
	}
}

// readGrowing returns every byte however the reader splits them and
// whatever was announced, in a buffer sized by what arrived.
func TestReadGrowing(t *testing.T) {
	for _, n := range []int{0, 1, initialBodyCap - 1, initialBodyCap, initialBodyCap + 1, 100_000} {
		data := bytes.Repeat([]byte("0123456789"), n/10+1)[:n]
		for _, announced := range []int64{-1, int64(n), int64(n) + 1, 64 << 20, int64(n / 2)} {
			for name, wrap := range map[string]func(io.Reader) io.Reader{
				"whole": func(r io.Reader) io.Reader { return r }, "one byte": iotest.OneByteReader,
				"half": iotest.HalfReader, "eof with data": iotest.DataErrReader,
			} {
				got, err := readGrowing(wrap(bytes.NewReader(data)), announced, 64<<20)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%d bytes, announced %d, %s reads: got %d bytes, %v", n, announced, name, len(got), err)
				}
				if limit := 2*n + initialBodyCap + 1; cap(got) > limit {
					t.Errorf("%d bytes, announced %d, %s reads: buffer of %d", n, announced, name, cap(got))
				}
				if announced == int64(n) && n > initialBodyCap && cap(got) != n+1 {
					t.Errorf("%d bytes as announced: buffer of %d, want %d", n, cap(got), n+1)
				}
			}
		}
	}
	want := fmt.Errorf("broken")
	if _, err := readGrowing(iotest.ErrReader(want), 10, 100); err != want {
		t.Fatalf("read error %v, want %v", err, want)
	}
}

func TestCheckInference(t *testing.T) {
	c := Default()
	if err := c.CheckInference(200*time.Millisecond + time.Second); err != nil {
		t.Errorf("default write timeout refuses the demo's longest inference: %v", err)
	}
	if err := c.CheckInference(c.WriteTimeout); err == nil {
		t.Error("a write timeout no longer than the inference passes")
	}
}
