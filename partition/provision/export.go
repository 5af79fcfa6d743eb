package provision

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/symphony-serving/symphony/partition/strictyaml"
)

// maxWorkloadGPUs is the workload file's limit on the machines of its
// cluster, all GPU types together (bench/workload's maxGPUs).
const maxWorkloadGPUs = 1 << 20

// ExportOptions tune WriteWorkload.
type ExportOptions struct {
	// Arrival is the exported models' arrival process: "const" (the
	// default) or "poisson". The planners' worst case, d + b/w, is the time
	// to collect a batch at a steady rate w (frames of a video stream, as
	// Scrooge and Harpagon plan for): a plan may fill a machine to the
	// last request, which steady arrivals keep up with and Poisson ones do
	// not.
	Arrival string
}

// exportModel is one model of an exported workload: a module's
// configurations on one hardware kind at one concurrency.
type exportModel struct {
	name        string
	latency     []time.Duration // ℓ(b) for b = 1..len
	hw          string
	concurrency int
	stream      string // the module's, when it runs as several models
	streamBatch int
	slo         time.Duration
	rate        float64
	configs     []int
}

// WriteWorkload writes p as a Symphony workload file
// (docs/workload-format.md, "Workload file") that the simulator serves as
// the provision runs. Each module's configurations on one hardware kind at
// one concurrency become one model: its SLO is the module's budget, its
// rate the configurations' real rate (dummies left out: Symphony's
// scheduler batches what arrives), its profile the module's points there
// as a table up to the plan's largest batch (stepProfile), its gpu_type the
// hardware and its concurrency the configurations'. A module on one such group keeps its name; otherwise each
// group is named module.hardware (and .cN when one hardware has several
// concurrencies). A CPU module's model is no different: its profile is
// one batch of 1, so the scheduler dispatches each request alone, up to
// the concurrency at once, on the CPU machines it names as a gpu_type.
// The cluster rents every instance Pack packs the provision onto, at its
// price, so that the simulator bills what the plan rents.
func WriteWorkload(w io.Writer, app *App, p *Provision, o ExportOptions) error {
	switch o.Arrival {
	case "":
		o.Arrival = "const"
	case "const", "poisson":
	default:
		return fmt.Errorf("provision: export arrival %q: want const or poisson", o.Arrival)
	}
	if err := Verify(app, p); err != nil {
		return fmt.Errorf("provision: not exporting an invalid provision: %w", err)
	}
	pk := Pack(app, p)
	var models []exportModel
	for i, mp := range p.Modules {
		mod := app.Modules[i]
		first := len(models)
		for ci, c := range mp.Configs {
			at := slices.IndexFunc(models[first:], func(m exportModel) bool { return m.hw == c.Hardware && m.concurrency == c.Concurrency })
			if at < 0 {
				models = append(models, exportModel{hw: c.Hardware, concurrency: c.Concurrency, slo: mp.Budget})
				at = len(models) - first - 1
			}
			m := &models[first+at]
			m.rate += c.Rate - c.DummyRate
			m.configs = append(m.configs, ci)
		}
		group := models[first:]
		for k := range group {
			m := &group[k]
			var pts []Point
			for _, pr := range mod.Profiles {
				if pr.Hardware == m.hw {
					for _, pt := range pr.Points {
						if pt.Concurrency == m.concurrency {
							pts = append(pts, pt)
						}
					}
				}
			}
			// Batches no larger than the plan's: a larger one runs longer
			// than any the budget was split for.
			planned := 0
			for _, ci := range m.configs {
				planned = max(planned, mp.Configs[ci].Batch)
			}
			m.latency = stepProfile(pts, planned)
			m.name = mod.Name
			if len(group) > 1 {
				// One stream of the module's requests, dispatched to its
				// models a batch at a time, as the plan's batch-aware
				// dispatch sends them to its configurations' machines.
				m.stream, m.streamBatch = mod.Name, planned
				m.name += "." + m.hw
				if slices.ContainsFunc(group, func(o exportModel) bool { return o.hw == m.hw && o.concurrency != m.concurrency }) {
					m.name += fmt.Sprintf(".c%d", m.concurrency)
				}
			}
		}
	}
	if machines := len(pk.Instances); machines > maxWorkloadGPUs {
		return fmt.Errorf("provision: the provision uses %d machines, more than the %d a workload file's cluster may have", machines, maxWorkloadGPUs)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Symphony workload exported by `symphony provision` (planner %s): each model is a module's\n", p.Planner)
	fmt.Fprintf(bw, "# configurations on one hardware kind at one concurrency; its SLO is the module's latency\n")
	fmt.Fprintf(bw, "# budget within the end-to-end SLO of %v, its profile the module's points there as a\n", p.SLO)
	fmt.Fprintf(bw, "# table up to the plan's batch. Arrivals are %s.\n", map[string]string{"const": "steady, as the planners' d + b/w assumes", "poisson": "Poisson"}[o.Arrival])
	fmt.Fprintf(bw, "# The provision costs %s per hour with partial machines charged by occupancy; packed onto\n", strconv.FormatFloat(p.CostPerHour, 'f', 4, 64))
	fmt.Fprintf(bw, "# whole instances (best fit) it rents these for %s per hour (a CPU\n", strconv.FormatFloat(pk.CostPerHour, 'f', 4, 64))
	bw.WriteString("# machine is a gpu_type too, whose models run batches of 1). Instances:\n")
	for _, in := range pk.Instances {
		fmt.Fprintf(bw, "#   %s:", in.Hardware)
		for _, sh := range in.Shares {
			fmt.Fprintf(bw, " %s[%d] %s", sh.Module, sh.Config, strconv.FormatFloat(sh.Fraction, 'f', 3, 64))
		}
		bw.WriteString("\n")
	}
	bw.WriteString("seed: 1\nduration: 30s\nwarmup: 5s\ncluster:\n  gpu_types:\n")
	for _, h := range app.Hardware {
		n := 0
		for _, in := range pk.Instances {
			if in.Hardware == h.Name {
				n++
			}
		}
		if n == 0 {
			continue
		}
		fmt.Fprintf(bw, "    - {name: %s, count: %d, price_per_hour: %s", h.Name, n, strconv.FormatFloat(h.PricePerHour, 'g', -1, 64))
		if h.Memory > 0 {
			fmt.Fprintf(bw, ", memory: %s", strictyaml.FormatSize(h.Memory))
		}
		bw.WriteString("}\n")
	}
	bw.WriteString("models:\n")
	for _, m := range models {
		fmt.Fprintf(bw, "  - name: %s\n", m.name)
		bw.WriteString("    profile: {batch_latency: [")
		for b, l := range m.latency {
			if b > 0 {
				bw.WriteString(", ")
			}
			bw.WriteString(l.String())
		}
		bw.WriteString("]}\n")
		fmt.Fprintf(bw, "    gpu_type: %s\n", m.hw)
		if m.concurrency > 1 {
			fmt.Fprintf(bw, "    concurrency: %d\n", m.concurrency)
		}
		fmt.Fprintf(bw, "    slo: %v\n", m.slo)
		fmt.Fprintf(bw, "    rate: %s\n", strconv.FormatFloat(m.rate, 'g', -1, 64))
		fmt.Fprintf(bw, "    arrival: %s\n", o.Arrival)
		if m.stream != "" {
			fmt.Fprintf(bw, "    stream: %s\n    stream_batch: %d\n", m.stream, m.streamBatch)
		}
	}
	bw.WriteString("policy: symphony\n")
	return bw.Flush()
}

// stepProfile is ℓ(b) for b = 1..upTo (at least the smallest point's
// batch) from a module's points at one hardware and concurrency: each
// batch takes what the smallest measured batch at least as large takes
// (the largest point beyond the last). It is exact at every measured batch
// and, latency growing with the batch, never below the truth between
// them: the scheduler never expects a batch to end sooner than it does.
func stepProfile(pts []Point, upTo int) []time.Duration {
	pts = slices.Clone(pts)
	slices.SortFunc(pts, func(a, b Point) int { return cmp.Or(cmp.Compare(a.Batch, b.Batch), cmp.Compare(b.Latency, a.Latency)) })
	out := make([]time.Duration, max(upTo, 1))
	k := 0
	for b := range out {
		for k < len(pts)-1 && pts[k].Batch < b+1 {
			k++
		}
		out[b] = pts[k].Latency
		if b > 0 {
			out[b] = max(out[b], out[b-1])
		}
	}
	return out
}
