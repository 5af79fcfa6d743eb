package rdma

import (
	"fmt"

	"github.com/symphony-serving/symphony/transport/wire"
)

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
	// fabric's completion goroutine, and must not block. onFail (which may
	// be nil) is called at most once, if the device stops delivering
	// completions for good (a *DeviceError): the READs still posted then
	// end only when the queue pair is closed. Once the device has failed,
	// NewQueuePair and PostRead refuse with that error.
	NewQueuePair(depth int, onComplete func(Completion), onFail func(error)) (QueuePair, error)
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
	// destroys it. After Close no completion of it is delivered and, if it
	// returns nil, the NIC no longer writes any buffer it was given. If the
	// queue pair could not be destroyed, Close returns why, and the READs
	// that had not completed are delivered as Stranded: the NIC may still
	// write their buffers, which must never be reused.
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
// *CompletionError; or, with Stranded, a READ given up by the Close of a
// queue pair that could not be destroyed.
type Completion struct {
	WRID uint64
	Err  error
	// Stranded: the READ never completed and its queue pair still exists,
	// so the NIC may write its local buffer at any later time. The buffer
	// must be kept out of use for good (leaked), never returned to a pool
	// whose next user would check a header that a late DMA could change.
	Stranded bool
}

// takePosted returns the work requests in posted, still awaiting their
// completions, and empties it: what a queue pair's Close must complete
// itself (see teardownCompletions).
func takePosted(posted map[uint64]struct{}) []uint64 {
	left := make([]uint64, 0, len(posted))
	for wr := range posted {
		left = append(left, wr)
	}
	clear(posted)
	return left
}

// teardownCompletions are the completions a queue pair's Close delivers
// for the READs (wrs) still posted once it has destroyed the queue pair,
// or failed to (destroyErr, ibv_destroy_qp's error). Destroyed, the
// device no longer processes the queue pair, so the READs are flushed and
// their buffers may be reused. Not destroyed, the device may still carry
// them out: they are stranded.
func teardownCompletions(wrs []uint64, destroyErr error) []Completion {
	out := make([]Completion, len(wrs))
	for i, wr := range wrs {
		if destroyErr == nil {
			out[i] = Completion{WRID: wr, Err: &CompletionError{Status: WCWRFlushErr}}
		} else {
			out[i] = Completion{WRID: wr, Stranded: true,
				Err: fmt.Errorf("rdma: READ stranded: its queue pair was not destroyed: %w", destroyErr)}
		}
	}
	return out
}
