// Package gateway serves Symphony over the KServe v2 REST and gRPC
// protocols (the Open Inference Protocol), so that applications in any
// language, and stock clients such as Triton's or KServe's, can send
// inference requests to a Symphony frontend without linking its Go client.
//
// The gateway is an http.Handler in front of an Inferer, the few methods it
// needs of a frontend client. It owns no global state. Serve it with the
// server and listener it builds, as `symphony frontend` does:
//
//	srv := gw.Server(gw) // or a mux that mounts gw beside /metrics
//	go srv.Serve(gw.Listener(ln))
//
// # Limits
//
// A client that is slow or never finishes must not hold the gateway's
// memory or connections. Config bounds each way to try:
//
//   - a body is read into a buffer that grows as its bytes arrive, never
//     ahead of them to the announced Content-Length, up to MaxBodyBytes
//     (413 past it): a connection that announces 64 MiB and sends one byte
//     costs a few KiB;
//   - ReadHeaderTimeout closes a connection whose header has not arrived
//     (slowloris), ReadTimeout one whose whole request has not (its body
//     is answered 408 first), and IdleTimeout a kept-alive one left idle;
//   - WriteTimeout bounds a request from its body's end to its answer's:
//     it must outlast the longest model SLO (Config.CheckInference), and
//     cuts off a client that does not read;
//   - past MaxConnections open connections, a new one is answered 503 with
//     Retry-After and closed at once; past MaxInFlight inference requests
//     handed to the frontend, a request is answered 503 with Retry-After.
//
// Stats counts what the caps turned away; the repeatable warnings are
// logged at most once every ten seconds each.
//
// # Endpoints
//
//	GET  /v2                                server metadata (name, version, extensions)
//	GET  /v2/health/live                    200 whenever the process serves HTTP
//	GET  /v2/health/ready                   200 if the frontend is connected to the scheduler, else 503
//	GET  /v2/models/{m}                     model metadata; 404 for an unknown model
//	GET  /v2/models/{m}/ready               200 if the model is ready, 503 if not, 404 if unknown
//	POST /v2/models/{m}/infer               run one request
//
// Each model path is also served under /v2/models/{m}/versions/{v}/...;
// Symphony models have no versions, so any {v} names the same model and is
// echoed back as model_version.
//
// # Tensors
//
// A model whose tensors the scheduler announced (a model repository's,
// read from its model.onnx; ModelInfo.Inputs and Outputs) has named,
// typed tensors. Its metadata lists them, each shape with a leading -1,
// the batch dimension, as Triton lists a batching model's. A request
// gives every input by name, in any order, with the model's datatype and
// one sample's shape, with or without a leading batch dimension of 1 (a
// larger batch is refused: Symphony forms batches itself); the response
// holds the model's outputs, or those the request names, with their
// datatypes and shapes (with the leading 1 if the inputs had it). The
// check and the layout are package tensor's (Pack, Split), which the Go
// client's InferTensors uses too; any mistake (a missing, unknown or
// repeated tensor, a wrong datatype or shape, binary data that is short or
// runs past the body) is a 400 whose message names the tensor and the
// problem, and the request never reaches the frontend.
//
// A model of opaque bytes (no tensors announced) takes its input as one
// byte slice: the gateway concatenates, in request order, each input
// tensor's raw little-endian, row-major bytes, whatever their names, and
// returns the result as one tensor, [n] UINT8, named "output0" unless the
// request named the single output it wants. Its metadata says the same:
// one [-1] UINT8 input and one [-1] UINT8 output.
//
// Tensor bytes are laid out as the binary tensor data extension lays them
// out (BOOL as one 0/1 byte, BYTES elements, which only opaque models
// take, as a 4-byte little-endian length and the bytes). JSON data may be
// flat or nested; its element count must match the shape. FP16 and BF16
// have no JSON form and are accepted and returned only as binary data (a
// request that asks for such an output in JSON is a 400 before it runs).
// JSON has no number for NaN and the infinities: FP32 and FP64 elements
// are written, and read, as the strings "NaN", "Infinity" and "-Infinity".
//
// Binary data (the Inference-Header-Content-Length header with inputs that
// carry parameters.binary_data_size) is accepted on requests, and the
// response takes the binary form when the request sets parameters
// binary_data_output (every output) or outputs[].parameters.binary_data
// (that one); the binary outputs' bytes follow the JSON header in output
// order. When every input is binary and the model is opaque, or has a
// single input, the request bytes are passed to the client without a copy.
//
// # Deadlines
//
// A request may bound its own latency with the X-Symphony-Timeout header
// (a Go duration, such as "20ms"), the request parameter "timeout_ms" (a
// number of milliseconds) or Triton's "timeout" (whole microseconds); the
// shortest wins. The bound, counted from the
// moment the request's body has arrived, becomes a deadline on the context
// handed to Infer, and the frontend client never lets a request run past
// its model's SLO, so a timeout can only shorten a deadline. The HTTP
// request's context is the parent: a client that disconnects cancels its
// request.
//
// # Priority
//
// The request parameter "priority" is Triton's: 0 the default, 1 the
// highest, larger numbers lower, up to MaxPriority. It reaches the
// frontend as a level (PriorityFrom) where a higher level is planned first
// within its model's queue and dropped last (scheduler/README.md,
// "Priority levels"): priority p is level 256 − p, and the default level 0
// ranks below every explicit priority.
//
// The caller's clock also counts what the frontend's does not: the
// request's way in and the answer's way back over HTTP. Symphony's
// scheduler runs each batch as late as its deadlines allow, to make it
// larger, so an answer on time for the frontend would often be late for
// the caller. The gateway therefore asks the frontend to schedule each
// request by its SLO (or its own timeout) less Config.HTTPBudget, the
// deadline argument of Infer; that earlier deadline never cancels the
// request, whose answer may still reach the caller in time.
//
// # Status codes
//
// Every error body is {"error": "...", "reason": "..."}: the protocol's
// message for people, and a reason for programs (the Reason constants):
// a frontend error's class ("not connected", "scheduler lost", ...), a
// drop's "drop: " and its frontend.DropReason ("drop: overload"), a
// backend failure's "backend: " and its cause's kind ("backend: input
// unavailable"). ResponseError turns an answer back into the frontend
// package's typed error, so that a Go client (package kserveclient, which
// `symphony bench --gateway` drives) reports outcomes as an embedded
// client does.
//
//	400  malformed request (JSON, shapes, sizes, datatypes, timeouts): "bad request"; frontend.ErrBadDeadline: "bad deadline"
//	404  unknown model (frontend.ErrUnknownModel): "unknown model"; unknown path: "not found"
//	405  wrong method on a known path: "method not allowed"
//	408  the body did not arrive within Config.ReadTimeout: "read timeout" (the connection is then closed)
//	413  body larger than Config.MaxBodyBytes: "body too large"
//	500  frontend.ErrRefused (the scheduler refused the descriptor: clock skew between hosts): "refused"; any error the gateway does not recognize: "internal" (details logged, not returned)
//	502  frontend.BackendError, the request reached a GPU but no result came back: "backend: KIND"
//	503  drops for overload or shutdown, deadline drops of requests whose deadline was the model's SLO: "drop: REASON"; frontend.ErrNotConnected, frontend.ErrSchedulerLost, frontend.ErrClosed; the gateway's caps: "drop: gateway busy"
//	504  the request's own timeout could not be met: it expired ("drop: canceled", or "timeout"), or it was shorter than the model's SLO and the request was dropped for its deadline ("drop: deadline")
//
// Overload drops get 503, not 429: Symphony sheds requests because the
// cluster as a whole is short of GPU time, not because this caller sent too
// many, and 503 is what load balancers and retry policies read as "try
// another replica or come back later". Drops for deadline, overload and
// shutdown, ErrNotConnected, ErrSchedulerLost and the caps carry a
// Retry-After of Config.RetryAfter (rounded up to whole seconds) since
// those conditions pass; ErrClosed does not, since that frontend is going
// away. A deadline the caller chose, shorter than the SLO, that cannot be
// met is a 504 without Retry-After: retrying the same request with the same
// timeout would most likely miss it again, and the caller, not the cluster,
// decides whether a longer one is worth it (408 is kept for its RFC 9110
// meaning, a request that did not arrive in time, which some clients
// retry on their own). When the caller disconnects the gateway writes
// nothing and logs status 499.
//
// # gRPC
//
// The gateway also serves the protocol over gRPC: RegisterGRPC, or
// GRPCServer with the Config's limits, serves the Open Inference
// Protocol's GRPCInferenceService with Triton's repository RPCs (package
// inferencepb, whose names and field numbers are the protocol's) in front
// of the same Inferer. A request takes the HTTP one's way (infer.go): it
// is decoded into the same request, with the same checks and messages
// (raw_input_contents as binary data, typed contents as JSON data), runs
// under the same in-flight cap and deadlines, and fails with the same
// failure, which becomes a status with the gRPC code of its HTTP status
// (grpcCode: 400 INVALID_ARGUMENT, 404 NOT_FOUND, 502 and 503
// UNAVAILABLE, 504 DEADLINE_EXCEEDED, 499 CANCELLED, 501 UNIMPLEMENTED,
// else INTERNAL), the HTTP message, and details: a google.rpc.ErrorInfo
// of ErrorDomain whose Reason is the HTTP body's reason (GRPCError reads
// it back into the frontend's typed error), and a google.rpc.RetryInfo of
// Config.RetryAfter where HTTP sends Retry-After. The request's own
// timeout is the shortest of its timeout_ms and timeout parameters, its
// x-symphony-timeout metadata (TimeoutMetadata) and its gRPC deadline; its
// priority parameter is HTTP's.
// The answer carries the batch as response parameters, and its outputs as
// typed contents when the inputs came so and every output has a typed
// form, else as raw_output_contents. ModelMetadata sends the model's SLO
// in the x-symphony-slo-ms header (SLOMetadata), the protocol's message
// having no parameters. Observe and the log count a gRPC request under
// the HTTP status its answer stands for.
package gateway
