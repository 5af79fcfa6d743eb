//go:build cgo

package onnx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/scheduler/serving/onnxmodel"
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

	// loadMu orders Load, LoadModel and UnloadModel; mu guards models.
	loadMu sync.Mutex
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

	// memory is what loading it took (LoadModel's measurement).
	memory uint64
	// use is read-held by each Execute on the session, taken while the
	// executor's mu is still held from the model's lookup, so that
	// UnloadModel can wait for the batches running on it before it
	// destroys the session.
	use sync.RWMutex

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
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
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
		m.use.Lock() // a batch of an earlier session may still run
		_ = m.session.Destroy()
		m.use.Unlock()
	}
	return nil
}

// LoadModel opens one model's session from the repository, runs one
// sample of zeros through it (so that the runtime's buffers exist before
// the first request, which then runs at its profiled speed), and reports
// the memory that took: the growth of the process's resident set over the
// load, from /proc/self/statm. It is a measurement of the whole process,
// so an approximation: memory freed or taken by other work meanwhile
// (batches of other models, another load) counts too, and memory the
// allocator reuses does not; 0 where the resident set did not grow or
// cannot be read. A model loaded already stays as it is.
func (e *Executor) LoadModel(spec wire.ModelSpec) (backend.MemoryUsage, error) {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	e.mu.RLock()
	m := e.models[spec.ID]
	e.mu.RUnlock()
	if m != nil {
		return backend.MemoryUsage{Bytes: m.memory}, nil
	}
	before := residentBytes()
	m, err := e.open(spec)
	if err != nil {
		return backend.MemoryUsage{}, err
	}
	if err := m.warm(); err != nil {
		_ = m.session.Destroy()
		return backend.MemoryUsage{}, err
	}
	if after := residentBytes(); after > before {
		m.memory = after - before
	}
	e.mu.Lock()
	e.models[spec.ID] = m
	e.mu.Unlock()
	return backend.MemoryUsage{Bytes: m.memory}, nil
}

// UnloadModel destroys one model's session once the batches running on it
// have finished; later batches of it fail as not loaded.
func (e *Executor) UnloadModel(id uint32) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	e.mu.Lock()
	m := e.models[id]
	delete(e.models, id)
	e.mu.Unlock()
	if m == nil {
		return nil
	}
	m.use.Lock()
	defer m.use.Unlock()
	if err := m.session.Destroy(); err != nil {
		return fmt.Errorf("onnx: model %s: destroying its session: %w", m.name, err)
	}
	return nil
}

// warm runs one sample of zeros through the session.
func (m *model) warm() error {
	_, err := m.run([][]byte{make([]byte, m.inLen)})
	return err
}

// residentBytes is the process's resident set, from /proc/self/statm (0
// where there is none).
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
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
	sig := onnxmodel.Signature{}
	sig.Inputs, m.inTypes = values(ins)
	sig.Outputs, m.outTypes = values(outs)
	if m.inputs, m.outputs, err = sig.Specs(); err != nil {
		return nil, fmt.Errorf("onnx: model %s (%s): this executor cannot serve it: %w", name, path, err)
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
	m.session, err = ort.NewDynamicAdvancedSession(path, tensor.Names(m.inputs), tensor.Names(m.outputs), opts)
	if err != nil {
		return nil, fmt.Errorf("onnx: model %s: session: %w", name, err)
	}
	return m, nil
}

// values is ONNX Runtime's view of a model's inputs or outputs as
// onnxmodel's Values, so that the executor judges a model's signature by
// the rule the scheduler reads its tensors with (onnxmodel's Specs), and
// their element types, in the same order.
func values(infos []ort.InputOutputInfo) ([]onnxmodel.Value, []ort.TensorElementDataType) {
	vals := make([]onnxmodel.Value, len(infos))
	types := make([]ort.TensorElementDataType, len(infos))
	for i, t := range infos {
		vals[i] = onnxmodel.Value{Name: t.Name, Tensor: t.OrtValueType == ort.ONNXTypeTensor, ElemType: int32(t.DataType), Shape: t.Dimensions}
		types[i] = t.DataType
	}
	return vals, types
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
	if m != nil {
		m.use.RLock() // before mu is let go: UnloadModel waits for it
		defer m.use.RUnlock()
	}
	e.mu.RUnlock()
	if m == nil {
		return nil, fmt.Errorf("onnx: model %d is not loaded", id)
	}
	if len(inputs) == 0 {
		return nil, nil
	}
	start := time.Now()
	res, err := m.run(inputs)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.timing.Batches++
	m.timing.Requests += uint64(len(inputs))
	m.timing.Busy += time.Since(start)
	m.mu.Unlock()
	return res, nil
}

// run runs one batch of m through one session call.
func (m *model) run(inputs [][]byte) ([][]byte, error) {
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
	if len(m.outputs) == 1 {
		// A request's output is its sample of the one output: a slice of
		// the batch's buffer, which the session is done with, not a copy.
		for r := range res {
			res[r] = bufs[0][r*m.outLen : (r+1)*m.outLen : (r+1)*m.outLen]
		}
		return res, nil
	}
	for r := range res {
		b := make([]byte, 0, m.outLen)
		for i, s := range m.outputs {
			size := int(s.Bytes())
			b = append(b, bufs[i][r*size:(r+1)*size]...)
		}
		res[r] = b
	}
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
