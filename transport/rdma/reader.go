package rdma

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport/wire"
)

// ReaderConfig configures a backend's side of the RDMA data path.
type ReaderConfig struct {
	// Fabric is the opened device; the Reader owns it from now on.
	Fabric Fabric
	// ReceiveBytes sizes the registered receive arena that every READ
	// lands in; an input that does not fit in what is free goes over TCP.
	ReceiveBytes int
	// Depth is how many READs each queue pair keeps posted; more wait
	// their turn.
	Depth int
	// Now is the clock that times READs against the acceptance window
	// (time.Now, monotonic, by default; tests share a fake one with the
	// store).
	Now func() time.Time
	Log zerolog.Logger
}

// DefaultReaderConfig returns the defaults over fabric: 64 MiB of receive
// buffers, 64 READs in flight per frontend.
func DefaultReaderConfig(f Fabric) ReaderConfig {
	return ReaderConfig{Fabric: f, ReceiveBytes: 64 << 20, Depth: 64, Now: time.Now, Log: zerolog.Nop()}
}

// Reader is a backend's side of the RDMA data path: one registered arena
// of receive buffers, and a Session (queue pair) per frontend.
//
// Lifetime of the receive buffers: the arena is mapped and registered by
// NewReader and deregistered and unmapped by Close, which refuses while
// any buffer is out. A buffer is out from the READ that fills it until
// its bytes have been copied into Go memory for the batch (or until its
// READ's completion, for a READ whose batch stopped waiting): the NIC
// may write it until then.
type Reader struct {
	cfg   ReaderConfig
	arena *Arena
	mr    MemoryRegion
	pool  *BufferPool
	stats ReaderStats
}

// ReaderStats count what the Reader did.
type ReaderStats struct {
	// Reads are inputs read and accepted over RDMA; Bytes their bytes.
	Reads, Bytes atomic.Uint64
	// SecondReads are inputs READ again because preprocessing wrote them
	// after their task was sent.
	SecondReads atomic.Uint64
	// Fallbacks are inputs handed back to TCP, SlowReads among them those
	// whose READ outlasted the acceptance window.
	Fallbacks, SlowReads atomic.Uint64
}

// NewReader maps and registers the receive arena.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	switch {
	case cfg.Fabric == nil:
		return nil, errors.New("rdma: reader without a fabric")
	case cfg.ReceiveBytes < 1<<20:
		return nil, fmt.Errorf("rdma: receive arena of %d bytes, want at least 1 MiB", cfg.ReceiveBytes)
	case cfg.Depth < 1:
		return nil, fmt.Errorf("rdma: read depth %d", cfg.Depth)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a, err := MapArena(cfg.ReceiveBytes)
	if err != nil {
		return nil, err
	}
	mr, err := cfg.Fabric.Register(a, false)
	if err != nil {
		_ = a.Unmap()
		return nil, err
	}
	pool, err := NewBufferPool(a, 64)
	if err != nil {
		_ = mr.Deregister()
		_ = a.Unmap()
		return nil, err
	}
	return &Reader{cfg: cfg, arena: a, mr: mr, pool: pool}, nil
}

// Stats returns the Reader's counters.
func (r *Reader) Stats() *ReaderStats { return &r.stats }

// PoolStats returns the receive pool's bookkeeping.
func (r *Reader) PoolStats() PoolStats { return r.pool.Stats() }

// Device names the device, for logs.
func (r *Reader) Device() string { return r.cfg.Fabric.Device() }

// Close releases the receive arena and the device. Every Session must be
// closed first; if buffers are still out, it releases nothing and says so.
func (r *Reader) Close() error {
	if err := r.pool.Close(); err != nil {
		return err
	}
	if err := r.mr.Deregister(); err != nil {
		return err
	}
	if err := r.arena.Unmap(); err != nil {
		return err
	}
	return r.cfg.Fabric.Close()
}

type sessionState uint8

const (
	sessionDialed sessionState = iota // QP in INIT, waiting for RDMAAccept
	sessionUp
	sessionBroken
	sessionClosed
)

// Session is the RDMA path to one frontend: a queue pair brought up over
// that frontend's data connection, the frontend's regions, and its seal
// and acceptance window.
type Session struct {
	r        *Reader
	qp       QueuePair
	onBroken func(*Session, error)

	mu       sync.Mutex
	state    sessionState
	seal     uint64
	window   time.Duration
	regions  map[uint32]wire.RDMARegion
	inflight map[uint64]*readOp
	queue    []*readOp // waiting for room in the send queue
	nextWR   uint64
}

// Errors that send a read to TCP.
var (
	errNotUp         = errors.New("rdma: no RDMA session with the frontend")
	errSessionClosed = errors.New("rdma: RDMA session closed")
)

