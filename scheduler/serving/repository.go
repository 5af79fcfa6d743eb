package serving

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// A model repository is a folder with one folder per model, in the spirit
// of Triton's: REPO/<model>/config.yaml says how the model is served, and
// REPO/<model>/<version>/model.onnx is what the backends run (the highest
// version). A model's config.yaml holds:
//
//	slo: 50ms                          # required
//	max_batch: 32                      # the largest batch to profile and serve (default 32)
//	input_size: 256                    # bytes of one request's input
//	memory: {static: 10MiB, dynamic: 1MiB}
//	profile: {alpha: 20us, beta: 200us, max_batch: 32}   # written by symphony profile
//	inputs:  [{name: x, datatype: FP32, dims: [1, 8, 8]}]  # optional: what model.onnx declares
//	outputs: [{name: y, datatype: FP32, dims: [3]}]
//
// A model is served only once it has a profile.
//
// A model's tensors (Model.Inputs and Outputs) are read from its
// model.onnx: each graph input and output, whose first dimension must be
// the dynamic batch and is dropped, the others fixed. config.yaml may list
// them too, with dims as one sample's shape, as documentation that is
// checked: they must then be the file's, in its order. input_size defaults
// to the inputs' bytes and, if given, must equal them. A model without a
// version folder (only a config.yaml) has the tensors its config lists, or
// none: its requests are opaque bytes.

// RepoConfigKeys are the keys of a model's config.yaml.
var RepoConfigKeys = []string{"slo", "max_batch", "input_size", "memory", "profile", "inputs", "outputs"}

// DefaultRepoMaxBatch is a repository model's max_batch when its config
// gives none.
const DefaultRepoMaxBatch = 32

// RepoModel is one model of a repository as its config.yaml describes it.
type RepoModel struct {
	// Model is the served model; its Profile is the zero Profile until the
	// model is profiled.
	Model
	// MaxBatch is the largest batch to profile and serve.
	MaxBatch int
	// Config is the config.yaml's path.
	Config string
	// File is the model.onnx the tensors were read from, "" for a model
	// without one.
	File string
}

// Profiled reports whether the model has a profile, which serving needs.
func (m *RepoModel) Profiled() bool { return m.Profile.Valid() }

// ReadRepoModel reads REPO/name/config.yaml.
func ReadRepoModel(repo, name string) (*RepoModel, error) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		return nil, fmt.Errorf("serving: model name %q cannot name a repository folder", name)
	}
	if err := strictyaml.CheckName(name, MaxNameLen); err != nil {
		return nil, fmt.Errorf("serving: repository model %q: name %v", name, err)
	}
	path := filepath.Join(repo, name, "config.yaml")
	data, err := strictyaml.ReadFile(path, MaxFileSize, "serving", "a model config")
	if err != nil {
		return nil, err
	}
	root, err := strictyaml.Decode(data, path, MaxFileSize, "empty model config (want at least slo)")
	if err != nil {
		return nil, err
	}
	r := &strictyaml.Reader{Source: path, Work: maxWork}
	d := NewDecoder(r)
	m, err := r.Mapping(root, "", "a model config {slo, max_batch, input_size, memory, profile, inputs, outputs}", RepoConfigKeys)
	if err != nil {
		return nil, err
	}
	rm := &RepoModel{Model: Model{Name: name}, MaxBatch: DefaultRepoMaxBatch, Config: path}
	v, err := r.Required(m, "slo", " (a duration such as 50ms)")
	if err != nil {
		return nil, err
	}
	if rm.SLO, err = r.PosDuration(v, "slo"); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("max_batch"); ok {
		if rm.MaxBatch, err = r.IntIn(v, "max_batch", 1, 1<<16); err != nil {
			return nil, err
		}
	}
	if err := d.sizes(m, &rm.Model); err != nil {
		return nil, err
	}
	if err := readTensors(r, m, repo, rm); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("profile"); ok {
		var spec *profile.ModelSpec
		if rm.Profile, spec, err = d.profile(v, "profile"); err != nil {
			return nil, err
		}
		if spec != nil {
			return nil, r.ErrAt(v, "profile", "a repository model's profile is its own measurement (symphony profile), not a zoo's")
		}
		if least := rm.LeastLatency(DefaultNetwork()); rm.SLO <= least {
			return nil, r.ErrAt(m.Get("slo"), "slo", "%v is not longer than a batch of one takes with the default network delays (%v)", rm.SLO, least)
		}
	}
	return rm, nil
}

// ParseRepository reads every model of the repository: the folders with a
// config.yaml, in name order. Every model must be profiled.
func ParseRepository(repo string) (*Config, error) {
	entries, err := os.ReadDir(repo)
	if err != nil {
		return nil, fmt.Errorf("serving: model repository: %w", err)
	}
	c := &Config{Source: repo, Settings: DefaultSettings()}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(repo, e.Name(), "config.yaml")); errors.Is(err, os.ErrNotExist) {
			continue
		}
		rm, err := ReadRepoModel(repo, e.Name())
		if err != nil {
			return nil, err
		}
		if !rm.Profiled() {
			return nil, fmt.Errorf("serving: %s has no profile: measure it with symphony profile --model-repo %s --model %s", rm.Config, repo, rm.Name)
		}
		c.Models = append(c.Models, rm.Model)
	}
	if len(c.Models) == 0 {
		return nil, fmt.Errorf("serving: model repository %s has no model (REPO/<model>/config.yaml)", repo)
	}
	slices.SortFunc(c.Models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	return c, c.Validate()
}

// WriteProfile sets the profile in a model's config.yaml, keeping its
// other keys and their comments: a linear profile as {alpha, beta,
// max_batch}, any other as its batch_latency table.
func WriteProfile(configPath string, p profile.Profile, linear *profile.Fit) error {
	data, err := strictyaml.ReadFile(configPath, MaxFileSize, "serving", "a model config")
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("serving: %s: %w", configPath, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("serving: %s: not a mapping", configPath)
	}
	root := doc.Content[0]
	val := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	add := func(k, v string) {
		val.Content = append(val.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &yaml.Node{Kind: yaml.ScalarNode, Value: v})
	}
	if linear != nil {
		add("alpha", linear.Alpha.String())
		add("beta", linear.Beta.String())
		add("max_batch", fmt.Sprint(p.MaxBatch()))
	} else {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for b := 1; b <= p.MaxBatch(); b++ {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: p.Latency(b).Round(10 * time.Nanosecond).String()})
		}
		val.Content = append(val.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "batch_latency"}, seq)
	}
	replaced := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "profile" {
			root.Content[i+1], replaced = val, true
		}
	}
	if !replaced {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "profile"}, val)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("serving: %s: %w", configPath, err)
	}
	return os.WriteFile(configPath, b.Bytes(), 0o644)
}
