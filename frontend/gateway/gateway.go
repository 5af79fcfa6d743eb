package gateway

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/tensor"
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
	// deadline, if not zero, is when the request should be answered by:
	// the gateway sets it Config.HTTPBudget short of the model's SLO (or
	// the request's own timeout), for the frontend to schedule by
	// (frontend.WithDeadline). Unlike ctx's deadline it must not end the
	// request: an answer a little after it still reaches the caller in
	// time. ctx carries the request's priority level, if it asked for one
	// (PriorityFrom), for the frontend (frontend.WithPriority).
	Infer(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, error)
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
	// Inputs and Outputs are the model's named tensors, one sample each
	// (frontend.ModelInfo's), or nil for a model of opaque bytes. With
	// them the metadata lists the real tensors, requests are checked
	// against them, and responses carry the named outputs.
	Inputs, Outputs []tensor.Spec
}

// Config holds the gateway's settings. Start from Default: the zero Config
// does not validate, so that a forgotten limit fails loudly.
type Config struct {
	// MaxBodyBytes caps an inference request's body, JSON and binary data
	// together; larger bodies get 413. The gateway holds a whole body in
	// memory to decode it, but grows its buffer as the bytes arrive, never
	// ahead of them to an announced Content-Length.
	MaxBodyBytes int64
	// MaxHeaderBytes caps a request's header. Inference requests carry a
	// few hundred bytes of header; net/http's default of 1 MiB would let
	// each slow connection hold a megabyte.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading a request's header, from a new
	// connection's start or a kept-alive connection's next byte: a client
	// that dribbles header bytes (slowloris) is closed after it.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, header and body; a body
	// still arriving then is answered 408 and its connection closed. It is
	// the bandwidth a client must have: 64 MiB in 10s is 54 Mbit/s, and a
	// request that takes longer to send has missed any SLO by far.
	ReadTimeout time.Duration
	// WriteTimeout bounds an inference request from its body's last byte
	// to its answer's last byte: the inference, then the write. It must
	// outlast the longest inference, the longest model SLO (the frontend
	// ends every request by its deadline), or answers that come in time
	// are cut off; CheckInference says whether it does. Past it, a
	// client that does not read its answer is disconnected.
	WriteTimeout time.Duration
	// IdleTimeout closes a kept-alive connection that sends no request for
	// this long, so that idle connections do not hold MaxConnections slots.
	IdleTimeout time.Duration
	// MaxConnections caps the connections open at once (with Listener);
	// past it a new connection is answered 503 with Retry-After and closed.
	// Each open connection costs a file descriptor and a few tens of KiB.
	MaxConnections int
	// MaxInFlight caps the inference requests handed to the frontend at
	// once; past it a request is answered 503 with Retry-After. The
	// frontend ends every request by its SLO, so requests in
	// flight are the rate times that at worst; the cap keeps a stalled
	// cluster from piling up bodies and goroutines without bound.
	MaxInFlight int
	// HTTPBudget is the part of a request's SLO kept for HTTP: the
	// caller's clock starts before the gateway has read the request and
	// stops after the answer has crossed back, while the frontend's
	// deadline counts from the request's arrival at the gateway. The
	// scheduler runs batches as late as their deadlines allow, so without
	// it answers on time for the frontend arrive late for the caller. The
	// gateway schedules each request this much short of its SLO (or its
	// own timeout), never by more than half of it.
	HTTPBudget time.Duration
	// RetryAfter is the Retry-After hint, rounded up to whole seconds, on
	// 503s for conditions that pass (overload and deadline drops, a lost
	// scheduler connection, the caps). Zero sends none.
	RetryAfter time.Duration
	// Version is the server version GET /v2 reports.
	Version string
	// Tokens, if set, are the bearer tokens a request must carry, over
	// HTTP and gRPC alike (the health endpoints excepted); nil admits
	// every request.
	Tokens *Tokens
	// Log receives the gateway's logs: one debug line per inference
	// request, an error line for each 500, and warnings (at most one every
	// ten seconds of each kind) when the caps turn requests away. The zero
	// Logger discards.
	Log zerolog.Logger
	// Observe, if set, is called once per inference request as it ends,
	// for metrics: with the model ("" for one the frontend does not
	// serve, so that arbitrary paths cannot inflate a label), the status
	// (499 for a caller that left) and the time the gateway took.
	Observe func(model string, status int, took time.Duration)
}

