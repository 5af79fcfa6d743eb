package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/tensor"
)

// serveGRPC serves g's gRPC service on a loopback listener, as
// `symphony frontend` does, and returns a client of it.
func serveGRPC(t *testing.T, g *Gateway) inferencepb.GRPCInferenceServiceClient {
	t.Helper()
	c, _ := serveGRPCAt(t, g)
	return c
}

// serveGRPCAt is serveGRPC, and the server's address.
func serveGRPCAt(t *testing.T, g *Gateway) (inferencepb.GRPCInferenceServiceClient, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := g.GRPCServer()
	go func() { _ = s.Serve(g.GRPCListener(ln)) }()
	t.Cleanup(s.Stop)
	return dialGRPC(t, ln.Addr().String()), ln.Addr().String()
}

// dialGRPC is a client of the gRPC server at addr, on a connection of its
// own.
func dialGRPC(t *testing.T, addr string) inferencepb.GRPCInferenceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return inferencepb.NewGRPCInferenceServiceClient(conn)
}

// grpcAnswer is what an error answer of the gRPC endpoint says.
type grpcAnswer struct {
	code   codes.Code
	msg    string
	reason string        // the ErrorInfo's
	retry  time.Duration // the RetryInfo's; 0 without one
}

func answerOf(t *testing.T, err error) grpcAnswer {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil {
		t.Fatalf("%v is not a gRPC status error", err)
	}
	a := grpcAnswer{code: st.Code(), msg: st.Message()}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.Domain != ErrorDomain {
				t.Errorf("ErrorInfo domain %q", d.Domain)
			}
			a.reason = d.Reason
		case *errdetails.RetryInfo:
			a.retry = d.RetryDelay.AsDuration()
		}
	}
	return a
}

// parityFake serves the models of the gateway's tests as a frontend
// would: resnet and cnn (the committed CNN's tensors, answering 1, 2 and
// the sum of its input) ready; two (two typed inputs and outputs) ready;
// cold known but not loaded; anything else unknown.
func parityFake(t *testing.T) *fakeInferer {
	f := cnnFake(t)
	sig := typedModels[2]
	f.models["two"] = ModelInfo{Name: "two", SLO: time.Second, Ready: true, Inputs: sig[0], Outputs: sig[1]}
	cnn := f.infer
	f.infer = func(ctx context.Context, model string, in []byte) ([]byte, error) {
		switch model {
		case "cnn":
			return cnn(ctx, model, in)
		case "two":
			return []byte{0, 0x3c, 0, 0x40, 7, 0, 0, 0}, nil // logits 1.0 and 2.0, best 7
		case "resnet":
			return in, nil
		case "cold":
			return nil, fmt.Errorf("%w: %q", frontend.ErrModelNotLoaded, model)
		}
		return nil, fmt.Errorf("%w %q", frontend.ErrUnknownModel, model)
	}
	return f
}

// TestGRPCHealthAndMetadata: the health and metadata RPCs answer what the
// HTTP endpoints do, an unknown model with NOT_FOUND and the HTTP
// message, and a model's SLO in the SLOMetadata header.
func TestGRPCHealthAndMetadata(t *testing.T) {
	f := parityFake(t)
	g := newGateway(t, f, func(c *Config) { c.Version = "v9" })
	c := serveGRPC(t, g)
	ctx := context.Background()
	if r, err := c.ServerLive(ctx, &inferencepb.ServerLiveRequest{}); err != nil || !r.Live {
		t.Errorf("live: %v %v", r, err)
	}
	for _, ready := range []bool{true, false} {
		f.ready = ready
		if r, err := c.ServerReady(ctx, &inferencepb.ServerReadyRequest{}); err != nil || r.Ready != ready {
			t.Errorf("ready %v: %v %v", ready, r, err)
		}
	}
	md, err := c.ServerMetadata(ctx, &inferencepb.ServerMetadataRequest{})
	if err != nil || md.Name != "symphony" || md.Version != "v9" || !slices.Equal(md.Extensions, []string{"binary_tensor_data"}) {
		t.Errorf("server metadata %v %v", md, err)
	}
	for model, want := range map[string]bool{"resnet": true, "cold": false} {
		if r, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: model, Version: "3"}); err != nil || r.Ready != want {
			t.Errorf("%s ready: %v %v", model, r, err)
		}
	}
	for _, call := range []func() error{
		func() error { _, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "nope"}); return err },
		func() error {
			_, err := c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "nope"})
			return err
		},
	} {
		a := answerOf(t, call())
		w := do(g, http.MethodGet, "/v2/models/nope", nil, nil)
		if a.code != codes.NotFound || a.msg != errorOf(t, w) || a.reason != ReasonUnknownModel {
			t.Errorf("unknown model: %+v; HTTP says %d %s", a, w.Code, w.Body)
		}
	}
	for _, model := range []string{"cnn", "resnet", "two"} {
		var header metadata.MD
		m, err := c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: model}, grpc.Header(&header))
		if err != nil {
			t.Fatal(err)
		}
		w := do(g, http.MethodGet, "/v2/models/"+model, nil, nil)
		var h struct {
			Name, Platform  string
			Inputs, Outputs []tensorMeta
			Parameters      struct {
				SLOms float64 `json:"slo_ms"`
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		if m.Name != h.Name || m.Platform != h.Platform || fmt.Sprint(tensorMetas(m.Inputs)) != fmt.Sprint(h.Inputs) || fmt.Sprint(tensorMetas(m.Outputs)) != fmt.Sprint(h.Outputs) {
			t.Errorf("%s: gRPC metadata %v, HTTP %s", model, m, w.Body)
		}
		if got := header.Get(SLOMetadata); len(got) != 1 || got[0] != strconv.FormatFloat(h.Parameters.SLOms, 'g', -1, 64) {
			t.Errorf("%s: SLO header %q, HTTP slo_ms %v", model, got, h.Parameters.SLOms)
		}
	}
}

