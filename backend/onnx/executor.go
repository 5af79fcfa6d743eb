//go:build cgo

package onnx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/symphony-serving/symphony/transport/wire"
)

// runtime is ONNX Runtime's environment, which the library keeps once per
// process: the first New opens the library, later ones must name the same.
var runtime struct {
	mu      sync.Mutex
	library string
}

func initRuntime(library string) error {
	runtime.mu.Lock()
	defer runtime.mu.Unlock()
	if runtime.library != "" {
		if runtime.library != library {
			return fmt.Errorf("onnx: ONNX Runtime is already loaded from %s in this process; cannot load %s too", runtime.library, library)
		}
		return nil
	}
	ort.SetSharedLibraryPath(library)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		return fmt.Errorf("onnx: loading ONNX Runtime from %s: %w", library, err)
	}
	runtime.library = library
	return nil
}

// Executor runs batches with ONNX Runtime on the CPU.
type Executor struct {
	cfg Config

	mu     sync.RWMutex
	models map[uint32]*model
}

// model is one loaded model: its session and the shapes of one sample.
type model struct {
	name          string
	session       *ort.DynamicAdvancedSession
	inDims        []int64 // one sample's input shape, the batch dimension left out
	inLen, outLen int     // values per sample

	mu     sync.Mutex
	timing Timing
}

// New opens ONNX Runtime's library and returns an executor for the
// models of cfg.Repository.
func New(cfg Config) (*Executor, error) {
	lib, err := cfg.libraryPath()
	if err != nil {
		return nil, err
	}
	if cfg.Repository == "" {
		return nil, errors.New("onnx: no model repository")
	}
	if err := initRuntime(lib); err != nil {
		return nil, err
	}
	return &Executor{cfg: cfg, models: map[uint32]*model{}}, nil
}

// Load opens a session for each model the scheduler serves, from the
// repository, replacing the sessions of an earlier Load. Every model must
// be in the repository with a supported signature.
func (e *Executor) Load(specs []wire.ModelSpec) error {
	loaded := make(map[uint32]*model, len(specs))
	for _, s := range specs {
		m, err := e.open(s.Name)
		if err != nil {
			for _, l := range loaded {
				_ = l.session.Destroy()
			}
			return err
		}
		loaded[s.ID] = m
	}
	e.mu.Lock()
	old := e.models
	e.models = loaded
	e.mu.Unlock()
	for _, m := range old {
		_ = m.session.Destroy() // no batch runs on it: Load comes between sessions
	}
	return nil
}

// open makes a session for the named model and checks its signature.
func (e *Executor) open(name string) (*model, error) {
	path, err := ModelFile(e.cfg.Repository, name)
	if err != nil {
		return nil, err
	}
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s (%s): not a model ONNX Runtime can read: %w", name, path, err)
	}
	if len(ins) != 1 || len(outs) != 1 {
		return nil, fmt.Errorf("onnx: model %s: %d inputs and %d outputs; this executor serves models of one input and one output", name, len(ins), len(outs))
	}
	in, out := ins[0], outs[0]
	inDims, inLen, err := sample(name, in)
	if err != nil {
		return nil, err
	}
	_, outLen, err := sample(name, out)
	if err != nil {
		return nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: session options: %w", err)
	}
	defer opts.Destroy()
	if e.cfg.IntraOpThreads > 0 {
		if err := opts.SetIntraOpNumThreads(e.cfg.IntraOpThreads); err != nil {
			return nil, fmt.Errorf("onnx: intra-op threads: %w", err)
		}
	}
	if e.cfg.InterOpThreads > 0 {
		if err := opts.SetInterOpNumThreads(e.cfg.InterOpThreads); err != nil {
			return nil, fmt.Errorf("onnx: inter-op threads: %w", err)
		}
	}
	s, err := ort.NewDynamicAdvancedSession(path, []string{in.Name}, []string{out.Name}, opts)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: session: %w", name, err)
	}
	return &model{name: name, session: s, inDims: inDims, inLen: inLen, outLen: outLen}, nil
}

