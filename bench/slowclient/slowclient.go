// Package slowclient opens many connections to an HTTP server that each
// misbehave in one of the ways that exhaust a server's memory or its
// connections (a body announced and never sent, a header sent a byte at a
// time, a kept-alive connection left idle) and measures how the server
// copes: how long it keeps each connection open, and how much memory it
// takes meanwhile. It is the KServe gateway's slow-client acceptance test
// (`symphony bench slowclients`, and a short version in CI).
package slowclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Mode is one way of misbehaving.
type Mode string

const (
	// ModeBody sends a complete POST header announcing Options.BodyBytes,
	// one byte of the body, then nothing: the server should close the
	// connection at its read timeout, holding little memory meanwhile.
	ModeBody Mode = "body"
	// ModeHeader sends a request line, then one header byte every
	// Options.Interval, never ending the header (slowloris): the server
	// should close it at its header timeout.
	ModeHeader Mode = "header"
	// ModeIdle sends one GET, reads its answer, then keeps the connection
	// open and silent: the server should close it at its idle timeout.
	ModeIdle Mode = "idle"
)

// Modes lists the modes in the order a full run tries them.
var Modes = []Mode{ModeBody, ModeHeader, ModeIdle}

// Options configure one run.
type Options struct {
	// Addr is the server's host:port.
	Addr string
	// Mode is how every connection misbehaves.
	Mode Mode
	// Conns is how many connections to open.
	Conns int
	// BodyPath is the path ModeBody and ModeHeader POST to (one whose
	// handler reads the body); IdlePath the path ModeIdle GETs.
	BodyPath, IdlePath string
	// BodyBytes is the Content-Length ModeBody announces.
	BodyBytes int64
	// Interval is how often ModeHeader sends a header byte.
	Interval time.Duration
	// Wait bounds the run: connections the server has not closed this
	// long after the last was opened are closed by the client and counted
	// as still open.
	Wait time.Duration
	// Memory, if set, reports the server's memory in bytes (its RSS, or
	// the heap of an in-process server); it is read before the
	// connections are opened, every SampleEvery while they are, and after.
	Memory      func() (uint64, error)
	SampleEvery time.Duration
}

// Default returns options for a full run against a KServe gateway: 1000
// connections, 64 MiB announced (the gateway's default body limit), a
// header byte a second, and a minute's wait, several times the gateway's
// default timeouts.
func Default() Options {
	return Options{
		Mode: ModeBody, Conns: 1000, BodyPath: "/v2/models/slowclient/infer", IdlePath: "/v2/health/live",
		BodyBytes: 64 << 20, Interval: time.Second, Wait: time.Minute, SampleEvery: 100 * time.Millisecond,
	}
}

// Validate reports the first option that makes no sense.
func (o Options) Validate() error {
	switch {
	case o.Addr == "":
		return errors.New("slowclient: no server address")
	case !slices.Contains(Modes, o.Mode):
		return fmt.Errorf("slowclient: unknown mode %q (want one of %v)", o.Mode, Modes)
	case o.Conns <= 0:
		return fmt.Errorf("slowclient: %d connections; want at least one", o.Conns)
	case !strings.HasPrefix(o.BodyPath, "/") || !strings.HasPrefix(o.IdlePath, "/"):
		return fmt.Errorf("slowclient: paths %q and %q must start with /", o.BodyPath, o.IdlePath)
	case o.BodyBytes < 2:
		return fmt.Errorf("slowclient: announced body of %d bytes; want at least 2, one sent and one withheld", o.BodyBytes)
	case o.Interval <= 0 || o.Wait <= 0:
		return fmt.Errorf("slowclient: interval %v and wait %v must be positive", o.Interval, o.Wait)
	case o.Memory != nil && o.SampleEvery <= 0:
		return fmt.Errorf("slowclient: memory sampled every %v; want a positive period", o.SampleEvery)
	}
	return nil
}

