// These tests of partition/plan's workload export live here, as an
// external test of bench/workload, because they check the export against
// the workload parser and partition's own tests may not import bench/
// (bench imports partition, never the other way round).
package workload_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/plan"
)

// TestWriteWorkload: the exported workload parses with the workload
// parser, serves every GPU module as a model whose SLO is its budget and
// whose rate is its rate, and rents the plan's machines.
func TestWriteWorkload(t *testing.T) {
	af, err := plan.ParseAppFile("../../testdata/apps/traffic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Solve(af.App, af.Options)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := plan.WriteWorkload(&buf, af.App, p); err != nil {
		t.Fatal(err)
	}
	w, err := workload.Parse(buf.Bytes(), "exported.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "CPU modules left out: [decode]") {
		t.Errorf("no note on the CPU module:\n%s", buf.String())
	}
	got := map[string]workload.Model{}
	for _, m := range w.Models {
		got[m.Name] = m
	}
	gpuMachines := map[string]float64{}
	for i, mp := range p.Modules {
		if af.App.Modules[i].Kind == plan.CPU {
			if _, ok := got[mp.Name]; ok {
				t.Errorf("CPU module %s exported as a model", mp.Name)
			}
			continue
		}
		m, ok := got[mp.Name]
		if !ok {
			t.Fatalf("module %s missing from the workload", mp.Name)
		}
		if m.SLO != mp.Budget {
			t.Errorf("%s: SLO %v, budget %v", mp.Name, m.SLO, mp.Budget)
		}
		if len(m.Rates) != 1 || m.Rates[0].Rate != mp.Rate {
			t.Errorf("%s: rates %+v, want %v", mp.Name, m.Rates, mp.Rate)
		}
		if !m.Profile.Valid() || m.Profile.Latency(1) <= 0 {
			t.Errorf("%s: profile %+v", mp.Name, m.Profile)
		}
		for _, c := range mp.Configs {
			gpuMachines[c.Hardware] += c.Machines
		}
	}
	for _, g := range w.Cluster.GPUTypes {
		if need := gpuMachines[g.Name]; float64(g.Count) < need || float64(g.Count) >= need+1 {
			t.Errorf("%s: %d GPUs for %v machines", g.Name, g.Count, need)
		}
	}
	if len(w.Cluster.GPUTypes) == 0 {
		t.Error("no GPU types")
	}
}

// TestWriteWorkloadTooManyMachines: a plan with more machines than a
// workload file's cluster may hold used to be written anyway, as a file
// that the workload parser refuses.
func TestWriteWorkloadTooManyMachines(t *testing.T) {
	app := &plan.App{SLO: 10 * time.Second, Hardware: []plan.Hardware{{Name: "g", PricePerHour: 1}},
		Modules: []plan.Module{{Name: "a", Ingress: 3e7, Profiles: []plan.Profile{{Hardware: "g",
			Points: []plan.Point{{Batch: 1, Concurrency: 1, Latency: 100 * time.Millisecond}, {Batch: 8, Concurrency: 1, Latency: 300 * time.Millisecond}}}}}}}
	p, err := plan.Solve(app, plan.Default())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = plan.WriteWorkload(&buf, app, p)
	if err == nil {
		if _, perr := workload.Parse(buf.Bytes(), "exported.yaml"); perr != nil {
			t.Fatalf("exported a workload that does not parse: %v", perr)
		}
		t.Fatal("exported 1125000 machines")
	}
	if !strings.Contains(err.Error(), "more than") {
		t.Fatalf("error %v", err)
	}
}
