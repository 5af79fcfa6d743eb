package gateway

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/serving/onnxmodel"
	"github.com/symphony-serving/symphony/tensor"
)

// The committed CNN's tensors (testdata/models/cnn): one sample is an
// [1 8 8] FP32 image, its result [3] FP32 scores.
var (
	cnnInputs  = []tensor.Spec{{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}}}
	cnnOutputs = []tensor.Spec{{Name: "y", Datatype: "FP32", Shape: []int64{3}}}
)

// cnnFake serves "cnn" with the committed CNN's tensors as its model file
// declares them, answering each request with the scores 1, 2 and the sum
// of its input.
func cnnFake(t *testing.T) *fakeInferer {
	t.Helper()
	sig, err := onnxmodel.ReadFile("../../testdata/models/cnn/1/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	in, out, err := sig.Specs()
	if err != nil {
		t.Fatal(err)
	}
	if !tensor.EqualSpecs(in, cnnInputs) || !tensor.EqualSpecs(out, cnnOutputs) {
		t.Fatalf("the committed CNN is %v → %v, the fuzz seeds assume %v → %v", in, out, cnnInputs, cnnOutputs)
	}
	f := newFake()
	f.models["cnn"] = ModelInfo{Name: "cnn", SLO: 100 * time.Millisecond, Ready: true, Inputs: in, Outputs: out}
	f.infer = func(_ context.Context, _ string, input []byte) ([]byte, error) {
		x, err := tensor.Values[float32](tensor.Tensor{Datatype: "FP32", Data: input})
		if err != nil {
			return nil, err
		}
		var sum float32
		for _, v := range x {
			sum += v
		}
		return tensor.Of("y", nil, []float32{1, 2, sum}).Data, nil
	}
	return f
}

// The metadata of a typed model lists its tensors, each with the leading
// -1 batch dimension of a batching model.
func TestMetadataTensors(t *testing.T) {
	g := newGateway(t, cnnFake(t), nil)
	w := do(g, http.MethodGet, "/v2/models/cnn", nil, nil)
	var meta struct {
		Inputs, Outputs []tensorMeta
	}
	if err := json.Unmarshal(w.Body.Bytes(), &meta); err != nil || w.Code != http.StatusOK {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	want := []tensorMeta{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 1, 8, 8}}}
	if len(meta.Inputs) != 1 || meta.Inputs[0].Name != "x" || !slices.Equal(meta.Inputs[0].Shape, want[0].Shape) || meta.Inputs[0].Datatype != "FP32" {
		t.Errorf("inputs %+v, want %+v", meta.Inputs, want)
	}
	if len(meta.Outputs) != 1 || meta.Outputs[0].Name != "y" || !slices.Equal(meta.Outputs[0].Shape, []int64{-1, 3}) {
		t.Errorf("outputs %+v", meta.Outputs)
	}
	// A model of opaque bytes keeps its one UINT8 input and output.
	w = do(g, http.MethodGet, "/v2/models/resnet", nil, nil)
	if !strings.Contains(w.Body.String(), `"inputs":[{"name":"input0","datatype":"UINT8","shape":[-1]}]`) {
		t.Errorf("opaque metadata %s", w.Body)
	}
}

// cnnJSON is a JSON request for the CNN: 64 values of v, with shape.
func cnnJSON(shape string, v string, extra string) []byte {
	return []byte(`{"id":"r1","inputs":[{"name":"x","shape":` + shape + `,"datatype":"FP32","data":[` +
		strings.TrimSuffix(strings.Repeat(v+",", 64), ",") + `]}]` + extra + `}`)
}

