// Package cli is the command-line plumbing the symphony and symphony-bench
// binaries share: how a command parses its flags and reports usage errors,
// the exit status an error maps to, loggers, the flags and network of a
// process, and output files. It holds no command's logic: commands call
// libraries.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/tcp"
)

// ErrUsage marks errors that are the caller's: exit status 2.
var ErrUsage = errors.New("usage")

// ErrReported marks an error already shown to the user.
var ErrReported = errors.New("see above")

// UsageErr is a usage error (ErrUsage) with a message.
func UsageErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}

// ExitStatus reports err, the result of the command cmd of the program
// prog, on stderr as the program's users expect, and returns the exit
// status: 0 for success or -h, 2 for a usage error, 130 for a stop by
// SIGINT or SIGTERM (the shell's 128 + SIGINT), 1 otherwise.
func ExitStatus(prog, cmd string, err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrReported):
		return 2
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd, strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd, err)
		return 130
	default:
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, cmd, err)
		return 1
	}
}

// ParseFlags parses a subcommand's flags; a bad flag is a usage error
// (exit 2), and the flag package has already printed it with the flag
// list, under the command's synopsis from the program's usage text.
func ParseFlags(fs *flag.FlagSet, args []string, prog, usage string) error {
	fs.Usage = func() {
		out := fs.Output()
		if syn := Synopsis(prog, usage, fs.Name()); syn != "" {
			fmt.Fprintf(out, "Usage:\n%s\nFlags:\n", syn)
		} else {
			fmt.Fprintf(out, "Usage of %s %s:\n", prog, fs.Name())
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrUsage, ErrReported)
	}
	return nil
}

// Synopsis is the part of a program's usage text about command name
// ("sim", "bench scheduler", ...): its usage lines and the description
// under them.
func Synopsis(prog, usage, name string) string {
	prefix := "  " + prog + " " + name
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  "+prog+" "):
			rest, ok := strings.CutPrefix(line, prefix)
			// "sim" must not take "sim lookahead": what follows the name is
			// a flag or an argument, not another word.
			in = ok && (rest == "" || strings.IndexAny(rest[:min(2, len(rest))], "-[(") == 1)
		case !strings.HasPrefix(line, "   "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// FlagSet reports whether the named flag was given on the command line.
func FlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// NewLogger returns a command's logger: human-readable lines on stderr,
// progress at info level, silent with quiet.
func NewLogger(stderr io.Writer, quiet bool) zerolog.Logger {
	level := zerolog.InfoLevel
	if quiet {
		level = zerolog.WarnLevel
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}).Level(level)
}

// ProcessLogger logs at info level for long-running processes (joins,
// leaves, failures), debug with verbose, with timestamps.
func ProcessLogger(stderr io.Writer, verbose bool) zerolog.Logger {
	level := zerolog.InfoLevel
	if verbose {
		level = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: stderr, NoColor: true}).Level(level).With().Timestamp().Logger()
}

// ProcessName is name, or ROLE-PID when none was given.
func ProcessName(name, role string) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%s-%d", role, os.Getpid())
}

// SignalContext is canceled on SIGINT or SIGTERM, so that processes stop
// cleanly: queued requests end with a shutdown drop, not silently.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// DataPathFlags are --data-path and --rdma-device, of every command that
// runs a backend or a frontend.
type DataPathFlags struct {
	mode   rdma.Mode
	device *string
}

// AddDataPathFlags adds --data-path and --rdma-device to fs.
func AddDataPathFlags(fs *flag.FlagSet) *DataPathFlags {
	d := &DataPathFlags{}
	fs.TextVar(&d.mode, "data-path", rdma.ModeAuto, "how backends read inputs from frontends: `auto` (RDMA READs where both sides have an RDMA device and a binary built with -tags rdma, else TCP; logs which), rdma (required: no start without it) or tcp")
	d.device = fs.String("rdma-device", "", "the RDMA device to use, as ibv_devices lists it (default: the first with an active port)")
	return d
}

// Config is the data path the flags ask for.
func (d *DataPathFlags) Config() rdma.Config {
	c := rdma.DefaultConfig()
	c.Mode, c.Device.Name = d.mode, *d.device
	return c
}

// Mode is the --data-path the flags ask for.
func (d *DataPathFlags) Mode() rdma.Mode { return d.mode }

// Device is the --rdma-device the flags ask for.
func (d *DataPathFlags) Device() string { return *d.device }

// NewNetwork is a process's TCP network, logging to log.
func NewNetwork(log zerolog.Logger) *tcp.Network {
	o := tcp.Default()
	o.Log = log
	return tcp.New(o)
}

// ExperimentReport is what the experiment commands (partition experiment,
// provision experiment, sim lookahead, the live sweeps) print and save.
type ExperimentReport interface {
	WriteText(io.Writer) error
	WriteJSON(io.Writer) error
	WriteCSV(io.Writer) error
}

// WriteExperiment saves rep as CSV at csvPath and its charts into plotDir
// (each if asked; plot nil: the report has none), then prints it on stdout
// as JSON or text.
func WriteExperiment(stdout io.Writer, rep ExperimentReport, asJSON bool, csvPath, plotDir string,
	plot func(dir string) ([]string, error), log zerolog.Logger) error {
	if csvPath != "" {
		if err := WriteFile(csvPath, rep.WriteCSV); err != nil {
			return err
		}
	}
	if plotDir != "" && plot != nil {
		paths, err := plot(plotDir)
		if err != nil {
			return err
		}
		log.Info().Strs("files", paths).Msg("charts written")
	}
	if asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout)
}

// WriteJSON writes v as a command's --json output: indented by two
// spaces, followed by a newline, with <, > and & left as they are so that a
// reason such as "idle > 10%" reads as in the text output. It is
// bench/report.EncodeJSON for the commands of the symphony binary, which
// may not import bench/.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteFile writes an output file (--csv and the like) through write,
// creating its folder first, so that a long run never ends in "no such file
// or directory" after the work is done.
func WriteFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Round rounds v to digits decimals, for figures in logs and reports.
func Round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}
