package gateway

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
)

// The gRPC endpoint's metadata keys: Symphony's additions to the protocol,
// in metadata so that the protocol's messages stay as KServe and Triton
// define them.
const (
	// TimeoutMetadata is the request metadata that bounds one request's
	// latency, as TimeoutHeader does over HTTP: a Go duration.
	TimeoutMetadata = "x-symphony-timeout"
	// SLOMetadata is the header of a ModelMetadata answer that gives the
	// model's SLO in milliseconds, as the HTTP metadata's parameter slo_ms
	// does (ModelMetadataResponse has no parameters).
	SLOMetadata = "x-symphony-slo-ms"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail that every
// error answer of the gRPC endpoint carries: its Reason is the reason the
// HTTP error body gives (the Reason constants). GRPCError reads it back.
const ErrorDomain = "symphony-serving.github.io/gateway"

// RegisterGRPC registers the KServe v2 gRPC service (GRPCInferenceService,
// package inferencepb) on s, in front of the gateway's Inferer: the HTTP
// gateway's semantics over gRPC. Its requests share the gateway's
// in-flight cap, Stats, logs and Observe with the HTTP ones. GRPCServer
// builds a server with it registered and the Config's limits applied.
func (g *Gateway) RegisterGRPC(s grpc.ServiceRegistrar) {
	inferencepb.RegisterGRPCInferenceServiceServer(s, &grpcService{g: g})
}

// GRPCServer returns a gRPC server serving the gateway's gRPC service,
// bounded by the Config as the HTTP server is: messages of at most
// MaxBodyBytes, metadata of at most MaxHeaderBytes, ReadHeaderTimeout to
// set up a connection and IdleTimeout to keep an idle one. One connection
// may carry twice MaxInFlight calls at once: enough to reach the
// in-flight cap and be answered UNAVAILABLE past it (rather than wait in
// the client for a stream), and a bound on the goroutines a connection
// holds. opts come after these, and may override them. Serve it on
// GRPCListener(ln) to cap connections.
func (g *Gateway) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	c := g.cfg
	s := grpc.NewServer(append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(min(c.MaxBodyBytes, math.MaxInt32))),
		grpc.MaxHeaderListSize(uint32(min(c.MaxHeaderBytes, math.MaxInt32))),
		grpc.ConnectionTimeout(c.ReadHeaderTimeout),
		grpc.MaxConcurrentStreams(uint32(min(2*int64(c.MaxInFlight), math.MaxUint32))),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: c.IdleTimeout}),
		grpc.UnaryInterceptor(g.authGRPC),
	}, opts...)...)
	g.RegisterGRPC(s)
	return s
}

// GRPCListener wraps ln so that the gRPC server's connections count
// against Config.MaxConnections with the HTTP server's (on Listener), in
// Stats. Past the cap a new connection is closed at once: HTTP/2 has no
// answer to give before a connection's preface.
func (g *Gateway) GRPCListener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, g: g}
}

// grpcService is the gateway's GRPCInferenceService.
type grpcService struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	g *Gateway
}

// grpcCode is the gRPC code of an HTTP status, as Triton maps its errors
// and as Google's APIs map codes to statuses: 400 INVALID_ARGUMENT, 401
// UNAUTHENTICATED (no accepted bearer token), 404
// NOT_FOUND, 501 UNIMPLEMENTED, 502 and 503 UNAVAILABLE (a backend that
// failed, a drop for overload, a lost scheduler: conditions that pass),
// 504 DEADLINE_EXCEEDED (the request's own deadline), 499 CANCELLED (the
// caller left), 500 and anything else INTERNAL.
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusBadRequest:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	case statusClientGone:
		return codes.Canceled
	case http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

// grpcError is the status error of a failure: its code (grpcCode), the
// HTTP answer's message, and details: an ErrorInfo with the HTTP answer's
// reason, and where the HTTP answer has a Retry-After, a RetryInfo of
// Config.RetryAfter.
func (g *Gateway) grpcError(f *failure) error {
	st := status.New(grpcCode(f.status), f.msg)
	info := &errdetails.ErrorInfo{Domain: ErrorDomain, Reason: f.reason}
	var err error
	if f.retry && g.cfg.RetryAfter > 0 {
		st, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(g.cfg.RetryAfter)})
	} else {
		st, err = st.WithDetails(info)
	}
	if err != nil { // the details did not marshal: the code and message still say it
		return status.Error(grpcCode(f.status), f.msg)
	}
	return st.Err()
}

// unknownModel is the failure of a request for a model the frontend does
// not serve.
func unknownModel(name string) *failure {
	return &failure{status: http.StatusNotFound, reason: ReasonUnknownModel, msg: fmt.Sprintf("unknown model %q", name)}
}

