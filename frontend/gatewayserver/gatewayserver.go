// Package gatewayserver serves a frontend client's KServe v2 gateway
// (frontend/gateway) over HTTP, with its Prometheus metrics, and over
// gRPC: what `symphony frontend` and `symphony demo --http-addr
// --grpc-addr` run. It adapts the client to the gateway's Inferer, so that
// the gateway itself stays free of the client.
package gatewayserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	frontmetrics "github.com/symphony-serving/symphony/frontend/metrics"
)

// Serve serves the KServe v2 gateway for client on addr with the
// settings gc (its Log and Observe are set here), behind the gateway's own
// server timeouts and connection cap, with the frontend's Prometheus
// metrics at /metrics if withMetrics. It is Start with HTTP alone.
func Serve(client *frontend.Client, addr string, gc gateway.Config, withMetrics bool, log zerolog.Logger) (*http.Server, string, error) {
	s, err := Start(client, Config{HTTPAddr: addr, Gateway: gc, Metrics: withMetrics, Log: log})
	if err != nil {
		return nil, "", err
	}
	return s.HTTP, s.HTTPAddr, nil
}

// Config says what Start serves.
type Config struct {
	// HTTPAddr is the address of the KServe v2 HTTP gateway, with the
	// metrics beside it; "" for none.
	HTTPAddr string
	// GRPCAddr is the address of the KServe v2 gRPC endpoint
	// (GRPCInferenceService), on a listener of its own; "" for none.
	GRPCAddr string
	// Gateway is both endpoints' settings; Start sets its Log and
	// Observe.
	Gateway gateway.Config
	// Metrics serves the frontend's Prometheus metrics at /metrics on
	// HTTPAddr; they count the gRPC requests with the HTTP ones, each
	// under the HTTP status its answer stands for.
	Metrics bool
	// Collectors are more metrics of the process's own (its network's
	// TLS refusals), served with the frontend's when Metrics is set.
	Collectors []prometheus.Collector
	// TLS, if set, serves both endpoints over TLS with it (a client
	// certificate required where it says so: mTLS at the gateway); nil
	// serves them in plaintext, for a TLS-terminating proxy in front.
	TLS *tls.Config
	Log zerolog.Logger
}

// Servers are the endpoints Start serves: one gateway, and so one
// in-flight cap, connection cap and set of metrics, over HTTP and gRPC.
type Servers struct {
	HTTP     *http.Server // nil without Config.HTTPAddr
	HTTPAddr string       // where HTTP listens (its port chosen if the Config's was 0)
	GRPC     *grpc.Server // nil without Config.GRPCAddr
	GRPCAddr string       // where gRPC listens
}

// Start serves the KServe v2 gateway for client over HTTP and gRPC, each
// on its own listener, behind the gateway's own timeouts and caps, in the
// background. It binds both listeners before it serves on either, so that
// an address that is taken fails the start, naming the endpoint.
func Start(client *frontend.Client, cfg Config) (*Servers, error) {
	gc := cfg.Gateway
	gc.Log = cfg.Log
	var m *frontmetrics.Metrics
	if cfg.Metrics {
		m = frontmetrics.New(client.Stats(), cfg.Collectors...)
		client.ObserveEnds(m.Ended)
		gc.Observe = m.Observe
	}
	gw, err := gateway.New(Inferer{client}, gc)
	if err != nil {
		return nil, err
	}
	var httpLn, grpcLn net.Listener
	if cfg.HTTPAddr != "" {
		if httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	if cfg.GRPCAddr != "" {
		if grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			if httpLn != nil {
				httpLn.Close()
			}
			return nil, fmt.Errorf("gateway gRPC: %w", err)
		}
	}
	s := &Servers{}
	if httpLn != nil {
		mux := http.NewServeMux()
		if m != nil {
			m.Gateway(gw.Stats())
			mux.Handle("/metrics", m.Handler())
		}
		mux.Handle("/", gw)
		s.HTTP, s.HTTPAddr = gw.Server(mux), httpLn.Addr().String()
		ln := gw.Listener(httpLn)
		if cfg.TLS != nil {
			c := cfg.TLS.Clone()
			c.NextProtos = []string{"http/1.1"}
			ln = tls.NewListener(ln, c)
		}
		go func() {
			if err := s.HTTP.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Log.Error().Err(err).Str("addr", httpLn.Addr().String()).Msg("gateway stopped")
			}
		}()
	}
	if grpcLn != nil {
		var opts []grpc.ServerOption
		if cfg.TLS != nil {
			opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
		}
		s.GRPC, s.GRPCAddr = gw.GRPCServer(opts...), grpcLn.Addr().String()
		go func() {
			if err := s.GRPC.Serve(gw.GRPCListener(grpcLn)); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				cfg.Log.Error().Err(err).Str("addr", grpcLn.Addr().String()).Msg("gateway gRPC stopped")
			}
		}()
	}
	return s, nil
}