func tensorMetas(ms []*inferencepb.ModelMetadataResponse_TensorMetadata) []tensorMeta {
	out := make([]tensorMeta, len(ms))
	for i, m := range ms {
		out[i] = tensorMeta{Name: m.Name, Datatype: m.Datatype, Shape: m.Shape}
	}
	return out
}

// httpTensors reads an HTTP inference answer's id and output tensors, in
// JSON or binary form, as bytes.
func httpTensors(t *testing.T, w *httptest.ResponseRecorder) (string, []tensor.Tensor) {
	t.Helper()
	head, tail := w.Body.Bytes(), []byte(nil)
	if n := w.Header().Get(headerLengthHeader); n != "" {
		k, _ := strconv.Atoi(n)
		head, tail = head[:k], head[k:]
	}
	var resp struct {
		ID      string `json:"id"`
		Outputs []struct {
			Name, Datatype string
			Shape          []int64
			Parameters     struct {
				BinaryDataSize *int `json:"binary_data_size"`
			}
			Data json.RawMessage
		}
	}
	if err := json.Unmarshal(head, &resp); err != nil {
		t.Fatalf("%s: %v", head, err)
	}
	var out []tensor.Tensor
	for _, o := range resp.Outputs {
		tt := tensor.Tensor{Name: o.Name, Datatype: o.Datatype, Shape: o.Shape}
		if n := o.Parameters.BinaryDataSize; n != nil {
			tt.Data, tail = tail[:*n], tail[*n:]
		} else {
			var err error
			if tt.Data, err = appendJSONTensor(nil, o.Data, o.Datatype, product(o.Shape)); err != nil {
				t.Fatalf("output %s: %v", o.Name, err)
			}
		}
		out = append(out, tt)
	}
	return resp.ID, out
}

func product(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// grpcTensors reads a gRPC inference answer's output tensors as bytes,
// and whether they came as typed contents.
func grpcTensors(t *testing.T, r *inferencepb.ModelInferResponse) (outs []tensor.Tensor, typed bool) {
	t.Helper()
	raw := r.GetRawOutputContents()
	if len(raw) != 0 && len(raw) != len(r.Outputs) {
		t.Fatalf("%d raw outputs for %d outputs", len(raw), len(r.Outputs))
	}
	for i, o := range r.GetOutputs() {
		tt := tensor.Tensor{Name: o.Name, Datatype: o.Datatype, Shape: o.Shape}
		if len(raw) > 0 {
			if o.Contents != nil {
				t.Errorf("output %s has contents and raw_output_contents", o.Name)
			}
			tt.Data = raw[i]
		} else {
			typed = true
			var err error
			if tt.Data, err = appendContents(o.GetContents(), o.Datatype, product(o.Shape)); err != nil {
				t.Fatalf("output %s: %v", o.Name, err)
			}
		}
		outs = append(outs, tt)
	}
	return outs, typed
}

// rawInputs is a request whose inputs are raw_input_contents.
func rawInputs(model string, ins ...tensor.Tensor) *inferencepb.ModelInferRequest {
	r := &inferencepb.ModelInferRequest{ModelName: model, Id: "r1"}
	for _, in := range ins {
		r.Inputs = append(r.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: in.Name, Datatype: in.Datatype, Shape: in.Shape})
		r.RawInputContents = append(r.RawInputContents, in.Data)
	}
	return r
}

// typedInput is one input tensor given as typed contents.
func typedInput(name, dt string, shape []int64, c *inferencepb.InferTensorContents) *inferencepb.ModelInferRequest_InferInputTensor {
	return &inferencepb.ModelInferRequest_InferInputTensor{Name: name, Datatype: dt, Shape: shape, Contents: c}
}

func outputs(names ...string) []*inferencepb.ModelInferRequest_InferRequestedOutputTensor {
	var out []*inferencepb.ModelInferRequest_InferRequestedOutputTensor
	for _, n := range names {
		out = append(out, &inferencepb.ModelInferRequest_InferRequestedOutputTensor{Name: n})
	}
	return out
}

func fp32s(n int, v float32) []float32 { return slices.Repeat([]float32{v}, n) }

