// Command tracegen writes the bundled request-rate traces (see package
// tracegen) and their README into a directory:
//
//	go run ./bench/workload/tracegen/cmd/tracegen -out testdata/traces
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/symphony-serving/symphony/bench/workload/tracegen"
)

func main() {
	out := flag.String("out", "testdata/traces", "directory to write the traces into (created if missing)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "tracegen: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "tracegen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := tracegen.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}
