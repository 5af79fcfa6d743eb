package rdma

import (
	"errors"
	"fmt"
)

// Mode is how a frontend serves, or a backend reads, inputs: the
// --data-path flag.
type Mode uint8

const (
	// ModeAuto uses RDMA when this build has it and a device with an
	// active port is present, and TCP otherwise; either way it says which.
	// Per peer, RDMA is used only when both sides offer it.
	ModeAuto Mode = iota
	// ModeRDMA requires RDMA here: without it the process does not start.
	ModeRDMA
	// ModeTCP never uses RDMA.
	ModeTCP
)

var modeNames = [...]string{"auto", "rdma", "tcp"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode parses "auto", "rdma" or "tcp".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("data path %q: want auto, rdma or tcp", s)
}

// MarshalText makes a Mode a flag.TextVar.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText makes a Mode a flag.TextVar.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Choice is the data path a process settled on, and why, for its startup
// log line.
type Choice struct {
	RDMA bool
	// Why says what decided it: the device, the flag, or what was missing.
	Why string
}

func (c Choice) String() string {
	if c.RDMA {
		return "rdma (" + c.Why + ")"
	}
	return "tcp (" + c.Why + ")"
}

// ErrRDMARequired wraps the reason --data-path=rdma cannot be honored.
var ErrRDMARequired = errors.New("--data-path=rdma, but RDMA is not available")

// Choose decides the data path from the mode and whether RDMA is
// available here (nil, or why not: ErrNotBuilt, ErrNoDevice, ...). device
// names the device that would be used. Only ModeRDMA without RDMA is an
// error, which wraps both ErrRDMARequired and the reason.
func Choose(mode Mode, device string, available error) (Choice, error) {
	switch mode {
	case ModeTCP:
		return Choice{Why: "--data-path=tcp"}, nil
	case ModeRDMA:
		if available != nil {
			return Choice{}, fmt.Errorf("%w: %w", ErrRDMARequired, available)
		}
		return Choice{RDMA: true, Why: "device " + device}, nil
	case ModeAuto:
		if available != nil {
			return Choice{Why: "auto: " + available.Error()}, nil
		}
		return Choice{RDMA: true, Why: "auto: device " + device}, nil
	}
	return Choice{}, fmt.Errorf("unknown data path %v", mode)
}

// Config is the data path of a frontend or a backend: the --data-path
// flag and the device it opens.
type Config struct {
	Mode   Mode
	Device DeviceConfig
	// Fabric, if set, is the device to use instead of opening Device:
	// tests pass a MemNetwork's. The frontend or backend owns it once it
	// has chosen RDMA.
	Fabric Fabric
}

// DefaultConfig is auto over the first usable device.
func DefaultConfig() Config { return Config{Mode: ModeAuto, Device: DefaultDeviceConfig()} }

// Select decides the data path (Choose) and, for RDMA, opens the device:
// a nil Fabric means TCP. Only ModeRDMA without a usable device is an
// error.
func Select(c Config) (Fabric, Choice, error) {
	var device string
	var available error
	switch {
	case c.Fabric != nil:
		device = c.Fabric.Device()
	case c.Mode != ModeTCP:
		device, available = Available(c.Device)
	}
	choice, err := Choose(c.Mode, device, available)
	if err != nil || !choice.RDMA {
		return nil, choice, err
	}
	if c.Fabric != nil {
		return c.Fabric, choice, nil
	}
	f, err := Open(c.Device)
	if err != nil {
		if c.Mode == ModeRDMA {
			return nil, Choice{}, fmt.Errorf("%w: %w", ErrRDMARequired, err)
		}
		return nil, Choice{Why: "auto: " + err.Error()}, nil
	}
	return f, choice, nil
}
