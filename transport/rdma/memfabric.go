package rdma

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"

	"github.com/symphony-serving/symphony/transport/wire"
)

// MemNetwork is an RDMA network inside one process: each Open is a device
// on it, and a READ between two of its queue pairs copies between their
// registered Arenas on a goroutine of its own, as a NIC's DMA would, with
// the checks a NIC makes (a connected peer, the rkey, the address range,
// the local key) and their error completions. It exists so that the RDMA
// data path above the device runs in tests without a NIC; it does not
// emulate timing. Two faults can be injected: a device that stops
// delivering completions (FailDevice) and queue pairs that cannot be
// destroyed (SetDestroyFault). Networks are independent: no state is
// global.
type MemNetwork struct {
	mu           sync.Mutex
	devices      map[uint16]*memDevice // by LID
	hook         ReadHook
	destroyFault error
}

// ReadHook lets a test choose how a READ of n bytes copies: it must call
// copyPart over [0, n) in pieces, in any order, and may block between them
// (while other goroutines change the source), as a NIC's DMA may read a
// message's bytes in any order and at any time before its completion.
type ReadHook func(n int, copyPart func(from, to int))

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork { return &MemNetwork{devices: map[uint16]*memDevice{}} }

// SetReadHook sets (or, with nil, clears) the hook of every later READ.
func (n *MemNetwork) SetReadHook(h ReadHook) {
	n.mu.Lock()
	n.hook = h
	n.mu.Unlock()
}

// FailDevice makes the devices named name stop delivering completions for
// good, as when the verbs fabric's completion channel or a completion
// queue fails: READs in flight still run (their DMA goes on) but their
// completions never come, every queue pair's onFail gets a *DeviceError
// wrapping err, and new queue pairs and READs are refused with it. Closing
// a queue pair then ends its READs as flushed, once their DMA is over (as
// ibv_destroy_qp does). It reports whether it found such a device.
func (n *MemNetwork) FailDevice(name string, err error) bool {
	n.mu.Lock()
	var ds []*memDevice
	for _, d := range n.devices {
		if d.name == name {
			ds = append(ds, d)
		}
	}
	n.mu.Unlock()
	for _, d := range ds {
		d.health.fail(&DeviceError{Device: d.name, Err: err})
	}
	return len(ds) > 0
}

// SetDestroyFault makes every later queue pair Close fail with err (nil:
// succeed again), as when ibv_destroy_qp fails: the queue pair is not
// destroyed, so Close does not wait for the READs in flight, whose DMA
// goes on writing their buffers; it delivers them as Stranded at once.
// Such a queue pair stays on its device, which then cannot be closed.
func (n *MemNetwork) SetDestroyFault(err error) {
	n.mu.Lock()
	n.destroyFault = err
	n.mu.Unlock()
}

// Open adds a device to the network.
func (n *MemNetwork) Open(name string) Fabric {
	n.mu.Lock()
	defer n.mu.Unlock()
	lid := uint16(len(n.devices) + 1)
	d := &memDevice{net: n, name: name, lid: lid, mrs: map[uint32]*memMR{}, qps: map[uint32]*memQP{}, health: newHealth()}
	n.devices[lid] = d
	return d
}

func (n *MemNetwork) device(lid uint16) *memDevice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.devices[lid]
}

type memDevice struct {
	net    *MemNetwork
	name   string
	lid    uint16
	health *health

	mu      sync.Mutex
	mrs     map[uint32]*memMR // by key (lkey = rkey)
	qps     map[uint32]*memQP // by QPN
	nextKey uint32
	nextQPN uint32
	closed  bool
}

func (d *memDevice) Device() string { return d.name }

func (d *memDevice) Register(a *Arena, remoteRead bool) (MemoryRegion, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, &VerbsError{Op: "ibv_reg_mr", Errno: syscall.ENODEV}
	}
	d.nextKey++
	mr := &memMR{dev: d, key: d.nextKey, arena: a, addr: a.Addr(), n: uint64(a.Len()), remoteRead: remoteRead}
	mr.idle.L = &mr.mu
	d.mrs[mr.key] = mr
	return mr, nil
}

