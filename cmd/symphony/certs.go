package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/transport/tlsnet/certgen"
)

// certRoles are the processes `symphony certs` makes a certificate for.
var certRoles = []string{"scheduler", "backend", "frontend"}

// runCerts is `symphony certs`: a development CA, and a certificate and key
// it signed for each process, as PEM files for --tls-ca, --tls-cert and
// --tls-key.
func runCerts(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("certs", flag.ContinueOnError)
	flags.SetOutput(stderr)
	out := flags.String("out", "", "write the files into `DIR` (made if missing; files already there are not overwritten)")
	hosts := flags.String("hosts", "", "comma-separated host names and IP addresses the certificates cover besides localhost, 127.0.0.1 and ::1: those the processes are dialed at (or a common name for --tls-server-name)")
	days := flags.Int("days", 365, "how many days the CA and the certificates are valid")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", flags.Args())
	}
	if *out == "" {
		return cli.UsageErr("--out DIR is required")
	}
	if *days < 1 || *days > 100*365 {
		return cli.UsageErr("--days %d: want 1 to %d", *days, 100*365)
	}
	extra := splitList(*hosts)
	files := []string{"ca.crt", "ca.key"}
	for _, r := range certRoles {
		files = append(files, r+".crt", r+".key")
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(*out, f)); err == nil {
			return fmt.Errorf("%s exists: remove it, or choose another --out (certs never overwrites a key)", filepath.Join(*out, f))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}

	v := certgen.Days(time.Now(), *days)
	ca, err := certgen.NewCA("Symphony development CA", v)
	if err != nil {
		return err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	contents := map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": caKey}
	for _, r := range certRoles {
		p, err := ca.Issue("symphony-"+r, extra, v)
		if err != nil {
			return err
		}
		contents[r+".crt"], contents[r+".key"] = p.CertPEM, p.KeyPEM
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(f, ".key") {
			mode = 0o600
		}
		if err := writeNew(filepath.Join(*out, f), contents[f], mode); err != nil {
			return err
		}
	}

	covers := strings.Join(append(append([]string(nil), certgen.DefaultHosts...), extra...), ", ")
	fmt.Fprintf(stdout, "wrote a development CA and certificates valid for %d days, into %s:\n", *days, *out)
	fmt.Fprintf(stdout, "  ca.crt, ca.key                  the CA (ECDSA P-256); keep ca.key off the machines that run the processes\n")
	for _, r := range certRoles {
		fmt.Fprintf(stdout, "  %-31s %s's certificate and key (server and client), for %s\n", r+".crt, "+r+".key", r, covers)
	}
	fmt.Fprintf(stdout, "run each process with its own:\n")
	for _, r := range certRoles {
		fmt.Fprintf(stdout, "  symphony %-9s --tls-ca %s --tls-cert %s --tls-key %s ...\n", r,
			filepath.Join(*out, "ca.crt"), filepath.Join(*out, r+".crt"), filepath.Join(*out, r+".key"))
	}
	fmt.Fprintf(stdout, "(or SYMPHONY_TLS_CA, SYMPHONY_TLS_CERT and SYMPHONY_TLS_KEY, or tls-ca, tls-cert and tls-key in a --config file)\n")
	return nil
}

// writeNew writes a file that must not exist yet, with mode from its
// creation on (a key is never readable by others, even for a moment).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
