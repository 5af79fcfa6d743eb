package modelgen

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// ResNet is a small residual CNN in the shape of ResNet (He et al.) on
// 3-channel Side×Side images: a stem (3×3 convolution to Width maps, relu),
// then three stages of one residual block each, at Width, 2·Width and
// 4·Width maps, the second and third stages halving the spatial size, then
// global average pooling, flatten and a dense layer to Classes. A block is
// Conv 3×3 → Relu → Conv 3×3 → Add skip → Relu; a block that changes the
// shape (stride 2, more maps) takes its skip through a strided 1×1
// projection. Input "x" is [N, 3, Side, Side], output "y" is [N, Classes].
//
// It is the benchmark model of the ONNX acceptance runs (bench/scripts/
// onnx-acceptance.sh): heavy enough that a batch's time on ONNX Runtime is
// the convolutions, not the runtime's per-call overhead (the committed test
// models run in microseconds, where a profile measures mostly noise), and
// yet a batch of 32 runs in tens of milliseconds on one CPU core, so that
// an SLO of the paper's order fits several batches. Benchmark() is the
// size used there; tests build narrower ones with NewResNet.
type ResNet struct {
	Side, Width, Classes int
	Stem                 Conv
	Blocks               []ResBlock
	W, B                 []float32 // 4·Width×Classes, Classes
}

// Conv is one 2-D convolution with bias: Out maps from In, K×K kernels,
// the given stride and the same zero padding on every side. W is
// Out×In×K×K, ONNX's weight layout.
type Conv struct {
	In, Out, K, Stride, Pad int
	W, B                    []float32
}

// ResBlock is one residual block; Proj is nil when the skip is the
// identity.
type ResBlock struct {
	C1, C2 Conv
	Proj   *Conv
}

// BenchmarkResNet is the benchmark model's repository name (`make
// models` writes it as .cache/models/resnet/1/model.onnx).
const BenchmarkResNet = "resnet"

// Benchmark returns the benchmark ResNet: 32×32 images, width 48, 10
// classes (about 690 thousand weights, a 2.7 MB file, and 110 million
// multiply-adds a sample), seed 1. The width sets the cost: 0.88ms a
// sample on one core of the 2-core development VM with one ONNX Runtime
// thread (symphony-bench profile's α in the issue 16 run of
// docs/benchmarks.md), so that a core sustains about a thousand requests
// a second and the load generator, the frontend and the
// scheduler keep up with that on the other core.
func Benchmark() *ResNet { return NewResNet(32, 48, 10, 1) }

// NewResNet returns a ResNet with weights drawn from seed: He-scaled
// (uniform with variance 2/fan-in) so that activations keep their scale
// through the relus, and the second convolution of each block scaled by
// a half more so that the residual sums do not grow block by block. side
// must be a multiple of 4 (two stride-2 stages).
func NewResNet(side, width, classes int, seed uint64) *ResNet {
	draw := uniform(rand.New(rand.NewPCG(seed, 0x7265736e6574)))
	conv := func(in, out, k, stride int, gain float64) Conv {
		fanIn := float64(in * k * k)
		return Conv{In: in, Out: out, K: k, Stride: stride, Pad: k / 2,
			W: draw(out*in*k*k, gain*math.Sqrt(6/fanIn)), B: draw(out, 0.01)}
	}
	m := &ResNet{Side: side, Width: width, Classes: classes, Stem: conv(3, width, 3, 1, 1)}
	in := width
	for i, out := range []int{width, 2 * width, 4 * width} {
		stride := 1
		if i > 0 {
			stride = 2
		}
		b := ResBlock{C1: conv(in, out, 3, stride, 1), C2: conv(out, out, 3, 1, 0.5)}
		if stride != 1 || in != out {
			p := conv(in, out, 1, stride, 1)
			b.Proj = &p
		}
		m.Blocks = append(m.Blocks, b)
		in = out
	}
	m.W, m.B = draw(in*classes, math.Sqrt(3/float64(in))), draw(classes, 0.1)
	return m
}

// Sizes implements Model.
func (m *ResNet) Sizes() (int, int) { return 3 * m.Side * m.Side, m.Classes }

// tensor is one sample's activations, C×H×W row-major, in float64.
type tensor struct {
	c, h, w int
	v       []float64
}

// image is a c×side×side tensor of the values x, channel-major.
func image(c, side int, x []float32) tensor {
	t := tensor{c: c, h: side, w: side, v: make([]float64, len(x))}
	for i, v := range x {
		t.v[i] = float64(v)
	}
	return t
}

