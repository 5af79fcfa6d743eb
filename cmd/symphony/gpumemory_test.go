package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// --gpu-memory takes sizes as the other byte flags do, refuses what it
// cannot mean, and reads back from --print-config in bytes.
func TestBackendGPUMemoryFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backend", "--gpu-memory", "-1"}, "--gpu-memory must not be negative"},
		{[]string{"backend", "--gpu-memory", "12GB"}, "unknown unit"},
		{[]string{"backend", "--gpu-memory", "lots"}, "-gpu-memory"},
		{[]string{"backend", "--executor", "onnx", "--model-repo", t.TempDir(), "--gpu-memory", "16GiB"}, "--gpu-memory is the emulated executor's"},
	} {
		if code, _, stderr := runCLI(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	code, stdout, stderr := runCLI(t, "backend", "--gpu-memory", "16GiB", "--print-config")
	if code != 0 || !strings.Contains(stdout, "gpu-memory: 17179869184") {
		t.Errorf("--print-config: exit %d, stderr %q:\n%s", code, stderr, stdout)
	}
}

// From the command line: the scheduler announces the serving file's
// memory, and an emulated backend whose GPU is too small for the models
// it is given refuses them, naming the model, while one whose GPU holds
// them (2GiB + 1GiB static, 512MiB the largest dynamic) registers.
func TestBackendGPUMemoryRefusesModels(t *testing.T) {
	serving := filepath.Join(t.TempDir(), "serving.yaml")
	const yaml = `policy: work-conserving
models:
  - {name: a, profile: {alpha: 100us, beta: 1ms}, slo: 1s, memory: {static: 2GiB, dynamic: 512MiB}}
  - {name: b, profile: {alpha: 100us, beta: 1ms}, slo: 1s, memory: {static: 1GiB, dynamic: 256MiB}}
`
	if err := os.WriteFile(serving, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const start = 30 * time.Second
	sched := startLiveCmd(t, "scheduler", "scheduler", "-f", serving, "--addr", "127.0.0.1:0", "--insecure", "--pprof-addr", "")
	addr := sched.waitLine(t, sched.stdout, regexp.MustCompile(`^scheduler listening on (\S+) `), start)[1]

	small := startLiveCmd(t, "small backend", "backend", "--scheduler", addr, "--name", "small", "--gpu-memory", "3GiB", "--insecure", "--pprof-addr", "")
	small.waitLine(t, small.stderr, regexp.MustCompile(`emulated executor: model \\"b\\" needs 1\.25GiB of GPU memory .* over its capacity of 3GiB`), start)
	big := startLiveCmd(t, "big backend", "backend", "--scheduler", addr, "--name", "big", "--gpu-memory", "3.5GiB", "--insecure", "--pprof-addr", "")
	big.waitLine(t, big.stdout, regexp.MustCompile(`^backend big registered 1 GPUs with `), start)
	if m, _ := small.stdout.find(regexp.MustCompile(`registered`)); m != nil {
		t.Errorf("the small backend registered: %q", m)
	}
}
