// Package onnx is a backend.Executor that runs real models with ONNX
// Runtime: one session per loaded model, one session call per batch. A
// batch's per-request inputs are concatenated along the batch dimension
// and its output is split back per request, so that the scheduler's
// batches are the runtime's batches.
//
// It needs cgo and ONNX Runtime's shared library (make onnxruntime fetches
// it into .cache/); a build without cgo still compiles, and New then says
// the executor is not in the build.
//
// A model has any number of inputs and outputs of the fixed-size numeric
// KServe datatypes (package tensor), each with a leading dynamic batch
// dimension and fixed others. A request's input is one sample of each
// input, little-endian, concatenated in the model's order, and its output
// one sample of each output likewise (tensor.Pack and tensor.Split): the
// layout the scheduler announces and the frontends check.
package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/symphony-serving/symphony/scheduler/serving"
)

// LibraryEnv names the environment variable that gives the path of ONNX
// Runtime's shared library when Config.Library is empty.
const LibraryEnv = "SYMPHONY_ONNXRUNTIME_LIB"

// Config configures the executor.
type Config struct {
	// Library is the path of libonnxruntime.so (default: DefaultLibrary).
	Library string
	// Repository is the model repository: Repository/<model>/<version>/model.onnx,
	// the highest numbered version served.
	Repository string
	// IntraOpThreads and InterOpThreads are each session's thread pools
	// (0: ONNX Runtime's default, one per core).
	IntraOpThreads, InterOpThreads int
}

// ErrNotBuilt is New's error in a build without cgo.
var ErrNotBuilt = errors.New("onnx: this binary was built without cgo, so without the ONNX Runtime executor (build with CGO_ENABLED=1)")

// Timing is the executor's account of its batches, per model name.
type Timing struct {
	Batches  uint64
	Requests uint64
	// Busy is the time spent in session calls, concatenation and split
	// included.
	Busy time.Duration
}

// RuntimeVersion is the ONNX Runtime release the executor is built for
// (github.com/yalue/onnxruntime_go v1.27.0 speaks its C API), and
// FetchedLibrary where make onnxruntime puts its library, relative to the
// repository's root.
const (
	RuntimeVersion = "1.24.1"
	FetchedLibrary = ".cache/onnxruntime-" + RuntimeVersion + "/libonnxruntime.so.1"
)

// DefaultLibrary is the library to use when none is configured:
// $SYMPHONY_ONNXRUNTIME_LIB, else the one make onnxruntime fetched into
// the current directory or one of its parents (a checkout of Symphony),
// else "".
func DefaultLibrary() string {
	if p := os.Getenv(LibraryEnv); p != "" {
		return p
	}
	dir, err := os.Getwd()
	for err == nil {
		p := filepath.Join(dir, FetchedLibrary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// libraryPath is the library the configuration names, checked to exist,
// so that a missing library fails with what to do rather than a dlopen
// error.
func (c Config) libraryPath() (string, error) {
	p := c.Library
	if p == "" {
		p = DefaultLibrary()
	}
	if p == "" {
		return "", fmt.Errorf("onnx: no ONNX Runtime library: give its path (--onnxruntime-lib or %s); make onnxruntime fetches it into %s", LibraryEnv, FetchedLibrary)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		return "", fmt.Errorf("onnx: ONNX Runtime library %s: not a file (make onnxruntime fetches it into .cache/)", p)
	}
	return p, nil
}

// ModelFile is the file the repository serves for model name: the
// highest numbered version directory's model.onnx (serving.ModelFile,
// the rule the scheduler reads the model's tensors by).
func ModelFile(repo, name string) (string, error) {
	p, err := serving.ModelFile(repo, name)
	if err != nil {
		return "", fmt.Errorf("onnx: %w", err)
	}
	return p, nil
}
