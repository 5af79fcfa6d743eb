// Package modelgen writes the small ONNX models Symphony's tests and
// benchmarks serve, with deterministic random weights, and evaluates them
// in plain Go so that a test can check a runtime's answers against an
// independent reference. Nothing is downloaded: the models are built here,
// as ONNX protobuf (onnx.proto's ModelProto, written field by field with
// protowire), which is why no onnx package from PyPI is needed.
//
// The committed models under testdata/models are what Committed returns:
// `go test ./bench/modelgen -run TestCommittedModels -update` rewrites
// them, and the same test without -update fails if they differ. The
// benchmark model (Benchmark, a ResNet-style CNN of 2.7 MB) is not
// committed: `make models` generates it into .cache/models
// (WriteBenchmark).
package modelgen

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"google.golang.org/protobuf/encoding/protowire"
)

// onnx.proto constants this package uses.
const (
	irVersion   = 8  // ONNX 1.10
	opsetOnnx   = 13 // the default domain's operator set
	tensorFloat = 1  // TensorProto.DataType FLOAT
)

// MLP is a two-layer perceptron: y = W2·relu(W1·x + b1) + b2, with input
// "x" of shape [N, In] and output "y" of shape [N, Out], N the batch.
type MLP struct {
	In, Hidden, Out int
	W1, B1, W2, B2  []float32 // row-major: W1 is In×Hidden, W2 Hidden×Out
}

// NewMLP returns an MLP of the given sizes with weights drawn from seed:
// the same seed, the same model.
func NewMLP(in, hidden, out int, seed uint64) *MLP {
	draw := uniform(rand.New(rand.NewPCG(seed, 0x6d6c70)))
	return &MLP{
		In: in, Hidden: hidden, Out: out,
		W1: draw(in*hidden, 1/math.Sqrt(float64(in))), B1: draw(hidden, 0.1),
		W2: draw(hidden*out, 1/math.Sqrt(float64(hidden))), B2: draw(out, 0.1),
	}
}

// uniform returns a function drawing n weights from rng, uniform in
// [-scale, scale): the generators' one way of drawing, so that the same
// seed gives the same model.
func uniform(rng *rand.Rand) func(n int, scale float64) []float32 {
	return func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32((rng.Float64()*2 - 1) * scale)
		}
		return v
	}
}

// Forward evaluates the model on one input of In values, in float64 and
// rounded once at the end: the reference a runtime's float32 answer is
// compared with.
func (m *MLP) Forward(x []float32) ([]float32, error) {
	if len(x) != m.In {
		return nil, fmt.Errorf("modelgen: input has %d values, the model takes %d", len(x), m.In)
	}
	h := make([]float64, m.Hidden)
	for j := range h {
		s := float64(m.B1[j])
		for i := 0; i < m.In; i++ {
			s += float64(x[i]) * float64(m.W1[i*m.Hidden+j])
		}
		h[j] = math.Max(s, 0)
	}
	return dense(h, m.W2, m.B2), nil
}

// dense is the layer y = x·W + b of the references, in float64 and
// rounded once: W is len(x)×len(b), row-major (ONNX Gemm's and MatMul's
// layout).
func dense(x []float64, w, b []float32) []float32 {
	y := make([]float32, len(b))
	for k := range y {
		s := float64(b[k])
		for j, v := range x {
			s += v * float64(w[j*len(b)+k])
		}
		y[k] = float32(s)
	}
	return y
}

// ONNX encodes the model as an ONNX ModelProto.
func (m *MLP) ONNX() []byte {
	var g graph
	g.initializer("W1", []int64{int64(m.In), int64(m.Hidden)}, m.W1)
	g.initializer("B1", []int64{int64(m.Hidden)}, m.B1)
	g.initializer("W2", []int64{int64(m.Hidden), int64(m.Out)}, m.W2)
	g.initializer("B2", []int64{int64(m.Out)}, m.B2)
	g.node("MatMul", []string{"x", "W1"}, "h1")
	g.node("Add", []string{"h1", "B1"}, "h2")
	g.node("Relu", []string{"h2"}, "h3")
	g.node("MatMul", []string{"h3", "W2"}, "h4")
	g.node("Add", []string{"h4", "B2"}, "y")
	g.input("x", int64(m.In))
	g.output("y", int64(m.Out))
	return model(g.bytes("mlp"))
}

// graph accumulates a GraphProto's fields, in field order.
type graph struct {
	nodes, inits, inputs, outputs []byte
}

// intsAttr is an AttributeProto of type INTS.
type intsAttr struct {
	name string
	ints []int64
}

