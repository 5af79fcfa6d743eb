//go:build cgo

package onnx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/symphony-serving/symphony/backend"
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

// model is one loaded model: its session and the shapes of one sample.
type model struct {
	name          string
	session       *ort.DynamicAdvancedSession
	inDims        []int64 // one sample's input shape, the batch dimension left out
	inLen, outLen int     // values per sample

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
// be in the repository with a supported signature.
func (e *Executor) Load(specs []wire.ModelSpec) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
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
	m, err := e.open(spec.Name)
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
	x, err := ort.NewTensor(ort.NewShape(append([]int64{1}, m.inDims...)...), make([]float32, m.inLen))
	if err != nil {
		return fmt.Errorf("onnx: model %s: warm-up input: %w", m.name, err)
	}
	defer x.Destroy()
	outs := []ort.Value{nil}
	if err := m.session.Run([]ort.Value{x}, outs); err != nil {
		return fmt.Errorf("onnx: model %s: warm-up run: %w", m.name, err)
	}
	return outs[0].Destroy()
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
