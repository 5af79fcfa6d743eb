// Package kserveclient calls a server of the KServe v2 REST protocol (the
// Open Inference Protocol) over HTTP: a Symphony frontend's gateway
// (package gateway, `symphony frontend`), or any other KServe v2 server,
// from a Go program that does not link the frontend client and so need not
// reach the scheduler or the backends itself.
//
// Like Symphony's models, the client moves opaque bytes: a request's input
// is one [n] UINT8 tensor sent as binary tensor data, and its output is the
// bytes of the answer's first output tensor, asked for in binary form.
//
// Errors keep what the server said. A request that got no answer is a
// *NoAnswerError (or, if its context was canceled, a canceled drop, as
// from the embedded client). An error answer is an *Error with its
// status, the gateway's machine-readable reason (gateway.ReasonDropPrefix
// and the others) and Retry-After hint, and it unwraps to the frontend
// package's typed error that reason stands for (a *frontend.DropError, a
// *frontend.BackendError, frontend.ErrSchedulerLost, ...; see
// gateway.ResponseError), so that a caller tests a remote request's outcome
// with errors.Is and errors.As exactly as it would an embedded client's.
package kserveclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway"
)

// Client calls one KServe v2 server. It is safe for concurrent use; its
// connections are kept alive and shared by all its requests.
type Client struct {
	base  string
	hc    *http.Client
	token string // sent as "Authorization: Bearer token" when not empty
}

// WithBearerToken returns a copy of c that sends token with every request
// ("Authorization: Bearer token"), for a gateway that asks for one
// (symphony frontend --gateway-token-file).
func (c *Client) WithBearerToken(token string) *Client {
	d := *c
	d.token = token
	return &d
}

// New returns a client of the server at baseURL (http:// or https://, with
// an optional path prefix, e.g. "http://127.0.0.1:8000"). hc is the HTTP
// client to send requests with; nil gives one tuned for many requests in
// flight (DefaultHTTPClient). New sends nothing: ServerReady or ModelReady
// checks that the server is there.
func New(baseURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("kserveclient: %q is not an http:// or https:// URL", baseURL)
	}
	if hc == nil {
		hc = DefaultHTTPClient()
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: hc}, nil
}

// DefaultHTTPClient is the HTTP client New uses when given none: as many
// idle connections per host as a load generator keeps requests in flight,
// so that none is closed and redialed between requests, and no
// Accept-Encoding, which the gateway ignores and whose decoding would cost
// the client CPU. It has no timeout, each request being bounded by its
// context, and no proxy, so that a benchmark measures the server.
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}}
}

// URL is the server's base URL, as requests are built on it.
func (c *Client) URL() string { return c.base }

// Error is an answer other than 200 OK. It unwraps to the frontend
// package's typed error its Reason stands for, or to a *gateway.StatusError
// for a reason with no such error (a malformed request, a body too large)
// and for an answer without a reason, as a server other than Symphony's
// gives.
type Error struct {
	Model  string // the model the request was for; "" for the server's own endpoints
	Status int    // the HTTP status code
	// Reason is the gateway's machine-readable reason (the gateway.Reason
	// constants, or gateway.ReasonDropPrefix and a frontend.DropReason);
	// "" if the answer had none.
	Reason string
	// Message is the answer's human-readable error, or its whole body if
	// that was not an error object.
	Message string
	// RetryAfter is the answer's Retry-After hint in whole seconds: the
	// gateway sends it for conditions that pass (overload, a lost
	// scheduler); 0 if none.
	RetryAfter time.Duration

	err error
}

func (e *Error) Error() string { return e.err.Error() }

// Unwrap returns the typed error the answer maps to (gateway.ResponseError).
func (e *Error) Unwrap() error { return e.err }

