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
	// Alarm, with Now, is the Reader's timer: it returns a channel that
	// receives once Now reads at or later, and a function that releases
	// it. Batch.Wait uses it to stop waiting for a READ at its acceptance
	// deadline. nil: a runtime timer for the time Now says is left, which
	// suits time.Now; a test with a fake Now gives one that goes off as it
	// moves the clock. Wait checks Now itself when woken, so an alarm that
	// goes off early costs only a wake-up, and one that goes off late only
	// delays the fallback.
	Alarm func(at time.Time) (<-chan time.Time, func())
	Log   zerolog.Logger
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
// may write it until then. A buffer whose READ was stranded (its queue
// pair could not be destroyed) is leaked: out for good, so that the arena
// is never unmapped nor the buffer reused while the NIC may write it.
type Reader struct {
	cfg   ReaderConfig
	arena *Arena
	mr    MemoryRegion
	pool  *BufferPool
	stats ReaderStats

	deviceFailed atomic.Bool // a session heard that the device failed: logged once
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
	if cfg.Alarm == nil {
		now := cfg.Now
		cfg.Alarm = func(at time.Time) (<-chan time.Time, func()) {
			t := time.NewTimer(at.Sub(now()))
			return t.C, func() { t.Stop() }
		}
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
// completion, or the device no longer delivering completions): the
// Session then sends every read to TCP, and the caller closes it and may
// Dial anew.
func (r *Reader) Dial(onBroken func(*Session, error)) (*Session, *wire.RDMAConnect, error) {
	s := &Session{r: r, onBroken: onBroken, regions: map[uint32]wire.RDMARegion{}, inflight: map[uint64]*readOp{}}
	qp, err := r.cfg.Fabric.NewQueuePair(r.cfg.Depth, s.onComplete, s.onFail)
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
	s.dropQueueLocked(errSessionClosed)
	s.mu.Unlock()
	// Flushes every READ in flight through onComplete (or strands it, if
	// the queue pair cannot be destroyed: see onComplete).
	if err := s.qp.Close(); err != nil {
		s.r.cfg.Log.Error().Err(err).Str("device", s.r.Device()).Uint32("qpn", s.QPN()).
			Msg("RDMA queue pair teardown failed")
	}
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
	queued    bool      // in Session.queue, not posted
	queuedAt  time.Time // when it was queued
	finished  bool
	abandoned bool // Wait stopped waiting; the completion returns buf
	hasBuf    bool
	err       error
	done      chan struct{}
}

// deadline is when Wait gives up on op, which has not finished: the end
// of its READ's acceptance window, past which the READ would be refused
// anyway; for a queued op, a window after it was queued (a send queue that
// has not moved for that long holds READs past their own deadlines).
// Under mu.
func (s *Session) deadline(op *readOp) time.Time {
	if op.queued {
		return op.queuedAt.Add(s.window)
	}
	return op.t0.Add(s.window)
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
		op.queued, op.queuedAt = true, s.r.cfg.Now()
		s.queue = append(s.queue, op)
		return
	}
	op.queued = false
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
	if c.Stranded {
		s.strandLocked(op, c.Err)
	}
	if c.Err == nil && op.abandoned {
		// Nobody waits for it: no verdict (nor second READ), only its
		// buffer back.
		s.finishLocked(op, errAbandoned)
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

// onFail is the queue pair's failure callback: the device no longer
// delivers completions, so the session breaks (its owner sends reads to
// TCP and closes it, which ends the READs in flight).
func (s *Session) onFail(err error) {
	if !s.r.deviceFailed.Swap(true) {
		s.r.cfg.Log.Error().Err(err).Str("device", s.r.Device()).
			Msg("RDMA device stopped delivering completions; every session on it falls back to TCP")
	}
	s.mu.Lock()
	s.breakLocked(err)
	s.mu.Unlock()
}

// strandLocked keeps op's buffer out of the pool for good: its READ was
// given up by a queue pair that could not be destroyed, so the NIC may
// still write it. Under mu.
func (s *Session) strandLocked(op *readOp, why error) {
	if !op.hasBuf {
		return
	}
	op.hasBuf = false
	if err := s.r.pool.Leak(op.buf); err != nil {
		s.r.cfg.Log.Error().Err(err).Msg("leaking a stranded receive buffer")
		return
	}
	s.r.cfg.Log.Error().Err(why).Str("device", s.r.Device()).Int("offset", op.buf.Off).Int("bytes", op.buf.Len).
		Msg("receive buffer leaked: the NIC may still write it")
}

// errAbandoned ends a READ that completed after Wait gave up on it; no one
// sees it.
var errAbandoned = errors.New("rdma: READ completed after its batch stopped waiting")

// SlowReadError: a READ completed later than the acceptance window allows,
// so its bytes may include a reused slot's and are not used; or, with
// Pending, Wait gave up on it at the window's end, when it had not
// completed (or, queued, not even been posted), since it would be refused
// anyway.
type SlowReadError struct {
	Took, Window time.Duration
	Pending      bool
}

func (e *SlowReadError) Error() string {
	if e.Pending {
		return fmt.Sprintf("rdma: READ not done after %v, past the %v acceptance window", e.Took, e.Window)
	}
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
	s.dropQueueLocked(errNotUp)
	if s.onBroken != nil {
		go s.onBroken(s, err)
	}
}

// dropQueueLocked ends every queued op with err; under mu.
func (s *Session) dropQueueLocked(err error) {
	for _, op := range s.queue {
		op.queued = false
		s.finishLocked(op, err)
	}
	s.queue = nil
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

// Wait waits for every READ of the batch, each until its acceptance
// deadline, or for ctx. Each outcome holds the input's bytes or why it
// goes to TCP. A READ not done by its deadline (see deadline) would be
// refused anyway: Wait gives up on it at once, with a *SlowReadError
// (Pending), so that a stalled queue pair (a frontend that vanished,
// which the NIC notices only after its retries) delays a batch by one
// window at most. Reads still in flight when ctx ends get ctx's error.
// The buffers of READs given up return to the pool when their READs
// complete (or are flushed).
func (b *Batch) Wait(ctx context.Context) []Outcome {
	out := make([]Outcome, len(b.ops))
	for i, op := range b.ops {
		out[i] = b.s.await(ctx, op)
	}
	return out
}

// await waits for op until it finishes, its deadline passes or ctx ends.
func (s *Session) await(ctx context.Context, op *readOp) Outcome {
	for {
		s.mu.Lock()
		if op.finished {
			s.mu.Unlock()
			return s.collect(op)
		}
		at := s.deadline(op)
		if now := s.r.cfg.Now(); !now.Before(at) {
			since := op.t0
			if op.queued {
				since = op.queuedAt
			}
			err := &SlowReadError{Took: now.Sub(since), Window: s.window, Pending: true}
			s.r.stats.SlowReads.Add(1)
			s.abandonLocked(op, err)
			s.mu.Unlock()
			s.r.stats.Fallbacks.Add(1)
			return Outcome{Fallback: err}
		}
		s.mu.Unlock()
		alarm, stop := s.r.cfg.Alarm(at)
		select {
		case <-op.done:
		case <-alarm:
		case <-ctx.Done():
		}
		stop()
		if ctx.Err() == nil {
			continue
		}
		s.mu.Lock()
		if op.finished {
			s.mu.Unlock()
			return s.collect(op)
		}
		s.abandonLocked(op, ctx.Err())
		s.mu.Unlock()
		s.r.stats.Fallbacks.Add(1)
		return Outcome{Fallback: ctx.Err()}
	}
}

// abandonLocked stops waiting for op, which has not finished; under mu. A
// queued op leaves the queue, never posted, and its buffer returns now; a
// posted op's buffer returns with its READ's completion or flush.
func (s *Session) abandonLocked(op *readOp, err error) {
	op.abandoned = true
	if !op.queued {
		return
	}
	for i, q := range s.queue {
		if q == op {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	op.queued = false
	s.finishLocked(op, err)
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
