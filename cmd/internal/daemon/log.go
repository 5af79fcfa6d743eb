package daemon

import (
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
)

// LogFormat is how a process writes its log lines.
type LogFormat int

const (
	// LogConsole is one human-readable line per event.
	LogConsole LogFormat = iota
	// LogJSON is one JSON object per line, for log collectors.
	LogJSON
)

// String is the flag value: console or json.
func (f LogFormat) String() string {
	if f == LogJSON {
		return "json"
	}
	return "console"
}

// MarshalText makes a LogFormat a flag.TextVar.
func (f LogFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText parses console or json.
func (f *LogFormat) UnmarshalText(b []byte) error {
	switch string(b) {
	case "console":
		*f = LogConsole
	case "json":
		*f = LogJSON
	default:
		return fmt.Errorf("%q: want console or json", b)
	}
	return nil
}

// TimeFormat is the timestamp of every log line: RFC 3339 to the
// microsecond, in UTC, as a scheduler's events are a few milliseconds
// apart and log lines from several machines are merged by time.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// timestampHook stamps each event with the time it was logged, formatted
// here rather than through zerolog's process-wide TimeFieldFormat, which
// a library must not change.
type timestampHook struct{ now func() time.Time }

func (h timestampHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, h.now().UTC().Format(TimeFormat))
}

// NewLogger is a long-running process's logger on w: info level (joins,
// leaves, failures), debug with verbose, each line stamped with the full
// time. now is the clock (time.Now outside tests).
func NewLogger(w io.Writer, format LogFormat, verbose bool, now func() time.Time) zerolog.Logger {
	level := zerolog.InfoLevel
	if verbose {
		level = zerolog.DebugLevel
	}
	if format == LogConsole {
		// The console writer reads the stamp back and prints it as given.
		w = zerolog.ConsoleWriter{Out: w, NoColor: true, TimeFormat: TimeFormat, TimeLocation: time.UTC}
	}
	return zerolog.New(w).Level(level).Hook(timestampHook{now})
}