// Dial creates a queue pair for one frontend and returns the RDMAConnect
// to send it on the data connection. onBroken is called once, on a
// goroutine of its own, if the queue pair fails (a READ's error
// completion): the Session then sends every read to TCP, and the caller
// closes it and may Dial anew.
func (r *Reader) Dial(onBroken func(*Session, error)) (*Session, *wire.RDMAConnect, error) {
	s := &Session{r: r, onBroken: onBroken, regions: map[uint32]wire.RDMARegion{}, inflight: map[uint64]*readOp{}}
	qp, err := r.cfg.Fabric.NewQueuePair(r.cfg.Depth, s.onComplete)
	if err != nil {
		return nil, nil, err
	}
	s.qp = qp
	return s, &wire.RDMAConnect{Endpoint: qp.Endpoint()}, nil
}

// QPN is the session's queue pair number, which RDMAAccept and RDMARefuse
// name.
func (s *Session) QPN() uint32 { return s.qp.Endpoint().QPN }

// Accept completes the bring-up with the frontend's answer.
func (s *Session) Accept(m *wire.RDMAAccept) error {
	if m.ForQPN != s.QPN() {
		return fmt.Errorf("rdma: accept for queue pair %#x, ours is %#x", m.ForQPN, s.QPN())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sessionDialed {
		return fmt.Errorf("rdma: accept in session state %d", s.state)
	}
	if err := s.qp.Connect(m.Endpoint); err != nil {
		return err
	}
	s.seal, s.window = m.Seal, m.ReuseDelay/2
	for _, rg := range m.Regions {
		s.regions[rg.ID] = rg
	}
	s.state = sessionUp
	return nil
}

// AddRegions learns regions registered after the accept.
func (s *Session) AddRegions(rs []wire.RDMARegion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rg := range rs {
		s.regions[rg.ID] = rg
	}
}

// Up reports whether the session reads over RDMA.
func (s *Session) Up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == sessionUp
}

// Regions is how many of the frontend's regions the session knows.
func (s *Session) Regions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.regions)
}

// Close destroys the queue pair: reads in flight end and go to TCP, and
// the NIC writes none of their buffers any more.
func (s *Session) Close() {
	s.mu.Lock()
	if s.state == sessionClosed {
		s.mu.Unlock()
		return
	}
	s.state = sessionClosed
	queued := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, op := range queued {
		s.finish(op, errSessionClosed)
	}
	// Flushes every READ in flight through onComplete.
	_ = s.qp.Close()
}

// Outcome is one input's read: Data (Go memory, the caller's) if it came
// over RDMA and passed the slot checks, or Fallback, the reason it must be
// asked for over TCP, which answers for sure (the bytes, that the input
// is gone, or after waiting for preprocessing).
type Outcome struct {
	Data     []byte
	Fallback error
}

// Batch is the READs of one Start.
type Batch struct {
	s   *Session
	ops []*readOp
}

// readOp is one input's READ, from Start to Wait (or, if Wait stopped
// waiting, to its completion).
type readOp struct {
	ref   wire.InputRef
	raddr uint64
	rkey  uint32
	n     uint32
	buf   Buffer
	round int       // 1, or 2 for the second READ of a preprocessed slot
	t0    time.Time // when its current READ was posted

	// Set under Session.mu; done closes once err is final.
	finished  bool
	abandoned bool // Wait stopped waiting; the completion returns buf
	hasBuf    bool
	err       error
	done      chan struct{}
}

// Start posts a READ of every ref's slot (header and input) at once and
// returns at once; Wait collects them.
func (s *Session) Start(refs []wire.InputRef) *Batch {
	b := &Batch{s: s, ops: make([]*readOp, len(refs))}
	for i, ref := range refs {
		op := &readOp{ref: ref, round: 1, done: make(chan struct{})}
		b.ops[i] = op
		s.mu.Lock()
		err := s.prepare(op)
		if err == nil {
			s.post(op)
		}
		s.mu.Unlock()
		if err != nil {
			s.finish(op, err)
		}
	}
	return b
}

// prepare finds op's remote slot and takes its receive buffer; under mu.
func (s *Session) prepare(op *readOp) error {
	if s.state != sessionUp {
		return errNotUp
	}
	rg, ok := s.regions[op.ref.Region]
	if !ok {
		return fmt.Errorf("rdma: region %d of input %d not announced", op.ref.Region, op.ref.Key)
	}
	addr, n, err := readSpan(rg, op.ref)
	if err != nil {
		return err
	}
	buf, err := s.r.pool.Get(int(n))
	if err != nil {
		return err
	}
	op.raddr, op.rkey, op.n, op.buf, op.hasBuf = addr, rg.RKey, n, buf, true
	return nil
}

// post posts op's READ, or queues it while the send queue is full; under
// mu. A refused post breaks the session.
func (s *Session) post(op *readOp) {
	if len(s.inflight) >= s.r.cfg.Depth {
		s.queue = append(s.queue, op)
		return
	}
	s.nextWR++
	wr := s.nextWR
	s.inflight[wr] = op
	op.t0 = s.r.cfg.Now()
	local := Span{Addr: s.r.pool.Addr(op.buf), Len: op.n, LKey: s.r.mr.LKey()}
	if err := s.qp.PostRead(wr, local, op.raddr, op.rkey); err != nil {
		delete(s.inflight, wr)
		s.breakLocked(err)
		s.finishLocked(op, err)
	}
}

