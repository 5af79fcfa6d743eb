package serving

import (
	"slices"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// MaxFileSize is the largest file Parse accepts, in bytes: a real
// configuration is a few kilobytes even with hundreds of models, and the
// limit keeps a mistaken input from exhausting memory in the YAML parser.
const MaxFileSize = 16 << 20

// maxWork bounds the YAML nodes a parse visits, aliases counted each time
// they are followed.
const maxWork = 20_000_000

// The keys a workload file (docs/workload-format.md) adds to a serving
// configuration: the load offered to the models and the harness's own
// settings. Parse skips them, so that the file a benchmark ran can
// configure the scheduler that serves it; bench/workload reads them (its
// TestLoadKeysAreRead checks that it reads every one).
var (
	// LoadTopKeys are the workload's keys of the root mapping.
	LoadTopKeys = []string{"seed", "duration", "warmup", "cluster", "nexus_frontends", "autoscale_window", "epoch", "faults"}
	// LoadModelKeys are the workload's keys of a models entry.
	LoadModelKeys = []string{"rate", "rates", "rate_trace", "daily_rate", "arrival", "priority_mix", "gpu_type", "concurrency", "stream", "stream_batch"}
	// LoadZooKeys are the workload's keys of a zoo mapping.
	LoadZooKeys = []string{"total_rate", "total_rates", "popularity", "arrival"}
)

// Error is a problem at one place in a file: its message names the file,
// the line and the field.
type Error = strictyaml.Error

// ParseFile reads and parses the serving configuration at path.
func ParseFile(path string) (*Config, error) {
	data, err := strictyaml.ReadFile(path, MaxFileSize, "serving", "a serving configuration")
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse parses a serving configuration: its models (a models list, zoos,
// or both) and settings, with defaults (DefaultSettings) for the keys it
// leaves out. A workload file parses too: its load keys are listed in
// Config.Ignored. Every error is an *Error naming the file, the line and
// the field, except Validate's own.
func Parse(data []byte, source string) (*Config, error) {
	name := source
	if name == "" {
		name = "serving configuration"
	}
	root, err := strictyaml.Decode(data, name, MaxFileSize, "empty file (want a YAML mapping with models or zoo)")
	if err != nil {
		return nil, err
	}
	r := &strictyaml.Reader{Source: name, Work: maxWork}
	d := NewDecoder(r)
	top, err := r.Mapping(root, "", "a mapping of serving fields (models, zoo, network, policy, ...)", slices.Concat(TopKeys, LoadTopKeys))
	if err != nil {
		return nil, err
	}
	c := &Config{Source: source, Settings: DefaultSettings()}
	if err := d.Settings(top, &c.Settings); err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	note := func(m *strictyaml.Map, keys []string) {
		for _, k := range keys {
			if m.Has(k) {
				ignored[k] = true
			}
		}
	}
	note(top, LoadTopKeys)
	if v, ok := top.Lookup("models"); ok {
		err := d.Models(v, "models", LoadModelKeys, func(m *strictyaml.Map, md Model) error {
			note(m, LoadModelKeys)
			c.Models = append(c.Models, md)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if v, ok := top.Lookup("zoo"); ok {
		err := d.Zoos(v, "zoo", LoadZooKeys, func(m *strictyaml.Map, models []Model) error {
			note(m, LoadZooKeys)
			c.Models = append(c.Models, models...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(c.Models) == 0 {
		return nil, r.ErrAt(top.Node, "models", "no models: give a models list or a zoo")
	}
	for k := range ignored {
		c.Ignored = append(c.Ignored, k)
	}
	slices.Sort(c.Ignored)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
