// Package daemon is what every long-running process of the symphony
// binary (scheduler, backend, frontend, controller) shares, so that an
// operator meets the same options and endpoints on each:
//   - configuration by flag, by SYMPHONY_* environment variable and by a
//     YAML config file, in that precedence, with --print-config showing the
//     effective values and where each came from (Apply);
//   - --version, from the build information go build records (ReadBuild);
//   - --log-format console|json with full timestamps, and -v (NewLogger);
//   - /livez and /readyz beside /metrics (Health, AdminMux), /readyz
//     saying what a ready process is doing where it has more than one way
//     to be ready (Health.Status), and
//     /debug/pprof on a separate, loopback address (PprofMux).
//
// It holds no process's logic: each command passes its own probes and
// metrics handler.
package daemon

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/tcp"
)

// DefaultPprofAddr is where profiles are served unless --pprof-addr says
// otherwise: a free port on loopback, logged at the start, so that any
// number of processes on one machine each get one without clashing, and
// none is reachable from the network.
const DefaultPprofAddr = "127.0.0.1:0"

// Flags are the options every process has. AddFlags declares them.
type Flags struct {
	Config      string
	PrintConfig bool
	Version     bool
	LogFormat   LogFormat
	Verbose     bool
	PprofAddr   string

	resolved *Resolved
}

// AddFlags declares the common options on fs; verbose is -v's help, which
// says what more a process logs.
func AddFlags(fs *flag.FlagSet, verbose string) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Config, "config", "", "read flag values from this YAML `FILE` (flag names as keys, at the top level or under a section named after the command; default: $"+ConfigEnv+"); precedence: flag > "+EnvPrefix+"<FLAG_NAME> environment > file > default")
	fs.BoolVar(&f.PrintConfig, "print-config", false, "print the effective configuration (every flag, its value and where it came from) as a config file, and exit")
	fs.BoolVar(&f.Version, "version", false, "print the version and exit")
	fs.TextVar(&f.LogFormat, "log-format", LogConsole, "log lines as `console` text or json, each with a full UTC timestamp")
	fs.BoolVar(&f.Verbose, "v", false, verbose)
	fs.StringVar(&f.PprofAddr, "pprof-addr", DefaultPprofAddr, "serve Go's profiles at http://`ADDR`/debug/pprof/ (default: a free loopback port, logged at the start; \"\": off); keep it off the network")
	return f
}

// Resolve finishes a parsed command line: it prints the version, or fills
// in the flags left unset from env and the config file (Apply) and prints
// the effective configuration, as asked. done is true when the command
// has nothing more to do.
func (f *Flags) Resolve(fs *flag.FlagSet, stdout io.Writer, env Lookup, sections []string) (done bool, err error) {
	if f.Version {
		fmt.Fprintln(stdout, ReadBuild())
		return true, nil
	}
	path := f.Config
	if path == "" {
		path, _ = env(ConfigEnv)
	}
	r, err := Apply(fs, path, env, sections)
	if err != nil {
		return false, err
	}
	f.resolved = r
	if f.PrintConfig {
		return true, r.WriteEffective(stdout)
	}
	return false, nil
}

// Resolved is the configuration Resolve produced (nil before it).
func (f *Flags) Resolved() *Resolved { return f.resolved }

// libraryLog takes the TCP library's own log lines for the whole process,
// as the library's logger is the whole process's: main routes them here
// (RouteLibraryLog), and each Logger made becomes their destination.
var libraryLog = tcp.LibraryLog{Fallback: os.Stderr}

// RouteLibraryLog sends the TCP library's own log lines to the process's
// logger (the last one Logger made), so that every line on stderr keeps
// the format --log-format chose. A program calls it once, first in main.
func RouteLibraryLog() error { return tcp.RouteLibraryLog(&libraryLog) }

// Logger is the process's logger on w, as the flags ask; the TCP
// library's lines go to it too, once main has routed them.
func (f *Flags) Logger(w io.Writer) zerolog.Logger {
	log := NewLogger(w, f.LogFormat, f.Verbose, time.Now)
	libraryLog.SetLogger(log)
	if f.resolved != nil && f.resolved.File() != "" {
		log.Debug().Str("file", f.resolved.File()).Msg("configuration read")
	}
	return log
}

// ServePprof serves the profiles on --pprof-addr in the background, and
// returns the server to close (nil when off). An address reachable from
// the network is served, but with a warning: profiles are not for it.
func (f *Flags) ServePprof(log zerolog.Logger) (*http.Server, error) {
	ln, err := Listen("pprof-addr", f.PprofAddr)
	if ln == nil || err != nil {
		return nil, err
	}
	if !IsLoopback(ln.Addr().String()) {
		log.Warn().Str("addr", ln.Addr().String()).Msg("--pprof-addr is reachable from the network: profiles show memory and code, and a long profile costs CPU; serve them on loopback")
	}
	log.Info().Str("url", "http://"+ln.Addr().String()+"/debug/pprof/").Msg("profiles")
	return Serve(ln, PprofMux(), log), nil
}

// Shutdown closes srv (nil: nothing) within d, for deferred stops.
func Shutdown(srv *http.Server, d time.Duration) {
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = srv.Shutdown(ctx)
}
