// Package serving is the serving configuration: what a Symphony cluster
// serves (models, their latency profiles, SLOs and input sizes) and how
// (the scheduling policy, the network delays it budgets for, the live
// delay floor, and limits). The scheduler process reads it from a file
// (`symphony scheduler -f FILE`); a workload file (docs/workload-format.md)
// is a serving configuration plus the load offered to it, and the bench
// harness parses its serving part with this package's Decoder, so that
// both read one format with one set of rules.
//
// The format is in docs/serving-config.md.
package serving

import (
	"errors"
	"fmt"
	"time"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
	"github.com/symphony-serving/symphony/tensor"
)

// Model is one served model, as the scheduler knows it. It is the model
// type of the serving layer: the zoo's profile.ModelSpec is reference data
// a Model can be made from, and a workload's model (bench/workload) adds
// the load offered to it.
type Model struct {
	Name    string
	Profile profile.Profile
	SLO     time.Duration
	// StaticMemory and DynamicMemory are bytes (0 when not given): what the
	// epoch job's placement packs GPUs by.
	StaticMemory  int64
	DynamicMemory int64
	// InputBytes is the size of one request's input (input_size), 0 when
	// not given: the pull of a batch's inputs is budgeted at
	// data_delay_per_mib for each MiB (scheduler.Delays.ForInput).
	InputBytes int64
	// Inputs and Outputs are the model's named tensors, one sample each
	// (the batch dimension left out), when they are known: a repository
	// model's, from its model.onnx. A request's bytes are then its inputs'
	// concatenated in this order (tensor.Pack), InputBytes is their size,
	// and the frontends check requests against them. Both are nil for a
	// model whose requests are opaque bytes (workload files, emulated
	// models).
	Inputs, Outputs []tensor.Spec
}

// LeastLatency is the least time a request to m can take: its input's
// pull, a batch of one and the result's trip under the delays d. An SLO
// not above it can never be met.
func (m *Model) LeastLatency(d scheduler.Delays) time.Duration {
	return d.ForInput(m.InputBytes).Dispatch(1) + m.Profile.Latency(1) + d.Result
}

// Settings is how a cluster serves its models: everything in a serving
// configuration but the models themselves.
type Settings struct {
	Policy scheduler.Policy
	// Schedulable is the symphony policy's schedulable condition and Drop
	// its drop policy; zero values take the policy's defaults.
	Schedulable scheduler.Schedulable
	Drop        scheduler.DropPolicy
	// ScheduleAhead is the clockwork policy's commit window (0: default).
	ScheduleAhead time.Duration
	// Network holds the delays of the network (network:): what the
	// simulator applies exactly and what the live scheduler budgets for,
	// raised to LiveFloor.
	Network scheduler.Delays
	// LiveFloor (live_floor:) is the least the live scheduler budgets for
	// each delay: a real cluster also pays for goroutine hand-offs, timer
	// lateness and a loaded CPU, which a file's network delays do not
	// describe. DefaultLiveFloor is what the 2-core development machine
	// needs.
	LiveFloor scheduler.Delays
	Limits    Limits
}

// Limits bound what the scheduler process takes on (limits:).
type Limits struct {
	// MaxGPUs is the most GPUs the cluster may have at once; a backend
	// whose GPUs would pass it is refused with that reason.
	MaxGPUs int
	// StallAfter is how long a plan may stay overdue, or a backend silent,
	// before its GPUs leave rotation; 0 means the longest SLO (at least
	// 100ms).
	StallAfter time.Duration
	// DrainTimeout is how long a stopping scheduler waits for the plans it
	// sent; 0 means the longest SLO plus half a second, negative not to
	// wait.
	DrainTimeout time.Duration
}

// Config is a whole serving configuration.
type Config struct {
	// Source names where the configuration came from, for messages.
	Source string
	Models []Model
	Settings
	// Ignored lists the keys of a workload file's load (rates, duration,
	// cluster, ...) that Parse skipped: a workload file serves as a
	// serving configuration too.
	Ignored []string
}

// DefaultMaxGPUs is Limits.MaxGPUs's default.
const DefaultMaxGPUs = 1024

// DefaultNetwork returns the network delays of a file without a network
// key: a LAN like the paper's testbed (100us control, 20us per input, 1ms
// per MiB of input, 100us result). A network mapping that leaves a delay
// out sets that delay to 0 instead, so that network: {} means an ideal
// network.
func DefaultNetwork() scheduler.Delays {
	return scheduler.Delays{
		Ctrl:           100 * time.Microsecond,
		DataPerRequest: 20 * time.Microsecond,
		DataPerMiB:     time.Millisecond, // about 1 GiB/s, for models with an input_size
		Result:         100 * time.Microsecond,
	}
}

