package loadgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway/kserveclient"
)

// GatewayTarget offers the load to a cluster through a frontend's KServe
// v2 gateway (`symphony bench --gateway`) instead of an embedded frontend
// client: each request is one kserveclient.Client.Infer. The client's
// errors unwrap to the frontend's typed errors by the gateway's reasons,
// and the gateway's answers carry each request's batch, so the report
// classifies outcomes, names drop and failure reasons, and counts batch
// sizes and GPU time as it does for an embedded client.
type GatewayTarget struct {
	c *kserveclient.Client
}

// NewGatewayTarget checks that the server behind c serves every model of w,
// ready, with w's SLO, and returns the target that sends w's load to it.
// It fails early, with a clear message, if the gateway is down or lacks a
// model, and refuses a workload whose SLO for a model differs from the one
// the cluster serves it with (the model's metadata): the report would judge
// requests by the wrong SLO. A server whose metadata does not say is taken
// at its word.
func NewGatewayTarget(ctx context.Context, c *kserveclient.Client, w *workload.Workload) (*GatewayTarget, error) {
	for _, m := range w.Models {
		ready, err := c.ModelReady(ctx, m.Name)
		if err != nil {
			return nil, fmt.Errorf("gateway %s: %w", c.URL(), err)
		}
		if !ready {
			return nil, fmt.Errorf("gateway %s: model %q not ready", c.URL(), m.Name)
		}
		md, err := c.ModelMetadata(ctx, m.Name)
		if down := new(*kserveclient.NoAnswerError); errors.As(err, down) {
			return nil, fmt.Errorf("gateway %s: %w", c.URL(), err)
		}
		if err != nil {
			continue // it answered, but with no metadata to compare with
		}
		if md.SLO > 0 && md.SLO.Round(time.Microsecond) != m.SLO.Round(time.Microsecond) {
			return nil, fmt.Errorf("model %q: %s gives an SLO of %v, but the cluster behind %s serves it with %v; bench the workload the scheduler was started with (symphony scheduler -f)",
				m.Name, w.Source, m.SLO, c.URL(), md.SLO)
		}
	}
	return &GatewayTarget{c: c}, nil
}

// Start implements Target. The gateway's answer says which batch ran the
// request, which becomes the call's timing.
func (t *GatewayTarget) Start(ctx context.Context, model string, input []byte, priority uint8) Call {
	return Go(func() (frontend.Timing, error) {
		_, b, err := t.c.InferPriority(ctx, model, input, tritonPriority(priority))
		return frontend.Timing{BatchSize: b.Size, Started: b.Started, Finished: b.Finished}, err
	})
}

// tritonPriority is the gateway's priority parameter for a frontend level
// (gateway.PriorityFrom's inverse): 0 for the default level 0, else
// 256 − level, Triton's numbering where 1 is the highest.
func tritonPriority(level uint8) uint64 {
	if level == 0 {
		return 0
	}
	return uint64(256 - int(level))
}
