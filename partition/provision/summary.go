package provision

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/symphony-serving/symphony/partition/internal/textout"
)

// Summary is the report of one provision: the output of `symphony provision`, whose
// --json is this struct's JSON, and what a program that provisions a
// deployment can store or print the same way. Unlike a Provision it holds plain
// numbers a reader need not convert (latencies in seconds, rates in
// requests per second, costs per hour) and the context a report needs:
// the file it came from, how long planning took, and the comparison with
// the other planners when one was run.
type Summary struct {
	Source      string          `json:"source"`
	Planner     string          `json:"planner"`
	Options     SummaryOptions  `json:"options"`
	SLO         float64         `json:"slo"`
	CostPerHour float64         `json:"cost_per_hour"`
	Modules     []SummaryModule `json:"modules"`
	Paths       []SummaryPath   `json:"paths"`
	// PathsOmitted reports that the DAG has more paths than listed.
	PathsOmitted bool     `json:"paths_omitted"`
	PlanSeconds  float64  `json:"plan_seconds"`
	Notes        []string `json:"notes"`
	// Compare holds every other planner's cost on the application
	// (Compare), when they were run.
	Compare []Comparison `json:"compare,omitempty"`
	// WorkloadOut names the Symphony workload file written from the provision
	// (WriteWorkload), if one was.
	WorkloadOut string `json:"workload_out,omitempty"`
	// RentedCostPerHour is what the instances the provision packs onto cost
	// (Pack): what a cloud bills, where CostPerHour charges partial
	// machines by occupancy. Instances lists them; both are absent until
	// SetPacking.
	RentedCostPerHour float64           `json:"rented_cost_per_hour,omitempty"`
	Instances         []SummaryInstance `json:"instances,omitempty"`
}

// SummaryInstance is one rented instance of a packing and the modules'
// shares of it.
type SummaryInstance struct {
	Hardware string               `json:"hardware"`
	Shares   []SummaryInstanceUse `json:"shares"`
}

// SummaryInstanceUse is one configuration's share of an instance.
type SummaryInstanceUse struct {
	Module   string  `json:"module"`
	Config   int     `json:"config"`
	Fraction float64 `json:"fraction"`
}

// SetPacking adds the instances the provision rents (Pack) to the summary.
func (o *Summary) SetPacking(pk Packing) {
	o.RentedCostPerHour = pk.CostPerHour
	o.Instances = nil
	for _, in := range pk.Instances {
		si := SummaryInstance{Hardware: in.Hardware}
		for _, sh := range in.Shares {
			si.Shares = append(si.Shares, SummaryInstanceUse(sh))
		}
		o.Instances = append(o.Instances, si)
	}
}

// SummaryOptions are the planner options that shaped the provision, named as
// the application file and the command's flags name them.
type SummaryOptions struct {
	Dispatch   string `json:"dispatch"`
	MaxConfigs int    `json:"max_configs"`
	Dummy      bool   `json:"dummy"`
	Split      string `json:"split"`
}

// SummaryModule is one module's share of the provision: its rates, its latency
// budget and worst case, its cost and its configurations.
type SummaryModule struct {
	Name        string          `json:"name"`
	Kind        string          `json:"kind"`
	Rate        float64         `json:"rate"`
	DummyRate   float64         `json:"dummy_rate"`
	Budget      float64         `json:"budget"`
	WorstCase   float64         `json:"worst_case"`
	CostPerHour float64         `json:"cost_per_hour"`
	Configs     []SummaryConfig `json:"configs"`
}