// responseError is the *Error of an answer that was not 200, with its
// body read.
func responseError(model string, resp *http.Response, body []byte) *Error {
	e := &Error{Model: model, Status: resp.StatusCode, err: gateway.ResponseError(model, resp.StatusCode, body)}
	if msg, reason, ok := gateway.ParseErrorBody(body); ok {
		e.Message, e.Reason = msg, reason
	} else {
		e.Message = strings.TrimSpace(string(body))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// NoAnswerError is a request that got no answer: the connection could not
// be made, or broke before the whole answer was read. It tells a server
// that is down or unreachable from one that answered no (an *Error), and
// unwraps to the HTTP client's error.
type NoAnswerError struct {
	URL string // the server's base URL
	Err error
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("kserveclient: no answer from %s: %v", e.URL, e.Err)
}

func (e *NoAnswerError) Unwrap() error { return e.Err }

// noAnswer is the error of a request that got no answer: a canceled drop
// if ctx was canceled, as the embedded frontend client reports a request
// its caller gave up on, else a *NoAnswerError.
func (c *Client) noAnswer(ctx context.Context, model string, err error) error {
	if ctx.Err() != nil {
		return &frontend.DropError{Model: model, Reason: frontend.DropCanceled}
	}
	return &NoAnswerError{URL: c.base, Err: err}
}

// get sends a GET for path and returns the answer's status and body; an
// answer that is neither 200 nor one of okStatus is an *Error.
func (c *Client) get(ctx context.Context, model, path string, okStatus ...int) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, body, err := c.do(ctx, model, req)
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK && !slices.Contains(okStatus, resp.StatusCode) {
		return 0, nil, responseError(model, resp, body)
	}
	return resp.StatusCode, body, nil
}

// do sends req and reads the whole answer, whatever its status; a request
// that got no answer, or not all of it, fails with noAnswer's error.
func (c *Client) do(ctx context.Context, model string, req *http.Request) (*http.Response, []byte, error) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, c.noAnswer(ctx, model, err)
	}
	defer resp.Body.Close()
	body, err := readAnswer(resp)
	if err != nil {
		return nil, nil, c.noAnswer(ctx, model, err)
	}
	return resp, body, nil
}

// ServerReady asks whether the server can run requests: for a Symphony
// gateway, whether its frontend is connected to the scheduler. A server
// that answers 503 is up but not ready (false, nil).
func (c *Client) ServerReady(ctx context.Context) (bool, error) {
	st, _, err := c.get(ctx, "", "/v2/health/ready", http.StatusServiceUnavailable)
	return st == http.StatusOK, err
}

// ModelReady asks whether the server can run requests for model now. A
// model the server does not know is an error (it unwraps to
// frontend.ErrUnknownModel from a Symphony gateway); a known model that is
// not ready is (false, nil).
func (c *Client) ModelReady(ctx context.Context, model string) (bool, error) {
	st, _, err := c.get(ctx, model, modelPath(model)+"/ready", http.StatusServiceUnavailable)
	return st == http.StatusOK, err
}

// Metadata is what the client reads of a model's metadata.
type Metadata struct {
	Name     string
	Platform string
	// SLO is the latency SLO the cluster serves the model with (the
	// gateway's parameter slo_ms): the longest a request may take, which
	// sensible timeouts exceed. 0 if the server does not say.
	SLO time.Duration
}

