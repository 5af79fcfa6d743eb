package rdma

import (
	"errors"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/transporttest"
	"github.com/symphony-serving/symphony/transport/wire"
)

// slowCloseFabric is a Fabric whose queue pairs take their time to close,
// as ibv_destroy_qp may, so that a test can run other calls meanwhile.
type slowCloseFabric struct {
	Fabric
	closing chan struct{} // a queue pair's Close began
	release chan struct{} // lets it finish
	closed  chan error    // the device's Close, and what it returned
}

func (f *slowCloseFabric) NewQueuePair(depth int, onComplete func(Completion), onFail func(error)) (QueuePair, error) {
	qp, err := f.Fabric.NewQueuePair(depth, onComplete, onFail)
	if err != nil {
		return nil, err
	}
	return &slowCloseQP{QueuePair: qp, f: f}, nil
}

func (f *slowCloseFabric) Close() error {
	err := f.Fabric.Close()
	f.closed <- err
	return err
}

type slowCloseQP struct {
	QueuePair
	f *slowCloseFabric
}

func (q *slowCloseQP) Close() error {
	close(q.f.closing)
	<-q.f.release
	return q.QueuePair.Close()
}

// The device is released only after the last queue pair is destroyed, even
// when a connection's queue pair is still being torn down (Disconnect, on
// the transport's goroutine) while the frontend closes the exporter and the
// store frees its last region.
func TestExporterClosesDeviceAfterQueuePairTeardown(t *testing.T) {
	net := NewMemNetwork()
	fab := &slowCloseFabric{Fabric: net.Open("fe0"), closing: make(chan struct{}), release: make(chan struct{}), closed: make(chan error, 2)}
	exp, err := NewExporter(ExporterConfig{Fabric: fab, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	exp.AllocRegion(0, 4096, true)
	c := &transporttest.RecordingConn{Remote: "backend"}
	exp.Connect(c, &wire.RDMAConnect{Endpoint: wire.RDMAEndpoint{QPN: 5, LID: 9, MTU: 5, ReadDepth: 1}})
	if _, ok := c.Take()[0].(*wire.RDMAAccept); !ok {
		t.Fatal("not accepted")
	}
	disconnected := make(chan struct{})
	go func() {
		exp.Disconnect(c) // the data connection closed
		close(disconnected)
	}()
	<-fab.closing
	exp.Close()
	exp.FreeRegion(0) // the store closes
	select {
	case err := <-fab.closed:
		t.Fatalf("device closed while a queue pair was being destroyed (%v)", err)
	default:
	}
	close(fab.release)
	<-disconnected
	if err := <-fab.closed; err != nil {
		t.Fatalf("device close: %v", err)
	}
	var ve *VerbsError
	if _, err := fab.Fabric.NewQueuePair(1, nil, nil); !errors.As(err, &ve) || ve.Errno != syscall.ENODEV {
		t.Fatalf("device still open: %v", err)
	}
}

// Both ends of a pair settle on one READ depth, within every limit of both
// devices, even when a device's requester and responder limits differ: a
// requester's max_rd_atomic over the responder's max_dest_rd_atomic has
// READs refused or stalled.
func TestPairReadDepthIsSymmetric(t *testing.T) {
	for _, c := range []struct{ beInit, beDest, feInit, feDest, want int }{
		{16, 16, 16, 16, 16},
		{16, 4, 16, 16, 4}, // the backend serves fewer than it issues
		{4, 16, 16, 16, 4},
		{16, 16, 2, 8, 2},
		{128, 128, 128, 128, 16},
		{0, 0, 16, 16, 1},
	} {
		be, fe := localReadDepth(c.beInit, c.beDest), localReadDepth(c.feInit, c.feDest)
		atBE, atFE := pairReadDepth(be, fe), pairReadDepth(fe, be)
		if atBE != c.want || atFE != c.want {
			t.Errorf("%+v: backend uses %d, frontend %d", c, atBE, atFE)
		}
		for _, lim := range []int{c.beInit, c.beDest, c.feInit, c.feDest} {
			if lim > 0 && atBE > lim {
				t.Errorf("%+v: depth %d over a device limit %d", c, atBE, lim)
			}
		}
	}
}
