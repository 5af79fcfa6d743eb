package tlsnet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
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

// logBuffer collects the server's log lines, and lets a test wait for one.
type logBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{} // a token after each write
}

func newLogBuffer() *logBuffer { return &logBuffer{wrote: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// has reports whether one line mentions all of subs.
func (b *logBuffer) has(subs ...string) bool {
	for _, line := range strings.Split(b.String(), "\n") {
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

// waitFor waits for a line that mentions all of subs.
func (b *logBuffer) waitFor(t *testing.T, subs ...string) {
	t.Helper()
	timeout := time.After(closeWithin)
	for !b.has(subs...) {
		select {
		case <-b.wrote:
		case <-timeout:
			t.Fatalf("no log line with %q within %v; log:\n%s", subs, closeWithin, b.String())
		}
	}
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
	s := &hostileServer{t: t, logs: newLogBuffer(), got: make(chan uint64, 16)}
	o := testOptions(t)
	o.MaxFrame, o.HandshakeTimeout, o.WarnBurst = 1<<20, handshake, 1000
	o.Log = zerolog.New(s.logs).Level(zerolog.WarnLevel)
	s.net = New(o)
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

// plain opens a plain TCP connection.
func (s *hostileServer) plain() *net.TCPConn {
	s.t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, closeWithin)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// raw opens a TLS connection with a valid certificate, its TLS handshake
// done and nothing sent over it.
func (s *hostileServer) raw() *tls.Conn {
	s.t.Helper()
	o := testOptions(s.t)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: closeWithin}, "tcp", s.addr,
		&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{o.Certificate}, RootCAs: o.CA})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
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

// expectLog checks that the server logged reason with c's address. The
// warning may follow the close by a moment: it waits for it.
func (s *hostileServer) expectLog(c net.Conn, reason string) {
	s.t.Helper()
	s.logs.waitFor(s.t, `"level":"warn"`, c.LocalAddr().String(), reason)
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
	k, n, err := wire.ParseHeader(h, wire.DefaultMaxFrame)
	if err != nil || k != wire.KindWelcome {
		t.Fatalf("welcome header %v, %d, %v", k, n, err)
	}
	if _, err := io.ReadFull(r, make([]byte, n)); err != nil {
		t.Fatalf("reading the welcome: %v", err)
	}
}

// TestHostile sends bad frames over an authenticated TLS connection: each
// is cut off with a warning naming it, and the server serves on.
func TestHostile(t *testing.T) {
	s := newHostileServer(t, time.Minute)
	cases := []struct {
		name   string
		reason string // in the server's warning
		attack func(t *testing.T, c *tls.Conn)
	}{
		{"Garbage", "protocol error", func(t *testing.T, c *tls.Conn) {
			g := make([]byte, 4096)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range g {
				g[i] = byte(r.Uint32())
			}
			write(t, c, g)
		}},
		{"Truncated", "peer closed mid-frame", func(t *testing.T, c *tls.Conn) {
			write(t, c, frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "trunc"})[:12])
			_ = c.CloseWrite()
		}},
		{"UnknownKind", "unknown message kind 200", func(t *testing.T, c *tls.Conn) {
			write(t, c, append(header(2, 200), 0x90))
		}},
		{"EmptyFrame", "empty frame", func(t *testing.T, c *tls.Conn) {
			write(t, c, header(0, 0))
		}},
		{"NotHello", "first frame is Submit, want Hello", func(t *testing.T, c *tls.Conn) {
			write(t, c, frame(&wire.Submit{}))
		}},
		{"BadHello", "bad Hello message", func(t *testing.T, c *tls.Conn) {
			write(t, c, append(header(3, byte(wire.KindHello)), 0x91, 0xc1))
		}},
		{"HugeHello", "frame too large", func(t *testing.T, c *tls.Conn) {
			// A Hello padded with a deeply nested value: refused by its
			// length, before anything decodes it.
			b := append(header(0, byte(wire.KindHello)), 0x96, 1, 1, 0xa0, 0xa0, 0)
			b = append(b, bytes.Repeat([]byte{0x91}, 200<<10)...)
			b = append(b, 0xc0)
			binary.BigEndian.PutUint32(b, uint32(len(b)-4))
			write(t, c, b)
		}},
		{"BadBody", "bad Submit message", func(t *testing.T, c *tls.Conn) {
			handshake(t, c)
			write(t, c, append(header(3, byte(wire.KindSubmit)), 0x91, 0xc1))
		}},
		{"HelloAgain", "Hello after the handshake", func(t *testing.T, c *tls.Conn) {
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

	// Dialers that do not speak TLS never reach the wire handshake: they
	// are refused, counted, and logged with the reason.
	// A plaintext Symphony dialer is told why, in a Reject it can read.
	for _, tc := range []struct {
		name   string
		sent   []byte
		answer string // a Reject's reason; "": nothing
	}{
		{"Garbage", bytes.Repeat([]byte{0xee}, 512), ""},
		{"PlaintextHello", frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend}), plaintextReason},
	} {
		t.Run("NotTLS"+tc.name, func(t *testing.T) {
			before := s.net.Refused()
			c := s.plain()
			write(t, c, tc.sent)
			got := expectClosed(t, c)
			switch {
			case tc.answer == "" && len(got) > 0:
				t.Errorf("a dialer without TLS got %d bytes back", len(got))
			case tc.answer != "":
				k, n, err := wire.ParseHeader(got, wire.DefaultMaxFrame)
				if err != nil || k != wire.KindReject || len(got) != wire.HeaderSize+n {
					t.Fatalf("answer %q is no Reject frame: %v", got, err)
				}
				if m, err := wire.Decode(k, got[wire.HeaderSize:]); err != nil || m.(*wire.Reject).Reason != tc.answer {
					t.Errorf("answer %+v, %v; want a Reject %q", m, err, tc.answer)
				}
			}
			s.expectLog(c, "TLS handshake refused: remote "+c.LocalAddr().String()+": not TLS")
			if got := s.net.Refused(); got != before+1 {
				t.Errorf("Refused went from %d to %d, want one more", before, got)
			}
			s.healthy()
		})
	}
}

// TestSlowloris checks the handshake timeout, for dialers that stall in
// the TLS handshake and for ones that stall before or in their Hello.
func TestSlowloris(t *testing.T) {
	s := newHostileServer(t, 300*time.Millisecond)
	hello := frame(&wire.Hello{Version: wire.Version, Role: wire.RoleFrontend})
	for _, tc := range []struct {
		name string
		tls  bool
		sent []byte
		want string
	}{
		{"Silent", false, nil, "no TLS handshake within 300ms"},
		{"PartialClientHello", false, []byte{0x16, 0x03, 0x01, 0x00}, "no TLS handshake within 300ms"},
		{"NoHello", true, nil, "no hello in time"},
		{"PartialHello", true, hello[:7], "no hello in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c net.Conn
			if tc.tls {
				c = s.raw()
			} else {
				c = s.plain()
			}
			if tc.sent != nil {
				write(t, c, tc.sent)
			}
			expectClosed(t, c)
			s.expectLog(c, tc.want)
			s.healthy()
		})
	}
}

// A flood of dialers without TLS logs a few warnings a second, not one
// each; the network counts every refusal, and the lines it held back.
func TestRefusalFloodIsRateLimited(t *testing.T) {
	logs := newLogBuffer()
	o := testOptions(t)
	o.HandshakeTimeout, o.Log = time.Second, zerolog.New(logs).Level(zerolog.WarnLevel)
	n := New(o)
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
		write(t, c, append(header(0, 200), 0))
		expectClosed(t, c)
		_ = c.Close()
	}
	// The refusal is counted before its line is logged or held back, and
	// the socket closed after both.
	if got := n.Refused(); got != dialers {
		t.Errorf("Refused() = %d, want %d", got, dialers)
	}
	lines := strings.Count(logs.String(), "\n")
	if lines > 2*ratelog.DefaultBurst || lines == 0 {
		t.Errorf("%d warning lines for %d bad dialers, want a rate-limited few", lines, dialers)
	}
	if got := n.SuppressedLogs(); got+uint64(lines) != dialers {
		t.Errorf("%d lines logged and %d held back, want %d in all", lines, got, dialers)
	}
}
