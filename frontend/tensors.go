package frontend

import (
	"context"
	"fmt"

	"github.com/symphony-serving/symphony/tensor"
)

// Tensor is one named tensor of a request or a result (package tensor):
// its datatype, its shape and its raw little-endian bytes. Build one with
// FP32Tensor, INT64Tensor or tensor.Of, and read one with its FP32 and
// INT64 methods or tensor.Values.
type Tensor = tensor.Tensor

// FP32Tensor is an FP32 tensor of the given name and shape holding values.
func FP32Tensor(name string, shape []int64, values []float32) Tensor {
	return tensor.Of(name, shape, values)
}

// INT64Tensor is an INT64 tensor of the given name and shape holding values.
func INT64Tensor(name string, shape []int64, values []int64) Tensor {
	return tensor.Of(name, shape, values)
}

// InferTensors runs one request of named tensors for a model whose
// tensors the scheduler announced (ModelInfo.Inputs), and returns the
// model's named outputs. It checks the inputs against the model before the
// request leaves: an input missing, unknown or given twice, of the wrong
// datatype or shape (one sample's, with or without a leading batch
// dimension of 1), or whose bytes are not what its shape needs, is an
// error that wraps tensor.ErrMissing, ErrUnknown, ErrDatatype, ErrShape or
// ErrSize and names the tensor. The outputs have the inputs' convention:
// a leading batch dimension of 1 if the inputs had one. Their Data alias
// one result buffer. Otherwise it is Infer, with Infer's errors.
func (c *Client) InferTensors(ctx context.Context, model string, inputs []Tensor, opts ...CallOption) ([]Tensor, error) {
	info, ok := c.Model(model)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	if info.Inputs == nil {
		return nil, fmt.Errorf("frontend: model %q declares no tensors (its requests are opaque bytes): use Infer", model)
	}
	data, batched, err := tensor.Pack(info.Inputs, inputs)
	if err != nil {
		return nil, fmt.Errorf("frontend: model %q: %w", model, err)
	}
	out, err := c.Infer(ctx, model, data, opts...)
	if err != nil {
		return nil, err
	}
	res, err := tensor.Split(info.Outputs, out, batched)
	if err != nil {
		return nil, fmt.Errorf("frontend: model %q: the backend's %w", model, err)
	}
	return res, nil
}