// ModelMetadata reads model's metadata.
func (c *Client) ModelMetadata(ctx context.Context, model string) (Metadata, error) {
	_, body, err := c.get(ctx, model, modelPath(model))
	if err != nil {
		return Metadata{}, err
	}
	var meta struct {
		Name       string `json:"name"`
		Platform   string `json:"platform"`
		Parameters struct {
			SLOms float64 `json:"slo_ms"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return Metadata{}, fmt.Errorf("kserveclient: metadata of model %q: %w", model, err)
	}
	md := Metadata{Name: meta.Name, Platform: meta.Platform}
	if ms := meta.Parameters.SLOms; ms > 0 && ms < float64(time.Hour/time.Millisecond) {
		md.SLO = time.Duration(ms * float64(time.Millisecond))
	}
	return md, nil
}

// Infer runs one request for model on input and returns its output and,
// from a Symphony gateway whose frontend says, the batch it ran in (the
// zero Batch otherwise). ctx bounds the request: canceling it ends the
// request as a *frontend.DropError with frontend.DropCanceled, as with
// the embedded client. An error answer is an *Error.
func (c *Client) Infer(ctx context.Context, model string, input []byte) ([]byte, gateway.Batch, error) {
	return c.InferPriority(ctx, model, input, 0)
}

// InferPriority is Infer at Triton's priority p: 1 the highest, larger
// numbers lower, 0 the default (the gateway's priority parameter, which it
// sends only when p is not 0).
func (c *Client) InferPriority(ctx context.Context, model string, input []byte, p uint64) ([]byte, gateway.Batch, error) {
	out, head, err := c.post(ctx, model, input, p)
	if err != nil || len(head) == 0 {
		return out, gateway.Batch{}, err
	}
	b, _ := gateway.ResponseBatch(head)
	return out, b, nil
}

// post sends the request and returns the output and the answer's JSON
// header. The request's JSON header is written out rather than encoded
// from maps, and the answer read into a buffer of its length: the two were
// a fifth of the client's CPU (BenchmarkGatewayRoundTrip).
func (c *Client) post(ctx context.Context, model string, input []byte, priority uint64) ([]byte, []byte, error) {
	n := strconv.Itoa(len(input))
	body := make([]byte, 0, 192+len(input))
	body = append(body, '{')
	if priority > 0 {
		body = strconv.AppendUint(append(body, `"parameters":{"priority":`...), priority, 10)
		body = append(body, "},"...)
	}
	body = append(body, `"inputs":[{"name":"input0","datatype":"UINT8","shape":[`...)
	body = append(append(body, n...), `],"parameters":{"binary_data_size":`...)
	body = append(append(body, n...), `}}],"outputs":[{"name":"output0","parameters":{"binary_data":true}}]}`...)
	headerLen := len(body)
	body = append(body, input...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+modelPath(model)+"/infer", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(headerContentLength, strconv.Itoa(headerLen))
	resp, data, err := c.do(ctx, model, req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, responseError(model, resp, data)
	}
	if n, err := strconv.Atoi(resp.Header.Get(headerContentLength)); err == nil && n >= 0 && n <= len(data) {
		return data[n:], data[:n], nil
	}
	// A JSON answer: the server ignored the binary output asked for.
	return jsonOutput(model, data)
}

// headerContentLength is the binary tensor data extension's header: the
// length of the JSON object that starts a body, the tensors' bytes after
// it.
const headerContentLength = "Inference-Header-Content-Length"

// jsonOutput reads the output of an answer in the JSON form, which a server
// may give although the request asked for binary data: its first output
// tensor's data, whose elements are bytes (UINT8, or the 0/1 of BOOL).
func jsonOutput(model string, data []byte) ([]byte, []byte, error) {
	var resp struct {
		Outputs []struct {
			Datatype string  `json:"datatype"`
			Data     []int64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(data, &resp); err != nil || len(resp.Outputs) == 0 {
		return nil, nil, fmt.Errorf("kserveclient: model %q: an answer with no output tensor the client reads", model)
	}
	o := resp.Outputs[0]
	out := make([]byte, len(o.Data))
	for i, v := range o.Data {
		if v < 0 || v > 255 {
			return nil, nil, fmt.Errorf("kserveclient: model %q: output element %d is not a byte (%s %d)", model, i, o.Datatype, v)
		}
		out[i] = byte(v)
	}
	return out, data, nil
}

func modelPath(model string) string { return "/v2/models/" + url.PathEscape(model) }

// maxPresized is the largest answer read into a buffer of its announced
// length at once; larger ones grow as they arrive, so that a server
// announcing more than it sends cannot make the client allocate it.
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
