package rdma

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// DefaultReuseDelay is how long a frontend keeps released input space from
// reuse. Backends accept only READs that complete within half of it, so it
// must be far above a READ's time (microseconds; a few milliseconds under
// incast); it costs the store the space released in that time.
const DefaultReuseDelay = 50 * time.Millisecond

// ExporterConfig configures a frontend's side of the RDMA data path.
type ExporterConfig struct {
	// Fabric is the opened device; the Exporter owns it from now on.
	Fabric Fabric
	// ReuseDelay is the store's reuse delay, announced to backends.
	ReuseDelay time.Duration
	Log        zerolog.Logger
}

// Exporter is a frontend's side of the RDMA data path: it maps and
// registers the input store's regions (it is the store's region
// allocator), brings up a responder queue pair for each backend that asks
// on its data connection, and tells connected backends about every region
// it registers. The frontend's CPU takes no part in the READs themselves.
//
// Lifetime of a region's memory: mapped and registered by AllocRegion,
// deregistered (the NIC stops reading it) and then unmapped by FreeRegion,
// which the store calls only once no input lives in the region and the
// store is closing. Backends that still READ it afterwards get a remote
// access error and fall back to TCP, which answers that the input is gone.
type Exporter struct {
	fab   Fabric
	seal  uint64
	reuse time.Duration
	log   zerolog.Logger

	warned atomic.Bool // a region could not be registered: said once at Warn

	mu        sync.Mutex
	regions   map[uint32]*exportedRegion
	conns     map[transport.Conn]QueuePair
	closed    bool
	fabClosed bool
	// busy counts the device calls under way outside mu: regions being
	// registered or deregistered, queue pairs being created or destroyed
	// while in neither map. The device is not closed while any is.
	busy int
}

type exportedRegion struct {
	arena *Arena
	mr    MemoryRegion
	key   wire.RDMARegion
}

// NewExporter starts exporting over cfg.Fabric. Its seal, which the store
// stamps into every slot header, is random per Exporter.
func NewExporter(cfg ExporterConfig) (*Exporter, error) {
	if cfg.Fabric == nil {
		return nil, errors.New("rdma: exporter without a fabric")
	}
	if cfg.ReuseDelay <= 0 {
		cfg.ReuseDelay = DefaultReuseDelay
	}
	if cfg.ReuseDelay > wire.MaxReuseDelay {
		return nil, errors.New("rdma: reuse delay over wire.MaxReuseDelay")
	}
	return &Exporter{
		fab: cfg.Fabric, seal: rand.Uint64() | 1, reuse: cfg.ReuseDelay, log: cfg.Log,
		regions: map[uint32]*exportedRegion{}, conns: map[transport.Conn]QueuePair{},
	}, nil
}

// Seal is the secret the store seals slot headers with.
func (e *Exporter) Seal() uint64 { return e.seal }

// ReuseDelay is the reuse delay the store must keep.
func (e *Exporter) ReuseDelay() time.Duration { return e.reuse }

// Device names the device, for logs.
func (e *Exporter) Device() string { return e.fab.Device() }

// AllocRegion returns the memory of store region id, of size bytes. A
// shared region (one that holds many inputs and lives as long as the
// store) is mapped, registered for remote READ and announced; an
// oversized single-input region is plain Go memory that backends read
// over TCP, so that its short life never means a deregistration while a
// backend might READ it. If mapping or registering fails (typically the
// locked-memory limit), the region is Go memory too, and its inputs go
// over TCP: the store never fails for want of RDMA.
func (e *Exporter) AllocRegion(id uint32, size int, shared bool) []byte {
	if !shared || !e.enter() {
		return make([]byte, size)
	}
	defer e.leave()
	a, err := MapArena(size)
	if err == nil {
		var mr MemoryRegion
		if mr, err = e.fab.Register(a, true); err == nil {
			return e.export(id, size, a, mr)
		}
		_ = a.Unmap()
	}
	ev := e.log.Debug()
	if !e.warned.Swap(true) {
		ev = e.log.Warn()
	}
	ev.Err(err).Uint32("region", id).Int("bytes", size).Msg("input region not registered for RDMA; its inputs go over TCP")
	return make([]byte, size)
}

// export records and announces a registered region.
func (e *Exporter) export(id uint32, size int, a *Arena, mr MemoryRegion) []byte {
	r := &exportedRegion{arena: a, mr: mr, key: wire.RDMARegion{ID: id, Addr: a.Addr(), Length: uint64(size), RKey: mr.RKey()}}
	// Under mu, so that a connection accepted concurrently gets the region
	// in its RDMAAccept or here, never neither. Send only queues (the
	// transports run OnClose, hence Disconnect, on their own goroutines).
	e.mu.Lock()
	e.regions[id] = r
	for c := range e.conns {
		_ = c.Send(&wire.RDMARegions{Regions: []wire.RDMARegion{r.key}})
	}
	e.mu.Unlock()
	e.log.Debug().Uint32("region", id).Int("bytes", size).Msg("input region registered")
	return a.Bytes()[:size:size]
}

