package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"github.com/symphony-serving/symphony/frontend"
)

// TimeoutHeader is the request header that bounds one request's latency, a
// Go duration such as "20ms". It is a header as well as the timeout_ms
// parameter so that a proxy or sidecar can set it without touching bodies.
const TimeoutHeader = "X-Symphony-Timeout"

// Inferer is what the gateway needs of a frontend client. It is declared
// here, on the consumer's side, so that the gateway depends on three
// methods rather than on a connected client, and tests can fake it.
type Inferer interface {
	// Infer runs one request; input is the request's raw bytes, the output
	// the result's raw bytes. It ends with one of the frontend package's
	// errors, which the gateway maps to status codes, and it must honour
	// ctx: its deadline shortens the request's, its cancellation drops it.
	Infer(ctx context.Context, model string, input []byte) ([]byte, error)
	// Model reports whether the model is served and whether it is ready
	// (has GPUs / is connected).
	Model(name string) (info ModelInfo, ok bool)
	// Ready reports whether the frontend is connected to the scheduler.
	Ready() bool
}

// ModelInfo is what the gateway reports about a model: enough for the
// metadata and readiness endpoints.
type ModelInfo struct {
	// Name is the model's name as requests give it.
	Name string
	// SLO is the model's latency objective, the longest deadline a request
	// gets; reported as the metadata parameter slo_ms so that clients can
	// pick sensible timeouts.
	SLO time.Duration
	// Ready: the model can run requests now.
	Ready bool
}

// Config holds the gateway's settings. Start from Default: the zero Config
// does not validate, so that a forgotten body limit fails loudly.
type Config struct {
	// MaxBodyBytes caps an inference request's body, JSON and binary data
	// together; larger bodies get 413 before they are buffered, since the
	// gateway holds a whole body in memory to decode it.
	MaxBodyBytes int64
	// RetryAfter is the Retry-After hint, rounded up to whole seconds, on
	// 503s for conditions that pass (overload and deadline drops, a lost
	// scheduler connection). Zero sends none.
	RetryAfter time.Duration
	// Version is the server version GET /v2 reports.
	Version string
	// Log receives the gateway's logs: one debug line per inference
	// request and an error line for each 500. The zero Logger discards.
	Log zerolog.Logger
	// Observe, if set, is called once per inference request as it ends,
	// for metrics: with the model ("" for one the frontend does not
	// serve, so that arbitrary paths cannot inflate a label), the status
	// (499 for a caller that left) and the time the gateway took.
	Observe func(model string, status int, took time.Duration)
}

// Default returns the settings a gateway starts from: 64 MiB bodies, which
// hold a batch of large images as binary data; a 1 s Retry-After, the
// smallest the header can say; and no logging.
func Default() Config {
	return Config{MaxBodyBytes: 64 << 20, RetryAfter: time.Second, Version: "dev", Log: zerolog.Nop()}
}

// Validate reports the first setting that makes no sense.
func (c Config) Validate() error {
	switch {
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("MaxBodyBytes %d must be positive", c.MaxBodyBytes)
	case c.RetryAfter < 0:
		return fmt.Errorf("RetryAfter %v must not be negative", c.RetryAfter)
	}
	return nil
}

// Gateway is an http.Handler serving the KServe v2 REST protocol in front
// of an Inferer. It is safe for concurrent use and keeps no per-request
// state between requests.
type Gateway struct {
	inf Inferer
	cfg Config
	mux *http.ServeMux
}

// New returns a gateway in front of inf, or an error if inf is nil or cfg
// does not validate.
func New(inf Inferer, cfg Config) (*Gateway, error) {
	if inf == nil {
		return nil, errors.New("gateway: nil Inferer")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{inf: inf, cfg: cfg, mux: http.NewServeMux()}
	g.mux.HandleFunc("/v2", only(http.MethodGet, g.serverMetadata))
	g.mux.HandleFunc("/v2/health/live", only(http.MethodGet, g.live))
	g.mux.HandleFunc("/v2/health/ready", only(http.MethodGet, g.ready))
	for _, m := range []string{"/v2/models/{model}", "/v2/models/{model}/versions/{version}"} {
		g.mux.HandleFunc(m, only(http.MethodGet, g.modelMetadata))
		g.mux.HandleFunc(m+"/ready", only(http.MethodGet, g.modelReady))
		g.mux.HandleFunc(m+"/infer", only(http.MethodPost, g.infer))
	}
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return g, nil
}

// ServeHTTP routes a request to its endpoint.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mux.ServeHTTP(w, r)
}

// only admits one method (GET admits HEAD too) and answers others with a
// JSON 405, where the mux's own method patterns would answer in plain text.
func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s wants %s, not %s", r.URL.Path, method, r.Method))
			return
		}
		h(w, r)
	}
}

func (g *Gateway) serverMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"name": "symphony", "version": g.cfg.Version, "extensions": []string{"binary_tensor_data"},
	})
}

