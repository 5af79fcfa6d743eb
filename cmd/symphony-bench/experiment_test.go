package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExperimentList(t *testing.T) {
	code, out, stderr := runCLI(t, "experiment", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"table4", "fig4", "fig6", "fig7", "fig8", "fig9", "fig10", "fig11", "fig13", "fig14", "fig15"} {
		if !strings.Contains(out, "\n"+name+" ") && !strings.HasPrefix(out, name+" ") {
			t.Errorf("experiment list does not name %s:\n%s", name, out)
		}
	}
}

func TestExperimentUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"experiment"},
		{"experiment", "fig5"},
		{"experiment", "fig4", "--check", "a", "--record", "b"},
		{"experiment", "fig4", "extra"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage): %s", args, code, stderr)
		}
	}
}

// TestExperimentRecordThenCheck: --record writes the quick figures, --check
// passes against them and fails, with exit 1 and the figure named, once a
// recorded figure is edited.
func TestExperimentRecordThenCheck(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	if code, _, stderr := runCLI(t, "experiment", "table4", "--quick", "--quiet", "--out", out, "--record", dir); code != 0 {
		t.Fatalf("record: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"table4.csv", "table4.json", "table4.svg", "table4.png"} {
		if _, err := os.Stat(filepath.Join(out, "table4", f)); err != nil {
			t.Errorf("the run wrote no %s: %v", f, err)
		}
	}
	if code, _, stderr := runCLI(t, "experiment", "table4", "--quick", "--quiet", "--out", "", "--check", dir); code != 0 {
		t.Fatalf("check against its own recording: exit %d: %s", code, stderr)
	}
	path := filepath.Join(dir, "quick", "table4.csv")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "InceptionResNetV2,nexus,", "InceptionResNetV2,nexus,1", 1)
	if edited == string(b) {
		t.Fatalf("no InceptionResNetV2 nexus row in\n%s", b)
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "experiment", "table4", "--quick", "--quiet", "--out", "", "--check", dir)
	if code != 1 || !strings.Contains(stderr, "InceptionResNetV2 nexus") || !strings.Contains(stderr, "goodput_rps") {
		t.Errorf("check against an edited figure: exit %d, stderr:\n%s\nwant exit 1 naming the figure", code, stderr)
	}
}
