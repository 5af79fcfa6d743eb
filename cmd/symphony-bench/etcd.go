package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/symphony-serving/symphony/cmd/internal/cli"
	"github.com/symphony-serving/symphony/partition/registry/etcdembed"
)

// runEtcd is `symphony-bench etcd`: a single-member etcd in this process
// (partition/registry/etcdembed), for trying the live control plane's
// processes on one machine (bench/scripts/live-processes.sh) where no etcd
// is installed. Production runs an etcd cluster of its own.
func runEtcd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:2379", "client `ADDR` (host:port)")
	dir := fs.String("data-dir", "", "data `DIR` (default: a temporary directory, removed on exit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	d := *dir
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("", "symphony-etcd-"); err != nil {
			return err
		}
		defer os.RemoveAll(d)
	}
	srv, err := etcdembed.Start(etcdembed.Config{Dir: d, ClientAddr: *listen})
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(stdout, "etcd serving on %s (data in %s); stop with SIGTERM\n", srv.Endpoint, d)
	ctx, stop := cli.SignalContext()
	defer stop()
	<-ctx.Done()
	return nil
}