// Result is what one run measured.
type Result struct {
	Mode Mode `json:"mode"`
	// Opened is the connections opened; DialErrors those that could not
	// be (the first error is in DialError).
	Opened     int    `json:"opened"`
	DialErrors int    `json:"dial_errors"`
	DialError  string `json:"dial_error,omitempty"`
	// OpenedIn is how long opening them took.
	OpenedIn time.Duration `json:"opened_in_ns"`
	// Closed counts the connections the server closed; StillOpen those it
	// had not closed when the wait ran out.
	Closed    int `json:"closed_by_server"`
	StillOpen int `json:"still_open"`
	// Lifetime quantiles of the connections the server closed, each from
	// the moment its misbehaviour began (its dial for ModeBody and
	// ModeHeader, its answer for ModeIdle) to its close: compare them with
	// the server's read, header and idle timeouts.
	LifetimeMin    time.Duration `json:"lifetime_min_ns"`
	LifetimeMedian time.Duration `json:"lifetime_median_ns"`
	LifetimeMax    time.Duration `json:"lifetime_max_ns"`
	// AllClosedIn is the time from the first dial until the server had
	// closed the last connection (0 if some were still open).
	AllClosedIn time.Duration `json:"all_closed_in_ns"`
	// Statuses counts the answers the server wrote before closing, by
	// status (ModeBody expects 408; ModeIdle's 200 to its GET is not
	// counted).
	Statuses map[int]int `json:"statuses,omitempty"`
	// MemBefore, MemPeak and MemAfter are Options.Memory before the
	// connections, its largest reading while they were open, and after
	// the server closed them; 0 when not measured.
	MemBefore uint64 `json:"mem_before_bytes,omitempty"`
	MemPeak   uint64 `json:"mem_peak_bytes,omitempty"`
	MemAfter  uint64 `json:"mem_after_bytes,omitempty"`
}

// conn is one misbehaving connection's outcome.
type conn struct {
	c      net.Conn
	ref    time.Time // when its misbehaviour began
	closed time.Time // when the server closed it; zero if it did not
	status int       // the status the server answered before closing, 0 if none
}