// node appends a NodeProto (GraphProto field 1).
func (g *graph) node(op string, inputs []string, output string, attrs ...intsAttr) {
	var n []byte
	for _, in := range inputs {
		n = protowire.AppendTag(n, 1, protowire.BytesType)
		n = protowire.AppendString(n, in)
	}
	n = protowire.AppendTag(n, 2, protowire.BytesType)
	n = protowire.AppendString(n, output)
	n = protowire.AppendTag(n, 3, protowire.BytesType)
	n = protowire.AppendString(n, output+"_"+op)
	n = protowire.AppendTag(n, 4, protowire.BytesType)
	n = protowire.AppendString(n, op)
	for _, a := range attrs {
		var ab []byte
		ab = protowire.AppendTag(ab, 1, protowire.BytesType) // name
		ab = protowire.AppendString(ab, a.name)
		for _, v := range a.ints {
			ab = protowire.AppendTag(ab, 8, protowire.VarintType) // ints
			ab = protowire.AppendVarint(ab, uint64(v))
		}
		ab = protowire.AppendTag(ab, 20, protowire.VarintType) // type: INTS
		ab = protowire.AppendVarint(ab, 7)
		n = protowire.AppendTag(n, 5, protowire.BytesType) // attribute
		n = protowire.AppendBytes(n, ab)
	}
	g.nodes = protowire.AppendTag(g.nodes, 1, protowire.BytesType)
	g.nodes = protowire.AppendBytes(g.nodes, n)
}

// initializer appends a float TensorProto of raw little-endian data
// (GraphProto field 5).
func (g *graph) initializer(name string, dims []int64, data []float32) {
	var t []byte
	var packed []byte
	for _, d := range dims {
		packed = protowire.AppendVarint(packed, uint64(d))
	}
	t = protowire.AppendTag(t, 1, protowire.BytesType) // dims, packed
	t = protowire.AppendBytes(t, packed)
	t = protowire.AppendTag(t, 2, protowire.VarintType) // data_type
	t = protowire.AppendVarint(t, tensorFloat)
	t = protowire.AppendTag(t, 8, protowire.BytesType) // name
	t = protowire.AppendString(t, name)
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	t = protowire.AppendTag(t, 9, protowire.BytesType) // raw_data
	t = protowire.AppendBytes(t, raw)
	g.inits = protowire.AppendTag(g.inits, 5, protowire.BytesType)
	g.inits = protowire.AppendBytes(g.inits, t)
}

// valueInfo is a ValueInfoProto of a float tensor [N, dims...], N a named
// (batch) dimension.
func valueInfo(name string, dims ...int64) []byte {
	var batch, shape, tensor, typ, vi []byte
	batch = protowire.AppendTag(batch, 2, protowire.BytesType) // dim_param
	batch = protowire.AppendString(batch, "N")
	shape = protowire.AppendTag(shape, 1, protowire.BytesType)
	shape = protowire.AppendBytes(shape, batch)
	for _, d := range dims {
		var fixed []byte
		fixed = protowire.AppendTag(fixed, 1, protowire.VarintType) // dim_value
		fixed = protowire.AppendVarint(fixed, uint64(d))
		shape = protowire.AppendTag(shape, 1, protowire.BytesType)
		shape = protowire.AppendBytes(shape, fixed)
	}
	tensor = protowire.AppendTag(tensor, 1, protowire.VarintType) // elem_type
	tensor = protowire.AppendVarint(tensor, tensorFloat)
	tensor = protowire.AppendTag(tensor, 2, protowire.BytesType) // shape
	tensor = protowire.AppendBytes(tensor, shape)
	typ = protowire.AppendTag(typ, 1, protowire.BytesType) // tensor_type
	typ = protowire.AppendBytes(typ, tensor)
	vi = protowire.AppendTag(vi, 1, protowire.BytesType)
	vi = protowire.AppendString(vi, name)
	vi = protowire.AppendTag(vi, 2, protowire.BytesType)
	return protowire.AppendBytes(vi, typ)
}

func (g *graph) input(name string, dims ...int64) {
	g.inputs = protowire.AppendTag(g.inputs, 11, protowire.BytesType)
	g.inputs = protowire.AppendBytes(g.inputs, valueInfo(name, dims...))
}

func (g *graph) output(name string, dims ...int64) {
	g.outputs = protowire.AppendTag(g.outputs, 12, protowire.BytesType)
	g.outputs = protowire.AppendBytes(g.outputs, valueInfo(name, dims...))
}

