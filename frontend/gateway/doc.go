// Package gateway serves Symphony over the KServe v2 REST protocol (the Open
// Inference Protocol), so that applications in any language, and stock
// clients such as Triton's or KServe's, can send inference requests to a
// Symphony frontend without linking its Go client.
//
// The gateway is an http.Handler in front of an Inferer, the few methods it
// needs of a frontend client. It owns no goroutines and no global state:
// mount it on any http.Server (set that server's ReadHeaderTimeout and
// IdleTimeout; the gateway bounds bodies, not time on the wire).
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
// Symphony moves opaque bytes: a model's input is one byte slice and its
// output is another. The gateway turns a request's input tensors into that
// slice by concatenating, in request order, each tensor's raw little-endian,
// row-major bytes, exactly as the binary tensor data extension lays them out
// (BOOL as one 0/1 byte, BYTES elements as a 4-byte little-endian length and
// the bytes). JSON data may be flat or nested; its element count must match
// the shape. FP16 and BF16 have no JSON form and are accepted only as binary
// data. The result is returned as one tensor, [n] UINT8, named "output0"
// unless the request named the single output it wants. Model metadata
// describes the same: one [-1] UINT8 input and one [-1] UINT8 output.
//
// Binary data (the Inference-Header-Content-Length header with inputs that
// carry parameters.binary_data_size) is accepted on requests, and the
// response takes the binary form when the request sets parameters
// binary_data_output or outputs[].parameters.binary_data. When every input
// is binary the request bytes are passed to the client without a copy.
//
// # Deadlines
//
// A request may bound its own latency with the X-Symphony-Timeout header
// (a Go duration, such as "20ms") or the request parameter "timeout_ms"
// (a number); with both, the shorter wins. The bound becomes a deadline on
// the context handed to Infer, and the frontend client never lets a request
// run past its model's SLO, so a timeout can only shorten a deadline. The
// HTTP request's context is the parent: a client that disconnects cancels
// its request.
//
// # Status codes
//
// Every error body is {"error": "..."}.
//
//	400  malformed request (JSON, shapes, sizes, datatypes, timeouts) and frontend.ErrBadDeadline
//	404  unknown model (frontend.ErrUnknownModel) or unknown path
//	405  wrong method on a known path
//	408  the request's own timeout expired before it ran (a canceled drop or context error with the deadline passed)
//	413  body larger than Config.MaxBodyBytes
//	500  frontend.ErrRefused (the scheduler refused the descriptor: clock skew between hosts), and any error the gateway does not recognize (details logged, not returned)
//	502  frontend.BackendError: the request reached a GPU but no result came back
//	503  frontend.ErrNotConnected, frontend.ErrSchedulerLost, frontend.ErrClosed, and drops for deadline, overload or shutdown
//
// Overload drops get 503, not 429: Symphony sheds requests because the
// cluster as a whole is short of GPU time, not because this caller sent too
// many, and 503 is what load balancers and retry policies read as "try
// another replica or come back later". Drops for deadline, overload and
// shutdown, ErrNotConnected and ErrSchedulerLost carry a Retry-After of Config.RetryAfter
// (rounded up to whole seconds) since those conditions pass; ErrClosed does
// not, since that frontend is going away. When the caller disconnects the
// gateway writes nothing and logs status 499.
package gateway