// Shutdown stops both endpoints gracefully: they take no new requests,
// and return once those in flight are answered, or when ctx ends, which
// closes what is left. It returns the HTTP server's error.
func (s *Servers) Shutdown(ctx context.Context) error {
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		if s.GRPC == nil {
			return
		}
		stopped := make(chan struct{})
		go func() {
			s.GRPC.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.GRPC.Stop()
			<-stopped
		}
	}()
	var err error
	if s.HTTP != nil {
		err = s.HTTP.Shutdown(ctx)
	}
	<-grpcDone
	return err
}

// Close closes both endpoints and their connections at once.
func (s *Servers) Close() {
	if s.HTTP != nil {
		s.HTTP.Close()
	}
	if s.GRPC != nil {
		s.GRPC.Stop()
	}
}

// Inferer adapts a frontend client to the gateway's Inferer: requests
// run through the client with the gateway's deadline to schedule by.
type Inferer struct{ C *frontend.Client }

// Infer runs one request (gateway.Inferer).
func (g Inferer) Infer(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, error) {
	out, _, err := g.InferTimed(ctx, model, input, deadline)
	return out, err
}

// InferTimed runs one request and says which batch ran it, and when.
func (g Inferer) InferTimed(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, gateway.Batch, error) {
	var opts []frontend.CallOption
	if !deadline.IsZero() {
		opts = append(opts, frontend.WithDeadline(deadline))
	}
	if p := gateway.PriorityFrom(ctx); p > 0 {
		opts = append(opts, frontend.WithPriority(p))
	}
	call := g.C.Go(ctx, model, input, opts...)
	<-call.Done()
	t := call.Timing
	return call.Output, gateway.Batch{Size: t.BatchSize, Started: t.Started, Finished: t.Finished}, call.Err
}

// Model reports a model's SLO and whether it can be served now.
func (g Inferer) Model(name string) (gateway.ModelInfo, bool) {
	m, ok := g.C.Model(name)
	return gateway.ModelInfo{Name: m.Name, SLO: m.SLO, Ready: ok && g.C.Connected() && m.State == frontend.StateReady, Inputs: m.Inputs, Outputs: m.Outputs}, ok
}

// RepositoryIndex lists the scheduler's models and their states
// (gateway.Repository).
func (g Inferer) RepositoryIndex() []gateway.RepositoryModel {
	ms := g.C.RepositoryIndex()
	out := make([]gateway.RepositoryModel, len(ms))
	for i, m := range ms {
		out[i] = gateway.RepositoryModel{Name: m.Name, State: string(m.State), Reason: m.Reason}
	}
	return out
}

// LoadModel loads a model on the cluster (gateway.Repository).
func (g Inferer) LoadModel(ctx context.Context, name string) error { return g.C.LoadModel(ctx, name) }

// UnloadModel unloads a model from the cluster (gateway.Repository).
func (g Inferer) UnloadModel(ctx context.Context, name string) error {
	return g.C.UnloadModel(ctx, name)
}

// Ready reports whether the client is connected to its scheduler.
func (g Inferer) Ready() bool { return g.C.Connected() }

// LongestInference is the longest an inference through client can take:
// its longest model SLO, by which the frontend ends every request.
func LongestInference(client *frontend.Client) time.Duration {
	var slo time.Duration
	for _, m := range client.Models() {
		slo = max(slo, m.SLO)
	}
	return slo
}
