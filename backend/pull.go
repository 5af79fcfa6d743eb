package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Puller reads inputs from frontends. The interface is a one-sided read of
// registered regions (wire.InputRef: region, offset, length), so that an
// RDMA implementation (RDMA READ of the frontend's registered memory) can
// replace the TCP one without changing the backend.
type Puller interface {
	// ReadAll fills each read's Dst[i] with its Ops[i]'s bytes, reading
	// from every frontend at once; a nil Dst[i] where errs[k] is nil means
	// that input is no longer there. errs[k] is set if reads[k]'s frontend
	// could not be reached by ctx's deadline.
	ReadAll(ctx context.Context, reads []PullRead) (errs []error)
}

// errNoFrontend: the frontend is unknown or its data connection is down.
var errNoFrontend = errors.New("no data connection to the frontend")

// tcpPuller reads inputs over each frontend's data connection (a Read
// message answered by a ReadReply) and sends results back on it.
type tcpPuller struct {
	net     transport.Network
	name    string
	backoff transport.Backoff
	log     zerolog.Logger
	// warn is log rate-limited, for lines that can repeat per batch.
	warn zerolog.Logger
	// hooks, if set, ride each data connection (the RDMA path brings its
	// queue pairs up over them); set before the first up.
	hooks connHooks

	// undelivered counts the results send could not deliver (the agent
	// points it at its Stats).
	undelivered *atomic.Uint64

	mu    sync.Mutex
	peers map[uint32]*peer
}

// connHooks lets another data path ride each frontend's data connection:
// the RDMA path exchanges its queue pair's endpoints and its regions over
// it. Calls for one connection come in order: up, messages, down.
type connHooks interface {
	connUp(pe *peer, c transport.Conn, w *wire.Welcome)
	connMessage(pe *peer, c transport.Conn, m wire.Message)
	connDown(pe *peer, c transport.Conn)
}

// peer is one frontend's data connection, kept up with backoff until the
// scheduler says the frontend is gone.
type peer struct {
	id      uint32
	addr    string
	cancel  context.CancelFunc
	mu      sync.Mutex
	conn    transport.Conn
	upCh    chan struct{} // closed once conn is set; renewed when it drops
	seq     uint64
	waiting map[uint64]chan *wire.ReadReply
	results *transport.Coalescer[wire.Result]
	// closing closes when the peer is going: results no longer wait for
	// its connection to come up.
	closing chan struct{}
}

func newTCPPuller(n transport.Network, name string, b transport.Backoff, log zerolog.Logger) *tcpPuller {
	return &tcpPuller{net: n, name: name, backoff: b, log: log, warn: log, undelivered: new(atomic.Uint64), peers: map[uint32]*peer{}}
}

