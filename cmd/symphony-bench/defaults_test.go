package main

import (
	"reflect"
	"testing"

	"github.com/symphony-serving/symphony/scheduler/serving"
)

// `symphony scheduler` with no -f serves what `symphony demo` with no -f
// offers load to: the bundled workload's serving part is the production
// binary's default serving configuration.
func TestDefaultWorkloadServesTheSchedulerDefault(t *testing.T) {
	w, err := loadWorkload("")
	if err != nil {
		t.Fatal(err)
	}
	def, err := serving.ParseFile("../symphony/default-serving.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := w.Serving()
	if !reflect.DeepEqual(got.Models, def.Models) || got.Settings != def.Settings {
		t.Fatalf("the demo's models or settings differ from cmd/symphony/default-serving.yaml:\n%+v\n%+v", got.Settings, def.Settings)
	}
}
