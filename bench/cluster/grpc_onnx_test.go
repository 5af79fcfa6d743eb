//go:build cgo

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/symphony-serving/symphony/backend/onnx/onnxtest"
	"github.com/symphony-serving/symphony/bench/modelgen"
	"github.com/symphony-serving/symphony/frontend/gateway"
	"github.com/symphony-serving/symphony/frontend/gateway/inferencepb"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/scheduler/service"
	"github.com/symphony-serving/symphony/scheduler/serving/onnxmodel"
	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport/inproc"
)

// The committed CNN, a typed model, on an ONNX Runtime backend behind both
// gateways: its image as gRPC typed contents, as raw contents and as HTTP
// JSON gets the same scores, the model's own (its plain-Go evaluation, to
// within 1e-5), typed for typed inputs; a wrong datatype, a wrong shape,
// an unknown tensor, contents one element short and raw contents of the
// wrong length get INVALID_ARGUMENT with the HTTP 400's message (the raw
// length naming the gRPC field).
func TestGRPCGatewayTypedModel(t *testing.T) {
	onnxtest.NeedRuntime(t)
	cnn := modelgen.Committed()["cnn/1/model.onnx"]
	sig, err := onnxmodel.ReadFile("../../testdata/models/cnn/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	ins, outs, err := sig.Specs()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(inproc.New(), "", 1, 1)
	cfg.Models = []service.Model{{Name: "cnn", Profile: profile.MustLinear(100*time.Microsecond, 100*time.Microsecond, 8), SLO: 1500 * time.Millisecond,
		InputBytes: tensor.TotalBytes(ins), Inputs: ins, Outputs: outs}}
	cfg.Executor = committedModels(t)
	c := startCluster(t, cfg)
	base, gc := bothGateways(t, c.Frontends[0])
	ctx := context.Background()

	x := make([]float32, 64)
	for j := range x {
		x[j] = float32(math.Sin(float64(j)))
	}
	want, err := cnn.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	typed := &inferencepb.ModelInferRequest{ModelName: "cnn", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: []int64{1, 1, 8, 8}, Contents: &inferencepb.InferTensorContents{Fp32Contents: x}}}}
	r, err := gc.ModelInfer(ctx, typed)
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Outputs; len(o) != 1 || o[0].Name != "y" || o[0].Datatype != "FP32" || !slices.Equal(o[0].Shape, []int64{1, 3}) || len(r.RawOutputContents) != 0 {
		t.Fatalf("typed answer %v", r)
	}
	byTyped := r.Outputs[0].GetContents().GetFp32Contents()
	img := tensor.Of("x", []int64{1, 8, 8}, x)
	r, err = gc.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "cnn", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "x", Datatype: "FP32", Shape: img.Shape}}, RawInputContents: [][]byte{img.Data}})
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Outputs; len(o) != 1 || !slices.Equal(o[0].Shape, []int64{3}) || len(r.RawOutputContents) != 1 {
		t.Fatalf("raw answer %v", r)
	}
	byRaw, err := tensor.Tensor{Datatype: "FP32", Data: r.RawOutputContents[0]}.FP32()
	if err != nil {
		t.Fatal(err)
	}
	code, body := postJSON(t, base+"/v2/models/cnn/infer", []byte(`{"inputs":[{"name":"x","shape":[1,1,8,8],"datatype":"FP32","data":`+jsonFloats(x)+`}]}`), nil)
	var h struct {
		Outputs []struct {
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(body, &h); err != nil || code != 200 || len(h.Outputs) != 1 {
		t.Fatalf("HTTP %d %s (%v)", code, body, err)
	}
	for name, y := range map[string][]float32{"typed": byTyped, "raw": byRaw, "HTTP": h.Outputs[0].Data} {
		if len(y) != len(want) {
			t.Fatalf("%s: scores %v, want %v", name, y, want)
		}
		for k := range want {
			if math.Abs(float64(y[k]-want[k])) > 1e-5 {
				t.Errorf("%s: y[%d] = %v, want %v", name, k, y[k], want[k])
			}
		}
	}

	ones := func(n int) string { return strings.TrimSuffix(strings.Repeat("1,", n), ",") }
	rawOf := func(name, dt string, shape []int64, data []byte) *inferencepb.ModelInferRequest {
		return &inferencepb.ModelInferRequest{ModelName: "cnn", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			{Name: name, Datatype: dt, Shape: shape}}, RawInputContents: [][]byte{data}}
	}
	shortHead := `{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","parameters":{"binary_data_size":200}}]}`
	for _, tc := range []struct {
		name    string
		body    string
		hdr     map[string]string
		req     *inferencepb.ModelInferRequest
		grpcMsg string // "" for HTTP's
	}{
		{"wrong datatype", `{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP64","data":[` + ones(64) + `]}]}`, nil,
			rawOf("x", "FP64", []int64{1, 8, 8}, make([]byte, 512)), ""},
		{"wrong shape", `{"inputs":[{"name":"x","shape":[8,8,1],"datatype":"FP32","data":[` + ones(64) + `]}]}`, nil,
			rawOf("x", "FP32", []int64{8, 8, 1}, make([]byte, 256)), ""},
		{"unknown tensor", `{"inputs":[{"name":"z","shape":[1,8,8],"datatype":"FP32","data":[` + ones(64) + `]}]}`, nil,
			rawOf("z", "FP32", []int64{1, 8, 8}, make([]byte, 256)), ""},
		{"contents one short", `{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","data":[` + ones(63) + `]}]}`, nil,
			&inferencepb.ModelInferRequest{ModelName: "cnn", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
				{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}, Contents: &inferencepb.InferTensorContents{Fp32Contents: x[:63]}}}}, ""},
		{"raw contents of the wrong length", shortHead + string(make([]byte, 200)), map[string]string{"Inference-Header-Content-Length": strconv.Itoa(len(shortHead))},
			rawOf("x", "FP32", []int64{1, 8, 8}, make([]byte, 200)), `input "x": 64 elements of FP32 need 256 bytes, raw_input_contents has 200`},
	} {
		hcode, hbody := postJSON(t, base+"/v2/models/cnn/infer", []byte(tc.body), tc.hdr)
		msg, reason, ok := gateway.ParseErrorBody(hbody)
		if !ok || hcode != 400 {
			t.Fatalf("%s: HTTP %d %s", tc.name, hcode, hbody)
		}
		_, err := gc.ModelInfer(ctx, tc.req)
		code, gmsg, greason := grpcFailure(t, err)
		if tc.grpcMsg != "" {
			msg = tc.grpcMsg
		}
		if code != codes.InvalidArgument || gmsg != msg || greason != reason {
			t.Errorf("%s: gRPC %v %q (%s); want INVALID_ARGUMENT %q (%s)", tc.name, code, gmsg, greason, msg, reason)
		}
	}
}

// jsonFloats is xs as a JSON array.
func jsonFloats(xs []float32) string {
	parts := make([]string, len(xs))
	for i, v := range xs {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
