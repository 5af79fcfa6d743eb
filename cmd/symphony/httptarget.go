package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

// httpTarget drives a frontend's KServe v2 gateway: each request is a POST
// to /v2/models/{m}/infer with the input as binary tensor data. Error
// answers map back to the frontend's typed errors by their reason
// (gateway.ResponseError), so the report classifies outcomes, and names
// drop and failure reasons, as it does for an embedded client.
type httpTarget struct {
	base   string
	client *http.Client
}

func newHTTPTarget(ctx context.Context, base string, w *workload.Workload) (*httpTarget, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--gateway %q: want an http:// URL", base)
	}
	t := &httpTarget{base: strings.TrimRight(base, "/"), client: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024, IdleConnTimeout: time.Minute},
	}}
	// Fail early, with a clear message, if the gateway is down or lacks a model.
	for _, m := range w.Models {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/v2/models/"+url.PathEscape(m.Name)+"/ready", nil)
		resp, err := t.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("gateway %s: %w", base, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("gateway %s: model %q not ready (HTTP %d)", base, m.Name, resp.StatusCode)
		}
		if err := t.checkSLO(ctx, m.Name, m.SLO, w.Source); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkSLO refuses a workload whose SLO for model differs from the one the
// cluster serves it with (the gateway's model metadata, slo_ms): the report
// would judge requests by the wrong SLO. A gateway that does not say is
// taken at its word.
func (t *httpTarget) checkSLO(ctx context.Context, model string, slo time.Duration, source string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/v2/models/"+url.PathEscape(model), nil)
	resp, err := t.client.Do(req)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", t.base, err)
	}
	defer resp.Body.Close()
	var meta struct {
		Parameters struct {
			SLOms float64 `json:"slo_ms"`
		} `json:"parameters"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&meta) != nil || meta.Parameters.SLOms <= 0 {
		return nil
	}
	if served := time.Duration(meta.Parameters.SLOms * float64(time.Millisecond)); served.Round(time.Microsecond) != slo.Round(time.Microsecond) {
		return fmt.Errorf("model %q: %s gives an SLO of %v, but the cluster behind %s serves it with %v; bench the workload the scheduler was started with (symphony scheduler -f)", model, source, slo, t.base, served)
	}
	return nil
}

// Go implements loadgen.Target.
func (t *httpTarget) Go(ctx context.Context, model string, input []byte, _ ...frontend.CallOption) *frontend.Call {
	return frontend.Async(model, func() ([]byte, frontend.Timing, error) { return t.infer(ctx, model, input) })
}

// infer posts one request. The gateway reports the request's batch as
// response parameters, which become the call's timing.
func (t *httpTarget) infer(ctx context.Context, model string, input []byte) (out []byte, tm frontend.Timing, err error) {
	out, head, err := t.post(ctx, model, input)
	if err != nil || len(head) == 0 {
		return out, tm, err
	}
	var resp struct {
		Parameters map[string]int64 `json:"parameters"`
	}
	if json.Unmarshal(head, &resp) == nil {
		p := resp.Parameters
		if p[gateway.ParamBatchSize] > 0 && p[gateway.ParamBatchStarted] > 0 {
			tm.BatchSize = int(p[gateway.ParamBatchSize])
			tm.Started, tm.Finished = time.Unix(0, p[gateway.ParamBatchStarted]), time.Unix(0, p[gateway.ParamBatchFinished])
		}
	}
	return out, tm, nil
}

// post sends the request and returns the output and the response's JSON
// header, or the typed error its status maps to.
func (t *httpTarget) post(ctx context.Context, model string, input []byte) ([]byte, []byte, error) {
	header, _ := json.Marshal(map[string]any{
		"inputs": []map[string]any{{
			"name": "input0", "datatype": "UINT8", "shape": []int{len(input)},
			"parameters": map[string]any{"binary_data_size": len(input)},
		}},
		"outputs": []map[string]any{{"name": "output0", "parameters": map[string]any{"binary_data": true}}},
	})
	body := make([]byte, 0, len(header)+len(input))
	body = append(append(body, header...), input...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/v2/models/"+url.PathEscape(model)+"/infer", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, nil, transportError(ctx, model, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, transportError(ctx, model, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, gateway.ResponseError(model, resp.StatusCode, data)
	}
	if n, err := strconv.Atoi(resp.Header.Get("Inference-Header-Content-Length")); err == nil && n >= 0 && n <= len(data) {
		return data[n:], data[:n], nil
	}
	return data, nil, nil
}

// transportError is the error of a request that got no answer: a canceled
// drop if the load generator canceled it, as an embedded client reports
// one, else the HTTP client's error.
func transportError(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return &frontend.DropError{Model: model, Reason: frontend.DropCanceled}
	}
	return fmt.Errorf("gateway: no answer: %w", err)
}
