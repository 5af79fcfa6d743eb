package cluster

import (
	"bytes"
	"testing"

	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/rdma"
)

// A whole cluster on the RDMA data path, over the emulated fabric: every
// request ends with its own output, backends READ the inputs, and
// whatever they cannot READ they read over TCP. The queue pairs come up
// while requests already flow, so on a loaded machine a first round of
// requests may all be served before them: the test sends rounds until
// the backends READ (at most 50), checking every request of each.
func TestEndToEndOverEmulatedRDMA(t *testing.T) {
	mem := rdma.NewMemNetwork()
	cfg := testConfig(inproc.New(), "", 2, 2)
	cfg.DataPath = rdma.ModeRDMA
	cfg.Fabric = func(name string) rdma.Fabric { return mem.Open(name) }
	cfg.Preprocess = &upper{} // hooks_test.go
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	if !f.DataPath().RDMA {
		t.Fatalf("frontend data path %v", f.DataPath())
	}
	var reads, fallbacks uint64
	rounds := 0
	for ; rounds < 50 && reads == 0; rounds++ {
		serveAlternating(t, f, 200, bytes.ToUpper)
		reads, fallbacks = 0, 0
		for _, b := range c.Backends {
			if !b.DataPath().RDMA {
				t.Fatalf("backend data path %v", b.DataPath())
			}
			reads += b.RDMAStats().Reads.Load()
			fallbacks += b.RDMAStats().Fallbacks.Load()
		}
	}
	// Batches planned before a backend's queue pair with the frontend was
	// up, inputs still being preprocessed when their batch READs them,
	// and plans that outran a region's announcement go over TCP.
	if reads == 0 {
		t.Fatalf("no input READ in %d rounds of 200 requests (%d fell back to TCP)", rounds, fallbacks)
	}
	t.Logf("%d rounds of 200 requests: %d inputs READ, %d fell back to TCP, the rest before the queue pairs were up", rounds, reads, fallbacks)
}
