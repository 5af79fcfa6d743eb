package cli

import (
	"flag"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/cmd/internal/daemon"
	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/tcp"
	"github.com/symphony-serving/symphony/transport/tlsnet"
)

// TLSFlags are how a process secures its connections, control and data
// alike: --tls-ca, --tls-cert and --tls-key for mutual TLS
// (transport/tlsnet), --tls-server-name, and --insecure for plaintext
// TCP (transport/tcp) said out loud. Without any of them a process runs
// in plaintext and warns at the start.
type TLSFlags struct {
	CA, Cert, Key string
	ServerName    string
	Insecure      bool
}

// InsecureWarning is what a process without TLS flags logs at its start.
const InsecureWarning = "insecure: connections are neither encrypted nor authenticated; give --tls-ca/--tls-cert/--tls-key, or --insecure to silence this on loopback"

// AddTLSFlags adds the TLS flags to fs.
func AddTLSFlags(fs *flag.FlagSet) *TLSFlags {
	f := &TLSFlags{}
	fs.StringVar(&f.CA, "tls-ca", "", "the cluster's CA certificate (PEM `FILE`): with --tls-cert and --tls-key, every connection to and from this process is mutual TLS 1.3, and a peer must present a certificate this CA signed (docs/operations.md, \"Authentication: mTLS\"; symphony certs makes a development set)")
	fs.StringVar(&f.Cert, "tls-cert", "", "this process's certificate (PEM `FILE`), signed by --tls-ca, for server and client authentication both")
	fs.StringVar(&f.Key, "tls-key", "", "the private key of --tls-cert (PEM `FILE`)")
	fs.StringVar(&f.ServerName, "tls-server-name", "", "with --tls-*, check the certificate of each process this one dials against `NAME` instead of the dialed host (for addresses the certificates do not list, such as pod IPs)")
	fs.BoolVar(&f.Insecure, "insecure", false, "run without TLS on purpose: plaintext TCP, neither encrypted nor authenticated (loopback, trusted networks); without it and without --tls-*, the same, with a warning")
	return f
}

// Enabled reports whether the flags ask for mutual TLS.
func (f *TLSFlags) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Validate checks that the flags go together: all three files or none,
// and --insecure or --tls-server-name only where they mean something.
func (f *TLSFlags) Validate() error {
	set := 0
	for _, v := range []string{f.CA, f.Cert, f.Key} {
		if v != "" {
			set++
		}
	}
	switch {
	case set != 0 && set != 3:
		return UsageErr("--tls-ca, --tls-cert and --tls-key go together: give all three for mutual TLS, or none for plaintext")
	case set == 3 && f.Insecure:
		return UsageErr("--insecure and --tls-ca/--tls-cert/--tls-key exclude each other")
	case set == 0 && f.ServerName != "":
		return UsageErr("--tls-server-name needs --tls-ca, --tls-cert and --tls-key")
	}
	return nil
}

// Network is a process's network, mutual TLS or plaintext TCP as its
// flags asked, for its control and data connections alike.
type Network struct {
	transport.Network
	tls      *tlsnet.Network // nil in plaintext
	plain    *tcp.Network    // nil with TLS
	insecure bool            // plaintext, and --insecure not given
	log      zerolog.Logger
}

// Network returns the network the flags ask for, with log for its
// warnings: mutual TLS with the flags' files, or plaintext TCP. In
// plaintext without --insecure it logs InsecureWarning, and a listener on
// an address reachable from the network logs louder still.
func (f *TLSFlags) Network(log zerolog.Logger) (*Network, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if !f.Enabled() {
		n := &Network{plain: NewNetwork(log), insecure: !f.Insecure, log: log}
		n.Network = n.plain
		if n.insecure {
			log.Warn().Msg(InsecureWarning)
		} else {
			log.Info().Msg("plaintext connections (--insecure): neither encrypted nor authenticated")
		}
		return n, nil
	}
	cert, ca, err := tlsnet.LoadCredentials(f.CA, f.Cert, f.Key)
	if err != nil {
		return nil, UsageErr("%v", err)
	}
	o := tlsnet.Default()
	o.Certificate, o.CA, o.ServerName, o.Log = cert, ca, f.ServerName, log
	n := &Network{tls: tlsnet.New(o), log: log}
	n.Network = n.tls
	log.Info().Str("ca", f.CA).Str("cert", f.Cert).Msg("mutual TLS: peers must present a certificate from the CA")
	return n, nil
}

// Listen listens as the underlying network does; in plaintext without
// --insecure, on an address reachable from the network, it first says
// loudly what that means.
func (n *Network) Listen(addr string, accept transport.Acceptor) (transport.Listener, error) {
	ln, err := n.Network.Listen(addr, accept)
	if err == nil && n.insecure && !daemon.IsLoopback(addr) {
		n.log.Error().Str("addr", ln.Addr()).Msg("insecure: listening on an address reachable from the network with neither encryption nor authentication: anyone who reaches it can join the cluster, submit work and read inputs and results; give --tls-ca/--tls-cert/--tls-key (symphony certs makes a development set), or --insecure if this network is trusted")
	}
	return ln, err
}

// Secure reports whether the network is mutual TLS.
func (n *Network) Secure() bool { return n.tls != nil }

// Refused is the number of connections refused at the TLS handshake
// (tlsnet.Network.Refused); 0 in plaintext.
func (n *Network) Refused() uint64 {
	if n.tls == nil {
		return 0
	}
	return n.tls.Refused()
}

// Close releases what the network holds.
func (n *Network) Close() {
	if n.plain != nil {
		n.plain.Close()
	}
}

// Collectors are the network's metrics for the /metrics of process
// ("scheduler", "backend", "frontend"): Refused as
// symphony_<process>_tls_refused_total. It exists in plaintext too, at 0,
// so that dashboards and alerts need not know how a process was started.
func (n *Network) Collectors(process string) []prometheus.Collector {
	return []prometheus.Collector{prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "symphony_" + process + "_tls_refused_total",
		Help: "Connections refused at the TLS handshake: no client certificate, one the CA did not sign or that expired, a dialer without TLS, a dialer that refused this process's certificate, or no handshake in time (always 0 without --tls-*).",
	}, func() float64 { return float64(n.Refused()) })}
}
