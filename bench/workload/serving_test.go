package workload

import (
	"path/filepath"
	"reflect"
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