// DefaultLiveFloor returns the live delay floor of a file without a
// live_floor key: 300us control, 20us per input, 2ms per MiB of input and
// 1.5ms result. They are what the 2-core development machine needs: a
// result's trip there has a tail of about a millisecond (the VM's
// wake-ups, not load), and loopback moves large inputs at well under a
// GB/s while the same cores run everything else (the figures and their
// commands: docs/benchmarks.md, "Table 4 ResNet50, live" and "Large
// inputs").
func DefaultLiveFloor() scheduler.Delays {
	return scheduler.Delays{Ctrl: 300 * time.Microsecond, DataPerRequest: 20 * time.Microsecond, DataPerMiB: 2 * time.Millisecond, Result: 1500 * time.Microsecond}
}

// DefaultSettings returns the settings of a file that gives none: the
// symphony policy with its defaults, DefaultNetwork, DefaultLiveFloor and
// DefaultMaxGPUs.
func DefaultSettings() Settings {
	return Settings{
		Policy:    scheduler.PolicySymphony,
		Network:   DefaultNetwork(),
		LiveFloor: DefaultLiveFloor(),
		Limits:    Limits{MaxGPUs: DefaultMaxGPUs},
	}
}

// LiveDelays are the delays a live scheduler budgets for: each of the
// network's delays raised to at least the live floor.
func (s *Settings) LiveDelays() scheduler.Delays {
	d, f := s.Network, s.LiveFloor
	return scheduler.Delays{Ctrl: max(d.Ctrl, f.Ctrl), DataPerRequest: max(d.DataPerRequest, f.DataPerRequest),
		DataPerMiB: max(d.DataPerMiB, f.DataPerMiB), Result: max(d.Result, f.Result)}
}

// LongestSLO is the longest SLO of the models (0 for none).
func (c *Config) LongestSLO() time.Duration {
	var slo time.Duration
	for i := range c.Models {
		slo = max(slo, c.Models[i].SLO)
	}
	return slo
}

// Validate checks what Parse guarantees, for configurations built in code.
func (c *Config) Validate() error {
	if len(c.Models) == 0 {
		return fmt.Errorf("serving %s: no models", c.Source)
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("serving %s: %w", c.Source, err)
	}
	seen := make(map[string]bool, len(c.Models))
	for i := range c.Models {
		m := &c.Models[i]
		switch {
		case m.Name == "":
			return fmt.Errorf("serving %s: models[%d] has no name", c.Source, i)
		case seen[m.Name]:
			return fmt.Errorf("serving %s: model %q appears twice", c.Source, m.Name)
		case !m.Profile.Valid():
			return fmt.Errorf("serving %s: model %q has no profile", c.Source, m.Name)
		case m.SLO <= 0:
			return fmt.Errorf("serving %s: model %q: slo must be positive", c.Source, m.Name)
		case m.InputBytes < 0 || m.StaticMemory < 0 || m.DynamicMemory < 0:
			return fmt.Errorf("serving %s: model %q: negative size", c.Source, m.Name)
		}
		if err := m.validateTensors(); err != nil {
			return fmt.Errorf("serving %s: model %q: %w", c.Source, m.Name, err)
		}
		seen[m.Name] = true
	}
	return nil
}

// validateTensors checks a model's tensors: none, or valid inputs and
// outputs whose input bytes are InputBytes.
func (m *Model) validateTensors() error {
	if m.Inputs == nil && m.Outputs == nil {
		return nil
	}
	if len(m.Inputs) == 0 || len(m.Outputs) == 0 {
		return fmt.Errorf("%d input and %d output tensors: give both or neither", len(m.Inputs), len(m.Outputs))
	}
	if err := tensor.ValidateSpecs("input", m.Inputs); err != nil {
		return err
	}
	if err := tensor.ValidateSpecs("output", m.Outputs); err != nil {
		return err
	}
	if total := tensor.TotalBytes(m.Inputs); m.InputBytes != total {
		return fmt.Errorf("input size %d is not the %d bytes its input tensors take", m.InputBytes, total)
	}
	return nil
}

// Validate checks the settings.
func (s *Settings) Validate() error {
	if err := s.Network.Validate(); err != nil {
		return err
	}
	if err := s.LiveFloor.Validate(); err != nil {
		return fmt.Errorf("live_floor: %w", err)
	}
	switch {
	case s.ScheduleAhead < 0:
		return errors.New("schedule_ahead must not be negative")
	case s.Limits.MaxGPUs < 1 || s.Limits.MaxGPUs > MaxGPUsLimit:
		return fmt.Errorf("limits.max_gpus %d out of range [1, %d]", s.Limits.MaxGPUs, MaxGPUsLimit)
	case s.Limits.StallAfter < 0:
		return errors.New("limits.stall_after must not be negative")
	}
	return nil
}

// MaxGPUsLimit bounds limits.max_gpus: far above any cluster, low enough
// that per-GPU tables stay small.
const MaxGPUsLimit = 1 << 20

// Demand is a served model and the request rate it must serve: what the
// epoch job sizes and partitions by (partition.SizePart) and what the
// Nexus baseline's epoch planner packs GPUs by, from the rate measured
// over the last epoch.
type Demand struct {
	Model
	// Rate is λ, requests per second.
	Rate float64
}