// meanPool is global average pooling: each map's mean.
func (t tensor) meanPool() []float64 {
	pooled := make([]float64, t.c)
	for c := range pooled {
		var s float64
		for _, v := range t.v[c*t.h*t.w : (c+1)*t.h*t.w] {
			s += v
		}
		pooled[c] = s / float64(t.h*t.w)
	}
	return pooled
}

// apply is the convolution of x, in float64: the reference ONNX Runtime's
// Conv is checked against, so it is written the plain way.
func (cv *Conv) apply(x tensor) tensor {
	oh := (x.h+2*cv.Pad-cv.K)/cv.Stride + 1
	ow := (x.w+2*cv.Pad-cv.K)/cv.Stride + 1
	y := tensor{c: cv.Out, h: oh, w: ow, v: make([]float64, cv.Out*oh*ow)}
	for o := 0; o < cv.Out; o++ {
		for i := 0; i < oh; i++ {
			for j := 0; j < ow; j++ {
				s := float64(cv.B[o])
				for c := 0; c < cv.In; c++ {
					for ki := 0; ki < cv.K; ki++ {
						ii := i*cv.Stride - cv.Pad + ki
						if ii < 0 || ii >= x.h {
							continue
						}
						for kj := 0; kj < cv.K; kj++ {
							jj := j*cv.Stride - cv.Pad + kj
							if jj < 0 || jj >= x.w {
								continue
							}
							s += x.v[(c*x.h+ii)*x.w+jj] * float64(cv.W[((o*cv.In+c)*cv.K+ki)*cv.K+kj])
						}
					}
				}
				y.v[(o*oh+i)*ow+j] = s
			}
		}
	}
	return y
}

func relu(x tensor) tensor {
	for i, v := range x.v {
		x.v[i] = math.Max(v, 0)
	}
	return x
}

// Forward evaluates the network on one image (3×Side×Side values,
// channel-major), in float64, rounded once at the end.
func (m *ResNet) Forward(x []float32) ([]float32, error) {
	if in, _ := m.Sizes(); len(x) != in {
		return nil, fmt.Errorf("modelgen: input has %d values, the model takes %d", len(x), in)
	}
	t := relu(m.Stem.apply(image(3, m.Side, x)))
	for i := range m.Blocks {
		b := &m.Blocks[i]
		skip := t
		if b.Proj != nil {
			skip = b.Proj.apply(t)
		}
		h := b.C2.apply(relu(b.C1.apply(t)))
		for k := range h.v {
			h.v[k] += skip.v[k]
		}
		t = relu(h)
	}
	return dense(t.meanPool(), m.W, m.B), nil
}

// ONNX encodes the network as an ONNX ModelProto. Every Conv carries its
// kernel_shape, pads (begin and end of each axis) and strides, so that no
// runtime falls back on defaults the reference does not share.
func (m *ResNet) ONNX() []byte {
	var g graph
	conv := func(name, in string, cv *Conv) string {
		g.initializer(name+".w", []int64{int64(cv.Out), int64(cv.In), int64(cv.K), int64(cv.K)}, cv.W)
		g.initializer(name+".b", []int64{int64(cv.Out)}, cv.B)
		p, s, k := int64(cv.Pad), int64(cv.Stride), int64(cv.K)
		g.node("Conv", []string{in, name + ".w", name + ".b"}, name,
			intsAttr{"kernel_shape", []int64{k, k}}, intsAttr{"pads", []int64{p, p, p, p}}, intsAttr{"strides", []int64{s, s}})
		return name
	}
	relu := func(in string) string {
		g.node("Relu", []string{in}, in+".relu")
		return in + ".relu"
	}
	t := relu(conv("stem", "x", &m.Stem))
	for i := range m.Blocks {
		b := &m.Blocks[i]
		name := fmt.Sprintf("block%d", i+1)
		skip := t
		if b.Proj != nil {
			skip = conv(name+".proj", t, b.Proj)
		}
		h := conv(name+".conv2", relu(conv(name+".conv1", t, &b.C1)), &b.C2)
		g.node("Add", []string{h, skip}, name+".add")
		t = relu(name + ".add")
	}
	last := int64(m.Blocks[len(m.Blocks)-1].C2.Out)
	g.initializer("fc.w", []int64{last, int64(m.Classes)}, m.W)
	g.initializer("fc.b", []int64{int64(m.Classes)}, m.B)
	g.node("GlobalAveragePool", []string{t}, "pool")
	g.node("Flatten", []string{"pool"}, "flat")
	g.node("Gemm", []string{"flat", "fc.w", "fc.b"}, "y")
	g.input("x", 3, int64(m.Side), int64(m.Side))
	g.output("y", int64(m.Classes))
	return model(g.bytes("resnet"))
}
