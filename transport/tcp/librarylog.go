package tcp

import (
	"bytes"
	"io"
	"regexp"
	"sync/atomic"

	"github.com/cloudwego/netpoll"
	"github.com/rs/zerolog"
)

// LibraryLog receives netpoll's own log lines and writes each to the
// logger set last (SetLogger) as a warning, or, before any is set, as it
// came to Fallback. netpoll reports a few connection events (a peer that
// resets a connection while it is read, say) through the standard log
// package as plain text, which breaks a process's --log-format json, whose
// every stderr line must be a JSON record.
type LibraryLog struct {
	// Fallback takes the lines while no logger is set.
	Fallback io.Writer
	log      atomic.Pointer[zerolog.Logger]
}

// SetLogger makes log the destination of the lines from now on. It may be
// called at any time, from any goroutine.
func (l *LibraryLog) SetLogger(log zerolog.Logger) { l.log.Store(&log) }

// RouteLibraryLog points netpoll's logger at l. netpoll's logger is a
// variable of the whole process that its goroutines read unguarded, so a
// program calls this once, first thing in main, before any connection
// exists; later loggers reach l through SetLogger.
func RouteLibraryLog(l *LibraryLog) error {
	// LoadBalance -1 leaves netpoll's balancing as it is; the other zero
	// fields leave theirs.
	return netpoll.Configure(netpoll.Config{LoggerOutput: l, LoadBalance: -1})
}

// stdLogStamp is the standard logger's LstdFlags prefix.
var stdLogStamp = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `)

// Write takes what the standard logger writes: one or more lines.
func (l *LibraryLog) Write(p []byte) (int, error) {
	log := l.log.Load()
	if log == nil {
		if l.Fallback == nil {
			return len(p), nil
		}
		return l.Fallback.Write(p)
	}
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		line = stdLogStamp.ReplaceAll(line, nil)
		if len(line) > 0 {
			log.Warn().Str("library", "netpoll").Msg(string(line))
		}
	}
	return len(p), nil
}
