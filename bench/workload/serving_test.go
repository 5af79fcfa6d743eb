package workload

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/scheduler/serving"
)

// A workload file read as a serving configuration (what `symphony
// scheduler -f` does) serves exactly what the workload's own parse says it
// serves: the same models, profiles, SLOs, sizes and settings.
func TestServingPartOfEveryWorkload(t *testing.T) {
	files, err := filepath.Glob("../../testdata/workloads/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workload files: %v", err)
	}
	faults, _ := filepath.Glob("../../testdata/faults/*.yaml")
	for _, f := range append(files, faults...) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			w, err := ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := serving.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := w.Serving()
			if !reflect.DeepEqual(c.Settings, want.Settings) {
				t.Errorf("settings %+v, the workload's %+v", c.Settings, want.Settings)
			}
			if len(c.Models) != len(want.Models) {
				t.Fatalf("%d models, the workload's %d", len(c.Models), len(want.Models))
			}
			for i := range c.Models {
				if !reflect.DeepEqual(c.Models[i], want.Models[i]) {
					t.Errorf("model %d: %+v, the workload's %+v", i, c.Models[i], want.Models[i])
				}
			}
			if len(c.Ignored) == 0 {
				t.Error("no load keys ignored in a workload file")
			}
		})
	}
}

// Every load key serving.Parse skips is one this parser reads: given a bad
// value, each is refused here by name, so no key is skipped by the one
// parser and left unread by the other. (This parser's keys are the
// serving configuration's plus these lists, by construction.)
func TestLoadKeysAreRead(t *testing.T) {
	const base = "cluster: {gpus: 1}\nmodels:\n  - {name: m, profile: {alpha: 1ms, beta: 1ms}, slo: 50ms, %s}\nzoo: {profiles: 1080ti, select: [VGG16], %s}\n%s"
	bad := func(k string) string { return k + ": [nope]" }
	for _, k := range serving.LoadTopKeys {
		file := fmt.Sprintf(base, "rate: 1", "total_rate: 1", bad(k)+"\n")
		if k == "cluster" {
			file = strings.Replace(file, "cluster: {gpus: 1}\n", "", 1) + "\n"
		}
		if _, err := Parse([]byte(file), "t.yaml"); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("top key %s: error %v", k, err)
		}
	}
	for _, k := range serving.LoadModelKeys {
		rate := "rate: 1, "
		if slices.Contains([]string{"rate", "rates", "rate_trace", "daily_rate"}, k) {
			rate = ""
		}
		if _, err := Parse([]byte(fmt.Sprintf(base, rate+bad(k), "total_rate: 1", "")), "t.yaml"); err == nil || !strings.Contains(err.Error(), "models[0]."+k) {
			t.Errorf("model key %s: error %v", k, err)
		}
	}
	for _, k := range serving.LoadZooKeys {
		rate := "total_rate: 1, "
		if k == "total_rate" || k == "total_rates" {
			rate = ""
		}
		if _, err := Parse([]byte(fmt.Sprintf(base, "rate: 1", rate+bad(k), "")), "t.yaml"); err == nil || !strings.Contains(err.Error(), "zoo."+k) {
			t.Errorf("zoo key %s: error %v", k, err)
		}
	}
}
