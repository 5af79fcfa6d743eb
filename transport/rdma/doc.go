// Package rdma is Symphony's RDMA data path (paper §4.6, §5.5): backends
// fetch inputs from frontends with one-sided RDMA READs of the frontends'
// registered input stores, so that a frontend's CPU takes no part in a
// batch's incast.
//
// # Pieces
//
// A frontend's Exporter maps each shared region of its input store
// (frontend.InputStore, through its RegionAllocator seam) and registers
// it for remote READ. A backend's Reader registers one arena of receive
// buffers, handed out by a BufferPool. Per data connection (backend to
// frontend, the TCP connection that already carries TCP reads and
// results), the backend creates an RC queue pair and sends RDMAConnect;
// the frontend creates its own, connects it and answers RDMAAccept with
// the keys of its regions (wire messages, msgpack); both move their queue
// pairs to ready-to-send. A Session then READs each input's slot into a
// receive buffer, polls the completion, checks the slot and copies the
// input into Go memory for the batch. Whatever a Session cannot vouch for
// goes back to the caller, which asks over TCP: the TCP answer (the
// bytes, "gone", or the bytes after preprocessing) is authoritative, so
// the RDMA path never changes what a request sees, only how fast.
//
// The verbs calls live in verbs.go, built with the rdma build tag
// (libibverbs-dev; cgo). The default build is pure Go: Open and Available
// report ErrNotBuilt, so --data-path=auto falls back to TCP and
// --data-path=rdma fails at startup. MemNetwork emulates a fabric in one
// process, so that everything above the verbs calls is tested without a
// NIC.
//
// # Memory
//
// Go memory is never handed to the NIC. Only Arenas (anonymous mmap,
// outside the Go heap, unmapped explicitly) are registered: each shared
// store region (owned by the store, mapped and unmapped by the Exporter)
// and each Reader's receive arena. The comments on Arena, BufferPool,
// Reader, Exporter and frontend.InputStore give each buffer's lifetime.
//
// # Why a READ never returns another request's bytes
//
// The frontend's CPU does not see READs, so it cannot check keys as the
// TCP server does, and a NIC may read a message's bytes in any order.
// Each input lives in a slot behind a header (slot.go): its key, length,
// state, and a check made with the store's seal, a random secret that
// only backends learn (in RDMAAccept). The store keeps three rules:
//
//  1. An input's bytes and header are written before its task is sent to
//     the scheduler (Put), or, for an input that preprocessing fills
//     later (Reserve), the header says pending until the last write and
//     preprocessed after it.
//  2. When an input's space is given back (the request ended, and no
//     preprocessing or TCP send still uses it), its header is zeroed
//     first, at time g.
//  3. No byte of that space is written again before g + D, the reuse
//     delay (DefaultReuseDelay), announced to backends.
//
// A backend READs header and input in one READ, posted at t0, whose
// completion it sees at t1, and accepts it only if t1 - t0 < D/2 and the
// header holds the input's key and length, the right check, and state
// ready. All the READ's memory accesses happen within [t0, t1]. Suppose an
// accepted READ saw a byte not written by its own request K: that byte
// was written for another request at some w <= t1, and by rule 3
// w >= g + D, so g <= t1 - D < t0. Then the header was read after g, when
// rule 2 had zeroed it, and later writes are other requests' headers
// (other keys) or inputs (which cannot carry a check without the seal):
// the header could not have passed. Bytes from before K's writes cannot
// be seen either, since by rule 1 those were done before the plan that
// names K existed, so before t0. Hence every byte is K's. The margin
// D/2 absorbs clock rate differences and the time between zeroing a
// header and recording g (recorded after the write).
//
// A preprocessed slot is READ a second time, posted after the first READ
// completed showing it preprocessed, so after the last preprocessing
// write: the second READ cannot see a byte from before it, and the same
// argument covers reuse. A pending, failed, released or foreign slot, a
// READ over the window, and any READ error go to TCP. A READ not done by
// the end of its window would be refused anyway, so a batch stops waiting
// for it then and asks over TCP; its receive buffer stays out until the
// READ completes or is flushed.
//
// A receive buffer returns to the pool only once the NIC can no longer
// write it: after its READ's completion, or after its queue pair was
// destroyed. If a queue pair cannot be destroyed, the buffers of its
// unfinished READs are leaked (counted in PoolStats, logged) and the
// arena stays mapped: a late DMA into a reused buffer could change a
// later read's bytes after its header was checked. If the device stops
// delivering completions (its completion channel or a queue fails), every
// session on it breaks, and no queue pair is made on it any more.
//
// What this rests on: x86-style store ordering between the CPU's writes
// and the NIC's DMA reads (a header read that sees a write also sees the
// writes before it; the store writes under a mutex), monotonic clocks
// running at about the same rate on both machines, request keys never
// reused by a store, and the seal staying secret from the apps whose
// bytes fill the store.
package rdma
