// Package gatewayserver serves a frontend client's KServe v2 HTTP gateway
// (frontend/gateway) with its Prometheus metrics: what `symphony frontend`
// and `symphony demo --http-addr` run. It adapts the client to the
// gateway's Inferer, so that the gateway itself stays free of the client.
package gatewayserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	frontmetrics "github.com/symphony-serving/symphony/frontend/metrics"
)

// Serve serves the KServe v2 gateway for client on addr with the
// settings gc (its Log and Observe are set here), behind the gateway's own
// server timeouts and connection cap, with the frontend's Prometheus
// metrics at /metrics if withMetrics.
func Serve(client *frontend.Client, addr string, gc gateway.Config, withMetrics bool, log zerolog.Logger) (*http.Server, string, error) {
	gc.Log = log
	var m *frontmetrics.Metrics
	if withMetrics {
		m = frontmetrics.New(client.Stats())
		client.ObserveEnds(m.Ended)
		gc.Observe = m.Observe
	}
	gw, err := gateway.New(Inferer{client}, gc)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	if m != nil {
		m.Gateway(gw.Stats())
		mux.Handle("/metrics", m.Handler())
	}
	mux.Handle("/", gw)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("gateway: %w", err)
	}
	srv := gw.Server(mux)
	go func() {
		if err := srv.Serve(gw.Listener(ln)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("gateway stopped")
		}
	}()
	return srv, ln.Addr().String(), nil
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