// SummaryConfig is one configuration of a module (Config), in dispatch
// order.
type SummaryConfig struct {
	Hardware    string  `json:"hardware"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Latency     float64 `json:"latency"`
	Throughput  float64 `json:"throughput"`
	Machines    float64 `json:"machines"`
	Rate        float64 `json:"rate"`
	DummyRate   float64 `json:"dummy_rate"`
	Remaining   float64 `json:"remaining"`
	WorstCase   float64 `json:"worst_case"`
	CostPerHour float64 `json:"cost_per_hour"`
}

// SummaryPath is one source-to-sink path: its worst-case latency against
// the sum of its modules' budgets.
type SummaryPath struct {
	Modules   []string `json:"modules"`
	WorstCase float64  `json:"worst_case"`
	Budget    float64  `json:"budget"`
}

// NewSummary reports p, a provision of the application read from source,
// planned in took.
func NewSummary(source string, p *Provision, took time.Duration) *Summary {
	o := &Summary{
		Source: source, Planner: p.Planner, SLO: p.SLO.Seconds(), CostPerHour: p.CostPerHour,
		Options: SummaryOptions{
			Dispatch: p.Options.Dispatch.String(), MaxConfigs: p.Options.MaxConfigs,
			Dummy: p.Options.Dummy, Split: p.Options.Split.String(),
		},
		Modules: []SummaryModule{}, Paths: []SummaryPath{}, PathsOmitted: p.PathsOmitted,
		PlanSeconds: took.Seconds(), Notes: append([]string{}, p.Notes...),
	}
	for _, m := range p.Modules {
		pm := SummaryModule{Name: m.Name, Kind: m.Kind.String(), Rate: m.Rate, DummyRate: m.DummyRate,
			Budget: m.Budget.Seconds(), WorstCase: m.WorstCase.Seconds(), CostPerHour: m.CostPerHour, Configs: []SummaryConfig{}}
		for _, c := range m.Configs {
			pm.Configs = append(pm.Configs, SummaryConfig{
				Hardware: c.Hardware, Batch: c.Batch, Concurrency: c.Concurrency, Latency: c.Latency.Seconds(),
				Throughput: c.Throughput, Machines: c.Machines, Rate: c.Rate, DummyRate: c.DummyRate,
				Remaining: c.Remaining, WorstCase: c.WorstCase.Seconds(), CostPerHour: c.CostPerHour,
			})
		}
		o.Modules = append(o.Modules, pm)
	}
	for _, path := range p.Paths {
		o.Paths = append(o.Paths, SummaryPath{Modules: path.Modules, WorstCase: path.WorstCase.Seconds(), Budget: path.Budget.Seconds()})
	}
	return o
}

// WriteText writes the summary as `symphony provision` prints it: a header,
// the modules' configurations, the paths, the comparison if there is one,
// and the notes.
func (o *Summary) WriteText(out io.Writer) error {
	return textout.WriteTrimmed(out, o.writeTables)
}

func (o *Summary) writeTables(w io.Writer) error {
	fmt.Fprintf(w, "%s: %d modules, SLO %s\n", filepath.Base(o.Source), len(o.Modules), FormatSeconds(o.SLO))
	fmt.Fprintf(w, "planner:  %s (dispatch %s, max configs %s, dummy %v, split %s), planned in %s\n",
		o.Planner, o.Options.Dispatch, maxConfigsText(o.Options.MaxConfigs), o.Options.Dummy, o.Options.Split, FormatSeconds(o.PlanSeconds))
	fmt.Fprintf(w, "cost:     %.4f per hour", o.CostPerHour)
	if o.RentedCostPerHour > 0 {
		shared := 0
		for _, in := range o.Instances {
			if len(in.Shares) > 1 {
				shared++
			}
		}
		fmt.Fprintf(w, " with partial machines charged by occupancy; rents %.4f per hour: %d instances, %d shared by partial machines (best fit)", o.RentedCostPerHour, len(o.Instances), shared)
	}
	fmt.Fprintf(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "module\trate\tbudget\tworst case\tcost/h\thardware\tbatch\tconc\tmachines\tassigned\tdummy\tw\tworst case\t")
	for _, m := range o.Modules {
		for i, c := range m.Configs {
			head := "\t\t\t\t\t"
			if i == 0 {
				head = fmt.Sprintf("%s\t%.4g\t%s\t%s\t%.4f\t", m.Name, m.Rate, FormatSeconds(m.Budget), FormatSeconds(m.WorstCase), m.CostPerHour)
			}
			fmt.Fprintf(tw, "%s%s\t%d\t%d\t%.4g\t%.4g\t%.4g\t%.4g\t%s\t\n", head, c.Hardware, c.Batch, c.Concurrency,
				c.Machines, c.Rate, c.DummyRate, c.Remaining, FormatSeconds(c.WorstCase))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tworst case\tbudgets\t")
	for _, p := range o.Paths {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", strings.Join(p.Modules, " -> "), FormatSeconds(p.WorstCase), FormatSeconds(p.Budget))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.PathsOmitted {
		fmt.Fprintf(w, "(more paths omitted; the first %d are listed)\n", len(o.Paths))
	}
	if len(o.Compare) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "planner\tcost/h\tover ours\ttime\t")
		fmt.Fprintf(tw, "%s\t%.4f\t\t%s\t\n", o.Planner, o.CostPerHour, FormatSeconds(o.PlanSeconds))
		for _, c := range o.Compare {
			if c.CostPerHour == nil {
				fmt.Fprintf(tw, "%s\t-\t\t\t%s\n", c.Planner, c.Error)
				continue
			}
			fmt.Fprintf(tw, "%s\t%.4f\t%+.1f%%\t%s\t\n", c.Planner, *c.CostPerHour, 100**c.ExtraOverOurs, FormatSeconds(c.PlanSeconds))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if o.WorkloadOut != "" {
		fmt.Fprintf(w, "\nworkload written to %s\n", o.WorkloadOut)
	}
	textout.WriteNotes(w, o.Notes)
	return nil
}

func maxConfigsText(n int) string {
	if n == 0 {
		return "any"
	}
	return strconv.Itoa(n)
}
