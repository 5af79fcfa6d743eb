package main

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/transport/tlsnet"
)

// symphony certs writes a CA and a certificate per process that load as
// the processes load them, cover the hosts asked for, and keep their keys
// private; it refuses to overwrite them.
func TestCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, stdout, stderr := runCLI(t, "certs", "--out", dir, "--hosts", "sched.internal, 10.1.2.3", "--days", "30")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, role := range certRoles {
		flags := "--tls-ca " + filepath.Join(dir, "ca.crt") + " --tls-cert " + filepath.Join(dir, role+".crt") + " --tls-key " + filepath.Join(dir, role+".key")
		if !strings.Contains(stdout, flags) {
			t.Errorf("the output does not give %s its flags %q:\n%s", role, flags, stdout)
		}
		cert, _, err := tlsnet.LoadCredentials(filepath.Join(dir, "ca.crt"), filepath.Join(dir, role+".crt"), filepath.Join(dir, role+".key"))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(leaf.DNSNames, "sched.internal") || !slices.Contains(leaf.DNSNames, "localhost") ||
			!slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("10.1.2.3")) }) ||
			!slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP("::1")) }) {
			t.Errorf("%s covers %v and %v", role, leaf.DNSNames, leaf.IPAddresses)
		}
		if days := leaf.NotAfter.Sub(leaf.NotBefore).Hours() / 24; days < 30 || days > 31 {
			t.Errorf("%s valid for %.1f days, want 30", role, days)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".key") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", e.Name(), fi.Mode().Perm())
		}
	}
	if len(entries) != 8 {
		t.Errorf("%d files written, want 8", len(entries))
	}
	if code, _, stderr := runCLI(t, "certs", "--out", dir); code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("certs over existing files: exit %d, %q", code, stderr)
	}
	for _, args := range [][]string{{"certs"}, {"certs", "--out", dir + "2", "--days", "0"}, {"certs", "--out", dir + "2", "extra"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
