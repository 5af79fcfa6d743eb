package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/symphony-serving/symphony/bench/report"
	"github.com/symphony-serving/symphony/bench/slowclient"
	"github.com/symphony-serving/symphony/cmd/internal/cli"
)

// runBenchSlowClients is `symphony bench slowclients`: many connections to
// a running KServe gateway that announce bodies and never send them, send
// their headers a byte at a time, or sit idle, and how long the gateway
// keeps them and what memory they cost it.
func runBenchSlowClients(args []string, stdout, stderr io.Writer) error {
	def := slowclient.Default()
	fs := flag.NewFlagSet("bench slowclients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	gatewayURL := fs.String("gateway", "", "the gateway's `URL` (http://HOST:PORT; required)")
	pid := fs.Int("pid", 0, "the gateway process's `PID`, to read its RSS from /proc (default: memory not measured)")
	modes := fs.String("modes", "body,header,idle", "what the connections do, run in turn: body (announce --body-bytes, send one byte), header (a header byte every --interval), idle (one GET, then silence)")
	conns := fs.Int("conns", def.Conns, "connections per mode")
	bodyBytes := fs.Int64("body-bytes", def.BodyBytes, "Content-Length the body connections announce")
	interval := fs.Duration("interval", def.Interval, "how often a header connection sends a byte")
	wait := fs.Duration("wait", def.Wait, "longest to wait for the gateway to close a mode's connections; those still open are counted")
	asJSON := fs.Bool("json", false, "print the results as JSON on stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	u, err := url.Parse(*gatewayURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return cli.UsageErr("--gateway %q: want an http://HOST:PORT URL", *gatewayURL)
	}
	o := def
	o.Addr, o.Conns, o.BodyBytes, o.Interval, o.Wait = u.Host, *conns, *bodyBytes, *interval, *wait
	if *pid > 0 {
		o.Memory = slowclient.ProcessRSS(*pid)
	}
	var list []slowclient.Mode
	for m := range strings.SplitSeq(*modes, ",") {
		o.Mode = slowclient.Mode(strings.TrimSpace(m))
		if err := o.Validate(); err != nil {
			return cli.UsageErr("%v", err)
		}
		list = append(list, o.Mode)
	}
	ctx, stop := cli.SignalContext()
	defer stop()
	log := cli.NewLogger(stderr, *asJSON)
	var results []*slowclient.Result
	for _, m := range list {
		o.Mode = m
		log.Info().Str("mode", string(m)).Int("conns", o.Conns).Str("gateway", o.Addr).Msg("opening")
		r, err := slowclient.Run(ctx, o)
		if err != nil {
			return err
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	if *asJSON {
		if err := report.EncodeJSON(stdout, results); err != nil {
			return err
		}
	} else {
		writeSlowClients(stdout, o, *pid, results)
	}
	return ctx.Err()
}

// writeSlowClients prints one line per mode.
func writeSlowClients(w io.Writer, o slowclient.Options, pid int, results []*slowclient.Result) {
	fmt.Fprintf(w, "slow clients against %s: %d connections per mode, bodies of %d bytes announced, a header byte every %v\n",
		o.Addr, o.Conns, o.BodyBytes, o.Interval)
	fmt.Fprintf(w, "%-7s %7s %7s %9s %28s %14s %12s", "mode", "opened", "closed", "open", "lifetime min/median/max", "all closed in", "answers")
	if pid > 0 {
		fmt.Fprintf(w, " %14s %14s %14s", "RSS before", "peak", "after")
	}
	fmt.Fprintln(w)
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	for _, r := range results {
		life := "-"
		if r.Closed > 0 {
			life = sec(r.LifetimeMin) + "/" + sec(r.LifetimeMedian) + "/" + sec(r.LifetimeMax)
		}
		all := "-"
		if r.AllClosedIn > 0 {
			all = sec(r.AllClosedIn)
		}
		fmt.Fprintf(w, "%-7s %7d %7d %9d %28s %14s %12s", r.Mode, r.Opened, r.Closed, r.StillOpen, life, all, answers(r.Statuses))
		if pid > 0 {
			fmt.Fprintf(w, " %14s %14s %14s", mib(r.MemBefore), mib(r.MemPeak), mib(r.MemAfter))
		}
		fmt.Fprintln(w)
		if r.DialErrors > 0 {
			fmt.Fprintf(w, "        %d connections could not be opened: %s\n", r.DialErrors, r.DialError)
		}
	}
}

// answers is "408×1000" for the statuses a mode's connections got.
func answers(statuses map[int]int) string {
	if len(statuses) == 0 {
		return "none"
	}
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d×%d", c, statuses[c])
	}
	return strings.Join(parts, " ")
}
