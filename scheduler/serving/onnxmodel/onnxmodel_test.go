package onnxmodel

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/symphony-serving/symphony/tensor"
)

// models is the committed test models (bench/modelgen writes them).
const models = "../../../testdata/models"

func committed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(models, name, "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The committed models' signatures: their one input and output, the
// weights (initializers) not among the inputs.
func TestCommittedModels(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out tensor.Spec
	}{
		{"mlp", tensor.Spec{Name: "x", Datatype: "FP32", Shape: []int64{16}}, tensor.Spec{Name: "y", Datatype: "FP32", Shape: []int64{4}}},
		{"cnn", tensor.Spec{Name: "x", Datatype: "FP32", Shape: []int64{1, 8, 8}}, tensor.Spec{Name: "y", Datatype: "FP32", Shape: []int64{3}}},
	} {
		sig, err := ReadFile(filepath.Join(models, tc.name, "1", "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if len(sig.Inputs) != 1 || sig.Inputs[0].Shape[0] != -1 || sig.Inputs[0].ElemType != 1 {
			t.Fatalf("%s: inputs %+v", tc.name, sig.Inputs)
		}
		ins, outs, err := sig.Specs()
		if err != nil {
			t.Fatal(err)
		}
		if len(ins) != 1 || !ins[0].Equal(tc.in) || len(outs) != 1 || !outs[0].Equal(tc.out) {
			t.Errorf("%s: %v → %v, want %v → %v", tc.name, ins, outs, tc.in, tc.out)
		}
	}
}

// Corrupt files are refused as not ONNX models, saying where.
func TestCorrupt(t *testing.T) {
	mlp := committed(t, "mlp")
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"text", []byte("hello, world\n"), "not an ONNX model"},
		{"truncated", mlp[:len(mlp)/2], "not an ONNX model: model: field 7"},
		{"no graph", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8), "no graph"},
		{"graph a varint", protowire.AppendVarint(protowire.AppendTag(nil, 7, protowire.VarintType), 8), "not a message"},
	} {
		_, err := Read(tc.data)
		if err == nil || !strings.HasPrefix(err.Error(), "not an ONNX model") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(p, []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p); err == nil || !strings.HasPrefix(err.Error(), p+": not an ONNX model") {
		t.Errorf("ReadFile: %v", err)
	}
}

// valueInfo builds a ValueInfoProto: a tensor of elem with dims (-1 a
// dim_param), or a sequence when elem is negative.
func valueInfo(name string, elem int32, dims ...int64) []byte {
	var shape, tt, typ, vi []byte
	for _, d := range dims {
		var dim []byte
		if d < 0 {
			dim = protowire.AppendString(protowire.AppendTag(nil, dimParam, protowire.BytesType), "N")
		} else {
			dim = protowire.AppendVarint(protowire.AppendTag(nil, dimValue, protowire.VarintType), uint64(d))
		}
		shape = protowire.AppendBytes(protowire.AppendTag(shape, shapeDim, protowire.BytesType), dim)
	}
	if elem >= 0 {
		tt = protowire.AppendVarint(protowire.AppendTag(tt, tensorTypeElem, protowire.VarintType), uint64(elem))
		tt = protowire.AppendBytes(protowire.AppendTag(tt, tensorTypeShape, protowire.BytesType), shape)
		typ = protowire.AppendBytes(protowire.AppendTag(typ, typeTensor, protowire.BytesType), tt)
	} else {
		typ = protowire.AppendBytes(protowire.AppendTag(typ, 4, protowire.BytesType), nil) // sequence_type
	}
	vi = protowire.AppendString(protowire.AppendTag(vi, valueName, protowire.BytesType), name)
	return protowire.AppendBytes(protowire.AppendTag(vi, valueType, protowire.BytesType), typ)
}

