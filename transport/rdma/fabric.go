package rdma

import "github.com/symphony-serving/symphony/transport/wire"

// Fabric is an opened RDMA device as the rest of the package uses it: a
// protection domain, its memory registrations and its RC queue pairs. Open
// (the rdma build) implements it over libibverbs; MemNetwork emulates it in
// one process, so that everything above the device (the handshake, slot
// checks, fallbacks, buffer bookkeeping) runs in the default build's tests.
type Fabric interface {
	// Device names the device, for logs.
	Device() string
	// Register registers all of a's memory in the protection domain: for
	// the local NIC to write (a backend's receive buffers), and, with
	// remoteRead, for peers to READ (a frontend's input regions). Only an
	// Arena can be registered: Go memory is never handed to the NIC.
	Register(a *Arena, remoteRead bool) (MemoryRegion, error)
	// NewQueuePair creates an RC queue pair in the INIT state with room
	// for depth outstanding READs. onComplete (nil for a queue pair that
	// never posts, a frontend's) gets each READ's completion, on the
	// fabric's completion goroutine, and must not block.
	NewQueuePair(depth int, onComplete func(Completion)) (QueuePair, error)
	// Close releases the device. Every queue pair and memory region must
	// be closed first.
	Close() error
}

// MemoryRegion is a registered Arena.
type MemoryRegion interface {
	// LKey is the key of local work requests' scatter entries.
	LKey() uint32
	// RKey is the key a peer READs with.
	RKey() uint32
	// Deregister ends the registration: the NIC no longer touches the
	// arena, which its owner may then unmap.
	Deregister() error
}

// QueuePair is one RC queue pair.
type QueuePair interface {
	// Endpoint is what the peer needs to connect to this queue pair.
	Endpoint() wire.RDMAEndpoint
	// Connect moves the queue pair through ready-to-receive to
	// ready-to-send, towards remote.
	Connect(remote wire.RDMAEndpoint) error
	// PostRead posts one signaled READ of local.Len bytes at remoteAddr
	// (rkey) into local. Its completion, with wrID, goes to onComplete.
	PostRead(wrID uint64, local Span, remoteAddr uint64, rkey uint32) error
	// Close moves the queue pair to the error state, waits until every
	// posted READ has completed (flushed ones with WCWRFlushErr) and
	// destroys it. After Close no completion of it is delivered and the
	// NIC no longer writes any buffer it was given.
	Close() error
}

// Span is a local scatter entry: Len bytes at Addr, in the memory region
// of LKey.
type Span struct {
	Addr uint64
	Len  uint32
	LKey uint32
}

// Completion is one finished READ: Err is nil on success, or a
// *CompletionError.
type Completion struct {
	WRID uint64
	Err  error
}
