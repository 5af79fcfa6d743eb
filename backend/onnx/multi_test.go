//go:build cgo

package onnx

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/symphony-serving/symphony/tensor"
	"github.com/symphony-serving/symphony/transport/wire"
)

// multiModel is an ONNX model of two FP32 inputs and an INT64 one, and two
// outputs: s = a + b (FP32 [N,2]) and k = k (INT64 [N,3]).
func multiModel() []byte {
	str := func(b []byte, f protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, f, protowire.BytesType), s)
	}
	msg := func(b []byte, f protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, f, protowire.BytesType), m)
	}
	vi := func(name string, elem uint64, dims ...int64) []byte {
		shape := msg(nil, 1, str(nil, 2, "N"))
		for _, d := range dims {
			shape = msg(shape, 1, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(d)))
		}
		tt := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), elem)
		tt = msg(tt, 2, shape)
		return msg(str(nil, 1, name), 2, msg(nil, 1, tt))
	}
	node := func(op, out string, ins ...string) []byte {
		var n []byte
		for _, in := range ins {
			n = str(n, 1, in)
		}
		return str(str(str(n, 2, out), 3, out+"_"+op), 4, op)
	}
	var g []byte
	g = msg(g, 1, node("Add", "s", "a", "b"))
	g = msg(g, 1, node("Identity", "k2", "k"))
	g = str(g, 2, "multi")
	g = msg(g, 11, vi("a", 1, 2))
	g = msg(g, 11, vi("b", 1, 2))
	g = msg(g, 11, vi("k", 7, 3))
	g = msg(g, 12, vi("s", 1, 2))
	g = msg(g, 12, vi("k2", 7, 3))
	m := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8) // ir_version
	m = msg(m, 7, g)
	return msg(m, 8, protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 13)) // opset 13
}

// A model of several inputs and outputs of two datatypes: each request's
// bytes are its inputs in order (tensor.Pack), each result its outputs.
func TestMultipleTensors(t *testing.T) {
	repo := t.TempDir()
	dir := filepath.Join(repo, "multi", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.onnx"), multiModel(), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, Config{Repository: repo, IntraOpThreads: 1})
	ins := []tensor.Spec{{Name: "a", Datatype: "FP32", Shape: []int64{2}}, {Name: "b", Datatype: "FP32", Shape: []int64{2}}, {Name: "k", Datatype: "INT64", Shape: []int64{3}}}
	outs := []tensor.Spec{{Name: "s", Datatype: "FP32", Shape: []int64{2}}, {Name: "k2", Datatype: "INT64", Shape: []int64{3}}}
	bad := wire.ModelSpec{ID: 1, Name: "multi", Inputs: ins[:2], Outputs: outs}
	if err := e.Load([]wire.ModelSpec{bad}); err == nil || !strings.Contains(err.Error(), "the scheduler announces") {
		t.Fatalf("mismatched announcement: %v", err)
	}
	if err := e.Load([]wire.ModelSpec{{ID: 1, Name: "multi", Inputs: ins, Outputs: outs}}); err != nil {
		t.Fatal(err)
	}
	var reqs [][]byte
	for r := range 3 {
		f := float32(r)
		data, _, err := tensor.Pack(ins, []tensor.Tensor{
			tensor.Of("k", []int64{3}, []int64{int64(r), -1, 1 << 40}),
			tensor.Of("a", []int64{2}, []float32{f, 1}), tensor.Of("b", []int64{2}, []float32{10, f}),
		})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, data)
	}
	res, err := e.Execute(context.Background(), 0, 1, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for r, out := range res {
		got, err := tensor.Split(outs, out, false)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := got[0].FP32()
		k, _ := got[1].INT64()
		if f := float32(r); !slices.Equal(s, []float32{f + 10, 1 + f}) || !slices.Equal(k, []int64{int64(r), -1, 1 << 40}) {
			t.Errorf("request %d: s %v, k %v", r, s, k)
		}
	}
	if in, out, _ := e.SampleBytes(1); in != 40 || out != 32 {
		t.Errorf("sample bytes %d, %d", in, out)
	}
}