// Default returns the settings a gateway starts from: 64 MiB bodies, which
// hold a batch of large images as binary data, and 64 KiB headers; 5s to
// send a header and 10s a whole request; 10s from a body to its answer,
// over the SLOs of the paper's zoos (20-400ms) many times; 30s of idle keep-alive; 4096 connections and 2048
// requests in flight, far over the 1500 req/s demo's few dozen; a 2ms HTTP
// budget, over the most the gateway path added to the demo's p99 latency
// on loopback (docs/benchmarks.md); a 1s Retry-After, the smallest the
// header can say; and no logging.
func Default() Config {
	return Config{
		MaxBodyBytes: 64 << 20, MaxHeaderBytes: 64 << 10,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second,
		MaxConnections: 4096, MaxInFlight: 2048, HTTPBudget: 2 * time.Millisecond,
		RetryAfter: time.Second, Version: "dev", Log: zerolog.Nop(),
	}
}

// Validate reports the first setting that makes no sense. A zero timeout
// or cap is refused rather than read as "none": each is what stands
// between the gateway and a client that never finishes.
func (c Config) Validate() error {
	switch {
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("MaxBodyBytes %d must be positive", c.MaxBodyBytes)
	case c.MaxHeaderBytes <= 0:
		return fmt.Errorf("MaxHeaderBytes %d must be positive", c.MaxHeaderBytes)
	case c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0:
		return fmt.Errorf("timeouts (read header %v, read %v, write %v, idle %v) must be positive",
			c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout)
	case c.ReadHeaderTimeout > c.ReadTimeout:
		return fmt.Errorf("ReadHeaderTimeout %v must not exceed ReadTimeout %v, which includes it", c.ReadHeaderTimeout, c.ReadTimeout)
	case c.MaxConnections <= 0 || c.MaxInFlight <= 0:
		return fmt.Errorf("MaxConnections %d and MaxInFlight %d must be positive", c.MaxConnections, c.MaxInFlight)
	case c.RetryAfter < 0 || c.HTTPBudget < 0:
		return fmt.Errorf("RetryAfter %v and HTTPBudget %v must not be negative", c.RetryAfter, c.HTTPBudget)
	}
	return nil
}

// CheckInference reports whether WriteTimeout outlasts an inference of
// longest: the longest SLO of the models served.
// The models are known only once the frontend has joined the scheduler, so
// New cannot check it; a caller does when they are.
func (c Config) CheckInference(longest time.Duration) error {
	if c.WriteTimeout <= longest {
		return fmt.Errorf("gateway write timeout %v does not outlast the longest inference (the longest SLO) of %v: answers that come in time would be cut off", c.WriteTimeout, longest)
	}
	return nil
}

// Gateway is an http.Handler serving the KServe v2 REST protocol in front
// of an Inferer. It is safe for concurrent use and keeps no per-request
// state between requests.
type Gateway struct {
	inf   Inferer
	cfg   Config
	mux   *http.ServeMux
	stats Stats
	// capLog, busyLog and httpLog are Config.Log sampled to a line every
	// ten seconds: what they report can repeat for every connection.
	capLog, busyLog, httpLog zerolog.Logger
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
	sampled := func() zerolog.Logger {
		return cfg.Log.Sample(&zerolog.BurstSampler{Burst: 1, Period: 10 * time.Second})
	}
	g.capLog, g.busyLog, g.httpLog = sampled(), sampled(), sampled()
	g.mux.HandleFunc("/v2", only(http.MethodGet, g.serverMetadata))
	g.mux.HandleFunc("/v2/health/live", only(http.MethodGet, g.live))
	g.mux.HandleFunc("/v2/health/ready", only(http.MethodGet, g.ready))
	// The probes every Symphony process answers, for Kubernetes.
	g.mux.HandleFunc("/livez", only(http.MethodGet, g.livez))
	g.mux.HandleFunc("/readyz", only(http.MethodGet, g.readyz))
	for _, m := range []string{"/v2/models/{model}", "/v2/models/{model}/versions/{version}"} {
		g.mux.HandleFunc(m, only(http.MethodGet, g.modelMetadata))
		g.mux.HandleFunc(m+"/ready", only(http.MethodGet, g.modelReady))
		g.mux.HandleFunc(m+"/infer", only(http.MethodPost, g.infer))
	}
	g.mux.HandleFunc("/v2/repository/index", only(http.MethodPost, g.repositoryIndex))
	g.mux.HandleFunc("/v2/repository/models/{model}/load", only(http.MethodPost, g.repositoryLoad))
	g.mux.HandleFunc("/v2/repository/models/{model}/unload", only(http.MethodPost, g.repositoryUnload))
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, ReasonNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return g, nil
}

// Stats returns the gateway's counters, for metrics.
func (g *Gateway) Stats() *Stats { return &g.stats }