// TestGRPCInferMatchesHTTP sends the same requests over HTTP and gRPC:
// those that run reach the frontend with the same bytes and answer the
// same tensors (typed contents for typed inputs, unless an output has no
// typed form); those that fail get the gRPC code of the HTTP status and
// the HTTP message and reason, or for a raw length, which the protocols
// name differently, the same message with the gRPC field's name.
func TestGRPCInferMatchesHTTP(t *testing.T) {
	img := tensor.Of("x", []int64{1, 8, 8}, fp32s(64, 0.5))
	cnnBin, cnnHdr := binBody(`{"id":"r1","inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","parameters":{"binary_data_size":256}}],"parameters":{"binary_data_output":true}}`, img.Data)
	shortBin, shortHdr := binBody(`{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","parameters":{"binary_data_size":200}}]}`, make([]byte, 200))
	twoJSON := func(outs string) []byte {
		return []byte(`{"id":"r1","inputs":[{"name":"ids","shape":[4],"datatype":"INT64","data":[1,2,3,4]},{"name":"mask","shape":[4],"datatype":"BOOL","data":[true,false,true,true]}]` + outs + `}`)
	}
	twoTyped := func(outs ...string) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{ModelName: "two", Id: "r1", Outputs: outputs(outs...), Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			typedInput("ids", "INT64", []int64{4}, &inferencepb.InferTensorContents{Int64Contents: []int64{1, 2, 3, 4}}),
			typedInput("mask", "BOOL", []int64{4}, &inferencepb.InferTensorContents{BoolContents: []bool{true, false, true, true}}),
		}}
	}
	cnnTyped := func(dt string, shape []int64, c *inferencepb.InferTensorContents) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{ModelName: "cnn", Id: "r1", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{typedInput("x", dt, shape, c)}}
	}
	ab := []byte(`{"id":"r1","inputs":[{"name":"a","shape":[2],"datatype":"UINT8","parameters":{"binary_data_size":2}},{"name":"b","shape":[1],"datatype":"INT16","parameters":{"binary_data_size":2}}],"parameters":{"binary_data_output":true}}`)
	abBody, abHdr := binBody(string(ab), []byte{1, 2}, []byte{3, 4})
	tests := []struct {
		name  string
		model string
		body  []byte
		hdr   map[string]string
		req   *inferencepb.ModelInferRequest
		typed bool       // a typed answer is expected
		code  codes.Code // OK: the request runs
		// grpcMsg, if set, is the gRPC message, which differs from HTTP's
		// only in the field it names.
		grpcMsg string
	}{
		{"raw CNN", "cnn", cnnBin, cnnHdr, rawInputs("cnn", img), false, codes.OK, ""},
		{"typed CNN with a batch dimension", "cnn", cnnJSON("[1,1,8,8]", "0.5", ""), nil,
			cnnTyped("FP32", []int64{1, 1, 8, 8}, &inferencepb.InferTensorContents{Fp32Contents: fp32s(64, 0.5)}), true, codes.OK, ""},
		{"typed inputs, an FP16 output: raw", "two", twoJSON(`,"outputs":[{"name":"logits","parameters":{"binary_data":true}},{"name":"best"}]`), nil, twoTyped(), false, codes.OK, ""},
		{"typed inputs, one typed output asked for", "two", twoJSON(`,"outputs":[{"name":"best"}]`), nil, twoTyped("best"), true, codes.OK, ""},
		{"opaque bytes, typed", "resnet", []byte(`{"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"UINT16","data":[1,2,3,65535]}]}`), nil,
			&inferencepb.ModelInferRequest{ModelName: "resnet", Id: "r1", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
				typedInput("x", "UINT16", []int64{2, 2}, &inferencepb.InferTensorContents{UintContents: []uint32{1, 2, 3, 65535}})}}, true, codes.OK, ""},
		{"opaque bytes, two raw inputs", "resnet", abBody, abHdr, rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{2}, Data: []byte{1, 2}},
			tensor.Tensor{Name: "b", Datatype: "INT16", Shape: []int64{1}, Data: []byte{3, 4}}), false, codes.OK, ""},

		{"wrong datatype", "cnn", []byte(strings.Replace(string(cnnJSON("[1,8,8]", "1", "")), "FP32", "FP64", 1)), nil,
			rawInputs("cnn", tensor.Of("x", []int64{1, 8, 8}, slices.Repeat([]float64{1}, 64))), false, codes.InvalidArgument, ""},
		{"wrong shape", "cnn", cnnJSON("[8,8,1]", "1", ""), nil, rawInputs("cnn", tensor.Of("x", []int64{8, 8, 1}, fp32s(64, 1))), false, codes.InvalidArgument, ""},
		{"a batch of two", "cnn", []byte(`{"inputs":[{"name":"x","shape":[2,1,8,8],"datatype":"FP32","data":[` + strings.TrimSuffix(strings.Repeat("1,", 128), ",") + `]}]}`), nil,
			rawInputs("cnn", tensor.Of("x", []int64{2, 1, 8, 8}, fp32s(128, 1))), false, codes.InvalidArgument, ""},
		{"missing tensor", "two", []byte(`{"inputs":[{"name":"ids","shape":[4],"datatype":"INT64","data":[1,2,3,4]}]}`), nil,
			&inferencepb.ModelInferRequest{ModelName: "two", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
				typedInput("ids", "INT64", []int64{4}, &inferencepb.InferTensorContents{Int64Contents: []int64{1, 2, 3, 4}})}}, false, codes.InvalidArgument, ""},
		{"unknown tensor", "cnn", []byte(`{"inputs":[{"name":"z","shape":[1],"datatype":"FP32","data":[1]}]}`), nil,
			rawInputs("cnn", tensor.Of("z", []int64{1}, []float32{1})), false, codes.InvalidArgument, ""},
		{"unknown output", "cnn", cnnJSON("[1,8,8]", "1", `,"outputs":[{"name":"scores"}]`), nil,
			func() *inferencepb.ModelInferRequest {
				r := rawInputs("cnn", img)
				r.Outputs = outputs("scores")
				return r
			}(), false, codes.InvalidArgument, ""},
		{"an input twice", "cnn", []byte(`{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`), nil,
			rawInputs("cnn", tensor.Of("x", []int64{1}, []float32{1}), tensor.Of("x", []int64{1}, []float32{1})), false, codes.InvalidArgument, ""},
		{"unknown datatype", "cnn", []byte(`{"inputs":[{"name":"x","shape":[1],"datatype":"FP8","data":[1]}]}`), nil,
			rawInputs("cnn", tensor.Tensor{Name: "x", Datatype: "FP8", Shape: []int64{1}, Data: []byte{1}}), false, codes.InvalidArgument, ""},
		{"no inputs", "cnn", []byte(`{"inputs":[]}`), nil, &inferencepb.ModelInferRequest{ModelName: "cnn"}, false, codes.InvalidArgument, ""},
		{"typed contents one short", "cnn", []byte(`{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","data":[` + strings.TrimSuffix(strings.Repeat("1,", 63), ",") + `]}]}`), nil,
			cnnTyped("FP32", []int64{1, 8, 8}, &inferencepb.InferTensorContents{Fp32Contents: fp32s(63, 1)}), false, codes.InvalidArgument, ""},
		{"a bad timeout_ms", "resnet", []byte(`{"parameters":{"timeout_ms":-5},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil,
			func() *inferencepb.ModelInferRequest {
				r := rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}})
				r.Parameters = map[string]*inferencepb.InferParameter{"timeout_ms": {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: -5}}}
				return r
			}(), false, codes.InvalidArgument, ""},
		{"a priority past the levels", "resnet", []byte(`{"parameters":{"priority":300},"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[1]}]}`), nil,
			func() *inferencepb.ModelInferRequest {
				r := rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}})
				r.Parameters = map[string]*inferencepb.InferParameter{"priority": {ParameterChoice: &inferencepb.InferParameter_Uint64Param{Uint64Param: 300}}}
				return r
			}(), false, codes.InvalidArgument, ""},
		{"raw contents of the wrong length", "cnn", shortBin, shortHdr, rawInputs("cnn", tensor.Tensor{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}, Data: make([]byte, 200)}),
			false, codes.InvalidArgument, `input "x": 64 elements of FP32 need 256 bytes, raw_input_contents has 200`},
		{"unknown model", "nope", reqBody, nil, rawInputs("nope", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}}), false, codes.NotFound, ""},
		{"model not loaded", "cold", reqBody, nil, rawInputs("cold", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}}), false, codes.Unavailable, ""},
	}
	f := parityFake(t)
	g := newGateway(t, f, nil)
	c := serveGRPC(t, g)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.calls, f.input = 0, nil
			w := do(g, http.MethodPost, "/v2/models/"+tc.model+"/infer", tc.body, tc.hdr)
			httpIn, httpCalls := f.input, f.calls
			f.calls, f.input = 0, nil
			resp, err := c.ModelInfer(context.Background(), tc.req)
			if f.calls != httpCalls || !slices.Equal(f.input, httpIn) {
				t.Errorf("Infer got %d calls with %v over gRPC, %d with %v over HTTP", f.calls, f.input, httpCalls, httpIn)
			}
			if tc.code != codes.OK {
				if err == nil {
					t.Fatalf("answered %v; HTTP %d %s", resp, w.Code, w.Body)
				}
				a := answerOf(t, err)
				want := errorOf(t, w)
				if tc.grpcMsg != "" {
					want = tc.grpcMsg
				}
				if a.code != tc.code || a.code != grpcCode(w.Code) || a.msg != want || a.reason != reasonOf(t, w) {
					t.Errorf("gRPC %v %q (%s); HTTP %d %s, want %v %q", a.code, a.msg, a.reason, w.Code, w.Body, tc.code, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("gRPC: %v; HTTP %d %s", err, w.Code, w.Body)
			}
			if w.Code != http.StatusOK {
				t.Fatalf("HTTP %d %s", w.Code, w.Body)
			}
			id, want := httpTensors(t, w)
			got, typed := grpcTensors(t, resp)
			if typed != tc.typed {
				t.Errorf("typed answer %v, want %v", typed, tc.typed)
			}
			if resp.Id != id || resp.ModelName != tc.model || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("gRPC answers %s %s %v\nHTTP answers %s %v", resp.ModelName, resp.Id, got, id, want)
			}
		})
	}
}

