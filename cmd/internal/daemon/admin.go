package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
)

// Probe reports whether a process is live or ready: nil for yes, else why
// not. It must answer quickly; a probe that blocks past ProbeTimeout is a
// failure (a stuck event loop is what a liveness probe is for).
type Probe func(ctx context.Context) error

// ProbeTimeout bounds one probe, under Kubernetes' default probe timeout
// of 1 s, so that the answer is ours rather than the kubelet's.
const ProbeTimeout = 800 * time.Millisecond

// Health is a process's liveness and readiness, as its /livez and /readyz
// report them. A nil probe always passes.
type Health struct {
	// Live fails when the process should be restarted: it no longer makes
	// progress.
	Live Probe
	// Ready fails when the process should get no new work: not yet joined
	// to its cluster, or draining.
	Ready Probe
	// Status, if set, says what a ready process is doing, after /readyz's
	// "ok: " (a scheduler of the live control plane: active or standby),
	// for an operator who reads the probe; a status probe passes or fails
	// on the code alone. It must answer at once.
	Status func() string
}

// Register adds /livez and /readyz to mux: 200 "ok" (with Status's line
// on /readyz), or 503 with the reason on one line.
func (h Health) Register(mux *http.ServeMux) {
	mux.Handle("GET /livez", probeHandler(h.Live, nil))
	mux.Handle("GET /readyz", probeHandler(h.Ready, h.Status))
}

func probeHandler(p Probe, status func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := runProbe(r.Context(), p); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ok: %v\n", err)
			return
		}
		if status != nil {
			if s := status(); s != "" {
				fmt.Fprintf(w, "ok: %s\n", s)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
}

// runProbe runs p under ProbeTimeout, answering even if p never returns.
func runProbe(ctx context.Context, p Probe) error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %v", ProbeTimeout)
	}
}

// AdminMux is the status endpoints of a scheduler or a backend:
// /livez, /readyz and, if metrics is not nil, /metrics.
func AdminMux(h Health, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	h.Register(mux)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

// Listen binds addr for the flag named flagName, before the process
// starts its work, so that a taken port fails the start naming the flag.
// "" binds nothing (nil, nil).
func Listen(flagName, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	return ln, nil
}

// Serve serves h on ln in the background, with a header timeout against
// slow clients; closing the returned server closes ln.
func Serve(ln net.Listener, h http.Handler, log zerolog.Logger) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("HTTP server stopped")
		}
	}()
	return srv
}

// PprofMux serves Go's profiles under /debug/pprof/. It goes on its own
// address (--pprof-addr), loopback by default: profiles show code, memory
// contents and can run for long, so they are not for the network that
// reaches the gateway or the metrics.
func PprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// IsLoopback reports whether the listen address addr (host:port) accepts
// connections only from this machine.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
