package tcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/ratelog"
	"github.com/symphony-serving/symphony/transport/wire"
)

// closeWithin bounds how long the server may take to cut a hostile
// connection. It is well under the handshake timeout of hostileServer, so a
// connection closed in time was closed for its own fault.
const closeWithin = 3 * time.Second

// logBuffer collects the server's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// has reports whether one line mentions all of subs.
func (b *logBuffer) has(subs ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, line := range strings.Split(b.buf.String(), "\n") {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			return true
		}
	}
	return false
}

type hostileServer struct {
	t    *testing.T
	net  *Network
	addr string
	logs *logBuffer
	echo transport.Conn // a well-behaved client, connected throughout
	got  chan uint64    // task IDs echoed back to echo
}

// newHostileServer listens with an echo acceptor and connects one
// well-behaved client that must survive everything.
func newHostileServer(t *testing.T, handshake time.Duration) *hostileServer {
	s := &hostileServer{t: t, logs: &logBuffer{}, got: make(chan uint64, 16)}
	s.net = New(Options{Limits: transport.Limits{MaxFrame: 1 << 20, HandshakeTimeout: handshake},
		Log: zerolog.New(s.logs).Level(zerolog.WarnLevel), WarnBurst: 1000})
	t.Cleanup(s.net.Close)
	ln, err := s.net.Listen("127.0.0.1:0", func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{
			Message: func(c transport.Conn, m wire.Message) { _ = c.Send(m) },
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s.addr = ln.Addr()
	s.echo = s.dial()
	return s
}

// dial connects a well-behaved client whose echoes go to s.got.
func (s *hostileServer) dial() transport.Conn {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	c, _, err := s.net.Dial(ctx, s.addr, &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "good"},
		transport.HandlerFuncs{Message: func(_ transport.Conn, m wire.Message) {
			if sub, ok := m.(*wire.Submit); ok && len(sub.Tasks) == 1 {
				s.got <- sub.Tasks[0].ID
			}
		}})
	if err != nil {
		s.t.Fatalf("a well-behaved client cannot connect: %v", err)
	}
	s.t.Cleanup(func() { c.Close(nil) })
	return c
}

// healthy checks that the standing client and a new one both complete a
// round trip.
func (s *hostileServer) healthy() {
	s.t.Helper()
	fresh := s.dial()
	for i, c := range []transport.Conn{s.echo, fresh} {
		id := uint64(1000 + i)
		if err := c.Send(&wire.Submit{Tasks: []wire.Task{{ID: id}}}); err != nil {
			s.t.Fatalf("Send: %v", err)
		}
		select {
		case got := <-s.got:
			if got != id {
				s.t.Fatalf("echo of %d, want %d", got, id)
			}
		case <-time.After(closeWithin):
			s.t.Fatal("no echo: the server is not serving")
		}
	}
	fresh.Close(nil)
}

// raw opens a plain TCP connection.
func (s *hostileServer) raw() *net.TCPConn {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, closeWithin)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// write sends b. A failure is only logged: the server may rightly cut a
// hostile connection before reading all of it.
func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Logf("write: %v", err)
	}
}

// expectClosed reads (and drops) until the server closes c, and returns
// what was read.
func expectClosed(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(closeWithin))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection within %v", closeWithin)
	}
	return b // EOF, or a reset: closed either way
}

// expectLog checks that the server logged reason with c's address.
func (s *hostileServer) expectLog(c net.Conn, reason string) {
	s.t.Helper()
	if !s.logs.has(`"level":"warn"`, c.LocalAddr().String(), reason) {
		s.t.Errorf("no warning naming %s and %q; log:\n%s", c.LocalAddr(), reason, s.logs.buf.String())
	}
}

func frame(m wire.Message) []byte { return wire.AppendFrame(nil, m) }

func header(n uint32, k byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), k)
}

// handshake sends a Hello on a raw connection and reads the Welcome.
func handshake(t *testing.T, c net.Conn) {
	t.Helper()
	write(t, c, frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend}))
	_ = c.SetReadDeadline(time.Now().Add(closeWithin))
	r := bufio.NewReader(c)
	h := make([]byte, wire.HeaderSize)
	if _, err := io.ReadFull(r, h); err != nil {
		t.Fatalf("reading the welcome: %v", err)
	}
	if k, n, err := wire.ParseHeader(h, wire.DefaultMaxFrame); err != nil || k != wire.KindWelcome || n != r.Buffered() {
		t.Fatalf("welcome header %v, %d, %v", k, n, err)
	}
	_, _ = r.Discard(r.Buffered())
}

