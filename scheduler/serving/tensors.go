package serving

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler/serving/onnxmodel"
	"github.com/symphony-serving/symphony/tensor"
)

// ErrNoModelFile is ModelFile's error for a repository model without a
// version folder: a model that only has a config.yaml.
var ErrNoModelFile = errors.New("no version folder (<model>/<n>/model.onnx)")

// ModelFile is the file a repository serves for model name: the highest
// numbered version folder's model.onnx. It is the one place that rule is
// written; the backends that run the file (backend/onnx) call it too.
func ModelFile(repo, name string) (string, error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return "", fmt.Errorf("model name %q cannot name a repository folder", name)
	}
	dir := filepath.Join(repo, name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", name, err)
	}
	var versions []int
	for _, e := range entries {
		if v, err := strconv.Atoi(e.Name()); err == nil && v > 0 && e.IsDir() {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("model %s: %s: %w", name, dir, ErrNoModelFile)
	}
	sort.Ints(versions)
	p := filepath.Join(dir, strconv.Itoa(versions[len(versions)-1]), "model.onnx")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("model %s: %w", name, err)
	}
	return p, nil
}

// tensorKeys are the keys of one tensor of a config.yaml's inputs or
// outputs, after Triton's config.pbtxt.
var tensorKeys = []string{"name", "datatype", "dims"}

// tensorList reads a config.yaml's inputs: or outputs: list.
func tensorList(r *strictyaml.Reader, n *yaml.Node, path, what string) ([]tensor.Spec, error) {
	items, err := r.Seq(n, path, "a list of tensors {name, datatype, dims}")
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, r.ErrAt(n, path, "empty: a model has at least one %s (or leave the key out to take the model file's)", what)
	}
	specs := make([]tensor.Spec, 0, len(items))
	for i, item := range items {
		p := strictyaml.Index(path, i)
		m, err := r.Mapping(item, p, "a tensor {name, datatype, dims}", tensorKeys)
		if err != nil {
			return nil, err
		}
		var s tensor.Spec
		v, err := r.Required(m, "name", "")
		if err != nil {
			return nil, err
		}
		if s.Name, _, err = r.Str(v, m.At("name"), "a tensor name"); err != nil {
			return nil, err
		}
		if v, err = r.Required(m, "datatype", " (FP32, INT64, ...)"); err != nil {
			return nil, err
		}
		if s.Datatype, v, err = r.Str(v, m.At("datatype"), "a KServe datatype such as FP32"); err != nil {
			return nil, err
		}
		if _, ok := tensor.ElemSize(s.Datatype); !ok {
			if err := (tensor.Spec{Name: s.Name, Datatype: s.Datatype}).Validate(); err != nil {
				return nil, r.ErrAt(v, m.At("datatype"), "%v", err)
			}
		}
		if v, err = r.Required(m, "dims", " (one sample's shape, without the batch dimension; [] for a scalar)"); err != nil {
			return nil, err
		}
		dims, err := r.Seq(v, m.At("dims"), "a list of dimensions")
		if err != nil {
			return nil, err
		}
		s.Shape = make([]int64, 0, len(dims))
		for j, dn := range dims {
			d, err := r.IntIn(dn, strictyaml.Index(m.At("dims"), j), -1, tensor.MaxSampleBytes)
			if err != nil {
				return nil, err
			}
			if d <= 0 {
				return nil, r.ErrAt(dn, strictyaml.Index(m.At("dims"), j), "%d: dims are one sample's fixed shape, without the (dynamic) batch dimension", d)
			}
			s.Shape = append(s.Shape, int64(d))
		}
		specs = append(specs, s)
	}
	if err := tensor.ValidateSpecs(what, specs); err != nil {
		return nil, r.ErrAt(n, path, "%v", err)
	}
	return specs, nil
}

// readTensors fills rm's tensors: from its model.onnx, if it has one, and
// from config.yaml's inputs and outputs, which must then agree with the
// file; and defaults its input size to the inputs' bytes.
func readTensors(r *strictyaml.Reader, m *strictyaml.Map, repo string, rm *RepoModel) error {
	var cfgIn, cfgOut []tensor.Spec
	var err error
	if v, ok := m.Lookup("inputs"); ok {
		if cfgIn, err = tensorList(r, v, "inputs", "input"); err != nil {
			return err
		}
	}
	if v, ok := m.Lookup("outputs"); ok {
		if cfgOut, err = tensorList(r, v, "outputs", "output"); err != nil {
			return err
		}
	}
	if m.Has("inputs") != m.Has("outputs") {
		return r.ErrAt(m.Node, "", "gives %s but not %s: give both, or neither to take the model file's", pick(cfgIn != nil, "inputs", "outputs"), pick(cfgIn != nil, "outputs", "inputs"))
	}
	rm.Inputs, rm.Outputs = cfgIn, cfgOut
	path, err := ModelFile(repo, rm.Name)
	switch {
	case errors.Is(err, ErrNoModelFile):
	case err != nil:
		return fmt.Errorf("serving: repository %w", err)
	default:
		sig, err := onnxmodel.ReadFile(path)
		if err != nil {
			return fmt.Errorf("serving: %w", err)
		}
		in, out, err := sig.Specs()
		if err != nil {
			return fmt.Errorf("serving: %s: Symphony cannot serve this model: %w", path, err)
		}
		rm.File = path
		if cfgIn != nil {
			if err := agree(r, m, "inputs", cfgIn, in, path); err != nil {
				return err
			}
			if err := agree(r, m, "outputs", cfgOut, out, path); err != nil {
				return err
			}
		}
		rm.Inputs, rm.Outputs = in, out
	}
	if rm.Inputs == nil {
		return nil
	}
	total := tensor.TotalBytes(rm.Inputs)
	if v, ok := m.Lookup("input_size"); ok && rm.InputBytes != total {
		return r.ErrAt(v, "input_size", "%d bytes, but the inputs %v take %d a request (leave input_size out to take theirs)", rm.InputBytes, rm.Inputs, total)
	}
	rm.InputBytes = total
	return nil
}

// agree checks that config.yaml's tensors (key) are the model file's.
func agree(r *strictyaml.Reader, m *strictyaml.Map, key string, cfg, file []tensor.Spec, path string) error {
	if len(cfg) != len(file) {
		return r.ErrAt(m.Get(key), key, "lists %d tensors, but %s has %d: %v", len(cfg), path, len(file), file)
	}
	for i := range cfg {
		if !cfg[i].Equal(file[i]) {
			return r.ErrAt(m.Get(key), strictyaml.Index(key, i), "%v, but %s says %v (dims without the batch dimension, in the file's order)", cfg[i], path, file[i])
		}
	}
	return nil
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}
