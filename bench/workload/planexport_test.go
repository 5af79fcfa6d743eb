package workload_test

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/bench/workload"
	"github.com/symphony-serving/symphony/partition/provision"
)

// TestWriteWorkload: the exported workload parses with the workload
// parser; each module, CPU modules too, becomes one model per hardware kind
// and concurrency it runs on, whose SLO is its budget, whose rates add up
// to the module's real rate, pinned to its hardware (a CPU module's model
// runs batches of 1 only); and the cluster rents the instances of the
// provision's packing, no more and no fewer, at the packing's cost.
func TestWriteWorkload(t *testing.T) {
	for _, app := range []string{"traffic", "detect-classify", "harpagon-m3"} {
		af, p, w := exportApp(t, app, provision.ExportOptions{})
		rate := map[string]float64{}
		for _, m := range w.Models {
			module, _, _ := strings.Cut(m.Name, ".")
			rate[module] += m.Rates[0].Rate
			if m.GPUType == "" || m.Arrival.Kind != workload.ArrivalConstant {
				t.Errorf("%s: model %s: gpu_type %q, arrival %v", app, m.Name, m.GPUType, m.Arrival)
			}
			// A module run as several models shares one stream of its
			// requests, dispatched a batch at a time.
			if split := strings.Contains(m.Name, "."); split != (m.Stream == module) || split && m.StreamBatch < 1 {
				t.Errorf("%s: model %s: stream %q, stream_batch %d", app, m.Name, m.Stream, m.StreamBatch)
			}
			var mp *provision.ModuleProvision
			for i := range p.Modules {
				if p.Modules[i].Name == module {
					mp = &p.Modules[i]
				}
			}
			if mp == nil || m.SLO != mp.Budget {
				t.Errorf("%s: model %s has no module, or an SLO other than its budget", app, m.Name)
				continue
			}
			served := false
			for _, c := range mp.Configs {
				served = served || c.Hardware == m.GPUType && max(c.Concurrency, 1) == max(m.Concurrency, 1)
			}
			if !served {
				t.Errorf("%s: model %s on %s at concurrency %d, where no configuration of %s runs", app, m.Name, m.GPUType, m.Concurrency, module)
			}
			if kind := af.App.Modules[slices.IndexFunc(af.App.Modules, func(md provision.Module) bool { return md.Name == module })].Kind; kind == provision.CPU && m.Profile.MaxBatch() != 1 {
				t.Errorf("%s: CPU module %s exported with batches up to %d", app, m.Name, m.Profile.MaxBatch())
			}
		}
		for _, mp := range p.Modules {
			if math.Abs(rate[mp.Name]-mp.Rate) > 1e-9*mp.Rate {
				t.Errorf("%s: module %s: exported rates add up to %v, its rate is %v", app, mp.Name, rate[mp.Name], mp.Rate)
			}
		}
		pk := provision.Pack(af.App, p)
		for _, g := range w.Cluster.GPUTypes {
			if n := pk.Count(g.Name); g.Count != n {
				t.Errorf("%s: %d %s in the cluster, the packing rents %d", app, g.Count, g.Name, n)
			}
		}
		if got := w.Cluster.CostPerHour(); math.Abs(got-pk.CostPerHour) > 1e-9 {
			t.Errorf("%s: the cluster costs %v per hour, the packing %v", app, got, pk.CostPerHour)
		}
	}
}

// exportApp plans testdata/apps/APP.yaml, exports it with o and parses the
// export.
func exportApp(t *testing.T, app string, o provision.ExportOptions) (*provision.AppFile, *provision.Provision, *workload.Workload) {
	t.Helper()
	af, err := provision.ParseAppFile("../../testdata/apps/" + app + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := provision.Solve(af.App, af.Options)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := provision.WriteWorkload(&buf, af.App, p, o); err != nil {
		t.Fatal(err)
	}
	w, err := workload.Parse(buf.Bytes(), "exported.yaml")
	if err != nil {
		t.Fatalf("%s: %v\n%s", app, err, buf.String())
	}
	return af, p, w
}

// TestWriteWorkloadArrival: Poisson on request; anything else refused.
func TestWriteWorkloadArrival(t *testing.T) {
	af, p, w := exportApp(t, "harpagon-m3", provision.ExportOptions{Arrival: "poisson"})
	if w.Models[0].Arrival.Kind != workload.ArrivalPoisson {
		t.Fatalf("poisson export: %+v", w.Models[0].Arrival)
	}
	if err := provision.WriteWorkload(&bytes.Buffer{}, af.App, p, provision.ExportOptions{Arrival: "gamma"}); err == nil {
		t.Error("exported with arrival gamma")
	}
}

func TestWriteWorkloadRefusesInvalid(t *testing.T) {
	af, err := provision.ParseAppFile("../../testdata/apps/harpagon-m3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := provision.Solve(af.App, af.Options)
	if err != nil {
		t.Fatal(err)
	}
	p.Modules[0].Budget /= 10 // no longer met
	var buf bytes.Buffer
	if err := provision.WriteWorkload(&buf, af.App, p, provision.ExportOptions{}); err == nil || buf.Len() != 0 {
		t.Fatalf("exported an invalid provision: %v\n%s", err, buf.String())
	}
}

// TestWriteWorkloadTooManyMachines: a provision with more machines than a
// workload file's cluster may hold used to be written anyway, as a file
// that the workload parser refuses.
func TestWriteWorkloadTooManyMachines(t *testing.T) {
	app := &provision.App{SLO: 10 * time.Second, Hardware: []provision.Hardware{{Name: "g", PricePerHour: 1}},
		Modules: []provision.Module{{Name: "a", Ingress: 3e7, Profiles: []provision.Profile{{Hardware: "g",
			Points: []provision.Point{{Batch: 1, Concurrency: 1, Latency: 100 * time.Millisecond}, {Batch: 8, Concurrency: 1, Latency: 300 * time.Millisecond}}}}}}}
	p, err := provision.Solve(app, provision.Default())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = provision.WriteWorkload(&buf, app, p, provision.ExportOptions{})
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
