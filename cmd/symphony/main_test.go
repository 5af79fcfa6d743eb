package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// Each command's -h starts with its own lines of the top-level usage,
// then its flags.
func TestCommandHelpHasItsSynopsis(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"scheduler", "-h"}, "symphony scheduler [-f CONFIG]", "symphony frontend"},
		{[]string{"partition", "-h"}, "symphony partition -f MODELFILE", "experiment"},
		{[]string{"provision", "experiment", "-h"}, "symphony provision experiment [--instances N]", "APPFILE"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 0 || !strings.HasPrefix(stderr, "Usage:\n  "+tc.want) || !strings.Contains(stderr, "Flags:\n") || strings.Contains(stderr, tc.not) {
			t.Errorf("%v: exit %d, help:\n%s", tc.args, code, stderr)
		}
	}
}

// A taken metrics port fails the scheduler's start, naming the flag.
func TestSchedulerMetricsAddrTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr := runCLI(t, "scheduler", "--addr", "127.0.0.1:0", "--metrics-addr", ln.Addr().String())
	if code == 0 || !strings.Contains(stderr, "--metrics-addr") {
		t.Fatalf("exit %d, stderr %q; want a failure naming --metrics-addr", code, stderr)
	}
}

// The pinning and tail flags refuse what they cannot do, before anything
// starts, naming the flag.
func TestPinningAndTailFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backend", "--executor-cpus", "1,2", "--gpus", "1"}, "give one per GPU"},
		{[]string{"backend", "--executor-cpus", "3-1"}, "runs backwards"},
		{[]string{"backend", "--executor-cpus", "x"}, "not a CPU number"},
		{[]string{"backend", "--executor", "onnx", "--model-repo", t.TempDir(), "--executor-cpus", "0"}, "--intra-op-threads 1"},
		{[]string{"scheduler", "--tail-quantile", "1.5"}, "--tail-quantile"},
		{[]string{"scheduler", "--tail-quantile", "-0.5"}, "--tail-quantile"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, stderr, tc.want)
		}
	}
}