func TestHostile(t *testing.T) {
	s := newHostileServer(t, time.Minute)
	cases := []struct {
		name   string
		reason string // in the server's warning
		attack func(t *testing.T, c *net.TCPConn)
	}{
		{"Garbage", "protocol error", func(t *testing.T, c *net.TCPConn) {
			g := make([]byte, 4096)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range g {
				g[i] = byte(r.Uint32())
			}
			write(t, c, g)
		}},
		{"Truncated", "peer closed mid-frame", func(t *testing.T, c *net.TCPConn) {
			write(t, c, frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "trunc"})[:12])
			_ = c.CloseWrite()
		}},
		{"UnknownKind", "unknown message kind 200", func(t *testing.T, c *net.TCPConn) {
			write(t, c, append(header(2, 200), 0x90))
		}},
		{"EmptyFrame", "empty frame", func(t *testing.T, c *net.TCPConn) {
			write(t, c, header(0, 0))
		}},
		{"NotHello", "first frame is Submit, want Hello", func(t *testing.T, c *net.TCPConn) {
			write(t, c, frame(&wire.Submit{}))
		}},
		{"BadHello", "bad Hello message", func(t *testing.T, c *net.TCPConn) {
			write(t, c, append(header(3, byte(wire.KindHello)), 0x91, 0xc1))
		}},
		{"HugeHello", "frame too large", func(t *testing.T, c *net.TCPConn) {
			// A Hello padded with a deeply nested value: refused by its
			// length, before anything decodes it.
			b := append(header(0, byte(wire.KindHello)), 0x96, 1, 1, 0xa0, 0xa0, 0)
			b = append(b, bytes.Repeat([]byte{0x91}, 200<<10)...)
			b = append(b, 0xc0)
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			write(t, c, b)
		}},
		{"BadBody", "bad Submit message", func(t *testing.T, c *net.TCPConn) {
			handshake(t, c)
			write(t, c, append(header(3, byte(wire.KindSubmit)), 0x91, 0xc1))
		}},
		{"HelloAgain", "Hello after the handshake", func(t *testing.T, c *net.TCPConn) {
			handshake(t, c)
			write(t, c, frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend}))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := s.raw()
			tc.attack(t, c)
			expectClosed(t, c)
			s.expectLog(c, tc.reason)
			s.healthy()
		})
	}

	t.Run("WrongVersion", func(t *testing.T) {
		c := s.raw()
		write(t, c, frame(&wire.Hello{Version: 99, Role: wire.RoleFrontend}))
		b := expectClosed(t, c)
		k, n, err := wire.ParseHeader(b, wire.DefaultMaxFrame)
		if err != nil || k != wire.KindReject || len(b) != wire.HeaderSize+n {
			t.Fatalf("answer %q is no Reject frame: %v", b, err)
		}
		m, err := wire.Decode(k, b[wire.HeaderSize:])
		if want := fmt.Sprintf("protocol version 99, want %d", wire.Version); err != nil || m.(*wire.Reject).Reason != want {
			t.Fatalf("answer %+v, %v; want a Reject %q", m, err, want)
		}
		s.expectLog(c, "rejecting dialer")
		s.healthy()
	})

	// A 1 GiB length, before and after the handshake: refused from the
	// header, without allocating for the body.
	for _, after := range []bool{false, true} {
		t.Run(map[bool]string{false: "GiantHello", true: "GiantSubmit"}[after], func(t *testing.T) {
			c := s.raw()
			kind := wire.KindHello
			if after {
				handshake(t, c)
				kind = wire.KindSubmit
			}
			var before, end runtime.MemStats
			runtime.ReadMemStats(&before)
			write(t, c, append(header(1<<30, byte(kind)), 0x90))
			expectClosed(t, c)
			runtime.ReadMemStats(&end)
			if grew := end.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
				t.Errorf("allocated %d MiB for a refused frame", grew>>20)
			}
			s.expectLog(c, "frame too large")
			s.healthy()
		})
	}
}

// TestSlowloris checks the handshake timeout, for a dialer that sends
// nothing and for one that stops halfway through its Hello.
func TestSlowloris(t *testing.T) {
	s := newHostileServer(t, 300*time.Millisecond)
	for _, sent := range [][]byte{nil, frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend})[:7]} {
		c := s.raw()
		if sent != nil {
			write(t, c, sent)
		}
		expectClosed(t, c)
		s.expectLog(c, "no hello in time")
		s.healthy()
	}
}

// A flood of hostile dialers logs a few warnings a second, not one each;
// the network counts the rest.
func TestHostileFloodIsRateLimited(t *testing.T) {
	var logs logBuffer
	n := New(Options{Limits: transport.Limits{HandshakeTimeout: time.Second}, Log: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	defer n.Close()
	ln, err := n.Listen("127.0.0.1:0", func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return nil, nil, errors.New("never reached")
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const dialers = 40
	for range dialers {
		c, err := net.Dial("tcp", ln.Addr())
		if err != nil {
			t.Fatal(err)
		}
		write(t, c.(*net.TCPConn), append(header(0, 200), 0))
		expectClosed(t, c.(*net.TCPConn))
	}
	logs.mu.Lock()
	lines := strings.Count(logs.buf.String(), "\n")
	logs.mu.Unlock()
	if lines > 2*ratelog.DefaultBurst || lines == 0 {
		t.Errorf("%d warning lines for %d bad dialers, want a rate-limited few", lines, dialers)
	}
	if got := n.SuppressedLogs(); got+uint64(lines) != dialers {
		t.Errorf("%d lines logged and %d held back, want %d in all", lines, got, dialers)
	}
}