// ServeHTTP routes a request to its endpoint.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.authHTTP(w, r) {
		return
	}
	g.mux.ServeHTTP(w, r)
}

// only admits one method (GET admits HEAD too) and answers others with a
// JSON 405, where the mux's own method patterns would answer in plain text.
func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", method)
			writeError(w, http.StatusMethodNotAllowed, ReasonMethod, fmt.Sprintf("%s wants %s, not %s", r.URL.Path, method, r.Method))
			return
		}
		h(w, r)
	}
}

// extensions are the protocol extensions the server metadata names.
func (g *Gateway) extensions() []string {
	ext := []string{"binary_tensor_data"}
	if _, ok := g.inf.(Repository); ok {
		ext = append(ext, "model_repository")
	}
	return ext
}

func (g *Gateway) serverMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"name": "symphony", "version": g.cfg.Version, "extensions": g.extensions(),
	})
}

func (g *Gateway) live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"live": true})
}

func (g *Gateway) ready(w http.ResponseWriter, _ *http.Request) {
	ok := g.inf.Ready()
	writeJSON(w, okOr503(ok), map[string]bool{"ready": ok})
}

// livez answers as every Symphony process's /livez does: "ok" while the
// gateway serves.
func (g *Gateway) livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz is /v2/health/ready in the plain form of every Symphony
// process's /readyz: 503 while the frontend is not connected to its
// scheduler, which is when it can run no request.
func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !g.inf.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ok: not connected to the scheduler")
		return
	}
	fmt.Fprintln(w, "ok")
}

func (g *Gateway) modelReady(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	info, ok := g.inf.Model(name)
	if !ok {
		writeError(w, http.StatusNotFound, ReasonUnknownModel, fmt.Sprintf("unknown model %q", name))
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

// batchedMeta describes a model's tensors as Triton does those of a model
// that batches: each shape with a leading -1, the batch dimension. A
// request gives that dimension as 1, or leaves it out.
func batchedMeta(specs []tensor.Spec) []tensorMeta {
	out := make([]tensorMeta, len(specs))
	for i, s := range specs {
		out[i] = tensorMeta{Name: s.Name, Datatype: s.Datatype, Shape: append([]int64{-1}, s.Shape...)}
	}
	return out
}

// platform is the platform model metadata names.
const platform = "symphony"

// modelTensors is a model's tensors as its metadata lists them: a typed
// model's as batchedMeta gives them, and for a model of opaque bytes one
// [-1] UINT8 input and one [-1] UINT8 output.
func modelTensors(info ModelInfo) (inputs, outputs []tensorMeta) {
	if info.Inputs != nil {
		return batchedMeta(info.Inputs), batchedMeta(info.Outputs)
	}
	return []tensorMeta{{Name: "input0", Datatype: "UINT8", Shape: []int64{-1}}},
		[]tensorMeta{{Name: defaultOutputName, Datatype: "UINT8", Shape: []int64{-1}}}
}

func (g *Gateway) modelMetadata(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	info, ok := g.inf.Model(name)
	if !ok {
		writeError(w, http.StatusNotFound, ReasonUnknownModel, fmt.Sprintf("unknown model %q", name))
		return
	}
	inputs, outputs := modelTensors(info)
	meta := map[string]any{"name": name, "platform": platform, "inputs": inputs, "outputs": outputs}
	if info.SLO > 0 {
		meta["parameters"] = map[string]any{"slo_ms": float64(info.SLO) / float64(time.Millisecond)}
	}
	writeJSON(w, http.StatusOK, meta)
}

// infer decodes a request, runs it and writes its result or its error,
// logging one debug line as it ends.
func (g *Gateway) infer(w http.ResponseWriter, r *http.Request) {
	l := inferLog{start: time.Now(), model: r.PathValue("model")}
	defer g.endInfer(&l)
	fail := func(code int, reason, msg string) {
		l.status, l.clientError = code, msg
		writeError(w, code, reason, msg)
	}

	timeout, terr := headerTimeout(TimeoutHeader, r.Header.Get(TimeoutHeader))
	if terr != nil {
		fail(http.StatusBadRequest, ReasonBadRequest, terr.Error())
		return
	}
	body, code, reason, berr := readBody(w, r, g.cfg.MaxBodyBytes)
	if berr != nil {
		fail(code, reason, berr.Error())
		return
	}
	info, known := g.inf.Model(l.model)
	req, derr := decodeInferRequest(body, r.Header.Get(headerLengthHeader), info.Inputs, info.Outputs)
	if derr != nil {
		fail(http.StatusBadRequest, ReasonBadRequest, derr.Error())
		return
	}
	l.id, l.nIn = req.ID, len(req.Input)
	// The answer may take the inference and then WriteTimeout to write,
	// counted from the request's arrival rather than from the header as
	// net/http counts.
	tensors, batch, f := g.run(r.Context(), &l, info, known, req, shorter(timeout, req.Timeout), func(arrived time.Time) {
		_ = http.NewResponseController(w).SetWriteDeadline(arrived.Add(g.cfg.WriteTimeout))
	})
	if f != nil {
		if f.status == statusClientGone {
			return
		}
		if f.retry {
			g.setRetryAfter(w)
		}
		writeError(w, f.status, f.reason, f.msg)
		return
	}
	writeInferResponse(w, l.model, r.PathValue("version"), req, tensors, batch)
}

// outputTensors is the response's output tensors: for a model of opaque
// bytes, out as one [n] UINT8 tensor; for a typed model, the outputs the
// request asked for, cut from out (an error if out is not what the
// model's outputs take: the backend's fault, not the caller's).
func outputTensors(specs []tensor.Spec, req *inferRequest, out []byte) ([]tensor.Tensor, error) {
	if specs == nil {
		return []tensor.Tensor{{Name: req.Outputs[0].Name, Datatype: "UINT8", Shape: []int64{int64(len(out))}, Data: out}}, nil
	}
	all, err := tensor.Split(specs, out, req.Batched)
	if err != nil {
		return nil, fmt.Errorf("the backend's %w", err)
	}
	res := make([]tensor.Tensor, len(req.Outputs))
	for i, o := range req.Outputs {
		res[i] = all[slices.IndexFunc(all, func(t tensor.Tensor) bool { return t.Name == o.Name })]
	}
	return res, nil
}

// deadline is the deadline a request whose body arrived at arrived is
// scheduled by: its model's SLO, or its own timeout if shorter, less the
// HTTP budget (never more than half of it), since the caller's clock also
// counts the request's way in and its answer's way back. Zero if the SLO
// is unknown.
func (g *Gateway) deadline(arrived time.Time, slo, timeout time.Duration) time.Time {
	if slo <= 0 {
		return time.Time{}
	}
	if timeout > 0 && timeout < slo {
		slo = timeout
	}
	return arrived.Add(slo - min(g.cfg.HTTPBudget, slo/2))
}

// setRetryAfter sets the Retry-After header, if the Config gives one.
func (g *Gateway) setRetryAfter(w http.ResponseWriter) {
	if g.cfg.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfter(g.cfg.RetryAfter))
	}
}

