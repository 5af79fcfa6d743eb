// Package certgen makes the certificates of a development cluster for
// mutual TLS (transport/tlsnet): a certificate authority, and certificates
// it signs that serve as both a server's and a client's, since every
// Symphony process listens and dials. `symphony certs` writes them to
// files; tests and `symphony demo` make them in memory.
//
// It is the standard library's crypto/x509 and crypto/ecdsa (P-256), with
// nothing to configure but names, hosts and lifetimes: a production
// deployment brings certificates from its own PKI (cert-manager, Vault, a
// corporate CA) instead.
package certgen

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Organization is the organization named in every certificate made here.
const Organization = "Symphony development cluster"

// DefaultHosts are the names every certificate made by Issue covers
// besides those given: the local machine, so that a cluster on loopback
// works as is.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// Validity is a certificate's lifetime.
type Validity struct {
	NotBefore, NotAfter time.Time
}

// Days is a lifetime of days from now, starting an hour ago so that a
// peer whose clock runs a little behind still accepts it.
func Days(now time.Time, days int) Validity {
	return Validity{NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, days)}
}

// CA is a certificate authority: its certificate and the key it signs
// with.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is Cert in PEM: the file every process trusts (--tls-ca).
	CertPEM []byte
}

// NewCA makes a self-signed certificate authority called name.
func NewCA(name string, v Validity) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(name, v)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certgen: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// KeyPEM is the CA's private key in PEM (PKCS #8). Whoever holds it can
// make certificates every process of the cluster accepts: keep it off the
// machines that run them.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.Key) }

// Pool is a certificate pool holding the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Pair is a certificate and its private key, in PEM.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// TLS is the pair as crypto/tls takes it.
func (p Pair) TLS() (tls.Certificate, error) { return tls.X509KeyPair(p.CertPEM, p.KeyPEM) }

// Issue makes a certificate for name signed by the CA, valid for v, for
// server and client authentication alike, covering DefaultHosts and hosts
// (IP addresses as IP addresses, anything else as a DNS name).
func (ca *CA) Issue(name string, hosts []string, v Validity) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl, err := template(name, v)
	if err != nil {
		return Pair{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	seen := map[string]bool{}
	for _, h := range append(append([]string(nil), DefaultHosts...), hosts...) {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Pair{}, fmt.Errorf("certgen: certificate for %s: %w", name, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: kp}, nil
}

// template is what a CA's and a leaf's certificates share.
func template(name string, v Validity) (*x509.Certificate, error) {
	if !v.NotAfter.After(v.NotBefore) {
		return nil, errors.New("certgen: a certificate must end after it starts")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{Organization}},
		NotBefore:    v.NotBefore,
		NotAfter:     v.NotAfter,
	}, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(kind string, der []byte) []byte {
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: kind, Bytes: der})
	return b.Bytes()
}