// onComplete is the queue pair's completion callback.
func (s *Session) onComplete(c Completion) {
	s.mu.Lock()
	op := s.inflight[c.WRID]
	delete(s.inflight, c.WRID)
	for len(s.queue) > 0 && len(s.inflight) < s.r.cfg.Depth && s.state == sessionUp {
		next := s.queue[0]
		s.queue = s.queue[1:]
		s.post(next)
	}
	if op == nil {
		s.mu.Unlock()
		return
	}
	if c.Err != nil {
		var ce *CompletionError
		if !errors.As(c.Err, &ce) || !ce.Flushed() {
			s.breakLocked(c.Err)
		}
		s.finishLocked(op, c.Err)
		s.mu.Unlock()
		return
	}
	err, again := s.verdict(op)
	if again {
		op.round = 2
		s.r.stats.SecondReads.Add(1)
		if s.state == sessionUp {
			s.post(op)
		} else {
			s.finishLocked(op, errSessionClosed)
		}
		s.mu.Unlock()
		return
	}
	s.finishLocked(op, err)
	s.mu.Unlock()
}

// SlowReadError: a READ completed, but later than the acceptance window
// allows, so its bytes may include a reused slot's and are not used.
type SlowReadError struct{ Took, Window time.Duration }

func (e *SlowReadError) Error() string {
	return fmt.Sprintf("rdma: READ took %v, over the %v acceptance window", e.Took, e.Window)
}

// verdict judges a READ that completed: nil if its bytes are op.ref's,
// again if the slot must be read once more, or why the input goes to TCP.
// Under mu (for seal and window; the buffer is op's alone).
func (s *Session) verdict(op *readOp) (err error, again bool) {
	if took := s.r.cfg.Now().Sub(op.t0); took >= s.window {
		s.r.stats.SlowReads.Add(1)
		return &SlowReadError{Took: took, Window: s.window}, false
	}
	st, err := CheckHeader(s.r.pool.Bytes(op.buf), s.seal, op.ref)
	if err != nil {
		return err, false
	}
	switch {
	case st == SlotReady && op.round == 1, st == SlotPreprocessed && op.round == 2:
		return nil, false
	case st == SlotPreprocessed:
		return nil, true
	}
	return &SlotError{Key: op.ref.Key, Reason: "input " + st.String()}, false
}

// breakLocked marks the session broken after a failed READ and tells the
// owner; under mu.
func (s *Session) breakLocked(err error) {
	if s.state != sessionUp {
		return
	}
	s.state = sessionBroken
	for _, op := range s.queue {
		s.finishLocked(op, errNotUp)
	}
	s.queue = nil
	if s.onBroken != nil {
		go s.onBroken(s, err)
	}
}

func (s *Session) finish(op *readOp, err error) {
	s.mu.Lock()
	s.finishLocked(op, err)
	s.mu.Unlock()
}

// finishLocked ends op with err (nil: its buffer holds ref's slot); under
// mu. An abandoned op's buffer goes back to the pool now.
func (s *Session) finishLocked(op *readOp, err error) {
	if op.finished {
		return
	}
	op.finished, op.err = true, err
	if op.abandoned && op.hasBuf {
		_ = s.r.pool.Put(op.buf)
		op.hasBuf = false
	}
	close(op.done)
}

// Wait waits for every READ of the batch, or for ctx. Each outcome holds
// the input's bytes or why it goes to TCP; reads still in flight when ctx
// ends get ctx's error, and their buffers return to the pool when their
// READs complete.
func (b *Batch) Wait(ctx context.Context) []Outcome {
	s := b.s
	out := make([]Outcome, len(b.ops))
	for i, op := range b.ops {
		select {
		case <-op.done:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if !op.finished {
			op.abandoned = true
			s.mu.Unlock()
			out[i].Fallback = ctx.Err()
			s.r.stats.Fallbacks.Add(1)
			continue
		}
		s.mu.Unlock()
		out[i] = s.collect(op)
	}
	return out
}

// collect turns a finished op into its outcome and returns its buffer.
func (s *Session) collect(op *readOp) Outcome {
	var o Outcome
	if op.err == nil {
		o.Data = make([]byte, op.ref.Length)
		copy(o.Data, s.r.pool.Bytes(op.buf)[HeaderSize:HeaderSize+op.ref.Length])
		s.r.stats.Reads.Add(1)
		s.r.stats.Bytes.Add(uint64(op.ref.Length))
	} else {
		o.Fallback = op.err
		s.r.stats.Fallbacks.Add(1)
	}
	if op.hasBuf {
		_ = s.r.pool.Put(op.buf)
		op.hasBuf = false
	}
	return o
}