// TestGRPCTypedContents: every datatype's typed contents reach the
// frontend as the binary layout, and come back typed; a value out of its
// datatype's range, elements in another datatype's field, FP16 as typed
// contents and raw contents beside typed ones are refused, naming the
// input and the problem.
func TestGRPCTypedContents(t *testing.T) {
	f := newFake() // resnet echoes its input: the answer is the input's bytes
	c := serveGRPC(t, newGateway(t, f, nil))
	in := func(dt string, n int64, co *inferencepb.InferTensorContents) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{ModelName: "resnet", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{typedInput("x", dt, []int64{n}, co)}}
	}
	for _, tc := range []struct {
		dt   string
		co   *inferencepb.InferTensorContents
		want []byte
	}{
		{"BOOL", &inferencepb.InferTensorContents{BoolContents: []bool{true, false}}, []byte{1, 0}},
		{"INT8", &inferencepb.InferTensorContents{IntContents: []int32{-1, 127}}, le(int8(-1), int8(127))},
		{"INT16", &inferencepb.InferTensorContents{IntContents: []int32{-2, 300}}, le(int16(-2), int16(300))},
		{"INT32", &inferencepb.InferTensorContents{IntContents: []int32{-3, 1 << 30}}, le(int32(-3), int32(1<<30))},
		{"INT64", &inferencepb.InferTensorContents{Int64Contents: []int64{-4, 1 << 40}}, le(int64(-4), int64(1<<40))},
		{"UINT8", &inferencepb.InferTensorContents{UintContents: []uint32{0, 255}}, []byte{0, 255}},
		{"UINT32", &inferencepb.InferTensorContents{UintContents: []uint32{5, 1 << 31}}, le(uint32(5), uint32(1<<31))},
		{"UINT64", &inferencepb.InferTensorContents{Uint64Contents: []uint64{6, 1 << 63}}, le(uint64(6), uint64(1<<63))},
		{"FP32", &inferencepb.InferTensorContents{Fp32Contents: []float32{1.5, -2}}, le(float32(1.5), float32(-2))},
		{"FP64", &inferencepb.InferTensorContents{Fp64Contents: []float64{2.5, -3}}, le(2.5, -3.0)},
		{"BYTES", &inferencepb.InferTensorContents{BytesContents: [][]byte{[]byte("hi"), {}}}, append(str("hi"), str("")...)},
	} {
		resp, err := c.ModelInfer(context.Background(), in(tc.dt, 2, tc.co))
		if err != nil {
			t.Errorf("%s: %v", tc.dt, err)
			continue
		}
		if !slices.Equal(f.input, tc.want) {
			t.Errorf("%s: Infer got %v, want %v", tc.dt, f.input, tc.want)
		}
		// An opaque model answers UINT8, typed for typed inputs.
		if got := resp.Outputs[0].GetContents().GetUintContents(); len(got) != len(tc.want) || len(resp.RawOutputContents) != 0 {
			t.Errorf("%s: answer %v", tc.dt, resp)
		}
	}
	for _, tc := range []struct {
		req  *inferencepb.ModelInferRequest
		want string
	}{
		{in("INT8", 1, &inferencepb.InferTensorContents{IntContents: []int32{128}}), `input "x": element 0: 128 is not a valid INT8`},
		{in("UINT16", 1, &inferencepb.InferTensorContents{UintContents: []uint32{1 << 16}}), `input "x": element 0: 65536 is not a valid UINT16`},
		{in("FP32", 1, &inferencepb.InferTensorContents{Fp64Contents: []float64{1}}), `input "x": FP32 elements go in fp32_contents, not fp64_contents`},
		{in("FP16", 1, &inferencepb.InferTensorContents{}), `input "x": FP16 has no typed contents; send it in raw_input_contents`},
		{in("UINT8", 1, nil), `input "x" has neither contents nor raw_input_contents`},
		{func() *inferencepb.ModelInferRequest {
			r := in("UINT8", 1, &inferencepb.InferTensorContents{UintContents: []uint32{1}})
			r.RawInputContents = [][]byte{{1}}
			return r
		}(), `input "x" has both contents and raw_input_contents`},
		{func() *inferencepb.ModelInferRequest {
			r := in("UINT8", 1, nil)
			r.RawInputContents = [][]byte{{1}, {2}}
			return r
		}(), `2 raw_input_contents for 1 inputs`},
		{in("UINT8", 1<<40, nil), `input "x": shape [1099511627776] has more elements than the 67108864-byte message can hold`},
	} {
		_, err := c.ModelInfer(context.Background(), tc.req)
		if a := answerOf(t, err); a.code != codes.InvalidArgument || !strings.HasPrefix(a.msg, tc.want) || a.reason != ReasonBadRequest {
			t.Errorf("%+v, want INVALID_ARGUMENT %q", a, tc.want)
		}
	}
}

