package serving

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/symphony-serving/symphony/scheduler/profile"
)

func writeConfig(t *testing.T, repo, model, text string) string {
	t.Helper()
	dir := filepath.Join(repo, model)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A model is served once profiled: before, the repository names the
// command that profiles it; after WriteProfile, its config keeps its
// other keys and comments and serves the profile written.
func TestRepositoryProfileCycle(t *testing.T) {
	repo := t.TempDir()
	cfg := writeConfig(t, repo, "cnn", "# the test CNN\nslo: 50ms   # end to end\nmax_batch: 8\ninput_size: 256\n")
	if _, err := ParseRepository(repo); err == nil || !strings.Contains(err.Error(), "symphony profile --model-repo") {
		t.Fatalf("unprofiled: %v", err)
	}
	rm, err := ReadRepoModel(repo, "cnn")
	if err != nil || rm.Profiled() || rm.MaxBatch != 8 || rm.InputBytes != 256 || rm.SLO != 50*time.Millisecond {
		t.Fatalf("ReadRepoModel = %+v, %v", rm, err)
	}
	lin, fit, err := profile.FromMeasured([]time.Duration{300 * time.Microsecond, 400 * time.Microsecond}, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteProfile(cfg, lin, &fit); err != nil {
		t.Fatal(err)
	}
	c, err := ParseRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 1 || c.Models[0].Name != "cnn" || c.Models[0].Profile.Latency(2) != 400*time.Microsecond {
		t.Fatalf("models %+v", c.Models)
	}
	text, _ := os.ReadFile(cfg)
	for _, want := range []string{"# the test CNN", "# end to end", "profile: {alpha: 100µs, beta: 200µs, max_batch: 2}"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("config lacks %q:\n%s", want, text)
		}
	}
	// A table replaces the line.
	tab, err := profile.Table([]time.Duration{time.Millisecond, 3 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteProfile(cfg, tab, nil); err != nil {
		t.Fatal(err)
	}
	rm, err = ReadRepoModel(repo, "cnn")
	if err != nil || rm.Profile.Latency(2) != 3*time.Millisecond {
		t.Fatalf("after the table: %+v, %v", rm, err)
	}
}

// Bad configs are refused with the file, line and field.
func TestRepositoryErrors(t *testing.T) {
	repo := t.TempDir()
	writeConfig(t, repo, "a", "slo: 50ms\nmax_bach: 8\n")
	if _, err := ReadRepoModel(repo, "a"); err == nil || !strings.Contains(err.Error(), `did you mean "max_batch"`) {
		t.Errorf("typo: %v", err)
	}
	writeConfig(t, repo, "b", "max_batch: 8\n")
	if _, err := ReadRepoModel(repo, "b"); err == nil || !strings.Contains(err.Error(), "slo") {
		t.Errorf("no slo: %v", err)
	}
	writeConfig(t, repo, "c", "slo: 50ms\nprofile: zoo:1080ti/ResNet50\n")
	if _, err := ReadRepoModel(repo, "c"); err == nil || !strings.Contains(err.Error(), "its own measurement") {
		t.Errorf("zoo profile: %v", err)
	}
	for _, name := range []string{"..", "a/b", ""} {
		if _, err := ReadRepoModel(repo, name); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if _, err := ParseRepository(filepath.Join(repo, "none")); err == nil {
		t.Error("a missing repository accepted")
	}
}
