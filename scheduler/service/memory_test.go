package service

import (
	"strings"
	"testing"
)

// The Welcome's specs carry each model's declared memory, 0 where none
// is declared; a negative size is refused at Start, since every peer
// would refuse the Welcome.
func TestWelcomeCarriesMemory(t *testing.T) {
	f := startFake(t, func(c *Config) {
		c.Models[0].StaticMemory, c.Models[0].DynamicMemory = 3<<30, 1<<30
	})
	b := f.backend(t, "b1", 1)
	fe := f.frontend(t, "f1")
	for _, w := range [][]int64{
		{b.Welcome.Models[0].StaticMemory, b.Welcome.Models[0].DynamicMemory, b.Welcome.Models[1].StaticMemory, b.Welcome.Models[1].DynamicMemory},
		{fe.Welcome.Models[0].StaticMemory, fe.Welcome.Models[0].DynamicMemory, fe.Welcome.Models[1].StaticMemory, fe.Welcome.Models[1].DynamicMemory},
	} {
		if w[0] != 3<<30 || w[1] != 1<<30 || w[2] != 0 || w[3] != 0 {
			t.Errorf("Welcome memory %v, want m's 3GiB + 1GiB and n's unknown", w)
		}
	}

	c := Default()
	c.Network, c.Models = f.net, startFakeModels()
	c.Models[1].DynamicMemory = -1
	if s, err := Start(c); err == nil || !strings.Contains(err.Error(), `model "n": models[0].dynamic_memory: -1 bytes negative`) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Start with a negative size: %v", err)
	}
}
