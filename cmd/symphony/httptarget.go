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
		// As many idle connections as requests in flight, so that none is
		// closed and redialed; no Accept-Encoding, which the gateway
		// ignores.
		Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 1024, IdleConnTimeout: time.Minute, DisableCompression: true},
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
	if b, ok := gateway.ResponseBatch(head); ok {
		tm.BatchSize, tm.Started, tm.Finished = b.Size, b.Started, b.Finished
	}
	return out, tm, nil
}

// post sends the request and returns the output and the response's JSON
// header, or the typed error the answer maps to. The request's JSON
// header is written out rather than encoded from maps, and the answer
// read into a buffer of its length: the two were a fifth of the client's
// CPU (BenchmarkGatewayRoundTrip).
func (t *httpTarget) post(ctx context.Context, model string, input []byte) ([]byte, []byte, error) {
	n := strconv.Itoa(len(input))
	body := make([]byte, 0, 160+len(input))
	body = append(body, `{"inputs":[{"name":"input0","datatype":"UINT8","shape":[`...)
	body = append(append(body, n...), `],"parameters":{"binary_data_size":`...)
	body = append(append(body, n...), `}}],"outputs":[{"name":"output0","parameters":{"binary_data":true}}]}`...)
	headerLen := len(body)
	body = append(body, input...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/v2/models/"+url.PathEscape(model)+"/infer", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(headerLen))
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, nil, transportError(ctx, model, err)
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp)
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

// maxPresized is the largest answer read into a buffer of its announced
// length at once; larger ones grow as they arrive, so that a gateway
// announcing more than it sends cannot make the load generator allocate it.
const maxPresized = 1 << 20

// readAnswer reads an answer's body.
func readAnswer(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxPresized {
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	return io.ReadAll(resp.Body)
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