// TestGRPCErrorMapping: each error Infer can end with gets the gRPC code
// of its HTTP status, the HTTP message and reason, a RetryInfo where HTTP
// has a Retry-After, and GRPCError turns it back into an error a report
// classifies as it would the original.
func TestGRPCErrorMapping(t *testing.T) {
	fail := func(err error) func(context.Context, string, []byte) ([]byte, error) {
		return func(context.Context, string, []byte) ([]byte, error) { return nil, err }
	}
	waitCtx := func(err error) func(context.Context, string, []byte) ([]byte, error) {
		return func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
			<-ctx.Done()
			return nil, err
		}
	}
	drop := func(r frontend.DropReason) error { return &frontend.DropError{Model: "resnet", Reason: r} }
	for _, tc := range []struct {
		name    string
		infer   func(context.Context, string, []byte) ([]byte, error)
		timeout string // X-Symphony-Timeout and its metadata
		code    codes.Code
	}{
		{"unknown model", fail(fmt.Errorf("%w %q", frontend.ErrUnknownModel, "resnet")), "", codes.NotFound},
		{"not loaded", fail(fmt.Errorf("%w: resnet", frontend.ErrModelNotLoaded)), "", codes.Unavailable},
		{"not connected", fail(frontend.ErrNotConnected), "", codes.Unavailable},
		{"scheduler lost", fail(frontend.ErrSchedulerLost), "", codes.Unavailable},
		{"closed", fail(frontend.ErrClosed), "", codes.Unavailable},
		{"bad deadline", fail(frontend.ErrBadDeadline), "", codes.InvalidArgument},
		{"bad input", fail(fmt.Errorf("%w: too big", frontend.ErrBadInput)), "", codes.InvalidArgument},
		{"backend", fail(&frontend.BackendError{Model: "resnet", Backend: "gpu3", Cause: "executor failed: out of memory"}), "", codes.Unavailable},
		{"deadline drop", fail(drop(frontend.DropDeadline)), "", codes.Unavailable},
		{"deadline drop of a timeout under the SLO", fail(drop(frontend.DropDeadline)), "20ms", codes.DeadlineExceeded},
		{"overload drop", fail(drop(frontend.DropOverload)), "", codes.Unavailable},
		{"shutdown drop", fail(drop(frontend.DropShutdown)), "", codes.Unavailable},
		{"expired", fail(drop(frontend.DropExpired)), "", codes.DeadlineExceeded},
		{"canceled by its own timeout", waitCtx(drop(frontend.DropCanceled)), "1ms", codes.DeadlineExceeded},
		{"context error on its own timeout", waitCtx(context.DeadlineExceeded), "1ms", codes.DeadlineExceeded},
		{"refused", fail(fmt.Errorf("%w for %q: clock ahead?", frontend.ErrRefused, "resnet")), "", codes.Internal},
		{"anything else", fail(errors.New("secret internals")), "", codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.infer = tc.infer
			g := newGateway(t, f, nil)
			var hdr map[string]string
			ctx := context.Background()
			if tc.timeout != "" {
				hdr = map[string]string{TimeoutHeader: tc.timeout}
				ctx = metadata.AppendToOutgoingContext(ctx, TimeoutMetadata, tc.timeout)
			}
			w := do(g, http.MethodPost, "/v2/models/resnet/infer", reqBody, hdr)
			_, err := serveGRPC(t, g).ModelInfer(ctx, rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}}))
			a := answerOf(t, err)
			// The timeouts' messages name how long the request waited,
			// which differs by a little between the two runs.
			sameMsg := a.msg == errorOf(t, w) || tc.timeout == "1ms" && strings.HasPrefix(a.msg, "request timed out after ")
			if a.code != tc.code || a.code != grpcCode(w.Code) || !sameMsg || a.reason != reasonOf(t, w) {
				t.Errorf("gRPC %v %q (%s); HTTP %d %s", a.code, a.msg, a.reason, w.Code, w.Body)
			}
			if retry := w.Header().Get("Retry-After"); (retry != "") != (a.retry > 0) || a.retry > 0 && a.retry != Default().RetryAfter {
				t.Errorf("RetryInfo %v; HTTP Retry-After %q", a.retry, retry)
			}
			_, orig := tc.infer(expired(), "resnet", nil)
			if a, b := outcome(orig), outcome(GRPCError("resnet", err)); a != b {
				t.Errorf("GRPCError gives %s, the gateway was given %s", b, a)
			}
		})
	}
}

