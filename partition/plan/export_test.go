package plan_test

import (
	"bytes"
	"testing"

	"github.com/symphony-serving/symphony/partition/plan"
)

// The exported workload's checks against bench/workload's parser are in
// bench/workload (plan_export_test.go): partition's tests may not import
// bench/.

func TestWriteWorkloadRefusesInvalid(t *testing.T) {
	af, err := plan.ParseAppFile("../../testdata/apps/harpagon-m3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Solve(af.App, af.Options)
	if err != nil {
		t.Fatal(err)
	}
	p.Modules[0].Budget /= 10 // no longer met
	var buf bytes.Buffer
	if err := plan.WriteWorkload(&buf, af.App, p); err == nil || buf.Len() != 0 {
		t.Fatalf("exported an invalid plan: %v\n%s", err, buf.String())
	}
}