// bytes is the GraphProto, named name.
func (g *graph) bytes(name string) []byte {
	var b []byte
	b = append(b, g.nodes...)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = append(b, g.inits...)
	b = append(b, g.inputs...)
	return append(b, g.outputs...)
}

// model wraps a GraphProto in a ModelProto.
func model(graph []byte) []byte {
	var opset, b []byte
	opset = protowire.AppendTag(opset, 2, protowire.VarintType) // version
	opset = protowire.AppendVarint(opset, opsetOnnx)
	b = protowire.AppendTag(b, 1, protowire.VarintType) // ir_version
	b = protowire.AppendVarint(b, irVersion)
	b = protowire.AppendTag(b, 2, protowire.BytesType) // producer_name
	b = protowire.AppendString(b, "symphony-modelgen")
	b = protowire.AppendTag(b, 7, protowire.BytesType) // graph
	b = protowire.AppendBytes(b, graph)
	b = protowire.AppendTag(b, 8, protowire.BytesType) // opset_import
	return protowire.AppendBytes(b, opset)
}

// Committed is the models committed under testdata/models, by repository
// path (<model>/<version>/model.onnx): an MLP of 16 inputs, 32 hidden
// units and 4 outputs (3 KB), and a CNN on 8×8 one-channel images with 4
// 3×3 filters and 3 classes (590 bytes).
func Committed() map[string]Model {
	return map[string]Model{"mlp/1/model.onnx": NewMLP(16, 32, 4, 1), "cnn/1/model.onnx": NewCNN(4, 8, 3, 2)}
}

// Model is a generated model: its ONNX file and its reference evaluation
// of one sample (the values of one input, flattened row-major).
type Model interface {
	ONNX() []byte
	Forward(x []float32) ([]float32, error)
	// Sizes are the values of one sample's input and output.
	Sizes() (in, out int)
}

// Sizes implements Model.
func (m *MLP) Sizes() (int, int) { return m.In, m.Out }

// CNN is a small convolutional network on one-channel Side×Side images:
// a 3×3 convolution to Channels maps (padding 1), relu, global average
// pooling, and a dense layer to Classes. Input "x" is [N, 1, Side, Side],
// output "y" is [N, Classes].
type CNN struct {
	Channels, Side, Classes int
	K, KB                   []float32 // Channels×3×3 kernels, Channels biases
	W, B                    []float32 // Channels×Classes, Classes
}

// NewCNN returns a CNN with weights drawn from seed.
func NewCNN(channels, side, classes int, seed uint64) *CNN {
	draw := uniform(rand.New(rand.NewPCG(seed, 0x636e6e)))
	return &CNN{Channels: channels, Side: side, Classes: classes,
		K: draw(channels*9, 1.0/3), KB: draw(channels, 0.1),
		W: draw(channels*classes, 1/math.Sqrt(float64(channels))), B: draw(classes, 0.1)}
}

// Sizes implements Model.
func (m *CNN) Sizes() (int, int) { return m.Side * m.Side, m.Classes }

// Forward evaluates the network on one image, in float64.
func (m *CNN) Forward(x []float32) ([]float32, error) {
	if in, _ := m.Sizes(); len(x) != in {
		return nil, fmt.Errorf("modelgen: input has %d values, the model takes %d", len(x), in)
	}
	conv := Conv{In: 1, Out: m.Channels, K: 3, Stride: 1, Pad: 1, W: m.K, B: m.KB}
	return dense(relu(conv.apply(image(1, m.Side, x))).meanPool(), m.W, m.B), nil
}

// ONNX encodes the network as an ONNX ModelProto.
func (m *CNN) ONNX() []byte {
	var g graph
	c, s, k := int64(m.Channels), int64(m.Side), int64(m.Classes)
	g.initializer("K", []int64{c, 1, 3, 3}, m.K)
	g.initializer("KB", []int64{c}, m.KB)
	g.initializer("W", []int64{c, k}, m.W)
	g.initializer("B", []int64{k}, m.B)
	g.node("Conv", []string{"x", "K", "KB"}, "conv", intsAttr{"kernel_shape", []int64{3, 3}}, intsAttr{"pads", []int64{1, 1, 1, 1}})
	g.node("Relu", []string{"conv"}, "act")
	g.node("GlobalAveragePool", []string{"act"}, "pool")
	g.node("Flatten", []string{"pool"}, "flat")
	g.node("Gemm", []string{"flat", "W", "B"}, "y")
	g.input("x", 1, s, s)
	g.output("y", k)
	return model(g.bytes("cnn"))
}
