package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each kind of error maps to its exit status, with the message users see.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{fmt.Errorf("%w: %w", ErrUsage, ErrReported), 2, ""},
		{UsageErr("--x %d out of range", 3), 2, "prog cmd: --x 3 out of range\n"},
		{fmt.Errorf("stopped: %w", context.Canceled), 130, "prog cmd: stopped: context canceled\n"},
		{errors.New("boom"), 1, "prog cmd: boom\n"},
	} {
		var b strings.Builder
		if code := ExitStatus("prog", "cmd", tc.err, &b); code != tc.code || b.String() != tc.msg {
			t.Errorf("%v: exit %d, %q; want %d, %q", tc.err, code, b.String(), tc.code, tc.msg)
		}
	}
}

// A command's synopsis is its own lines of the usage text, not a longer
// command's that starts with the same word.
func TestSynopsis(t *testing.T) {
	usage := "Usage:\n  p sim -f W\n      Simulate.\n  p sim lookahead -f W\n      Look ahead.\n  p demo\n"
	if got := Synopsis("p", usage, "sim"); got != "  p sim -f W\n      Simulate.\n" {
		t.Errorf("sim: %q", got)
	}
	if got := Synopsis("p", usage, "sim lookahead"); got != "  p sim lookahead -f W\n      Look ahead.\n" {
		t.Errorf("sim lookahead: %q", got)
	}
	if got := Synopsis("p", usage, "bench"); got != "" {
		t.Errorf("bench: %q", got)
	}
}

// WriteFile creates the file's folder first.
func TestWriteFileMakesItsFolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "out.csv")
	if err := WriteFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "x,y\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "x,y\n" {
		t.Fatalf("%q, %v", b, err)
	}
}

func TestRound(t *testing.T) {
	if got := Round(1.23456, 2); got != 1.23 {
		t.Errorf("Round(1.23456, 2) = %v", got)
	}
	if got := Round(2.5, 0); got != 3 {
		t.Errorf("Round(2.5, 0) = %v", got)
	}
}

// WriteJSON indents, ends with a newline, and leaves <, > and & as they are.
func TestWriteJSON(t *testing.T) {
	var b strings.Builder
	if err := WriteJSON(&b, map[string]any{"reason": "idle > 10% & <x>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"n\": 1,\n  \"reason\": \"idle > 10% & <x>\"\n}\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
