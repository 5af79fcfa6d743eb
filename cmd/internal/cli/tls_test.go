package cli

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/tlsnet/certgen"
	"github.com/symphony-serving/symphony/transport/wire"
)

func parseTLS(t *testing.T, args ...string) *TLSFlags {
	t.Helper()
	fs := flag.NewFlagSet("p", flag.ContinueOnError)
	f := AddTLSFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// The TLS files go together, and --insecure and --tls-server-name only
// where they mean something: usage errors, before anything starts.
func TestTLSFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "": valid
	}{
		{nil, ""},
		{[]string{"--insecure"}, ""},
		{[]string{"--tls-ca", "a", "--tls-cert", "b", "--tls-key", "c"}, ""},
		{[]string{"--tls-ca", "a", "--tls-cert", "b", "--tls-key", "c", "--tls-server-name", "s"}, ""},
		{[]string{"--tls-ca", "a"}, "go together"},
		{[]string{"--tls-cert", "b", "--tls-key", "c"}, "go together"},
		{[]string{"--tls-ca", "a", "--tls-cert", "b", "--tls-key", "c", "--insecure"}, "exclude each other"},
		{[]string{"--tls-server-name", "s"}, "needs --tls-ca"},
	} {
		err := parseTLS(t, tc.args...).Validate()
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Without TLS flags a process warns at the start, and louder when it
// listens where the network reaches it; --insecure silences both. Its
// refusal counter exists, at 0.
func TestPlaintextNetworkWarns(t *testing.T) {
	for _, insecure := range []bool{false, true} {
		var logs bytes.Buffer
		f := &TLSFlags{Insecure: insecure}
		n, err := f.Network(zerolog.New(&logs))
		if err != nil {
			t.Fatal(err)
		}
		accept := func(transport.Conn, *wire.Hello) (*wire.Welcome, transport.Handler, error) { return nil, nil, nil }
		for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
			ln, err := n.Listen(addr, accept)
			if err != nil {
				t.Fatal(err)
			}
			_ = ln.Close()
		}
		n.Close()
		warned := strings.Contains(logs.String(), InsecureWarning)
		loud := strings.Contains(logs.String(), `"level":"error"`) && strings.Contains(logs.String(), "reachable from the network")
		if warned == insecure || loud == insecure || strings.Count(logs.String(), "reachable from the network") > 1 {
			t.Errorf("--insecure %v: warned %v, loud %v; log:\n%s", insecure, warned, loud, logs.String())
		}
		if n.Secure() || n.Refused() != 0 {
			t.Errorf("plaintext: Secure %v, Refused %d", n.Secure(), n.Refused())
		}
		checkCounter(t, n, 0)
	}
}

// With the three files, the network is mutual TLS; a certificate the CA
// did not sign stops the start with a usage error naming the file.
func TestTLSNetworkLoadsTheFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v := certgen.Days(time.Now(), 1)
	var files [2][3]string
	for i, name := range []string{"ours", "theirs"} {
		ca, err := certgen.NewCA(name, v)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ca.Issue("p", nil, v)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = [3]string{write(name+"-ca.crt", ca.CertPEM), write(name+".crt", p.CertPEM), write(name+".key", p.KeyPEM)}
	}
	var logs bytes.Buffer
	n, err := (&TLSFlags{CA: files[0][0], Cert: files[0][1], Key: files[0][2]}).Network(zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if !n.Secure() || strings.Contains(logs.String(), "insecure") || !strings.Contains(logs.String(), "mutual TLS") {
		t.Errorf("Secure %v; log:\n%s", n.Secure(), logs.String())
	}
	checkCounter(t, n, 0)
	_, err = (&TLSFlags{CA: files[0][0], Cert: files[1][1], Key: files[1][2]}).Network(zerolog.Nop())
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), files[1][1]) {
		t.Errorf("another CA's certificate: %v, want a usage error naming it", err)
	}
}

// checkCounter checks the network's refusal counter as a process exports
// it.
func checkCounter(t *testing.T, n *Network, want float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.Collectors("backend")...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "symphony_backend_tls_refused_total" || mfs[0].GetMetric()[0].GetCounter().GetValue() != want {
		t.Errorf("collectors: %v, want symphony_backend_tls_refused_total at %v", mfs, want)
	}
}
