package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
)

// GRPCTarget offers the load to a cluster through a frontend's KServe v2
// gRPC endpoint (`symphony bench --grpc`): each request is one unary
// ModelInfer, its input one raw [n] UINT8 tensor, on a few shared client
// connections (HTTP/2 carries the calls in flight side by side on each).
// Error answers turn back into the frontend's typed errors by their
// reasons (gateway.GRPCError), and each answer's parameters say which
// batch ran it, so the report classifies outcomes, names drop and failure
// reasons, and counts batch sizes and GPU time as it does for an embedded
// client and for GatewayTarget.
type GRPCTarget struct {
	clients []inferencepb.GRPCInferenceServiceClient
	next    atomic.Uint32
	addr    string
}

// NewGRPCTarget checks that the server behind conns (one or more
// connections to the same server, at addr, which messages name) serves
// every model of w, ready, with w's SLO, and returns the target that sends
// w's load to it, spreading the requests over conns in turn. It fails
// early, with a clear message, if the server is down or lacks a model, and
// refuses a workload whose SLO for a model differs from the one the
// cluster serves it with (the gateway.SLOMetadata header of its
// metadata): the report would judge requests by the wrong SLO. A server
// that does not say is taken at its word.
func NewGRPCTarget(ctx context.Context, addr string, conns []grpc.ClientConnInterface, w *workload.Workload) (*GRPCTarget, error) {
	if len(conns) == 0 {
		return nil, fmt.Errorf("loadgen: no connection to %s", addr)
	}
	t := &GRPCTarget{addr: addr}
	for _, c := range conns {
		t.clients = append(t.clients, inferencepb.NewGRPCInferenceServiceClient(c))
	}
	if err := t.check(ctx, w); err != nil {
		return nil, err
	}
	return t, nil
}

// check checks the models of w, as NewGRPCTarget says.
func (t *GRPCTarget) check(ctx context.Context, w *workload.Workload) error {
	c := t.clients[0]
	for _, m := range w.Models {
		r, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: m.Name})
		if err != nil {
			return fmt.Errorf("gRPC %s: model %q: %w", t.addr, m.Name, err)
		}
		if !r.Ready {
			return fmt.Errorf("gRPC %s: model %q not ready", t.addr, m.Name)
		}
		var header metadata.MD
		if _, err := c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: m.Name}, grpc.Header(&header)); err != nil {
			if status.Code(err) == codes.Unavailable {
				return fmt.Errorf("gRPC %s: %w", t.addr, err)
			}
			continue // it answered, but with no metadata to compare with
		}
		v := header.Get(gateway.SLOMetadata)
		if len(v) == 0 {
			continue
		}
		ms, err := strconv.ParseFloat(v[0], 64)
		if err != nil || !(ms > 0) || ms >= float64(time.Hour/time.Millisecond) {
			continue
		}
		if slo := time.Duration(ms * float64(time.Millisecond)); slo.Round(time.Microsecond) != m.SLO.Round(time.Microsecond) {
			return fmt.Errorf("model %q: %s gives an SLO of %v, but the cluster behind %s serves it with %v; bench the workload the scheduler was started with (symphony scheduler -f)",
				m.Name, w.Source, m.SLO, t.addr, slo)
		}
	}
	return nil
}

// Start implements Target. The answer's parameters say which batch ran
// the request, which becomes the call's timing; a request whose ctx ended
// is a canceled drop, as from the embedded client.
func (t *GRPCTarget) Start(ctx context.Context, model string, input []byte, priority uint8) Call {
	c := t.clients[int(t.next.Add(1))%len(t.clients)]
	return Go(func() (frontend.Timing, error) {
		req := &inferencepb.ModelInferRequest{
			ModelName: model,
			Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
				{Name: "input0", Datatype: "UINT8", Shape: []int64{int64(len(input))}},
			},
			RawInputContents: [][]byte{input},
		}
		if p := tritonPriority(priority); p > 0 {
			req.Parameters = map[string]*inferencepb.InferParameter{"priority": {ParameterChoice: &inferencepb.InferParameter_Uint64Param{Uint64Param: p}}}
		}
		resp, err := c.ModelInfer(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return frontend.Timing{}, &frontend.DropError{Model: model, Reason: frontend.DropCanceled}
			}
			return frontend.Timing{}, gateway.GRPCError(model, err)
		}
		b, _ := gateway.GRPCResponseBatch(resp.GetParameters())
		return frontend.Timing{BatchSize: b.Size, Started: b.Started, Finished: b.Finished}, nil
	})
}
