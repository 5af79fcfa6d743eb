package rdma

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestParseModeAndFlag(t *testing.T) {
	for _, s := range []string{"auto", "rdma", "tcp"} {
		m, err := ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("infiniband"); err == nil || !strings.Contains(err.Error(), "want auto, rdma or tcp") {
		t.Errorf("bad mode: %v", err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	m := ModeTCP
	fs.TextVar(&m, "data-path", ModeAuto, "")
	if m != ModeAuto {
		t.Errorf("flag default: %v", m)
	}
	if err := fs.Parse([]string{"--data-path=rdma"}); err != nil || m != ModeRDMA {
		t.Errorf("--data-path=rdma: %v, %v", m, err)
	}
	if err := fs.Parse([]string{"--data-path=udp"}); err == nil {
		t.Error("--data-path=udp accepted")
	}
}

func TestChooseDataPath(t *testing.T) {
	for _, tc := range []struct {
		mode      Mode
		available error
		rdma      bool
		why, err  string
	}{
		{ModeTCP, nil, false, "--data-path=tcp", ""},
		{ModeTCP, ErrNotBuilt, false, "--data-path=tcp", ""},
		{ModeAuto, nil, true, "auto: device mlx5_0", ""},
		{ModeAuto, ErrNotBuilt, false, "auto: built without RDMA support", ""},
		{ModeAuto, ErrNoDevice, false, "auto: no RDMA device", ""},
		{ModeRDMA, nil, true, "device mlx5_0", ""},
		{ModeRDMA, ErrNotBuilt, false, "", "--data-path=rdma, but RDMA is not available: built without RDMA support"},
		{ModeRDMA, ErrNoDevice, false, "", "not available: no RDMA device"},
	} {
		c, err := Choose(tc.mode, "mlx5_0", tc.available)
		name := tc.mode.String() + "/" + errString(tc.available)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrRDMARequired) || !errors.Is(err, tc.available) {
				t.Errorf("%s: error %v, want %q wrapping ErrRDMARequired and the reason", name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case c.RDMA != tc.rdma || !strings.Contains(c.Why, tc.why):
			t.Errorf("%s: %+v, want rdma=%v why %q", name, c, tc.rdma, tc.why)
		}
	}
	if c := (Choice{Why: "auto: x"}); c.String() != "tcp (auto: x)" {
		t.Errorf("Choice.String: %q", c.String())
	}
}

func errString(err error) string {
	if err == nil {
		return "available"
	}
	return err.Error()
}

// Select in this build: TCP when asked; an emulated fabric is taken as
// is; otherwise it depends on the build (ErrNotBuilt) or on the machine's
// devices, and only ModeRDMA turns their absence into an error.
func TestSelect(t *testing.T) {
	f, c, err := Select(Config{Mode: ModeTCP})
	if f != nil || c.RDMA || err != nil {
		t.Errorf("tcp: %v %+v %v", f, c, err)
	}
	mem := NewMemNetwork().Open("mem0")
	f, c, err = Select(Config{Mode: ModeRDMA, Fabric: mem})
	if f != mem || !c.RDMA || err != nil || c.Why != "device mem0" {
		t.Errorf("emulated fabric: %v %+v %v", f, c, err)
	}
	if _, avail := Available(DefaultDeviceConfig()); avail != nil {
		f, c, err = Select(Config{Mode: ModeAuto, Device: DefaultDeviceConfig()})
		if f != nil || c.RDMA || err != nil || !strings.HasPrefix(c.Why, "auto: ") {
			t.Errorf("auto without RDMA: %v %+v %v", f, c, err)
		}
		t.Logf("auto here: %v", c)
		if _, _, err := Select(Config{Mode: ModeRDMA, Device: DefaultDeviceConfig()}); !errors.Is(err, ErrRDMARequired) {
			t.Errorf("rdma without RDMA: %v", err)
		}
		if !Built && !errors.Is(avail, ErrNotBuilt) {
			t.Errorf("default build: Available = %v, want ErrNotBuilt", avail)
		}
	}
}
