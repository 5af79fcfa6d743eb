package actuate

import (
	"strings"
	"testing"
	"time"
)

func TestPolicyTarget(t *testing.T) {
	type step struct {
		at     time.Duration // since t0
		want   int           // GPUs
		target int           // backends
	}
	s := time.Second
	cases := []struct {
		name  string
		cfg   PolicyConfig
		steps []step
	}{
		{
			name: "scale-out is immediate",
			cfg:  PolicyConfig{WarmPool: 1, ScaleInDelay: 30 * s, Max: 100},
			steps: []step{
				{0, 4, 5},
				{10 * s, 8, 9},   // +4 at once, despite the delay
				{20 * s, 20, 21}, // and again
			},
		},
		{
			name: "scale-in waits the delay",
			cfg:  PolicyConfig{WarmPool: 1, ScaleInDelay: 30 * s, Max: 100},
			steps: []step{
				{0, 10, 11},
				{10 * s, 4, 11}, // lower since 10s
				{20 * s, 4, 11},
				{30 * s, 4, 11},
				{39 * s, 4, 11}, // 29s lower: not yet
				{40 * s, 4, 5},  // 30s lower: shrink
			},
		},
		{
			name: "scale-in goes to the largest want within the window",
			cfg:  PolicyConfig{ScaleInDelay: 15 * s, Max: 100},
			steps: []step{
				{0, 10, 10},
				{10 * s, 8, 10},
				{20 * s, 6, 10}, // 10 held until 10s, inside [5s, 20s]
				{30 * s, 4, 8},  // [15s, 30s] saw 8, 6, 4
				{40 * s, 4, 6},  // [25s, 40s] saw 6, 4, 4
				{50 * s, 4, 4},
			},
		},
		{
			name: "a spike back up within the delay resets it",
			cfg:  PolicyConfig{ScaleInDelay: 30 * s, Max: 100},
			steps: []step{
				{0, 10, 10},
				{10 * s, 4, 10},
				{20 * s, 4, 10},
				{30 * s, 10, 10}, // the spike: the 20s lower so far count for nothing
				{40 * s, 4, 10},
				{60 * s, 4, 10}, // 20s lower
				{69 * s, 4, 10},
				{70 * s, 4, 4}, // 30s lower since the spike ended
			},
		},
		{
			name: "a smaller spike within the delay holds the target at the spike",
			cfg:  PolicyConfig{ScaleInDelay: 30 * s, Max: 100},
			steps: []step{
				{0, 10, 10},
				{10 * s, 3, 10},
				{20 * s, 6, 10},
				{30 * s, 3, 10},
				{40 * s, 3, 6}, // [10s, 40s] saw 3, 6, 3
				{50 * s, 3, 6}, // 6 held until 30s
				{60 * s, 3, 3},
			},
		},
		{
			name: "min and max bound the target",
			cfg:  PolicyConfig{WarmPool: 2, Min: 3, Max: 8},
			steps: []step{
				{0, 0, 3}, // 0+2 < min
				{1 * s, 4, 6},
				{2 * s, 7, 8},   // 7+2 > max
				{3 * s, 100, 8}, // far above max
				{4 * s, 0, 3},   // no delay: straight down to min
			},
		},
		{
			name: "warm pool 0 runs exactly the want",
			cfg:  PolicyConfig{Max: 10},
			steps: []step{
				{0, 5, 5},
				{1 * s, 2, 2},
				{2 * s, 0, 0},
				{3 * s, 7, 7},
			},
		},
		{
			name: "GPUs per backend rounds up",
			cfg:  PolicyConfig{GPUsPerBackend: 4, WarmPool: 1, Max: 10},
			steps: []step{
				{0, 9, 4},     // 3 backends + 1
				{1 * s, 8, 3}, // 2 + 1
				{2 * s, 0, 1},
			},
		},
		{
			name: "a negative want counts as 0",
			cfg:  PolicyConfig{WarmPool: 1, Max: 10},
			steps: []step{
				{0, -3, 1},
			},
		},
		{
			name: "time never goes back",
			cfg:  PolicyConfig{ScaleInDelay: 10 * s, Max: 100},
			steps: []step{
				{20 * s, 10, 10},
				{5 * s, 2, 10},  // taken as at 20s
				{29 * s, 2, 10}, // 2 in effect only since 20s
				{30 * s, 2, 2},
			},
		},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPolicy(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range c.steps {
				if got := p.Target(t0.Add(st.at), st.want); got != st.target {
					t.Fatalf("step %d (at %v, want %d GPUs): target %d backends, want %d", i, st.at, st.want, got, st.target)
				}
			}
		})
	}
}

// TestPolicyHistoryBounded checks the policy keeps only the window's wants.
func TestPolicyHistoryBounded(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{ScaleInDelay: 10 * time.Second, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		p.Target(t0.Add(time.Duration(i)*time.Second), i%7)
	}
	// The want at 989s (in effect at the window's start) and the 10 after.
	if len(p.hist) != 11 {
		t.Fatalf("history holds %d wants, want 11", len(p.hist))
	}
}

func TestPolicyConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  PolicyConfig
		errs []string // substrings; none: valid
	}{
		{"valid", PolicyConfig{GPUsPerBackend: 2, WarmPool: 1, ScaleInDelay: time.Minute, Min: 1, Max: 8}, nil},
		{"min equals max", PolicyConfig{Min: 4, Max: 4}, nil},
		{"zero value lacks max", PolicyConfig{}, []string{"max 0 backends must be at least 1"}},
		{"min above max", PolicyConfig{Min: 5, Max: 4}, []string{"min 5 backends exceeds max 4"}},
		{"negatives", PolicyConfig{GPUsPerBackend: -1, WarmPool: -2, ScaleInDelay: -time.Second, Min: -3, Max: 1},
			[]string{"GPUs per backend -1 is negative", "warm pool -2 is negative", "scale-in delay -1s is negative", "min -3 backends is negative"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			_, nerr := NewPolicy(c.cfg)
			if len(c.errs) == 0 {
				if err != nil || nerr != nil {
					t.Fatalf("Validate: %v; NewPolicy: %v; want valid", err, nerr)
				}
				return
			}
			if err == nil || nerr == nil {
				t.Fatalf("Validate: %v; NewPolicy: %v; want errors %q", err, nerr, c.errs)
			}
			for _, s := range c.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	p, err := NewPolicy(PolicyConfig{Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().GPUsPerBackend; got != 1 {
		t.Fatalf("GPUsPerBackend %d, want the default 1", got)
	}
}
