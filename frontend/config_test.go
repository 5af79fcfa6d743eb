package frontend

import (
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/transport/inproc"
)

// An advertised data address must be one a backend can dial: a host that
// is not a wildcard and a real port. A good one is what DataAddr reports.
func TestAdvertisedDataAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"10.1.2.3:7200": true, "pod.ns.svc:7200": true, "[fd00::1]:7200": true,
		"0.0.0.0:7200": false, "[::]:7200": false, ":7200": false, "10.1.2.3:0": false, "10.1.2.3": false, "10.1.2.3:70000": false,
	} {
		c := Default()
		c.SchedulerAddr, c.Network, c.AdvertiseDataAddr = "s", inproc.New(), addr
		err := c.Validate()
		if (err == nil) != ok || err != nil && !strings.Contains(err.Error(), "advertised data address") {
			t.Errorf("%s: %v, want ok %v", addr, err, ok)
		}
	}
	c := Default()
	c.SchedulerAddr, c.Network, c.AdvertiseDataAddr = "nowhere", inproc.New(), "10.1.2.3:7200"
	client, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if client.DataAddr() != "10.1.2.3:7200" {
		t.Errorf("DataAddr %q", client.DataAddr())
	}
}
