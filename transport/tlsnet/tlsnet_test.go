package tlsnet

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/tlsnet/certgen"
	"github.com/symphony-serving/symphony/transport/transporttest"
)

// cluster is a test cluster's credentials: its CA and one certificate it
// signed, made once per test binary.
var cluster struct {
	once sync.Once
	ca   *certgen.CA
	pair certgen.Pair
	cert tls.Certificate
	err  error
}

func testCA(t testing.TB) (*certgen.CA, certgen.Pair, tls.Certificate) {
	t.Helper()
	cluster.once.Do(func() {
		v := certgen.Days(time.Now(), 1)
		if cluster.ca, cluster.err = certgen.NewCA("test CA", v); cluster.err != nil {
			return
		}
		if cluster.pair, cluster.err = cluster.ca.Issue("test", nil, v); cluster.err != nil {
			return
		}
		cluster.cert, cluster.err = cluster.pair.TLS()
	})
	if cluster.err != nil {
		t.Fatal(cluster.err)
	}
	return cluster.ca, cluster.pair, cluster.cert
}

// testOptions are Options with the test cluster's credentials.
func testOptions(t testing.TB) Options {
	ca, _, cert := testCA(t)
	return Options{Certificate: cert, CA: ca.Pool()}
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T) transport.Network {
		return New(testOptions(t))
	})
}

func TestOptions(t *testing.T) {
	good := testOptions(t)
	good.MaxFrame, good.HandshakeTimeout, good.DialTimeout, good.WriteTimeout, good.MaxQueue = 1<<20, time.Second, time.Second, time.Second, 2<<20
	if err := good.Validate(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for name, change := range map[string]func(*Options){
		"no certificate":          func(o *Options) { o.Certificate = tls.Certificate{} },
		"no CA":                   func(o *Options) { o.CA = nil },
		"a queue under a frame":   func(o *Options) { o.MaxQueue = o.MaxFrame },
		"a negative handshake":    func(o *Options) { o.HandshakeTimeout = -1 },
		"no write timeout":        func(o *Options) { o.WriteTimeout = 0 },
		"a frame over the header": func(o *Options) { o.MaxFrame = 1 << 33 },
	} {
		bad := good
		change(&bad)
		if bad.Validate() == nil {
			t.Errorf("%s validated", name)
		}
	}
	if Default().Validate() == nil {
		t.Error("Default, which has no credentials, validated")
	}
}

// LoadCredentials reads what certgen writes, and refuses a certificate
// the CA did not sign, naming the files.
func TestLoadCredentials(t *testing.T) {
	ca, pair, _ := testCA(t)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile, certFile, keyFile := write("ca.crt", ca.CertPEM), write("a.crt", pair.CertPEM), write("a.key", pair.KeyPEM)
	cert, pool, err := LoadCredentials(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the loaded certificate does not verify against the loaded CA: %v", err)
	}

	other, err := certgen.NewCA("other", certgen.Days(time.Now(), 1))
	if err != nil {
		t.Fatal(err)
	}
	otherCA := write("other.crt", other.CertPEM)
	if _, _, err := LoadCredentials(otherCA, certFile, keyFile); err == nil || !strings.Contains(err.Error(), "does not verify against the CA "+otherCA) {
		t.Errorf("a certificate of another CA: %v", err)
	}
	if _, _, err := LoadCredentials(keyFile, certFile, keyFile); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key as the CA: %v", err)
	}
	if _, _, err := LoadCredentials(caFile, certFile, caFile); err == nil {
		t.Error("a certificate as the key loaded")
	}
}