func (d *memDevice) NewQueuePair(depth int, onComplete func(Completion), onFail func(error)) (QueuePair, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, &VerbsError{Op: "ibv_create_qp", Errno: syscall.ENODEV}
	}
	if depth <= 0 {
		return nil, &VerbsError{Op: "ibv_create_qp", Errno: syscall.EINVAL}
	}
	unwatch, err := d.health.watch(onFail)
	if err != nil {
		return nil, err
	}
	d.nextQPN++
	q := &memQP{dev: d, qpn: d.nextQPN, psn: rand.Uint32() & (1<<24 - 1), depth: depth, onComplete: onComplete,
		unwatch: unwatch, posted: map[uint64]struct{}{}}
	d.qps[q.qpn] = q
	return q, nil
}

func (d *memDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.mrs) > 0 || len(d.qps) > 0 {
		return fmt.Errorf("rdma: closing device %s with %d memory regions and %d queue pairs open", d.name, len(d.mrs), len(d.qps))
	}
	d.closed = true
	return nil
}

func (d *memDevice) qp(qpn uint32) *memQP {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.qps[qpn]
}

// mr finds the region of key and holds it (see memMR.hold).
func (d *memDevice) mr(key uint32) *memMR {
	d.mu.Lock()
	mr := d.mrs[key]
	d.mu.Unlock()
	if mr == nil || !mr.hold() {
		return nil
	}
	return mr
}

// memMR is a registration; READs hold it while they copy, and Deregister
// waits for them, as a NIC finishes its DMA before a deregistration
// returns.
type memMR struct {
	dev        *memDevice
	key        uint32
	arena      *Arena
	addr, n    uint64
	remoteRead bool

	mu    sync.Mutex
	idle  sync.Cond
	users int
	gone  bool
}

func (m *memMR) LKey() uint32 { return m.key }
func (m *memMR) RKey() uint32 { return m.key }

func (m *memMR) hold() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return false
	}
	m.users++
	return true
}

func (m *memMR) release() {
	m.mu.Lock()
	m.users--
	if m.users == 0 {
		m.idle.Broadcast()
	}
	m.mu.Unlock()
}

// bytes returns [addr, addr+n) of the region, or nil if out of it.
func (m *memMR) bytes(addr uint64, n uint32) []byte {
	if addr < m.addr || addr-m.addr > m.n || uint64(n) > m.n-(addr-m.addr) {
		return nil
	}
	off := addr - m.addr
	return m.arena.Bytes()[off : off+uint64(n)]
}

func (m *memMR) Deregister() error {
	m.mu.Lock()
	if m.gone {
		m.mu.Unlock()
		return errors.New("rdma: memory region already deregistered")
	}
	m.gone = true
	for m.users > 0 {
		m.idle.Wait()
	}
	m.mu.Unlock()
	m.dev.mu.Lock()
	delete(m.dev.mrs, m.key)
	m.dev.mu.Unlock()
	return nil
}

type qpState uint8

const (
	qpInit qpState = iota
	qpRTS
	qpErr
	qpClosed
)

type memQP struct {
	dev        *memDevice
	qpn, psn   uint32
	depth      int
	onComplete func(Completion)
	unwatch    func() // ends onFail

	mu          sync.Mutex
	state       qpState
	remote      wire.RDMAEndpoint
	outstanding int                 // READs whose DMA has not ended
	posted      map[uint64]struct{} // READs whose completion was not delivered
	reads       sync.WaitGroup
}

func (q *memQP) Endpoint() wire.RDMAEndpoint {
	var gid [16]byte
	gid[0], gid[1], gid[15] = 0xfe, 0x80, byte(q.dev.lid)
	return wire.RDMAEndpoint{QPN: q.qpn, PSN: q.psn, LID: q.dev.lid, GID: gid, MTU: 5, ReadDepth: 16}
}

func (q *memQP) Connect(remote wire.RDMAEndpoint) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != qpInit {
		return &VerbsError{Op: "ibv_modify_qp", Errno: syscall.EINVAL}
	}
	q.remote, q.state = remote, qpRTS
	return nil
}

