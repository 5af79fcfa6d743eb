package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/scheduler/serving"
)

// The harness's commands, and only they, go to symphony-bench.
func TestBenchCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"sim", "-f", "x"}, true},
		{[]string{"demo"}, true},
		{[]string{"profile", "--model", "cnn"}, true},
		{[]string{"experiment", "fig4", "--quick"}, true},
		{[]string{"bench", "slowclients"}, true},
		{[]string{"partition", "experiment"}, true},
		{[]string{"partition", "-f", "m.yaml"}, false},
		{[]string{"plan", "experiment"}, false},
		{[]string{"scheduler"}, false},
		{nil, false},
	} {
		if got := benchCommand(tc.args); got != tc.want {
			t.Errorf("benchCommand(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// With no symphony-bench beside it or on PATH, a bench command says how to
// build it and exits 2.
func TestExecBenchMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	// findBench looks beside the running binary, the test binary here; one
	// found there would be exec'd in place of the test.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(self), benchBinary)); err == nil {
		t.Skip("a symphony-bench sits beside the test binary")
	}
	var stderr strings.Builder
	if code := execBench([]string{"demo"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "make build") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

// The scheduler's default configuration is the one documented in
// testdata/serving/demo.yaml.
func TestDefaultServingIsTheDocumentedOne(t *testing.T) {
	def, err := loadServing("")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := serving.ParseFile("../../testdata/serving/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(def.Models, doc.Models) || def.Settings != doc.Settings {
		t.Fatalf("the embedded default differs from testdata/serving/demo.yaml")
	}
}

// The command's old name still runs it, saying so.
func TestPlanIsProvision(t *testing.T) {
	code, stdout, stderr := runCLI(t, "plan", "-f", trafficApp, "--json")
	if code != 0 || !strings.Contains(stderr, "symphony plan is now symphony provision") || !strings.Contains(stdout, `"cost_per_hour"`) {
		t.Fatalf("exit %d, stderr %q, stdout %.200q", code, stderr, stdout)
	}
}

// The scheduler serves a repository's profiled models, with a file's
// settings and models when both are given.
func TestWithRepository(t *testing.T) {
	c, err := withRepository("", "../../testdata/models")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 2 || c.Models[0].Name != "cnn" || c.Models[1].Name != "mlp" {
		t.Fatalf("models %+v", c.Models)
	}
	repoModels := c.Models
	c, err = withRepository("../../testdata/serving/demo.yaml", "../../testdata/models")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := serving.ParseFile("../../testdata/serving/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := append(doc.Models, repoModels...); !reflect.DeepEqual(c.Models, want) || c.Settings != doc.Settings {
		t.Fatalf("with demo.yaml: %d models, settings %+v; want demo.yaml's %d then the repository's %d, with its settings",
			len(c.Models), c.Settings, len(doc.Models), len(repoModels))
	}
}