// grpcTimeout is a request's own timeout from its metadata and its gRPC
// deadline, the shorter of the two (0 for none). A gRPC deadline is the
// caller's own timeout as X-Symphony-Timeout is: the request is scheduled
// by it, less the HTTP budget, and a deadline drop it causes is the
// caller's DEADLINE_EXCEEDED, not the cluster's UNAVAILABLE.
func grpcTimeout(ctx context.Context) (time.Duration, *failure) {
	var v string
	if vs := metadata.ValueFromIncomingContext(ctx, TimeoutMetadata); len(vs) > 0 {
		v = vs[0]
	}
	timeout, err := headerTimeout(TimeoutMetadata, v)
	if err != nil {
		return 0, badRequest(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = shorter(timeout, max(time.Until(dl), time.Nanosecond))
	}
	return timeout, nil
}

func (s *grpcService) ServerLive(context.Context, *inferencepb.ServerLiveRequest) (*inferencepb.ServerLiveResponse, error) {
	return &inferencepb.ServerLiveResponse{Live: true}, nil
}

func (s *grpcService) ServerReady(context.Context, *inferencepb.ServerReadyRequest) (*inferencepb.ServerReadyResponse, error) {
	return &inferencepb.ServerReadyResponse{Ready: s.g.inf.Ready()}, nil
}

// ModelReady answers NOT_FOUND for a model the frontend does not serve,
// as the HTTP endpoint answers 404.
func (s *grpcService) ModelReady(_ context.Context, r *inferencepb.ModelReadyRequest) (*inferencepb.ModelReadyResponse, error) {
	info, ok := s.g.inf.Model(r.GetName())
	if !ok {
		return nil, s.g.grpcError(unknownModel(r.GetName()))
	}
	return &inferencepb.ModelReadyResponse{Ready: info.Ready}, nil
}

func (s *grpcService) ServerMetadata(context.Context, *inferencepb.ServerMetadataRequest) (*inferencepb.ServerMetadataResponse, error) {
	return &inferencepb.ServerMetadataResponse{Name: "symphony", Version: s.g.cfg.Version, Extensions: s.g.extensions()}, nil
}

// ModelMetadata lists the model's tensors as the HTTP metadata does, and
// sends its SLO in the SLOMetadata header.
func (s *grpcService) ModelMetadata(ctx context.Context, r *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	name := r.GetName()
	info, ok := s.g.inf.Model(name)
	if !ok {
		return nil, s.g.grpcError(unknownModel(name))
	}
	if info.SLO > 0 {
		ms := strconv.FormatFloat(float64(info.SLO)/float64(time.Millisecond), 'g', -1, 64)
		_ = grpc.SetHeader(ctx, metadata.Pairs(SLOMetadata, ms))
	}
	inputs, outputs := modelTensors(info)
	return &inferencepb.ModelMetadataResponse{Name: name, Platform: platform, Inputs: grpcTensorMeta(inputs), Outputs: grpcTensorMeta(outputs)}, nil
}

func grpcTensorMeta(ts []tensorMeta) []*inferencepb.ModelMetadataResponse_TensorMetadata {
	out := make([]*inferencepb.ModelMetadataResponse_TensorMetadata, len(ts))
	for i, t := range ts {
		out[i] = &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
	}
	return out
}

// ModelInfer runs one request as the HTTP endpoint's POST .../infer does:
// decoded and checked against the model's tensors (decodeGRPCRequest),
// run under the same cap and deadlines (run), answered with the model's
// outputs and the batch's parameters, or with the HTTP answer's error as
// a status (grpcError).
func (s *grpcService) ModelInfer(ctx context.Context, r *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	g := s.g
	l := inferLog{start: time.Now(), model: r.GetModelName(), grpc: true}
	defer g.endInfer(&l)
	fail := func(f *failure) error {
		l.failed(f)
		return g.grpcError(f)
	}
	timeout, f := grpcTimeout(ctx)
	if f != nil {
		return nil, fail(f)
	}
	info, known := g.inf.Model(l.model)
	req, typed, err := decodeGRPCRequest(r, info.Inputs, info.Outputs, g.cfg.MaxBodyBytes)
	if err != nil {
		return nil, fail(badRequest(err))
	}
	l.id, l.nIn = req.ID, len(req.Input)
	tensors, batch, f := g.run(ctx, &l, info, known, req, shorter(timeout, req.Timeout), nil)
	if f != nil {
		return nil, g.grpcError(f)
	}
	resp := &inferencepb.ModelInferResponse{
		ModelName: l.model, ModelVersion: r.GetModelVersion(), Id: req.ID,
		Parameters: batchParameters(batch),
		Outputs:    make([]*inferencepb.ModelInferResponse_InferOutputTensor, len(tensors)),
	}
	if !typed {
		resp.RawOutputContents = make([][]byte, len(tensors))
	}
	for i, t := range tensors {
		o := &inferencepb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape}
		if typed {
			o.Contents = contentsOf(t)
		} else {
			resp.RawOutputContents[i] = t.Data
		}
		resp.Outputs[i] = o
	}
	return resp, nil
}