// up starts (or keeps) the data connection to frontend id.
func (p *tcpPuller) up(id uint32, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.peers[id]; old != nil {
		if old.addr == addr {
			return
		}
		// The ID now names another frontend (a restarted scheduler
		// numbers them anew): the old one's results have nowhere to go.
		close(old.closing)
		old.cancel()
		go old.results.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	pe := &peer{id: id, addr: addr, cancel: cancel, upCh: make(chan struct{}), waiting: map[uint64]chan *wire.ReadReply{}, closing: make(chan struct{})}
	pe.results = transport.NewCoalescer(func(rs []wire.Result) {
		c := pe.awaitConn(resultWait)
		for len(rs) > 0 {
			n, size := 0, 0
			for n < len(rs) && (n == 0 || size+len(rs[n].Output) <= maxReplyBytes) {
				size += len(rs[n].Output)
				n++
			}
			if c == nil || c.Send(&wire.Results{Results: rs[:n]}) != nil {
				p.lost(id, n, "its data connection is down")
			}
			rs = rs[n:]
		}
	})
	p.peers[id] = pe
	go transport.KeepDialing(ctx, p.backoff, p.log.With().Uint32("frontend", id).Logger(), func(ctx context.Context) error {
		return p.session(ctx, pe)
	})
}

// sync brings the data connections in line with the scheduler's list of
// live frontends, as a (re)connection's Welcome gives it: it keeps or
// starts those listed and closes every other. The others are frontends
// that left while this backend was away from the scheduler, whose
// FrontendDown went to a connection that is gone; kept, each would be
// redialed forever, and its ID might since name another frontend.
func (p *tcpPuller) sync(live []wire.FrontendUp) {
	listed := make(map[uint32]bool, len(live))
	for _, f := range live {
		listed[f.ID] = true
	}
	p.mu.Lock()
	var gone []uint32
	for id := range p.peers {
		if !listed[id] {
			gone = append(gone, id)
		}
	}
	p.mu.Unlock()
	for _, id := range gone {
		p.down(id)
	}
	for _, f := range live {
		p.up(f.ID, f.DataAddr)
	}
}

// down closes the data connection to frontend id, once the results
// queued for it have been handed to the connection: a drained backend
// closes right after its last batch, whose results must still go out.
func (p *tcpPuller) down(id uint32) {
	p.mu.Lock()
	pe := p.peers[id]
	delete(p.peers, id)
	p.mu.Unlock()
	if pe != nil {
		close(pe.closing) // a flush waiting for a connection gives up
		pe.results.Close()
		pe.cancel()
	}
}

// flush waits until the results queued so far for every frontend have
// been handed to its data connection (or booked undelivered): a backend
// moving to another scheduler flushes before that scheduler's frontends,
// which may reuse these frontends' IDs, replace the connections.
func (p *tcpPuller) flush() {
	p.mu.Lock()
	peers := make([]*peer, 0, len(p.peers))
	for _, pe := range p.peers {
		peers = append(peers, pe)
	}
	p.mu.Unlock()
	for _, pe := range peers {
		pe.results.Flush()
	}
}

// closeAll closes every data connection.
func (p *tcpPuller) closeAll() {
	p.mu.Lock()
	ids := make([]uint32, 0, len(p.peers))
	for id := range p.peers {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.down(id)
	}
}

func (p *tcpPuller) session(ctx context.Context, pe *peer) error {
	closed := make(chan struct{})
	gone := false // the connection closed, perhaps before Dial returned; under pe.mu
	h := transport.HandlerFuncs{
		Message: func(c transport.Conn, m wire.Message) {
			if !pe.onMessage(m) && p.hooks != nil {
				p.hooks.connMessage(pe, c, m)
			}
		},
		Closed: func(c transport.Conn, err error) {
			if p.hooks != nil {
				p.hooks.connDown(pe, c)
			}
			pe.mu.Lock()
			gone = true
			if pe.conn == c {
				pe.conn = nil
				pe.upCh = make(chan struct{})
			}
			// Fail every read waiting on this connection.
			for seq, ch := range pe.waiting {
				close(ch)
				delete(pe.waiting, seq)
			}
			pe.mu.Unlock()
			close(closed)
		},
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, welcome, err := p.net.Dial(dctx, pe.addr, &wire.Hello{Version: wire.Version, Role: wire.RolePuller, Name: p.name}, h)
	cancel()
	if err != nil {
		return err
	}
	pe.mu.Lock()
	up := !gone
	if up {
		pe.conn = conn
		close(pe.upCh)
	}
	pe.mu.Unlock()
	if up && p.hooks != nil {
		p.hooks.connUp(pe, conn, welcome)
	}
	select {
	case <-closed:
		return errors.New("data connection closed")
	case <-ctx.Done():
		conn.Close(errors.New("frontend gone"))
		<-closed
		return ctx.Err()
	}
}

// resultWait bounds how long results wait for their frontend's data
// connection to come up: a new backend's first results (drops, say) can be
// ready before its connection is; past a second no SLO is still open.
const resultWait = time.Second

// awaitConn returns the peer's connection, waiting up to d for it to come
// up; nil if it does not, or the peer is going.
func (pe *peer) awaitConn(d time.Duration) transport.Conn {
	pe.mu.Lock()
	c, up := pe.conn, pe.upCh
	pe.mu.Unlock()
	if c != nil {
		return c
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-pe.closing:
	}
	pe.mu.Lock()
	defer pe.mu.Unlock()
	return pe.conn
}

// onMessage takes a read reply; it reports false for any other message.
func (pe *peer) onMessage(m wire.Message) bool {
	rep, ok := m.(*wire.ReadReply)
	if !ok {
		return false
	}
	pe.mu.Lock()
	ch := pe.waiting[rep.Seq]
	delete(pe.waiting, rep.Seq)
	pe.mu.Unlock()
	if ch != nil {
		ch <- rep
	}
	return true
}

func (p *tcpPuller) peer(id uint32) *peer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peers[id]
}

// Read is ReadAll for one frontend.
func (p *tcpPuller) Read(ctx context.Context, frontend uint32, ops []wire.InputRef, dst [][]byte) error {
	errs := p.ReadAll(ctx, []PullRead{{Frontend: frontend, Ops: ops, Dst: dst}})
	return errs[0]
}

// PullRead is one frontend's share of a batch's reads.
type PullRead struct {
	Frontend uint32
	Ops      []wire.InputRef
	Dst      [][]byte
}

// ReadAll implements Puller: it sends every frontend its Read first, then waits for the replies:
// one goroutine drives the whole incast, so the batch waits for its slowest
// frontend and for nothing else. errs[i] is reads[i]'s error.
func (p *tcpPuller) ReadAll(ctx context.Context, reads []PullRead) (errs []error) {
	errs = make([]error, len(reads))
	type pending struct {
		read     int // index into reads
		from, to int // the ops of reads[read] this Read covers
		ch       chan *wire.ReadReply
		forget   func()
		err      error
	}
	var waits []pending
	for i, r := range reads {
		// Split a frontend's reads so that no reply frame comes near the
		// frame limit.
		for from := 0; from < len(r.Ops); {
			to, size := from, 0
			for to < len(r.Ops) && (to == from || size+int(r.Ops[to].Length) <= maxReplyBytes) {
				size += int(r.Ops[to].Length)
				to++
			}
			ch, forget, err := p.issue(ctx, r.Frontend, r.Ops[from:to])
			waits = append(waits, pending{read: i, from: from, to: to, ch: ch, forget: forget, err: err})
			from = to
		}
	}
	for _, w := range waits {
		r := reads[w.read]
		err := w.err
		if err == nil {
			select {
			case rep, ok := <-w.ch:
				err = fill(rep, ok, r.Ops[w.from:w.to], r.Dst[w.from:w.to])
			case <-ctx.Done():
				w.forget()
				err = ctx.Err()
			}
		}
		if err != nil && errs[w.read] == nil {
			errs[w.read] = err
		}
	}
	return errs
}

// maxReplyBytes bounds the input bytes one Read asks for, and the output
// bytes one Results frame carries, well under wire.DefaultMaxFrame.
const maxReplyBytes = 32 << 20

// issue sends a Read to frontend and returns the channel its reply will
// come on, waiting for the data connection if it is still being dialed.
func (p *tcpPuller) issue(ctx context.Context, frontend uint32, ops []wire.InputRef) (chan *wire.ReadReply, func(), error) {
	pe := p.peer(frontend)
	if pe == nil {
		return nil, nil, errNoFrontend
	}
	ch := make(chan *wire.ReadReply, 1)
	pe.mu.Lock()
	for pe.conn == nil {
		// Still dialing (a frontend that just joined) or redialing: wait
		// for the connection as long as the batch can.
		up := pe.upCh
		pe.mu.Unlock()
		select {
		case <-up:
		case <-ctx.Done():
			return nil, nil, errNoFrontend
		}
		pe.mu.Lock()
	}
	c := pe.conn
	pe.seq++
	seq := pe.seq
	pe.waiting[seq] = ch
	pe.mu.Unlock()
	forget := func() {
		pe.mu.Lock()
		delete(pe.waiting, seq)
		pe.mu.Unlock()
	}
	if err := c.Send(&wire.Read{Seq: seq, Ops: ops}); err != nil {
		forget()
		return nil, nil, err
	}
	return ch, forget, nil
}

// fill copies a reply into dst; ok is false if the connection closed first.
func fill(rep *wire.ReadReply, ok bool, ops []wire.InputRef, dst [][]byte) error {
	if !ok {
		return errNoFrontend
	}
	if len(rep.Data) != len(ops) {
		return fmt.Errorf("read reply has %d inputs for %d reads", len(rep.Data), len(ops))
	}
	for i, b := range rep.Data {
		if b == nil {
			b = []byte{} // an empty input is not a missing one
		}
		dst[i] = b
	}
	for _, i := range rep.Missing {
		dst[i] = nil
	}
	return nil
}

// send queues results for frontend; they are dropped if its data
// connection is down (the frontend ends those requests itself).
func (p *tcpPuller) send(frontend uint32, rs []wire.Result) {
	pe := p.peer(frontend)
	if pe == nil {
		p.lost(frontend, len(rs), "the scheduler said the frontend left")
		return
	}
	if !pe.results.Add(rs...) {
		p.lost(frontend, len(rs), "the frontend left")
	}
}

// lost books n results for frontend that cannot be delivered. The
// frontend ends those requests itself (by its deadline), but a result
// thrown away after its batch ran is worth an operator's notice.
func (p *tcpPuller) lost(frontend uint32, n int, why string) {
	p.undelivered.Add(uint64(n))
	p.warn.Warn().Uint32("frontend", frontend).Int("results", n).Str("why", why).Msg("results not delivered")
}

// rdmaPuller is the RDMA data path (paper §4.6, §5.5): it READs inputs
// straight out of the frontends' registered store regions, one queue pair
// per frontend, brought up over that frontend's data connection. Whatever
// it cannot READ, or reads but cannot vouch for (an input not yet
// preprocessed, a slot released or reused, a READ slower than the
// frontend's acceptance window, a frontend without RDMA, a failed queue
// pair), it asks for over TCP, whose answer is authoritative. Results
// still go back over TCP.
type rdmaPuller struct {
	tcp     *tcpPuller
	reader  *rdma.Reader
	backoff transport.Backoff
	log     zerolog.Logger

	mu       sync.Mutex
	links    map[*peer]*rdmaLink
	closed   bool
	inflight sync.WaitGroup // ReadAll calls, which close waits for
	changed  chan struct{}  // closed and renewed when a link settles
}

// rdmaLink is the RDMA side of one frontend's data connection.
type rdmaLink struct {
	mu      sync.Mutex
	conn    transport.Conn // the data connection it rides; nil while down
	sess    *rdma.Session  // dialed or up; nil on TCP
	upAt    time.Time      // when sess came up
	refused bool           // the frontend refused: TCP until a new connection
	breaks  int            // queue pairs lost in a row, for the redial backoff
	// settled is closed once the exchange on conn has ended: accepted,
	// refused or failed. A new connection renews it.
	settled chan struct{}
}

func (l *rdmaLink) isSettled() bool {
	select {
	case <-l.settled:
		return true
	default:
		return false
	}
}

// settle marks l's exchange ended and wakes waitSettled; under l.mu.
func (p *rdmaPuller) settle(l *rdmaLink) {
	if l.isSettled() {
		return
	}
	close(l.settled)
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

var _ connHooks = (*rdmaPuller)(nil)

func newRDMAPuller(tcp *tcpPuller, reader *rdma.Reader, b transport.Backoff, log zerolog.Logger) *rdmaPuller {
	p := &rdmaPuller{tcp: tcp, reader: reader, backoff: b, log: log, links: map[*peer]*rdmaLink{}, changed: make(chan struct{})}
	tcp.hooks = p
	return p
}

// link returns pe's link, made if need be; nil once closed.
func (p *rdmaPuller) link(pe *peer) *rdmaLink {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	l := p.links[pe]
	if l == nil {
		l = &rdmaLink{settled: make(chan struct{})}
		p.links[pe] = l
	}
	return l
}

// lookup returns pe's link, if it has one.
func (p *rdmaPuller) lookup(pe *peer) *rdmaLink {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.links[pe]
}

// connUp opens the RDMA exchange on a new data connection.
func (p *rdmaPuller) connUp(pe *peer, c transport.Conn, w *wire.Welcome) {
	l := p.link(pe)
	if l == nil {
		return
	}
	// A frontend that predates RDMA would close the connection on an
	// RDMAConnect: read it over TCP without asking.
	old := p.renew(l, c, w == nil || w.Features&wire.FeatureRDMA == 0)
	if old != nil {
		old.Close()
	}
	if w == nil || w.Features&wire.FeatureRDMA == 0 {
		p.log.Info().Uint32("frontend", pe.id).Msg("frontend does not speak RDMA; reading over TCP")
		return
	}
	p.dial(pe, l, c)
}

// renew points l at a new data connection c and returns the session of
// the old one, for the caller to close. With tcpOnly the exchange on c is
// over before it starts: the frontend is read over TCP.
func (p *rdmaPuller) renew(l *rdmaLink, c transport.Conn, tcpOnly bool) *rdma.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.sess
	l.conn, l.sess, l.refused = c, nil, tcpOnly
	p.settle(l)
	l.settled = make(chan struct{})
	if tcpOnly {
		p.settle(l)
	}
	return old
}

// dial creates a queue pair and sends its RDMAConnect on c.
func (p *rdmaPuller) dial(pe *peer, l *rdmaLink, c transport.Conn) {
	s, hello, err := p.reader.Dial(func(s *rdma.Session, err error) { p.broken(pe, l, s, err) })
	if err != nil {
		p.log.Warn().Err(err).Uint32("frontend", pe.id).Msg("RDMA queue pair not created; reading over TCP")
		l.mu.Lock()
		if l.conn == c {
			p.settle(l)
		}
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	if l.conn != c || l.sess != nil {
		l.mu.Unlock()
		s.Close()
		return
	}
	l.sess = s
	l.mu.Unlock()
	_ = c.Send(hello) // if c is closing, connDown closes s
}

// connMessage handles the frontend's RDMA answers.
func (p *rdmaPuller) connMessage(pe *peer, c transport.Conn, m wire.Message) {
	l := p.lookup(pe)
	if l == nil {
		return
	}
	l.mu.Lock()
	s := l.sess
	if l.conn != c {
		s = nil
	}
	l.mu.Unlock()
	if s == nil {
		return
	}
	switch m := m.(type) {
	case *wire.RDMAAccept:
		if m.ForQPN != s.QPN() {
			return // for a queue pair since replaced
		}
		if err := s.Accept(m); err != nil {
			p.log.Warn().Err(err).Uint32("frontend", pe.id).Msg("RDMA queue pair not connected; data path tcp")
			p.drop(l, s, false)
			return
		}
		l.mu.Lock()
		l.upAt = time.Now()
		p.settle(l)
		l.mu.Unlock()
		p.log.Info().Uint32("frontend", pe.id).Str("device", p.reader.Device()).Int("regions", len(m.Regions)).Msg("data path rdma")
	case *wire.RDMARefuse:
		if m.ForQPN != s.QPN() {
			return
		}
		p.log.Info().Uint32("frontend", pe.id).Str("reason", m.Reason).Msg("data path tcp: the frontend does not serve RDMA")
		p.drop(l, s, true)
	case *wire.RDMARegions:
		s.AddRegions(m.Regions)
	}
}

// drop ends session s of l, if it is still l's.
func (p *rdmaPuller) drop(l *rdmaLink, s *rdma.Session, refused bool) {
	l.mu.Lock()
	if l.sess == s {
		l.sess = nil
		l.refused = refused
		p.settle(l)
	}
	l.mu.Unlock()
	s.Close()
}

// connDown ends the RDMA session that rode c.
func (p *rdmaPuller) connDown(pe *peer, c transport.Conn) {
	l := p.lookup(pe)
	if l == nil {
		return
	}
	l.mu.Lock()
	var s *rdma.Session
	if l.conn == c {
		s, l.sess, l.conn = l.sess, nil, nil
	}
	l.mu.Unlock()
	if s != nil {
		s.Close()
	}
	if p.tcp.peer(pe.id) != pe {
		// The frontend left (or moved): its link goes with it.
		p.mu.Lock()
		delete(p.links, pe)
		p.mu.Unlock()
	}
}

// broken replaces a failed queue pair after a backoff; reads go over TCP
// meanwhile.
func (p *rdmaPuller) broken(pe *peer, l *rdmaLink, s *rdma.Session, err error) {
	l.mu.Lock()
	if l.sess != s {
		l.mu.Unlock()
		s.Close()
		return
	}
	if !l.upAt.IsZero() && time.Since(l.upAt) > p.backoff.Max {
		l.breaks = 0
	}
	wait := p.backoff.Delay(l.breaks, nil)
	l.breaks++
	l.sess = nil
	c := l.conn
	l.mu.Unlock()
	s.Close()
	p.log.Warn().Err(err).Uint32("frontend", pe.id).Str("redial_in", wait.Round(time.Millisecond).String()).Msg("RDMA queue pair failed; reading over TCP meanwhile")
	time.AfterFunc(wait, func() {
		l.mu.Lock()
		again := l.conn == c && c != nil && l.sess == nil && !l.refused
		l.mu.Unlock()
		if again && p.lookup(pe) == l {
			p.dial(pe, l, c)
		}
	})
}

// session returns frontend id's RDMA session, if it is up.
func (p *rdmaPuller) session(id uint32) *rdma.Session {
	pe := p.tcp.peer(id)
	if pe == nil {
		return nil
	}
	p.mu.Lock()
	l := p.links[pe]
	p.mu.Unlock()
	if l == nil {
		return nil
	}
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s == nil || !s.Up() {
		return nil
	}
	return s
}

// ReadAll implements Puller: it posts the READs of every frontend with an
// RDMA session and sends the other frontends' Reads over TCP at once, then
// asks over TCP for whatever RDMA handed back.
func (p *rdmaPuller) ReadAll(ctx context.Context, reads []PullRead) []error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return p.tcp.ReadAll(ctx, reads)
	}
	p.inflight.Add(1)
	p.mu.Unlock()
	defer p.inflight.Done()
	errs := make([]error, len(reads))
	type started struct {
		read  int
		batch *rdma.Batch
	}
	var batches []started
	var tcpOnly []int
	for i, r := range reads {
		if s := p.session(r.Frontend); s != nil {
			batches = append(batches, started{i, s.Start(r.Ops)})
		} else {
			tcpOnly = append(tcpOnly, i)
		}
	}
	// The frontends without RDMA are read over TCP meanwhile.
	var tcpDone chan struct{}
	if len(tcpOnly) > 0 {
		tcpDone = make(chan struct{})
		sub := make([]PullRead, len(tcpOnly))
		for k, i := range tcpOnly {
			sub[k] = reads[i]
		}
		run := func() {
			defer close(tcpDone)
			for k, err := range p.tcp.ReadAll(ctx, sub) {
				errs[tcpOnly[k]] = err
			}
		}
		if len(batches) == 0 {
			run()
			return errs
		}
		go run()
	}
	// Then the RDMA reads, and whatever they hand back goes over TCP.
	var again []PullRead
	var againIdx [][]int
	var againRead []int
	for _, b := range batches {
		r := reads[b.read]
		var fb PullRead
		var idx []int
		for k, o := range b.batch.Wait(ctx) {
			if o.Fallback == nil {
				r.Dst[k] = o.Data
				continue
			}
			fb.Ops = append(fb.Ops, r.Ops[k])
			idx = append(idx, k)
		}
		if len(idx) > 0 {
			fb.Frontend, fb.Dst = r.Frontend, make([][]byte, len(idx))
			again, againIdx, againRead = append(again, fb), append(againIdx, idx), append(againRead, b.read)
		}
	}
	if len(again) > 0 {
		for n, err := range p.tcp.ReadAll(ctx, again) {
			i := againRead[n]
			for k, op := range againIdx[n] {
				reads[i].Dst[op] = again[n].Dst[k]
			}
			errs[i] = err
		}
	}
	if tcpDone != nil {
		<-tcpDone
	}
	return errs
}

// close ends every RDMA session, after the data connections are closed.
// The Reader (its receive buffers and the device) is released once the
// last ReadAll still running has returned its buffers: at once, or when
// the batches still pulling give up (by their deadlines).
func (p *rdmaPuller) close() {
	p.mu.Lock()
	p.closed = true
	links := p.links
	p.links = nil
	p.mu.Unlock()
	for _, l := range links {
		l.mu.Lock()
		s := l.sess
		l.sess, l.conn = nil, nil
		l.mu.Unlock()
		if s != nil {
			s.Close()
		}
	}
	go func() {
		p.inflight.Wait()
		if err := p.reader.Close(); err != nil {
			p.log.Error().Err(err).Msg("RDMA receive buffers not released")
		}
	}()
}