// A JSON FP32 request runs with the image's bytes and answers the named
// FP32 output, with the batch dimension if the request had it.
func TestInferTensorsJSON(t *testing.T) {
	f := cnnFake(t)
	g := newGateway(t, f, nil)
	for _, tc := range []struct {
		shape string
		want  []int64
	}{{"[1,1,8,8]", []int64{1, 3}}, {"[1,8,8]", []int64{3}}} {
		w := do(g, http.MethodPost, "/v2/models/cnn/infer", cnnJSON(tc.shape, "0.5", ""), nil)
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if want := tensor.Of("x", nil, slices.Repeat([]float32{0.5}, 64)).Data; !slices.Equal(f.input, want) {
			t.Fatalf("Infer got %d bytes, want the 64 values", len(f.input))
		}
		var resp struct {
			ID      string `json:"id"`
			Outputs []struct {
				Name, Datatype string
				Shape          []int64
				Data           []float32
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatalf("%s: %v", w.Body, err)
		}
		o := resp.Outputs
		if resp.ID != "r1" || len(o) != 1 || o[0].Name != "y" || o[0].Datatype != "FP32" || !slices.Equal(o[0].Shape, tc.want) || !slices.Equal(o[0].Data, []float32{1, 2, 32}) {
			t.Errorf("shape %s: response %s", tc.shape, w.Body)
		}
	}
}

// A binary request and a binary answer: the output's bytes follow the
// JSON header, and NaN, which JSON has no number for, is a string in JSON.
func TestInferTensorsBinary(t *testing.T) {
	f := cnnFake(t)
	g := newGateway(t, f, nil)
	img := tensor.Of("x", nil, slices.Repeat([]float32{1}, 64)).Data
	body, hdr := binBody(`{"inputs":[{"name":"x","shape":[1,1,8,8],"datatype":"FP32","parameters":{"binary_data_size":256}}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`, img)
	w := do(g, http.MethodPost, "/v2/models/cnn/infer", body, hdr)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	n, _ := strconv.Atoi(w.Header().Get(headerLengthHeader))
	out := w.Body.Bytes()[n:]
	if len(out) != 12 || math.Float32frombits(binary.LittleEndian.Uint32(out[8:])) != 64 {
		t.Errorf("binary output %x", out)
	}
	if !strings.Contains(string(w.Body.Bytes()[:n]), `"shape":[1,3],"parameters":{"binary_data_size":12}`) {
		t.Errorf("header %s", w.Body.Bytes()[:n])
	}
	w = do(g, http.MethodPost, "/v2/models/cnn/infer", cnnJSON("[1,8,8]", `"NaN"`, ""), nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"data":[1,2,"NaN"]`) {
		t.Errorf("NaN: %d %s", w.Code, w.Body)
	}
}

// Each mistake is a 400 naming the tensor and the problem, and the
// request never reaches the frontend.
func TestInferTensorsErrors(t *testing.T) {
	f := cnnFake(t)
	g := newGateway(t, f, nil)
	trunc, trhdr := binBody(`{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","parameters":{"binary_data_size":256}}]}`, make([]byte, 200))
	short, shhdr := binBody(`{"inputs":[{"name":"x","shape":[1,8,8],"datatype":"FP32","parameters":{"binary_data_size":200}}]}`, make([]byte, 200))
	for _, tc := range []struct {
		name string
		body []byte
		hdr  map[string]string
		want string
	}{
		{"datatype", []byte(strings.Replace(string(cnnJSON("[1,8,8]", "1", "")), "FP32", "FP64", 1)), nil, `input "x": wrong datatype FP64; the model takes FP32`},
		{"shape", cnnJSON("[8,8,1]", "1", ""), nil, `input "x": wrong shape [8 8 1]; the model takes [1 8 8]`},
		{"batch", []byte(`{"inputs":[{"name":"x","shape":[2,1,8,8],"datatype":"FP32","data":[` + strings.TrimSuffix(strings.Repeat("1,", 128), ",") + `]}]}`), nil, "a batch of 2"},
		{"missing", []byte(`{"inputs":[{"name":"z","shape":[1],"datatype":"FP32","data":[1]}]}`), nil, `unknown tensor "z": the model's inputs are ["x"]`},
		{"unknown output", cnnJSON("[1,8,8]", "1", `,"outputs":[{"name":"scores"}]`), nil, `output "scores": unknown tensor`},
		{"truncated", trunc, trhdr, `input "x": binary data truncated: binary_data_size 256 runs past the body (200 bytes left)`},
		{"short", short, shhdr, "64 elements of FP32 need 256 bytes, binary_data_size is 200"},
	} {
		w := do(g, http.MethodPost, "/v2/models/cnn/infer", tc.body, tc.hdr)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s", tc.name, w.Code, w.Body)
			continue
		}
		if msg := errorOf(t, w); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, msg, tc.want)
		}
	}
	if f.calls != 0 {
		t.Errorf("%d bad requests reached the frontend", f.calls)
	}
	// A result the model's outputs cannot hold is the backend's fault.
	f.infer = func(context.Context, string, []byte) ([]byte, error) { return []byte{1, 2, 3}, nil }
	if w := do(g, http.MethodPost, "/v2/models/cnn/infer", cnnJSON("[1,8,8]", "1", ""), nil); w.Code != http.StatusInternalServerError {
		t.Errorf("short result: %d %s", w.Code, w.Body)
	}
}

// A missing input of a model of two, and an FP16 output asked for as JSON.
func TestInferTensorsTwoInputs(t *testing.T) {
	f := newFake()
	sig := typedModels[2]
	f.models["two"] = ModelInfo{Name: "two", SLO: time.Second, Ready: true, Inputs: sig[0], Outputs: sig[1]}
	f.infer = func(context.Context, string, []byte) ([]byte, error) {
		return []byte{0, 0x3c, 0, 0x40, 7, 0, 0, 0}, nil
	}
	g := newGateway(t, f, nil)
	ids := `{"name":"ids","shape":[4],"datatype":"INT64","data":[1,2,3,4]}`
	mask := `{"name":"mask","shape":[4],"datatype":"BOOL","data":[true,false,true,true]}`
	w := do(g, http.MethodPost, "/v2/models/two/infer", []byte(`{"inputs":[`+ids+`]}`), nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(errorOf(t, w), `missing tensor: input "mask" (BOOL [4]) not given`) {
		t.Errorf("missing: %d %s", w.Code, w.Body)
	}
	w = do(g, http.MethodPost, "/v2/models/two/infer", []byte(`{"inputs":[`+mask+`,`+ids+`]}`), nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(errorOf(t, w), `output "logits" is FP16, which has no JSON form`) {
		t.Errorf("FP16 as JSON: %d %s", w.Code, w.Body)
	}
	w = do(g, http.MethodPost, "/v2/models/two/infer", []byte(`{"inputs":[`+mask+`,`+ids+`],"outputs":[{"name":"best"}]}`), nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"outputs":[{"name":"best","datatype":"INT32","shape":[],"data":[7]}]`) {
		t.Errorf("best: %d %s", w.Code, w.Body)
	}
	want := append(tensor.Of("ids", nil, []int64{1, 2, 3, 4}).Data, 1, 0, 1, 1)
	if !slices.Equal(f.input, want) {
		t.Errorf("packed %v, want ids then mask: %v", f.input, want)
	}
}