func (g *Gateway) live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"live": true})
}

func (g *Gateway) ready(w http.ResponseWriter, _ *http.Request) {
	ok := g.inf.Ready()
	writeJSON(w, okOr503(ok), map[string]bool{"ready": ok})
}

func (g *Gateway) modelReady(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	info, ok := g.inf.Model(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown model %q", name))
		return
	}
	writeJSON(w, okOr503(info.Ready), map[string]any{"name": name, "ready": info.Ready})
}

// tensorMeta describes a tensor in model metadata.
type tensorMeta struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func (g *Gateway) modelMetadata(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	info, ok := g.inf.Model(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown model %q", name))
		return
	}
	meta := map[string]any{
		"name":     name,
		"platform": "symphony",
		"inputs":   []tensorMeta{{Name: "input0", Datatype: "UINT8", Shape: []int64{-1}}},
		"outputs":  []tensorMeta{{Name: defaultOutputName, Datatype: "UINT8", Shape: []int64{-1}}},
	}
	if info.SLO > 0 {
		meta["parameters"] = map[string]any{"slo_ms": float64(info.SLO) / float64(time.Millisecond)}
	}
	writeJSON(w, http.StatusOK, meta)
}

// infer decodes a request, runs it and writes its result or its error,
// logging one debug line as it ends.
func (g *Gateway) infer(w http.ResponseWriter, r *http.Request) {
	start, model := time.Now(), r.PathValue("model")
	var (
		id          string
		status      int
		nIn, nOut   int
		err         error
		clientError string
	)
	defer func() {
		lvl := zerolog.DebugLevel
		if status == http.StatusInternalServerError {
			lvl = zerolog.ErrorLevel
		}
		ev := g.cfg.Log.WithLevel(lvl).Str("model", model).Str("id", id).Int("status", status).
			Int("bytes_in", nIn).Int("bytes_out", nOut).Float64("dur_ms", float64(time.Since(start).Microseconds())/1000)
		if clientError != "" {
			ev = ev.Str("bad_request", clientError)
		}
		ev.Err(err).Msg("infer")
		if g.cfg.Observe != nil {
			code, served := status, model
			if code == 0 { // the Inferer panicked; net/http answers 500
				code = http.StatusInternalServerError
			}
			if code != http.StatusOK {
				if _, ok := g.inf.Model(model); !ok {
					served = ""
				}
			}
			g.cfg.Observe(served, code, time.Since(start))
		}
	}()
	fail := func(code int, msg string) {
		status, clientError = code, msg
		writeError(w, code, msg)
	}

	timeout, terr := headerTimeout(r.Header.Get(TimeoutHeader))
	if terr != nil {
		fail(http.StatusBadRequest, terr.Error())
		return
	}
	body, code, berr := readBody(w, r, g.cfg.MaxBodyBytes)
	if berr != nil {
		fail(code, berr.Error())
		return
	}
	req, derr := decodeInferRequest(body, r.Header.Get(headerLengthHeader))
	if derr != nil {
		fail(http.StatusBadRequest, derr.Error())
		return
	}
	id, nIn = req.ID, len(req.Input)
	if req.Timeout > 0 && (timeout == 0 || req.Timeout < timeout) {
		timeout = req.Timeout
	}
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}

	var out []byte
	var batch Batch
	if ti, ok := g.inf.(TimedInferer); ok {
		out, batch, err = ti.InferTimed(ctx, model, req.Input)
	} else {
		out, err = g.inf.Infer(ctx, model, req.Input)
	}
	if err != nil {
		var retry bool
		status, retry = errorStatus(ctx, err)
		switch {
		case status == statusClientGone:
			return
		case retry && g.cfg.RetryAfter > 0:
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(g.cfg.RetryAfter.Seconds()))))
		}
		msg := err.Error()
		switch status {
		case http.StatusInternalServerError:
			if !errors.Is(err, frontend.ErrRefused) { // the one 500 whose cause the operator should read
				msg = "internal error"
			}
		case http.StatusRequestTimeout:
			msg = fmt.Sprintf("request timed out after %v: %v", timeout, err)
		}
		writeError(w, status, msg)
		return
	}
	status, nOut = http.StatusOK, len(out)
	writeInferResponse(w, model, r.PathValue("version"), req, out, batch)
}

// statusClientGone is the status logged, never written, for a request
// whose caller disconnected: nginx's 499, which no standard code covers.
const statusClientGone = 499