// Run opens the connections, makes them misbehave and waits until the
// server has closed them all or the wait runs out. Canceling ctx ends the
// run early, as if the wait had run out.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &Result{Mode: o.Mode, Statuses: map[int]int{}}
	var err error
	if o.Memory != nil {
		if res.MemBefore, err = o.Memory(); err != nil {
			return nil, fmt.Errorf("slowclient: reading memory: %w", err)
		}
		res.MemPeak = res.MemBefore
	}
	start := time.Now()
	conns := make([]*conn, 0, o.Conns)
	var wg sync.WaitGroup
	done := make(chan struct{})   // closed when every connection has ended
	giveUp := make(chan struct{}) // closed when the wait runs out
	d := net.Dialer{Timeout: 5 * time.Second}
	for range o.Conns {
		c, err := d.DialContext(ctx, "tcp", o.Addr)
		if err != nil {
			if res.DialErrors++; res.DialError == "" {
				res.DialError = err.Error()
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		cn := &conn{c: c, ref: time.Now()}
		conns = append(conns, cn)
		wg.Go(func() { misbehave(cn, o, giveUp) })
	}
	res.Opened, res.OpenedIn = len(conns), time.Since(start)
	go func() { wg.Wait(); close(done) }()

	wait := time.NewTimer(o.Wait)
	defer wait.Stop()
	var tick <-chan time.Time
	if o.Memory != nil {
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		tick = t.C
	}
	for ended := false; !ended; {
		select {
		case <-done:
			ended = true
		case <-wait.C:
			ended = true
		case <-ctx.Done():
			ended = true
		case <-tick:
			if m, err := o.Memory(); err == nil && m > res.MemPeak {
				res.MemPeak = m
			}
		}
	}
	close(giveUp)
	for _, cn := range conns {
		cn.c.Close()
	}
	wg.Wait()
	if o.Memory != nil {
		if res.MemAfter, err = o.Memory(); err != nil {
			return nil, fmt.Errorf("slowclient: reading memory: %w", err)
		}
	}
	res.summarize(conns, start)
	return res, nil
}

// summarize fills in the counts and quantiles.
func (res *Result) summarize(conns []*conn, start time.Time) {
	var lives []time.Duration
	var last time.Time
	for _, cn := range conns {
		if cn.closed.IsZero() {
			res.StillOpen++
			continue
		}
		res.Closed++
		lives = append(lives, cn.closed.Sub(cn.ref))
		if cn.closed.After(last) {
			last = cn.closed
		}
		if cn.status != 0 {
			res.Statuses[cn.status]++
		}
	}
	if len(lives) > 0 {
		slices.Sort(lives)
		res.LifetimeMin, res.LifetimeMedian, res.LifetimeMax = lives[0], lives[len(lives)/2], lives[len(lives)-1]
	}
	if res.StillOpen == 0 && res.Closed > 0 {
		res.AllClosedIn = last.Sub(start)
	}
}

// misbehave plays one connection's part until the server closes it or the
// run gives up (then the run closes it, and it stays counted as open).
func misbehave(cn *conn, o Options, giveUp <-chan struct{}) {
	host := "Host: " + o.Addr + "\r\n"
	br := bufio.NewReaderSize(cn.c, 512)
	var err error
	switch o.Mode {
	case ModeBody:
		_, err = io.WriteString(cn.c, "POST "+o.BodyPath+" HTTP/1.1\r\n"+host+
			"Content-Type: application/octet-stream\r\nContent-Length: "+strconv.FormatInt(o.BodyBytes, 10)+"\r\n\r\n{")
	case ModeHeader:
		if _, err = io.WriteString(cn.c, "POST "+o.BodyPath+" HTTP/1.1\r\n"+host+"X-Slow: "); err == nil {
			stop, stopped := make(chan struct{}), make(chan struct{})
			go func() { dribble(cn.c, o.Interval, stop); close(stopped) }()
			defer func() { close(stop); <-stopped }()
		}
	case ModeIdle:
		if _, err = io.WriteString(cn.c, "GET "+o.IdlePath+" HTTP/1.1\r\n"+host+"\r\n"); err == nil {
			var resp *http.Response
			if resp, err = http.ReadResponse(br, nil); err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				cn.ref = time.Now()
			}
		}
	}
	if err == nil {
		cn.status = awaitClose(br)
	}
	select {
	case <-giveUp: // the run closed it, or it ended as the run gave up
		return
	default:
		cn.closed = time.Now()
	}
}

// dribble writes one header byte every interval until a write fails (the
// server closed the connection) or stop closes.
func dribble(c net.Conn, interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if _, err := c.Write([]byte{'a'}); err != nil {
				return
			}
		}
	}
}

// awaitClose reads until the connection ends, and returns the status of
// an answer the server wrote before closing, 0 if none.
func awaitClose(br *bufio.Reader) int {
	status := 0
	if resp, err := http.ReadResponse(br, nil); err == nil {
		status = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	_, _ = io.Copy(io.Discard, br)
	return status
}

// ProcessRSS returns a Memory function that reads process pid's resident
// set size from /proc/PID/status (Linux).
func ProcessRSS(pid int) func() (uint64, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	return func() (uint64, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, err
		}
		return parseVmRSS(b)
	}
}

// parseVmRSS finds the VmRSS line of a /proc/PID/status file.
func parseVmRSS(status []byte) (uint64, error) {
	for line := range strings.Lines(string(status)) {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", strings.TrimSpace(line))
		}
		kb, err := strconv.ParseUint(f[0], 10, 54) // kB that fit in a uint64 of bytes
		if err != nil {
			return 0, fmt.Errorf("VmRSS line %q: %w", strings.TrimSpace(line), err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line (is this Linux, and the process alive?)")
}
