package onnxmodel

import (
	"errors"
	"fmt"

	"github.com/symphony-serving/symphony/tensor"
)

// Specs are a signature's inputs and outputs as one request sees them:
// each value's leading dimension, which must be dynamic, is the batch that
// Symphony forms, and is dropped; every other dimension must be fixed. A
// model that breaks that (a fixed batch, a dynamic image size, a string or
// sequence value) is refused with the value and the reason, since Symphony
// batches requests of one fixed size.
func (s *Signature) Specs() (inputs, outputs []tensor.Spec, err error) {
	if len(s.Inputs) == 0 || len(s.Outputs) == 0 {
		return nil, nil, fmt.Errorf("the graph has %d inputs (initializers aside) and %d outputs; a served model needs at least one of each", len(s.Inputs), len(s.Outputs))
	}
	if inputs, err = specs("input", s.Inputs); err != nil {
		return nil, nil, err
	}
	if outputs, err = specs("output", s.Outputs); err != nil {
		return nil, nil, err
	}
	return inputs, outputs, nil
}

func specs(what string, vals []Value) ([]tensor.Spec, error) {
	if len(vals) > tensor.MaxTensors {
		return nil, fmt.Errorf("%d %ss, over %d", len(vals), what, tensor.MaxTensors)
	}
	out := make([]tensor.Spec, 0, len(vals))
	for _, v := range vals {
		sp, err := spec(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, v.Name, err)
		}
		out = append(out, sp)
	}
	if err := tensor.ValidateSpecs(what, out); err != nil {
		return nil, err
	}
	return out, nil
}

func spec(v Value) (tensor.Spec, error) {
	switch {
	case !v.Tensor:
		return tensor.Spec{}, errors.New("not a tensor (a sequence, map, optional or sparse value)")
	case v.Shape == nil:
		return tensor.Spec{}, errors.New("the file gives no shape")
	case len(v.Shape) == 0 || v.Shape[0] >= 0:
		return tensor.Spec{}, fmt.Errorf("shape %v: the first dimension must be the batch, and dynamic", v.Shape)
	}
	dt, err := tensor.FromONNX(v.ElemType)
	if err != nil {
		return tensor.Spec{}, err
	}
	shape := append([]int64{}, v.Shape[1:]...)
	for _, d := range shape {
		if d < 0 {
			return tensor.Spec{}, fmt.Errorf("shape %v: only the batch (first) dimension may be dynamic", v.Shape)
		}
	}
	return tensor.Spec{Name: v.Name, Datatype: dt, Shape: shape}, nil
}
