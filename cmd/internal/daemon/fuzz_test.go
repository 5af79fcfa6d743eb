package daemon

import (
	"flag"
	"io"
	"testing"
)

// FuzzParseConfig: any bytes as a config file give flag values or an
// error, never a panic, and every value given is for a flag of the command.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", "gpus: 2\n", "backend:\n  gpus: 3\n  load-model: [a, b]\n", "frontend: {x: 1}\n", "- a\n", "gpus: {a: 1}\n", "a: &x 1\nb: *x\n", "backend: ~\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := flag.NewFlagSet("backend", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		AddFlags(fs, "")
		fs.Int("gpus", 1, "")
		fs.Func("load-model", "", func(string) error { return nil })
		vals, err := parseConfig(data, fs, sections)
		if err != nil {
			return
		}
		for k := range vals {
			if fs.Lookup(k) == nil || notConfigurable[k] {
				t.Fatalf("value for %q, not a configurable flag", k)
			}
		}
	})
}