// errorStatus maps an Infer error to a status code, and says whether a
// Retry-After hint fits. ctx is the request's context, whose state tells a
// request that timed out (408) from one whose caller left (499).
func errorStatus(ctx context.Context, err error) (status int, retry bool) {
	var be *frontend.BackendError
	switch {
	case errors.Is(err, frontend.ErrUnknownModel):
		return http.StatusNotFound, false
	case errors.Is(err, frontend.ErrNotConnected), errors.Is(err, frontend.ErrSchedulerLost):
		return http.StatusServiceUnavailable, true
	case errors.Is(err, frontend.ErrClosed):
		return http.StatusServiceUnavailable, false
	case errors.Is(err, frontend.ErrBadDeadline):
		return http.StatusBadRequest, false
	case errors.Is(err, frontend.ErrRefused):
		return http.StatusInternalServerError, false
	case errors.As(err, &be):
		return http.StatusBadGateway, false
	}
	if reason, ok := frontend.IsDrop(err); ok {
		switch reason {
		case frontend.DropCanceled:
			return canceledStatus(ctx)
		case frontend.DropDeadline, frontend.DropOverload, frontend.DropShutdown:
			return http.StatusServiceUnavailable, true
		}
		return http.StatusServiceUnavailable, false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return canceledStatus(ctx)
	}
	return http.StatusInternalServerError, false
}

// canceledStatus is the status of a request that ended because a context
// ended: 408 if its own timeout expired, 499 (nothing written) if its
// caller left, and 503 if neither, when something else canceled it.
func canceledStatus(ctx context.Context) (int, bool) {
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return http.StatusRequestTimeout, false
	case context.Canceled:
		return statusClientGone, false
	}
	return http.StatusServiceUnavailable, false
}

// headerTimeout parses the X-Symphony-Timeout header; 0 when absent.
func headerTimeout(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive Go duration such as 20ms", TimeoutHeader, v)
	}
	return d, nil
}

// readBody reads a body of at most max bytes, answering the status to use
// on failure: 413 for too large, 400 for a body that could not be read.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, int, error) {
	tooBig := fmt.Errorf("request body is larger than %d bytes", max)
	if r.ContentLength > max {
		return nil, http.StatusRequestEntityTooLarge, tooBig
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead) // ReadFrom wants MinRead spare to see EOF
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max)); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, tooBig
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading the request body: %v", err)
	}
	return buf.Bytes(), 0, nil
}

// responseTensor is the one output tensor of a response.
type responseTensor struct {
	Name       string          `json:"name"`
	Datatype   string          `json:"datatype"`
	Shape      []int           `json:"shape"`
	Parameters map[string]int  `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// inferResponse is the inference response object.
type inferResponse struct {
	ModelName    string           `json:"model_name"`
	ModelVersion string           `json:"model_version,omitempty"`
	ID           string           `json:"id,omitempty"`
	Parameters   map[string]int64 `json:"parameters,omitempty"`
	Outputs      []responseTensor `json:"outputs"`
}

// TimedInferer is an Inferer that can also say how a request ran. The
// gateway then returns the batch as response parameters: batch_size, and
// batch_started_ns and batch_finished_ns (Unix ns), so that a remote load
// generator can report batch sizes and GPU time as an embedded one does.
type TimedInferer interface {
	InferTimed(ctx context.Context, model string, input []byte) ([]byte, Batch, error)
}

// Batch is the batch a request ran in; the zero Batch says nothing.
type Batch struct {
	Size              int
	Started, Finished time.Time
}

// Response parameter names for a request's batch.
const (
	ParamBatchSize     = "batch_size"
	ParamBatchStarted  = "batch_started_ns"
	ParamBatchFinished = "batch_finished_ns"
)

// writeInferResponse writes out as one [n] UINT8 tensor, in JSON or, if
// the request asked for it, in the binary data form.
func writeInferResponse(w http.ResponseWriter, model, version string, req *inferRequest, out []byte, batch Batch) {
	t := responseTensor{Name: req.OutputName, Datatype: "UINT8", Shape: []int{len(out)}}
	if req.BinaryOutput {
		t.Parameters = map[string]int{"binary_data_size": len(out)}
	} else {
		data := make([]byte, 0, 2+4*len(out))
		data = append(data, '[')
		for i, b := range out {
			if i > 0 {
				data = append(data, ',')
			}
			data = strconv.AppendUint(data, uint64(b), 10)
		}
		t.Data = append(data, ']')
	}
	resp := inferResponse{ModelName: model, ModelVersion: version, ID: req.ID, Outputs: []responseTensor{t}}
	if batch.Size > 0 && !batch.Started.IsZero() {
		resp.Parameters = map[string]int64{
			ParamBatchSize: int64(batch.Size), ParamBatchStarted: batch.Started.UnixNano(), ParamBatchFinished: batch.Finished.UnixNano(),
		}
	}
	if !req.BinaryOutput {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	head, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the response")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set(headerLengthHeader, strconv.Itoa(len(head)))
	h.Set("Content-Length", strconv.Itoa(len(head)+len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(head)
	_, _ = w.Write(out)
}

// writeJSON writes v as a JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError writes the protocol's error object, {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func okOr503(ok bool) int {
	if ok {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}