// TestGRPCTimeouts: a request is scheduled by, and bounded by, the
// shortest of its SLO, its x-symphony-timeout metadata, its timeout_ms
// parameter and its gRPC deadline; a malformed timeout is refused as over
// HTTP.
func TestGRPCTimeouts(t *testing.T) {
	req := func(timeoutMS int64) *inferencepb.ModelInferRequest {
		r := rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}})
		if timeoutMS > 0 {
			r.Parameters = map[string]*inferencepb.InferParameter{"timeout_ms": {ParameterChoice: &inferencepb.InferParameter_DoubleParam{DoubleParam: float64(timeoutMS)}}}
		}
		return r
	}
	for _, tc := range []struct {
		name      string
		md        string
		timeoutMS int64
		deadline  time.Duration
		want      time.Duration // 0: none
	}{
		{"none", "", 0, 0, 0},
		{"metadata", "20ms", 0, 0, 20 * time.Millisecond},
		{"parameter", "", 30, 0, 30 * time.Millisecond},
		{"shorter parameter wins", "1h", 25, 0, 25 * time.Millisecond},
		{"gRPC deadline", "", 0, 5 * time.Second, 5 * time.Second},
		{"shorter metadata wins over the deadline", "10ms", 0, time.Minute, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			// An SLO far over the gRPC deadline, which must not expire on
			// its way in on a loaded machine.
			f.models["resnet"] = ModelInfo{Name: "resnet", SLO: 10 * time.Second, Ready: true}
			c := serveGRPC(t, newGateway(t, f, nil))
			ctx := context.Background()
			if tc.md != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, TimeoutMetadata, tc.md)
			}
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			start := time.Now()
			if _, err := c.ModelInfer(ctx, req(tc.timeoutMS)); err != nil {
				t.Fatal(err)
			}
			eff := f.models["resnet"].SLO
			if tc.want > 0 && tc.want < eff {
				eff = tc.want
			}
			eff -= min(Default().HTTPBudget, eff/2)
			if f.schedule.Before(start.Add(eff).Add(-tc.deadline/10)) || f.schedule.After(f.called.Add(eff)) {
				t.Errorf("scheduled by %v, want %v after a moment in [%v, %v]", f.schedule.Sub(start), eff, start, f.called)
			}
			if tc.want == 0 {
				if f.hasDL {
					t.Fatalf("deadline set without a timeout")
				}
				return
			}
			if !f.hasDL || f.dl.Before(start.Add(tc.want).Add(-tc.deadline/10)) || f.dl.After(f.called.Add(tc.want)) {
				t.Fatalf("deadline %v after the start, want %v", f.dl.Sub(start), tc.want)
			}
		})
	}
	c := serveGRPC(t, newGateway(t, newFake(), nil))
	ctx := metadata.AppendToOutgoingContext(context.Background(), TimeoutMetadata, "soon")
	_, err := c.ModelInfer(ctx, req(0))
	if a := answerOf(t, err); a.code != codes.InvalidArgument || a.msg != `x-symphony-timeout "soon" is not a positive Go duration such as 20ms` {
		t.Errorf("%+v", a)
	}
}

