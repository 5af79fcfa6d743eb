//go:build cgo

package onnx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/symphony-serving/symphony/tensor"
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

// model is one loaded model: its session and its tensors, one sample
// each, in the session's order.
type model struct {
	name            string
	session         *ort.DynamicAdvancedSession
	inputs, outputs []tensor.Spec
	inTypes         []ort.TensorElementDataType
	outTypes        []ort.TensorElementDataType
	inLen, outLen   int // bytes per sample, all inputs and all outputs

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
// be in the repository with a supported signature, and where the
// scheduler announces a model's tensors they must be its file's: a
// scheduler and a backend reading different repositories would otherwise
// cut each other's bytes wrongly.
func (e *Executor) Load(specs []wire.ModelSpec) error {
	loaded := make(map[uint32]*model, len(specs))
	for _, s := range specs {
		m, err := e.open(s)
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

// open makes a session for the announced model and checks its signature.
func (e *Executor) open(spec wire.ModelSpec) (*model, error) {
	name := spec.Name
	path, err := ModelFile(e.cfg.Repository, name)
	if err != nil {
		return nil, err
	}
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s (%s): not a model ONNX Runtime can read: %w", name, path, err)
	}
	m := &model{name: name}
	if m.inputs, m.inTypes, err = samples(name, "input", ins); err != nil {
		return nil, err
	}
	if m.outputs, m.outTypes, err = samples(name, "output", outs); err != nil {
		return nil, err
	}
	if spec.Inputs != nil && (!tensor.EqualSpecs(spec.Inputs, m.inputs) || !tensor.EqualSpecs(spec.Outputs, m.outputs)) {
		return nil, fmt.Errorf("onnx: model %s: the scheduler announces tensors %v → %v, but %s declares %v → %v: do the scheduler and this backend read the same repository?",
			name, spec.Inputs, spec.Outputs, path, m.inputs, m.outputs)
	}
	m.inLen, m.outLen = int(tensor.TotalBytes(m.inputs)), int(tensor.TotalBytes(m.outputs))
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
	names := func(specs []tensor.Spec) []string {
		n := make([]string, len(specs))
		for i, s := range specs {
			n[i] = s.Name
		}
		return n
	}
	m.session, err = ort.NewDynamicAdvancedSession(path, names(m.inputs), names(m.outputs), opts)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: session: %w", name, err)
	}
	return m, nil
}

// samples checks a model's inputs or outputs (what names them): tensors of
// a fixed-size KServe datatype with a leading (dynamic) batch dimension
// and fixed others. It returns one sample of each, and their ONNX types.
func samples(model, what string, infos []ort.InputOutputInfo) ([]tensor.Spec, []ort.TensorElementDataType, error) {
	if len(infos) == 0 {
		return nil, nil, fmt.Errorf("onnx: model %s has no %ss", model, what)
	}
	specs := make([]tensor.Spec, len(infos))
	types := make([]ort.TensorElementDataType, len(infos))
	for i, t := range infos {
		if t.OrtValueType != ort.ONNXTypeTensor {
			return nil, nil, fmt.Errorf("onnx: model %s: %s %s: not a tensor", model, what, t.String())
		}
		dt, err := tensor.FromONNX(int32(t.DataType))
		if err != nil {
			return nil, nil, fmt.Errorf("onnx: model %s: %s %s: %w", model, what, t.String(), err)
		}
		d := t.Dimensions
		if len(d) < 1 || d[0] > 0 {
			return nil, nil, fmt.Errorf("onnx: model %s: %s %s: the first dimension must be the batch (dynamic)", model, what, t.String())
		}
		specs[i], types[i] = tensor.Spec{Name: t.Name, Datatype: dt, Shape: append([]int64{}, d[1:]...)}, t.DataType
	}
	if err := tensor.ValidateSpecs(what, specs); err != nil {
		return nil, nil, fmt.Errorf("onnx: model %s: %w", model, err)
	}
	return specs, types, nil
}

// Execute runs one batch through one session call. A request's input is
// each of the model's inputs, one sample, concatenated in the model's
// order; each input's samples are laid side by side along the batch
// dimension, and each output is cut back per request, a request's output
// being its sample of each output concatenated in order. gpu is ignored:
// the CPU runs every batch.
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
	n := len(inputs)
	for i, b := range inputs {
		if len(b) != m.inLen {
			return nil, fmt.Errorf("onnx: model %s: input %d has %d bytes; one sample of %v is %d", m.name, i, len(b), m.inputs, m.inLen)
		}
	}
	ins := make([]ort.Value, 0, len(m.inputs))
	defer func() {
		for _, v := range ins {
			_ = v.Destroy()
		}
	}()
	off := 0
	for i, s := range m.inputs {
		size := int(s.Bytes())
		buf := make([]byte, n*size)
		for r, b := range inputs {
			copy(buf[r*size:], b[off:off+size])
		}
		off += size
		x, err := ort.NewCustomDataTensor(batchShape(n, s), buf, m.inTypes[i])
		if err != nil {
			return nil, fmt.Errorf("onnx: model %s: input %s: %w", m.name, s.Name, err)
		}
		ins = append(ins, x)
	}
	outs := make([]ort.Value, 0, len(m.outputs))
	bufs := make([][]byte, len(m.outputs))
	defer func() {
		for _, v := range outs {
			_ = v.Destroy()
		}
	}()
	for i, s := range m.outputs {
		bufs[i] = make([]byte, n*int(s.Bytes()))
		y, err := ort.NewCustomDataTensor(batchShape(n, s), bufs[i], m.outTypes[i])
		if err != nil {
			return nil, fmt.Errorf("onnx: model %s: output %s: %w", m.name, s.Name, err)
		}
		outs = append(outs, y)
	}
	if err := m.session.Run(ins, outs); err != nil {
		return nil, fmt.Errorf("onnx: model %s: run: %w", m.name, err)
	}
	res := make([][]byte, n)
	for r := range res {
		b := make([]byte, 0, m.outLen)
		for i, s := range m.outputs {
			size := int(s.Bytes())
			b = append(b, bufs[i][r*size:(r+1)*size]...)
		}
		res[r] = b
	}
	m.mu.Lock()
	m.timing.Batches++
	m.timing.Requests += uint64(n)
	m.timing.Busy += time.Since(start)
	m.mu.Unlock()
	return res, nil
}

// batchShape is a batch of n samples of s.
func batchShape(n int, s tensor.Spec) ort.Shape {
	return ort.NewShape(append([]int64{int64(n)}, s.Shape...)...)
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
	return m.inLen, m.outLen, true
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