// sample checks that a tensor is float32 with a leading batch dimension and
// fixed others, and returns one sample's shape and number of values.
func sample(model string, t ort.InputOutputInfo) ([]int64, int, error) {
	if t.OrtValueType != ort.ONNXTypeTensor || t.DataType != ort.TensorElementDataTypeFloat {
		return nil, 0, fmt.Errorf("onnx: model %s: %s: this executor serves float32 tensors", model, t.String())
	}
	d := t.Dimensions
	if len(d) < 1 || d[0] > 0 {
		return nil, 0, fmt.Errorf("onnx: model %s: %s: the first dimension must be the batch (dynamic)", model, t.String())
	}
	n := 1
	for _, x := range d[1:] {
		if x <= 0 {
			return nil, 0, fmt.Errorf("onnx: model %s: %s: only the batch dimension may be dynamic", model, t.String())
		}
		n *= int(x)
	}
	return append([]int64(nil), d[1:]...), n, nil
}

// Execute runs one batch: the inputs, one sample each, concatenated along
// the batch dimension, through one session call; the output split back.
// gpu is ignored: the CPU runs every batch.
func (e *Executor) Execute(_ context.Context, _ int, id uint32, inputs [][]byte) ([][]byte, error) {
	e.mu.RLock()
	m := e.models[id]
	e.mu.RUnlock()
	if m == nil {
		return nil, fmt.Errorf("onnx: model %d is not loaded", id)
	}
	if len(inputs) == 0 {
		return nil, nil
	}
	start := time.Now()
	in := make([]float32, 0, len(inputs)*m.inLen)
	for i, b := range inputs {
		if len(b) != 4*m.inLen {
			return nil, fmt.Errorf("onnx: model %s: input %d has %d bytes; one sample of shape %v is %d float32 values, %d bytes", m.name, i, len(b), m.inDims, m.inLen, 4*m.inLen)
		}
		for j := 0; j < m.inLen; j++ {
			in = append(in, math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:])))
		}
	}
	shape := ort.NewShape(append([]int64{int64(len(inputs))}, m.inDims...)...)
	x, err := ort.NewTensor(shape, in)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: input tensor: %w", m.name, err)
	}
	defer x.Destroy()
	outs := []ort.Value{nil}
	if err := m.session.Run([]ort.Value{x}, outs); err != nil {
		return nil, fmt.Errorf("onnx: model %s: run: %w", m.name, err)
	}
	defer outs[0].Destroy()
	y, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("onnx: model %s: output is %T, not a float32 tensor", m.name, outs[0])
	}
	data := y.GetData()
	if len(data) != len(inputs)*m.outLen {
		return nil, fmt.Errorf("onnx: model %s: output has %d values for %d requests, want %d each", m.name, len(data), len(inputs), m.outLen)
	}
	res := make([][]byte, len(inputs))
	for i := range res {
		b := make([]byte, 4*m.outLen)
		for j, v := range data[i*m.outLen : (i+1)*m.outLen] {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(v))
		}
		res[i] = b
	}
	m.mu.Lock()
	m.timing.Batches++
	m.timing.Requests += uint64(len(inputs))
	m.timing.Busy += time.Since(start)
	m.mu.Unlock()
	return res, nil
}

// SampleBytes is the size of one request's input and of its output for a
// loaded model, as its ONNX file declares them.
func (e *Executor) SampleBytes(id uint32) (in, out int, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	m := e.models[id]
	if m == nil {
		return 0, 0, false
	}
	return 4 * m.inLen, 4 * m.outLen, true
}

// Timing is each loaded model's batches so far, by name.
func (e *Executor) Timing() map[string]Timing {
	e.mu.RLock()
	defer e.mu.RUnlock()
	t := make(map[string]Timing, len(e.models))
	for _, m := range e.models {
		m.mu.Lock()
		t[m.name] = m.timing
		m.mu.Unlock()
	}
	return t
}

// Close ends every session.
func (e *Executor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, m := range e.models {
		errs = append(errs, m.session.Destroy())
	}
	e.models = map[uint32]*model{}
	return errors.Join(errs...)
}
