package workload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxTraceRows is the most rows a rate trace may hold: 10 million seconds is
// almost four months, far beyond any run, and the cap keeps a wrong file
// from filling memory. It counts rows, so it bounds a per-minute trace too.
const MaxTraceRows = 10_000_000

// maxTraceLine bounds one line of a rate trace; a real row is a few bytes.
const maxTraceLine = 64 << 10

// ParseRateTrace reads a rate trace in CSV form, as recorded from a
// production service, so that a workload can replay it. By default each row
// is one second: either one column (the rate) or two (second,rate), where the
// seconds must be consecutive integers starting at 0 or 1 so that a missing
// row cannot silently shift the rest of the trace. A first line whose fields
// are not numbers is a header and skipped; blank lines and lines starting
// with # are ignored. Rates must be finite and not negative.
//
// A header whose first column is "minute" (minute,rate) makes each row one
// minute instead: every row then has both columns, and the minutes follow
// the same rule as seconds (consecutive, starting at 0 or 1). A day is then
// 1440 rows rather than 86400.
//
// Each row becomes a RatePhase of one second (one minute under a minute
// header); as with every rate schedule, the last phase holds its rate until
// the end of the run. Errors are *Error values naming source and the line.
func ParseRateTrace(r io.Reader, source string) ([]RatePhase, error) {
	if source == "" {
		source = "trace"
	}
	fail := func(line int, format string, args ...any) error {
		return &Error{Source: source, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxTraceLine)
	var (
		out      []RatePhase
		line     int
		cols     int  // columns of the first data row; 0 before it
		seenAny  bool // a non-blank line was seen (the header slot is used)
		lastSec  float64
		fields   []string
		colNames = [...]string{"second", "rate"}
		step     = time.Second // the span of one row
	)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields = splitFields(fields[:0], text)
		if !seenAny {
			seenAny = true
			if isHeader(fields) {
				if strings.EqualFold(fields[0], "minute") {
					step, colNames[0], cols = time.Minute, "minute", 2
				}
				continue
			}
		}
		switch {
		case len(fields) > 2:
			return nil, fail(line, "%d columns; want rate, or second,rate", len(fields))
		case len(fields) != cols && step == time.Minute:
			return nil, fail(line, "1 column under a minute header; want minute,rate")
		case cols == 0:
			cols = len(fields)
		case len(fields) != cols:
			return nil, fail(line, "%d columns, but earlier rows have %d", len(fields), cols)
		}
		for i, f := range fields {
			if f == "" {
				return nil, fail(line, "empty %s column", colNames[2-cols+i])
			}
		}
		if cols == 2 {
			unit := colNames[0]
			sec, err := strconv.ParseFloat(fields[0], 64)
			if err != nil || math.IsNaN(sec) || math.IsInf(sec, 0) || sec != math.Trunc(sec) {
				return nil, fail(line, "%s %q is not an integer", unit, fields[0])
			}
			switch {
			case len(out) == 0 && sec != 0 && sec != 1:
				return nil, fail(line, "first %s is %g; %ss must start at 0 or 1", unit, sec, unit)
			case len(out) > 0 && sec != lastSec+1:
				return nil, fail(line, "%s %g follows %s %g; %ss must be consecutive (no gaps, no repeats)", unit, sec, unit, lastSec, unit)
			}
			lastSec = sec
		}
		rs := fields[cols-1]
		rate, err := strconv.ParseFloat(rs, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return nil, fail(line, "rate %q is not a number", rs)
		case err != nil || math.IsNaN(rate) || math.IsInf(rate, 0):
			return nil, fail(line, "rate %q is not a finite number", rs)
		case rate < 0:
			return nil, fail(line, "rate %g is negative", rate)
		}
		if len(out) >= MaxTraceRows {
			return nil, fail(line, "more than %d rows", MaxTraceRows)
		}
		out = append(out, RatePhase{Duration: step, Rate: rate})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fail(line+1, "line longer than %d bytes", maxTraceLine)
		}
		return nil, &Error{Source: source, Line: line, Msg: "read error: " + err.Error(), Err: err}
	}
	if len(out) == 0 {
		return nil, fail(0, "no rates (want one rate per line, or second,rate)")
	}
	return out, nil
}

// splitFields splits a CSV row on commas and trims each field. Rates never
// need quoting, so quotes are not interpreted.
func splitFields(dst []string, s string) []string {
	for {
		f, rest, more := strings.Cut(s, ",")
		dst = append(dst, strings.TrimSpace(f))
		if !more {
			return dst
		}
		s = rest
	}
}

// isHeader reports whether no field of a row is a number.
func isHeader(fields []string) bool {
	for _, f := range fields {
		if _, err := strconv.ParseFloat(f, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			return false
		}
	}
	return true
}