// statusClientGone is the status logged, never written, for a request
// whose caller disconnected: nginx's 499, which no standard code covers.
const statusClientGone = 499

// headerTimeout parses the X-Symphony-Timeout header (or the gRPC
// metadata of that name, whose key is given as name); 0 when absent.
func headerTimeout(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q is not a positive Go duration such as 20ms", name, v)
	}
	return d, nil
}

// responseTensor is one output tensor of a response. Its parameters are
// structs rather than maps, which encoding/json writes without sorting
// keys or boxing values: the response is encoded once per request.
type responseTensor struct {
	Name       string          `json:"name"`
	Datatype   string          `json:"datatype"`
	Shape      []int64         `json:"shape"`
	Parameters *tensorParams   `json:"parameters,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

// tensorParams are a binary output tensor's parameters.
type tensorParams struct {
	BinaryDataSize int `json:"binary_data_size"`
}

// inferResponse is the inference response object.
type inferResponse struct {
	ModelName    string           `json:"model_name"`
	ModelVersion string           `json:"model_version,omitempty"`
	ID           string           `json:"id,omitempty"`
	Parameters   *batchParams     `json:"parameters,omitempty"`
	Outputs      []responseTensor `json:"outputs"`
}

// batchParams are the response parameters that say which batch ran the
// request (see TimedInferer), in the order a map would list them.
type batchParams struct {
	Finished int64 `json:"batch_finished_ns"`
	Size     int64 `json:"batch_size"`
	Started  int64 `json:"batch_started_ns"`
}

// TimedInferer is an Inferer that can also say how a request ran. The
// gateway then returns the batch as response parameters: batch_size, and
// batch_started_ns and batch_finished_ns (Unix ns), so that a remote load
// generator can report batch sizes and GPU time as an embedded one does
// (ResponseBatch reads them back).
type TimedInferer interface {
	InferTimed(ctx context.Context, model string, input []byte, deadline time.Time) ([]byte, Batch, error)
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

// ResponseBatch reads the batch a request ran in from its response's JSON
// object (the whole body, or the header of a binary one); ok is false
// when the response does not say.
func ResponseBatch(head []byte) (b Batch, ok bool) {
	var resp struct {
		Parameters batchParams `json:"parameters"`
	}
	if json.Unmarshal(head, &resp) != nil {
		return Batch{}, false
	}
	return batchOf(resp.Parameters)
}

// batchOf is the batch that response parameters name; ok is false when
// they name none that can be.
func batchOf(p batchParams) (b Batch, ok bool) {
	if p.Size <= 0 || p.Started <= 0 || p.Finished < p.Started || p.Size > math.MaxInt32 {
		return Batch{}, false
	}
	return Batch{Size: int(p.Size), Started: time.Unix(0, p.Started), Finished: time.Unix(0, p.Finished)}, true
}

// writeInferResponse writes the output tensors, each in JSON or in the
// binary data form as the request asked; with any binary output the
// response is a binary one, its tensors' bytes after the JSON header in
// output order.
func writeInferResponse(w http.ResponseWriter, model, version string, req *inferRequest, outs []tensor.Tensor, batch Batch) {
	resp := inferResponse{ModelName: model, ModelVersion: version, ID: req.ID, Outputs: make([]responseTensor, len(outs))}
	binLen := 0
	for i, t := range outs {
		rt := responseTensor{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
		if req.Outputs[i].Binary {
			rt.Parameters = &tensorParams{BinaryDataSize: len(t.Data)}
			binLen += len(t.Data)
		} else {
			rt.Data = appendJSONData(make([]byte, 0, 2+4*len(t.Data)), t.Datatype, t.Data)
		}
		resp.Outputs[i] = rt
	}
	if batch.Size > 0 && !batch.Started.IsZero() {
		resp.Parameters = &batchParams{Size: int64(batch.Size), Started: batch.Started.UnixNano(), Finished: batch.Finished.UnixNano()}
	}
	if !req.binary() {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	head, err := json.Marshal(resp)
	if err != nil {
		writeError(w, http.StatusInternalServerError, ReasonInternal, "encoding the response")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set(headerLengthHeader, strconv.Itoa(len(head)))
	h.Set("Content-Length", strconv.Itoa(len(head)+binLen))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(head)
	for i, t := range outs {
		if req.Outputs[i].Binary {
			_, _ = w.Write(t.Data)
		}
	}
}

// appendJSONData appends a tensor's bytes as a flat JSON array of its
// datatype's elements: numbers, booleans, and for the floating-point
// values JSON has no number for, the strings NaN, Infinity and -Infinity.
// FP16 and BF16 never get here (checkJSONOutputs).
func appendJSONData(dst []byte, dt string, data []byte) []byte {
	le := binary.LittleEndian
	size, _ := tensor.ElemSize(dt)
	dst = append(dst, '[')
	for i := 0; i+size <= len(data); i += size {
		if i > 0 {
			dst = append(dst, ',')
		}
		b := data[i:]
		switch dt {
		case "BOOL":
			dst = strconv.AppendBool(dst, b[0] != 0)
		case "UINT8":
			dst = strconv.AppendUint(dst, uint64(b[0]), 10)
		case "UINT16":
			dst = strconv.AppendUint(dst, uint64(le.Uint16(b)), 10)
		case "UINT32":
			dst = strconv.AppendUint(dst, uint64(le.Uint32(b)), 10)
		case "UINT64":
			dst = strconv.AppendUint(dst, le.Uint64(b), 10)
		case "INT8":
			dst = strconv.AppendInt(dst, int64(int8(b[0])), 10)
		case "INT16":
			dst = strconv.AppendInt(dst, int64(int16(le.Uint16(b))), 10)
		case "INT32":
			dst = strconv.AppendInt(dst, int64(int32(le.Uint32(b))), 10)
		case "INT64":
			dst = strconv.AppendInt(dst, int64(le.Uint64(b)), 10)
		case "FP32":
			dst = appendFloat(dst, float64(math.Float32frombits(le.Uint32(b))), 32)
		case "FP64":
			dst = appendFloat(dst, math.Float64frombits(le.Uint64(b)), 64)
		}
	}
	return append(dst, ']')
}

func appendFloat(dst []byte, v float64, bits int) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, bits)
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

// writeError writes the protocol's error object with the gateway's reason:
// {"error": msg, "reason": reason}.
func writeError(w http.ResponseWriter, status int, reason, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Reason: reason})
}

func okOr503(ok bool) int {
	if ok {
		return http.StatusOK
	}
	return http.StatusServiceUnavailable
}