func (q *memQP) PostRead(wrID uint64, local Span, remoteAddr uint64, rkey uint32) error {
	if err := q.dev.health.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	switch {
	case q.state == qpInit || q.state == qpClosed:
		q.mu.Unlock()
		return &VerbsError{Op: "ibv_post_send", Errno: syscall.EINVAL}
	case q.outstanding >= q.depth:
		q.mu.Unlock()
		return &VerbsError{Op: "ibv_post_send", Errno: syscall.ENOMEM}
	}
	q.outstanding++
	q.posted[wrID] = struct{}{}
	q.reads.Add(1)
	q.mu.Unlock()
	go func() {
		defer q.reads.Done()
		err := q.read(local, remoteAddr, rkey)
		q.mu.Lock()
		q.outstanding--
		if err != nil {
			q.state = max(q.state, qpErr)
		}
		// Not delivered if Close stranded it, or if the device no longer
		// delivers completions (Close flushes it then).
		_, deliver := q.posted[wrID]
		deliver = deliver && q.dev.health.Err() == nil
		if deliver {
			delete(q.posted, wrID)
		}
		q.mu.Unlock()
		if deliver && q.onComplete != nil {
			q.onComplete(Completion{WRID: wrID, Err: err})
		}
	}()
	return nil
}

// read does one READ as the NIC would, and returns its completion error.
func (q *memQP) read(local Span, remoteAddr uint64, rkey uint32) error {
	q.mu.Lock()
	st, remote := q.state, q.remote
	q.mu.Unlock()
	if st != qpRTS {
		return &CompletionError{Status: WCWRFlushErr}
	}
	peerDev := q.dev.net.device(remote.LID)
	var peer *memQP
	if peerDev != nil {
		peer = peerDev.qp(remote.QPN)
	}
	if peer == nil {
		return &CompletionError{Status: WCRetryExcErr}
	}
	peer.mu.Lock()
	peerUp := peer.state == qpRTS && peer.remote.QPN == q.qpn && peer.remote.LID == q.dev.lid
	peer.mu.Unlock()
	if !peerUp {
		return &CompletionError{Status: WCRetryExcErr}
	}
	src := peerDev.mr(rkey)
	if src == nil {
		return &CompletionError{Status: WCRemAccessErr}
	}
	defer src.release()
	from := src.bytes(remoteAddr, local.Len)
	if !src.remoteRead || from == nil {
		return &CompletionError{Status: WCRemAccessErr}
	}
	dst := q.dev.mr(local.LKey)
	if dst == nil {
		return &CompletionError{Status: WCLocProtErr}
	}
	defer dst.release()
	to := dst.bytes(local.Addr, local.Len)
	if to == nil {
		return &CompletionError{Status: WCLocProtErr}
	}
	q.dev.net.mu.Lock()
	hook := q.dev.net.hook
	q.dev.net.mu.Unlock()
	if hook == nil {
		copy(to, from)
	} else {
		hook(len(to), func(a, b int) { copy(to[a:b], from[a:b]) })
	}
	return nil
}

func (q *memQP) Close() error {
	q.mu.Lock()
	if q.state == qpClosed {
		q.mu.Unlock()
		return errors.New("rdma: queue pair already closed")
	}
	// Closed refuses new READs and flushes those not yet started.
	q.state = qpClosed
	q.mu.Unlock()
	q.unwatch()
	q.dev.net.mu.Lock()
	fault := q.dev.net.destroyFault
	q.dev.net.mu.Unlock()
	if fault == nil {
		q.reads.Wait() // the NIC is done with every buffer
	}
	// What is still posted had its completion withheld (a failed device),
	// or, with fault, may still be running.
	q.mu.Lock()
	left := takePosted(q.posted)
	q.mu.Unlock()
	if q.onComplete != nil {
		for _, c := range teardownCompletions(left, fault) {
			q.onComplete(c)
		}
	}
	if fault != nil {
		return fault
	}
	q.dev.mu.Lock()
	delete(q.dev.qps, q.qpn)
	q.dev.mu.Unlock()
	return nil
}
