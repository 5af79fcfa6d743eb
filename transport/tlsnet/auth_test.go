package tlsnet

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/tlsnet/certgen"
	"github.com/symphony-serving/symphony/transport/wire"
)

// authServer is a listener of the test cluster whose log a test reads.
type authServer struct {
	net  *Network
	addr string
	logs *logBuffer
}

func newAuthServer(t *testing.T, o Options) *authServer {
	s := &authServer{logs: newLogBuffer()}
	o.Log, o.WarnBurst = zerolog.New(s.logs).Level(zerolog.WarnLevel), 1000
	s.net = New(o)
	ln, err := s.net.Listen("127.0.0.1:0", func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) {
		return nil, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s.addr = ln.Addr()
	return s
}

func dialWith(n transport.Network, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	c, _, err := n.Dial(ctx, addr, &wire.Hello{Version: wire.Version, Role: wire.RoleFrontend, Name: "intruder"}, nil)
	if err == nil {
		c.Close(nil)
	}
	return err
}

// A dialer without a certificate from the cluster's CA is refused before
// the wire handshake: its Dial fails saying why, and the listener counts
// the refusal and logs one line naming the dialer's address and the
// reason.
func TestDialersWithoutAValidCertificateAreRefused(t *testing.T) {
	ca, _, _ := testCA(t)
	now := time.Now()
	other, err := certgen.NewCA("another cluster", certgen.Days(now, 1))
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *certgen.CA, v certgen.Validity) tls.Certificate {
		p, err := ca.Issue("intruder", nil, v)
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.TLS()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s := newAuthServer(t, testOptions(t))
	if err := dialWith(New(testOptions(t)), s.addr); err != nil {
		t.Fatalf("a dialer of the cluster: %v", err)
	}

	for _, tc := range []struct {
		name     string
		cert     tls.Certificate
		dialErr  string // in Dial's error
		refusal  string // the reason in the listener's line
		tlsAlone bool   // dial with crypto/tls: no certificate at all
	}{
		{name: "NoCertificate", tlsAlone: true, dialErr: "certificate required", refusal: "client didn't provide a certificate"},
		{name: "AnotherCA", cert: issue(other, certgen.Days(now, 1)), dialErr: "the listener refused this dialer's certificate", refusal: "certificate signed by unknown authority"},
		{name: "Expired", cert: issue(ca, certgen.Validity{NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-24 * time.Hour)}),
			dialErr: "the listener refused this dialer's certificate", refusal: "certificate has expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.net.Refused()
			var local string
			if tc.tlsAlone {
				c, err := tls.Dial("tcp", s.addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
				if err != nil {
					t.Fatalf("the client's half of the TLS handshake: %v", err)
				}
				defer c.Close()
				local = c.LocalAddr().String()
				_ = c.SetReadDeadline(time.Now().Add(closeWithin))
				if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), tc.dialErr) {
					t.Errorf("read on a connection without a certificate: %v, want %q", err, tc.dialErr)
				}
			} else {
				n := New(Options{Certificate: tc.cert, CA: ca.Pool(), Log: zerolog.Nop()})
				err := dialWith(n, s.addr)
				if err == nil || !strings.Contains(err.Error(), tc.dialErr) {
					t.Fatalf("Dial = %v, want an error saying %q", err, tc.dialErr)
				}
				var rej *transport.RejectedError
				if errors.As(err, &rej) {
					t.Errorf("Dial = %v: a wire Reject, but the dialer should never have reached the wire handshake", err)
				}
			}
			if local != "" {
				s.logs.waitFor(t, "TLS handshake refused: remote "+local+": "+tc.refusal)
			} else {
				s.logs.waitFor(t, "TLS handshake refused: remote 127.0.0.1:", tc.refusal)
			}
			if got := s.net.Refused(); got != before+1 {
				t.Errorf("Refused went from %d to %d, want one more", before, got)
			}
		})
	}

	t.Run("Plaintext", func(t *testing.T) {
		before := s.net.Refused()
		plain := tcp.New(tcp.Default())
		defer plain.Close()
		err := dialWith(plain, s.addr)
		var rej *transport.RejectedError
		if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "requires mutual TLS") {
			t.Fatalf("a plaintext dialer: %v, want a Reject saying that mutual TLS is required", err)
		}
		s.logs.waitFor(t, "TLS handshake refused: remote 127.0.0.1:", "not TLS")
		if got := s.net.Refused(); got != before+1 {
			t.Errorf("Refused went from %d to %d, want one more", before, got)
		}
	})
}

// A dialer checks the listener's certificate: one from another CA, or
// for another name, fails Dial, and the listener logs that the dialer
// refused it.
func TestListenersWithoutAValidCertificateAreRefused(t *testing.T) {
	ca, _, _ := testCA(t)
	other, err := certgen.NewCA("another cluster", certgen.Days(time.Now(), 1))
	if err != nil {
		t.Fatal(err)
	}
	p, err := other.Issue("impostor", nil, certgen.Days(time.Now(), 1))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := p.TLS()
	if err != nil {
		t.Fatal(err)
	}
	// The impostor trusts our CA, so that only our side refuses.
	s := newAuthServer(t, Options{Certificate: cert, CA: ca.Pool()})
	err = dialWith(New(testOptions(t)), s.addr)
	if err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Fatalf("Dial to an impostor = %v, want an unknown authority", err)
	}
	s.logs.waitFor(t, "TLS handshake refused: remote 127.0.0.1:", "the dialer refused this listener's certificate")

	// The right CA, but a name the certificate does not cover.
	good := newAuthServer(t, testOptions(t))
	o := testOptions(t)
	o.ServerName = "symphony-scheduler.example"
	if err := dialWith(New(o), good.addr); err == nil || !strings.Contains(err.Error(), "symphony-scheduler.example") {
		t.Errorf("Dial checking another name = %v, want a name mismatch", err)
	}
	o.ServerName = "localhost"
	_, port, _ := net.SplitHostPort(good.addr)
	if err := dialWith(New(o), net.JoinHostPort("127.0.0.1", port)); err != nil {
		t.Errorf("Dial with ServerName localhost, which the certificate covers: %v", err)
	}
}