// GRPCError is the error a Go client of the gRPC endpoint should see for
// err, the error of a call for model: the frontend package's typed error
// that the answer's reason (its ErrorInfo) stands for, as ResponseError
// gives for an HTTP answer (a *frontend.DropError with its reason, a
// *frontend.BackendError, frontend.ErrSchedulerLost, ...), so that a
// report classifies a remote request as it would an embedded one. It
// returns err itself for an answer whose reason stands for none, an
// answer without a reason (another server's, or gRPC's own), and an error
// that is no answer; nil for nil.
func GRPCError(model string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			if typed := reasonError(model, info.GetReason(), st.Message()); typed != nil {
				return typed
			}
		}
	}
	return err
}

// batchParameters are the response parameters that say which batch ran a
// request, as the HTTP response's are (batchParams); nil for the zero
// Batch.
func batchParameters(b Batch) map[string]*inferencepb.InferParameter {
	if b.Size <= 0 || b.Started.IsZero() {
		return nil
	}
	p := func(v int64) *inferencepb.InferParameter {
		return &inferencepb.InferParameter{ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: v}}
	}
	return map[string]*inferencepb.InferParameter{
		ParamBatchSize: p(int64(b.Size)), ParamBatchStarted: p(b.Started.UnixNano()), ParamBatchFinished: p(b.Finished.UnixNano()),
	}
}

// GRPCResponseBatch reads the batch a request ran in from a gRPC
// response's parameters, as ResponseBatch does from an HTTP response; ok
// is false when they do not say.
func GRPCResponseBatch(params map[string]*inferencepb.InferParameter) (b Batch, ok bool) {
	size, started, finished := params[ParamBatchSize].GetInt64Param(), params[ParamBatchStarted].GetInt64Param(), params[ParamBatchFinished].GetInt64Param()
	return batchOf(batchParams{Size: size, Started: started, Finished: finished})
}

// repository is the Inferer's Repository, or the failure to answer when
// it has none.
func (s *grpcService) repository() (Repository, *failure) {
	repo, ok := s.g.inf.(Repository)
	if !ok {
		return nil, &failure{status: http.StatusNotImplemented, reason: ReasonNoRepo, msg: errNoRepo}
	}
	return repo, nil
}

// RepositoryIndex lists the models as the HTTP index does. A repository
// name is ignored: a frontend serves one repository.
func (s *grpcService) RepositoryIndex(_ context.Context, r *inferencepb.RepositoryIndexRequest) (*inferencepb.RepositoryIndexResponse, error) {
	repo, f := s.repository()
	if f != nil {
		return nil, s.g.grpcError(f)
	}
	ms := index(repo, r.GetReady())
	resp := &inferencepb.RepositoryIndexResponse{Models: make([]*inferencepb.RepositoryIndexResponse_ModelIndex, len(ms))}
	for i, m := range ms {
		resp.Models[i] = &inferencepb.RepositoryIndexResponse_ModelIndex{Name: m.Name, Version: m.Version, State: m.State, Reason: m.Reason}
	}
	return resp, nil
}

// RepositoryModelLoad loads a model as the HTTP load does, answering once
// it is READY. Its parameters, like the HTTP body's, are ignored.
func (s *grpcService) RepositoryModelLoad(ctx context.Context, r *inferencepb.RepositoryModelLoadRequest) (*inferencepb.RepositoryModelLoadResponse, error) {
	err := s.control(ctx, "load", r.GetModelName(), func(repo Repository, ctx context.Context, name string) error { return repo.LoadModel(ctx, name) })
	if err != nil {
		return nil, err
	}
	return &inferencepb.RepositoryModelLoadResponse{}, nil
}

// RepositoryModelUnload unloads a model as the HTTP unload does,
// answering once it is UNAVAILABLE. Its parameters are ignored.
func (s *grpcService) RepositoryModelUnload(ctx context.Context, r *inferencepb.RepositoryModelUnloadRequest) (*inferencepb.RepositoryModelUnloadResponse, error) {
	err := s.control(ctx, "unload", r.GetModelName(), func(repo Repository, ctx context.Context, name string) error { return repo.UnloadModel(ctx, name) })
	if err != nil {
		return nil, err
	}
	return &inferencepb.RepositoryModelUnloadResponse{}, nil
}

// control runs a load or unload within the request's timeout (metadata
// and gRPC deadline, else ControlWait).
func (s *grpcService) control(ctx context.Context, op, name string, do func(Repository, context.Context, string) error) error {
	repo, f := s.repository()
	if f != nil {
		return s.g.grpcError(f)
	}
	wait, f := grpcTimeout(ctx)
	if f != nil {
		return s.g.grpcError(f)
	}
	if wait == 0 {
		wait = ControlWait
	}
	if f := s.g.runControl(ctx, repo, op, name, wait, do); f != nil {
		return s.g.grpcError(f)
	}
	return nil
}