// FreeRegion releases region id's memory (see the type's lifetime rules).
// Go memory is left to the collector.
func (e *Exporter) FreeRegion(id uint32) {
	e.mu.Lock()
	r := e.regions[id]
	delete(e.regions, id)
	if r != nil {
		e.busy++
	}
	e.mu.Unlock()
	if r == nil {
		return
	}
	defer e.leave()
	if err := r.mr.Deregister(); err != nil {
		// The NIC may still read it: leak the memory rather than fault.
		e.log.Error().Err(err).Uint32("region", id).Msg("input region not deregistered; its memory stays mapped")
	} else {
		_ = r.arena.Unmap()
	}
}

// Regions lists the registered regions, as announced.
func (e *Exporter) Regions() []wire.RDMARegion {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]wire.RDMARegion, 0, len(e.regions))
	for _, r := range e.regions {
		out = append(out, r.key)
	}
	return out
}

// Connect answers a backend's RDMAConnect on data connection c: a queue
// pair connected to the backend's, with every region registered so far
// (RDMAAccept), or the reason it cannot (RDMARefuse). A second
// RDMAConnect on one connection replaces the first's queue pair.
func (e *Exporter) Connect(c transport.Conn, m *wire.RDMAConnect) {
	refuse := func(why string) {
		_ = c.Send(&wire.RDMARefuse{ForQPN: m.Endpoint.QPN, Reason: why})
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		refuse("frontend closing")
		return
	}
	old := e.conns[c]
	delete(e.conns, c)
	e.busy++ // for the new queue pair until it is in conns or destroyed
	if old != nil {
		e.busy++
	}
	e.mu.Unlock()
	defer e.leave()
	if old != nil {
		_ = old.Close()
		e.leave()
	}
	qp, err := e.fab.NewQueuePair(1, nil, nil)
	if err != nil {
		refuse(err.Error())
		return
	}
	if err := qp.Connect(m.Endpoint); err != nil {
		_ = qp.Close()
		refuse(err.Error())
		return
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		_ = qp.Close()
		refuse("frontend closing")
		return
	}
	a := &wire.RDMAAccept{ForQPN: m.Endpoint.QPN, Endpoint: qp.Endpoint(), Seal: e.seal, ReuseDelay: e.reuse,
		Regions: make([]wire.RDMARegion, 0, len(e.regions))}
	for _, r := range e.regions {
		a.Regions = append(a.Regions, r.key)
	}
	// Under the lock, so that a region registered from now on is
	// announced on c after this snapshot.
	e.conns[c] = qp
	err = c.Send(a)
	e.mu.Unlock()
	if err != nil {
		e.Disconnect(c)
		return
	}
	e.log.Debug().Str("backend", c.RemoteAddr()).Uint32("qpn", a.Endpoint.QPN).Msg("RDMA queue pair up")
}

// Disconnect destroys the queue pair of data connection c, once it
// closed.
func (e *Exporter) Disconnect(c transport.Conn) {
	e.mu.Lock()
	qp := e.conns[c]
	delete(e.conns, c)
	if qp != nil {
		e.busy++
	}
	e.mu.Unlock()
	if qp != nil {
		_ = qp.Close()
		e.leave()
	}
}

// Close destroys every queue pair and refuses new ones. The device itself
// is released once the store has freed every region.
func (e *Exporter) Close() {
	e.mu.Lock()
	e.closed = true
	qps := make([]QueuePair, 0, len(e.conns))
	for c, qp := range e.conns {
		qps = append(qps, qp)
		delete(e.conns, c)
	}
	e.busy++
	e.mu.Unlock()
	for _, qp := range qps {
		_ = qp.Close()
	}
	e.leave()
}

// enter counts a device call about to run outside mu; false once closed.
func (e *Exporter) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.busy++
	return true
}

// leave ends a call counted in busy, and closes the device if it was the
// last use of it.
func (e *Exporter) leave() {
	e.mu.Lock()
	e.busy--
	e.mu.Unlock()
	e.closeFabricIfDone()
}

func (e *Exporter) closeFabricIfDone() {
	e.mu.Lock()
	done := e.closed && len(e.regions) == 0 && len(e.conns) == 0 && e.busy == 0 && !e.fabClosed
	if done {
		e.fabClosed = true
	}
	e.mu.Unlock()
	if done {
		if err := e.fab.Close(); err != nil {
			e.log.Error().Err(err).Msg("closing the RDMA device")
		}
	}
}