// modelOf wraps inputs, outputs and initializer names in a ModelProto.
func modelOf(inputs, outputs [][]byte, inits ...string) []byte {
	var g []byte
	for _, n := range inits {
		tp := protowire.AppendString(protowire.AppendTag(nil, tensorName, protowire.BytesType), n)
		g = protowire.AppendBytes(protowire.AppendTag(g, graphInitializer, protowire.BytesType), tp)
	}
	for _, in := range inputs {
		g = protowire.AppendBytes(protowire.AppendTag(g, graphInput, protowire.BytesType), in)
	}
	for _, out := range outputs {
		g = protowire.AppendBytes(protowire.AppendTag(g, graphOutput, protowire.BytesType), out)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, modelGraph, protowire.BytesType), g)
}

// Several inputs and outputs of the numeric types, an initializer listed
// as an input (IR version 3), and the signatures a fixed-size batching
// server cannot serve.
func TestSignatures(t *testing.T) {
	data := modelOf([][]byte{valueInfo("ids", 7, -1, 4), valueInfo("W", 1, 4, 4), valueInfo("mask", 9, -1, 4)},
		[][]byte{valueInfo("logits", 10, -1, 2), valueInfo("argmax", 7, -1)}, "W")
	sig, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	ins, outs, err := sig.Specs()
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Spec{{Name: "ids", Datatype: "INT64", Shape: []int64{4}}, {Name: "mask", Datatype: "BOOL", Shape: []int64{4}}}
	wantOut := []tensor.Spec{{Name: "logits", Datatype: "FP16", Shape: []int64{2}}, {Name: "argmax", Datatype: "INT64", Shape: []int64{}}}
	if !tensor.EqualSpecs(ins, want) || !tensor.EqualSpecs(outs, wantOut) {
		t.Fatalf("specs %v → %v", ins, outs)
	}
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{valueInfo("x", 1, 1, 4), `input "x": shape [1 4]: the first dimension must be the batch`},
		{valueInfo("x", 1, -1, -1), "only the batch (first) dimension may be dynamic"},
		{valueInfo("s", 8, -1), "BYTES, whose elements vary"},
		{valueInfo("c", 14, -1), "COMPLEX64"},
		{valueInfo("q", -1), "not a tensor"},
		{valueInfo("x", 1), "the first dimension must be the batch"},
	} {
		sig, err := Read(modelOf([][]byte{tc.in}, [][]byte{valueInfo("y", 1, -1)}))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := sig.Specs(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	sig, _ = Read(modelOf(nil, [][]byte{valueInfo("y", 1, -1)}))
	if _, _, err := sig.Specs(); err == nil || !strings.Contains(err.Error(), "0 inputs") {
		t.Errorf("no inputs: %v", err)
	}
}

// FuzzRead decodes arbitrary bytes: never a panic, and what it accepts has
// bounded signatures whose specs, if any, validate.
func FuzzRead(f *testing.F) {
	for _, m := range []string{"mlp", "cnn"} {
		b := committed(f, m)
		f.Add(b)
		f.Add(b[:len(b)/3])
	}
	f.Add(modelOf([][]byte{valueInfo("ids", 7, -1, 4), valueInfo("q", -1)}, [][]byte{valueInfo("y", 10, -1, 2)}, "W"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		sig, err := Read(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "not an ONNX model: ") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if len(sig.Inputs)+len(sig.Outputs) > MaxValues {
			t.Fatalf("%d values", len(sig.Inputs)+len(sig.Outputs))
		}
		for _, v := range slices.Concat(sig.Inputs, sig.Outputs) {
			if len(v.Shape) > tensor.MaxDims || len(v.Name) > MaxNameLen {
				t.Fatalf("value %q of %d dims", v.Name, len(v.Shape))
			}
		}
		ins, outs, err := sig.Specs()
		if err == nil && (tensor.ValidateSpecs("input", ins) != nil || tensor.ValidateSpecs("output", outs) != nil) {
			t.Fatalf("specs %v → %v do not validate", ins, outs)
		}
	})
}