// TestGRPCParametersAndObserve: the answer carries the batch as response
// parameters that GRPCResponseBatch reads back, as over HTTP; Observe and
// the log see each request, a caller that leaves as 499.
func TestGRPCParametersAndObserve(t *testing.T) {
	started := time.Unix(100, 5)
	f := timedFake{newFake(), Batch{Size: 7, Started: started, Finished: started.Add(3 * time.Millisecond)}}
	entered := make(chan struct{}, 1)
	f.infer = func(ctx context.Context, _ string, in []byte) ([]byte, error) {
		if in[0] == 1 {
			return in, nil
		}
		entered <- struct{}{}
		<-ctx.Done()
		return nil, &frontend.DropError{Model: "resnet", Reason: frontend.DropCanceled}
	}
	observed := make(chan int, 2)
	g, err := New(f, func() Config {
		c := Default()
		c.Observe = func(_ string, status int, _ time.Duration) { observed <- status }
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	c := serveGRPC(t, g)
	resp, err := c.ModelInfer(context.Background(), rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}}))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := GRPCResponseBatch(resp.Parameters); !ok || b.Size != 7 || !b.Started.Equal(f.batch.Started) || !b.Finished.Equal(f.batch.Finished) {
		t.Errorf("batch %+v %v from %v, want %+v", b, ok, resp.Parameters, f.batch)
	}
	if st := <-observed; st != http.StatusOK {
		t.Errorf("observed %d", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.ModelInfer(ctx, rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{2}}))
		done <- err
	}()
	<-entered
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("canceled call: %v", err)
	}
	if st := <-observed; st != statusClientGone {
		t.Errorf("a caller that left observed as %d", st)
	}
	// Without a TimedInferer, no parameters.
	resp, err = serveGRPC(t, newGateway(t, newFake(), nil)).ModelInfer(context.Background(), rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}}))
	if err != nil || resp.Parameters != nil {
		t.Errorf("parameters %v without a batch (%v)", resp.GetParameters(), err)
	}
}

// The gRPC requests share the gateway's in-flight cap with the HTTP ones,
// and its connections its connection cap: past the first, UNAVAILABLE
// with the HTTP message and a RetryInfo; past the second, the connection
// is closed.
func TestGRPCCaps(t *testing.T) {
	f := newFake()
	entered, release := make(chan struct{}), make(chan struct{})
	f.infer = func(_ context.Context, _ string, in []byte) ([]byte, error) {
		if in[0] == 2 {
			close(entered)
			<-release
		}
		return in, nil
	}
	g := newGateway(t, f, func(c *Config) { c.MaxInFlight, c.MaxConnections = 1, 1 })
	c, addr := serveGRPCAt(t, g)
	done := make(chan error, 1)
	go func() {
		_, err := c.ModelInfer(context.Background(), rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{2}}))
		done <- err
	}()
	<-entered
	_, err := c.ModelInfer(context.Background(), rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}}))
	w := do(g, http.MethodPost, "/v2/models/resnet/infer", reqBody, nil)
	if a := answerOf(t, err); a.code != codes.Unavailable || a.msg != errorOf(t, w) || a.reason != "drop: gateway busy" || a.retry != time.Second {
		t.Errorf("past the in-flight cap: %+v; HTTP %d %s", a, w.Code, w.Body)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A second connection is past the connection cap.
	other := dialGRPC(t, addr)
	_, err = other.ServerLive(context.Background(), &inferencepb.ServerLiveRequest{})
	if status.Code(err) != codes.Unavailable || g.Stats().RejectedConns.Load() == 0 {
		t.Errorf("a connection past the cap: %v, %d rejected", err, g.Stats().RejectedConns.Load())
	}
}

// TestGRPCRepository: the repository RPCs list, load and unload as the
// HTTP endpoints do, with their errors' codes and messages; a gateway
// whose frontend has no repository answers UNIMPLEMENTED.
func TestGRPCRepository(t *testing.T) {
	g, f := repoGateway()
	c := serveGRPC(t, g)
	ctx := context.Background()
	for _, ready := range []bool{false, true} {
		r, err := c.RepositoryIndex(ctx, &inferencepb.RepositoryIndexRequest{Ready: ready})
		if err != nil {
			t.Fatal(err)
		}
		var got []RepositoryModel
		for _, m := range r.Models {
			got = append(got, RepositoryModel{Name: m.Name, Version: m.Version, State: m.State, Reason: m.Reason})
		}
		if want := index(f, ready); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ready %v: index %v, want %v", ready, got, want)
		}
	}
	if _, err := c.RepositoryModelLoad(ctx, &inferencepb.RepositoryModelLoadRequest{ModelName: "cold"}); err != nil {
		t.Error(err)
	}
	if _, err := c.RepositoryModelUnload(ctx, &inferencepb.RepositoryModelUnloadRequest{ModelName: "resnet"}); err != nil {
		t.Error(err)
	}
	if !slices.Equal(f.ops, []string{"load cold", "unload resnet"}) {
		t.Errorf("ops %q", f.ops)
	}
	for _, tc := range []struct {
		model   string
		timeout string
		code    codes.Code
	}{
		{"nope", "", codes.NotFound},
		{"broken", "", codes.InvalidArgument},
		{"alone", "", codes.Unavailable},
		{"slow", "5ms", codes.DeadlineExceeded},
	} {
		hdr := map[string]string{}
		ctx := context.Background()
		if tc.timeout != "" {
			hdr[TimeoutHeader] = tc.timeout
			ctx = metadata.AppendToOutgoingContext(ctx, TimeoutMetadata, tc.timeout)
		}
		w := do(g, http.MethodPost, "/v2/repository/models/"+tc.model+"/load", nil, hdr)
		_, err := c.RepositoryModelLoad(ctx, &inferencepb.RepositoryModelLoadRequest{ModelName: tc.model})
		a := answerOf(t, err)
		if a.code != tc.code || a.code != grpcCode(w.Code) || a.msg != errorOf(t, w) || a.reason != reasonOf(t, w) || a.retry != 0 {
			t.Errorf("load %s: gRPC %+v; HTTP %d %s", tc.model, a, w.Code, w.Body)
		}
	}
	_, err := serveGRPC(t, newGateway(t, newFake(), nil)).RepositoryIndex(ctx, &inferencepb.RepositoryIndexRequest{})
	if a := answerOf(t, err); a.code != codes.Unimplemented || a.msg != errNoRepo || a.reason != ReasonNoRepo {
		t.Errorf("no repository: %+v", a)
	}
}

