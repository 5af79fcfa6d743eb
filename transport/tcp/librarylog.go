package tcp

import (
	"bytes"
	"regexp"

	"github.com/cloudwego/netpoll"
	"github.com/rs/zerolog"
)

// RouteLibraryLog sends netpoll's own log lines to log, one warning each.
// netpoll reports a few connection events (a peer that resets a connection
// while it is being read, say) through the standard log package, as plain
// text on stderr. That breaks a process's --log-format json, whose every
// stderr line must be a JSON record. netpoll's logger is process-wide, so
// a process calls this once, when it makes its logger.
func RouteLibraryLog(log zerolog.Logger) error {
	// LoadBalance -1 leaves netpoll's balancing as it is; the other zero
	// fields leave theirs.
	return netpoll.Configure(netpoll.Config{LoggerOutput: libraryLogWriter{log}, LoadBalance: -1})
}

// libraryLogWriter turns each line the standard logger writes into a log
// record, without the logger's own date and time.
type libraryLogWriter struct{ log zerolog.Logger }

// stdLogStamp is the standard logger's LstdFlags prefix.
var stdLogStamp = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d `)

func (w libraryLogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		line = stdLogStamp.ReplaceAll(line, nil)
		if len(line) > 0 {
			w.log.Warn().Str("library", "netpoll").Msg(string(line))
		}
	}
	return len(p), nil
}
