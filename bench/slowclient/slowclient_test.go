package slowclient

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// serve runs an HTTP server configured by mod on loopback.
func serve(t *testing.T, mod func(*http.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := w.Write([]byte("ok")); err != nil {
			t.Error(err)
		}
	})}
	mod(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// A server with an idle timeout closes idle connections about then, and
// Run times them from the answer; one without keeps them, and Run counts
// them as still open once its wait runs out.
func TestRunMeasuresIdleCloses(t *testing.T) {
	const idle = 200 * time.Millisecond
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"idle timeout", idle}, {"no timeout", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			o := Default()
			o.Addr = serve(t, func(s *http.Server) { s.IdleTimeout = tc.timeout })
			o.Mode, o.Conns, o.Wait = ModeIdle, 10, idle+3*time.Second
			if tc.timeout == 0 {
				o.Wait = 2 * idle
			}
			o.Memory, o.SampleEvery = ProcessRSS(os.Getpid()), 10*time.Millisecond
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Opened != o.Conns || res.MemBefore == 0 || res.MemPeak < res.MemBefore || res.MemAfter == 0 {
				t.Fatalf("%+v", res)
			}
			if tc.timeout == 0 {
				if res.StillOpen != o.Conns || res.Closed != 0 || res.AllClosedIn != 0 {
					t.Fatalf("a server without timeouts: %+v", res)
				}
				return
			}
			if res.Closed != o.Conns || res.LifetimeMin < idle/2 || res.LifetimeMax > o.Wait || res.AllClosedIn < res.LifetimeMax {
				t.Fatalf("a server with a %v idle timeout: %+v", idle, res)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Default()
	ok.Addr = "127.0.0.1:1"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*Options){
		func(o *Options) { o.Addr = "" },
		func(o *Options) { o.Mode = "fast" },
		func(o *Options) { o.Conns = 0 },
		func(o *Options) { o.BodyPath = "v2" },
		func(o *Options) { o.BodyBytes = 1 },
		func(o *Options) { o.Interval = 0 },
		func(o *Options) { o.Wait = -time.Second },
		func(o *Options) { o.Memory, o.SampleEvery = ProcessRSS(1), 0 },
	} {
		o := ok
		mod(&o)
		if o.Validate() == nil {
			t.Errorf("%+v validates", o)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS([]byte("Name:\tsymphony\nVmPeak:\t  9 kB\nVmRSS:\t   61192 kB\nThreads:\t9\n"))
	if err != nil || got != 61192<<10 {
		t.Fatalf("%d, %v", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n", "VmRSS:\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

// FuzzParseVmRSS: /proc's status file is read, not trusted; any bytes give
// a size or an error, never a panic.
func FuzzParseVmRSS(f *testing.F) {
	f.Add([]byte("VmRSS:\t   61192 kB\n"))
	f.Add([]byte("VmRSS: 18446744073709551615 kB"))
	f.Add([]byte("VmRSS:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseVmRSS(b)
	})
}