// GRPCError leaves nil, errors that are not a status, and statuses of
// other servers, which carry no reason, as they are.
func TestGRPCErrorPassesOthersThrough(t *testing.T) {
	plain := errors.New("dial failed")
	other := status.Error(codes.Unavailable, "connection refused")
	if GRPCError("m", nil) != nil || GRPCError("m", plain) != plain || GRPCError("m", other) != other {
		t.Error("GRPCError changed an error without a Symphony reason")
	}
}

// FuzzDecodeGRPCRequest feeds the gRPC request decoder arbitrary
// ModelInferRequest messages, for a model of opaque bytes and for typed
// ones: it must never panic, what it accepts must be bounded by what was
// sent (an element takes at least a byte on the wire and at most 8 as
// bytes, a BYTES element's length prefix 4 for the 2 bytes of its field),
// a typed model's exactly its inputs' bytes, and a typed answer must have
// a typed form for every output.
func FuzzDecodeGRPCRequest(f *testing.F) {
	seeds := []*inferencepb.ModelInferRequest{
		rawInputs("m", tensor.Of("x", []int64{1, 8, 8}, fp32s(64, 0.5))),
		rawInputs("m", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{2}, Data: []byte{1, 2}}, tensor.Tensor{Name: "s", Datatype: "BYTES", Shape: []int64{1}, Data: str("hi")}),
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{typedInput("x", "FP32", []int64{1, 1, 8, 8}, &inferencepb.InferTensorContents{Fp32Contents: fp32s(64, 1)})}},
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			typedInput("ids", "INT64", []int64{4}, &inferencepb.InferTensorContents{Int64Contents: []int64{1, 2, 3, -4}}),
			typedInput("mask", "BOOL", []int64{1, 4}, &inferencepb.InferTensorContents{BoolContents: []bool{true, false, true, true}}),
		}, Outputs: outputs("best"), Parameters: map[string]*inferencepb.InferParameter{"timeout_ms": {ParameterChoice: &inferencepb.InferParameter_DoubleParam{DoubleParam: 2.5}}}},
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{typedInput("s", "BYTES", []int64{2}, &inferencepb.InferTensorContents{BytesContents: [][]byte{nil, []byte("x")}}),
			typedInput("i", "INT8", []int64{1}, &inferencepb.InferTensorContents{IntContents: []int32{-128}})}},
	}
	for i, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(i))
	}
	f.Fuzz(func(t *testing.T, msg []byte, model uint8) {
		var r inferencepb.ModelInferRequest
		if proto.Unmarshal(msg, &r) != nil {
			return
		}
		sig := typedModels[int(model)%len(typedModels)]
		req, typed, err := decodeGRPCRequest(&r, sig[0], sig[1], 1<<20)
		if err != nil {
			if req != nil {
				t.Fatal("a request and an error")
			}
			return
		}
		if len(req.Input) > 8*len(msg) || len(req.Outputs) == 0 {
			t.Fatalf("%d bytes of input and %d outputs from a %d-byte message", len(req.Input), len(req.Outputs), len(msg))
		}
		if sig[0] != nil && int64(len(req.Input)) != tensor.TotalBytes(sig[0]) {
			t.Fatalf("%d bytes for a model whose inputs take %d", len(req.Input), tensor.TotalBytes(sig[0]))
		}
		for _, o := range req.Outputs {
			if dt := outputDatatype(sig[1], o.Name); typed && (dt == "FP16" || dt == "BF16") {
				t.Fatalf("a typed answer with a %s output", dt)
			}
		}
	})
}

// Over gRPC too, the priority parameter is Triton's and reaches the
// Inferer as its level, and Triton's timeout (microseconds) bounds the
// call.
func TestGRPCPriorityAndTimeout(t *testing.T) {
	f := newFake()
	c := serveGRPC(t, newGateway(t, f, nil))
	r := rawInputs("resnet", tensor.Tensor{Name: "a", Datatype: "UINT8", Shape: []int64{1}, Data: []byte{1}})
	r.Parameters = map[string]*inferencepb.InferParameter{
		"priority": {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: 1}},
		"timeout":  {ParameterChoice: &inferencepb.InferParameter_Uint64Param{Uint64Param: 40000}},
	}
	start := time.Now()
	if _, err := c.ModelInfer(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.priority != 255 {
		t.Errorf("priority 1 reached the Inferer as level %d, want 255", f.priority)
	}
	if !f.hasDL || f.dl.Before(start.Add(40*time.Millisecond)) || f.dl.After(f.called.Add(40*time.Millisecond)) {
		t.Errorf("deadline %v (set %v), want 40ms after the call", f.dl.Sub(start), f.hasDL)
	}
}
