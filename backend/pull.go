package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
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

	mu    sync.Mutex
	peers map[uint32]*peer
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
}

func newTCPPuller(n transport.Network, name string, b transport.Backoff, log zerolog.Logger) *tcpPuller {
	return &tcpPuller{net: n, name: name, backoff: b, log: log, peers: map[uint32]*peer{}}
}

// up starts (or keeps) the data connection to frontend id.
func (p *tcpPuller) up(id uint32, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.peers[id]; old != nil {
		if old.addr == addr {
			return
		}
		old.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	pe := &peer{id: id, addr: addr, cancel: cancel, upCh: make(chan struct{}), waiting: map[uint64]chan *wire.ReadReply{}}
	pe.results = transport.NewCoalescer(func(rs []wire.Result) {
		pe.mu.Lock()
		c := pe.conn
		pe.mu.Unlock()
		for len(rs) > 0 {
			n, size := 0, 0
			for n < len(rs) && (n == 0 || size+len(rs[n].Output) <= maxReplyBytes) {
				size += len(rs[n].Output)
				n++
			}
			if c == nil || c.Send(&wire.Results{Results: rs[:n]}) != nil {
				// The frontend ends these requests itself, by its deadline.
				p.log.Debug().Uint32("frontend", id).Int("results", n).Msg("results not delivered: no data connection")
			}
			rs = rs[n:]
		}
	})
	p.peers[id] = pe
	go transport.KeepDialing(ctx, p.backoff, p.log.With().Uint32("frontend", id).Logger(), func(ctx context.Context) error {
		return p.session(ctx, pe)
	})
}

// down closes the data connection to frontend id.
func (p *tcpPuller) down(id uint32) {
	p.mu.Lock()
	pe := p.peers[id]
	delete(p.peers, id)
	p.mu.Unlock()
	if pe != nil {
		pe.cancel()
		pe.results.Close()
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
		Message: func(_ transport.Conn, m wire.Message) { pe.onMessage(m) },
		Closed: func(c transport.Conn, err error) {
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
	conn, _, err := p.net.Dial(dctx, pe.addr, &wire.Hello{Version: wire.Version, Role: wire.RolePuller, Name: p.name}, h)
	cancel()
	if err != nil {
		return err
	}
	pe.mu.Lock()
	if !gone {
		pe.conn = conn
		close(pe.upCh)
	}
	pe.mu.Unlock()
	select {
	case <-closed:
		return errors.New("data connection closed")
	case <-ctx.Done():
		conn.Close(errors.New("frontend gone"))
		<-closed
		return ctx.Err()
	}
}

func (pe *peer) onMessage(m wire.Message) {
	rep, ok := m.(*wire.ReadReply)
	if !ok {
		return
	}
	pe.mu.Lock()
	ch := pe.waiting[rep.Seq]
	delete(pe.waiting, rep.Seq)
	pe.mu.Unlock()
	if ch != nil {
		ch <- rep
	}
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
	if pe := p.peer(frontend); pe != nil {
		pe.results.Add(rs...)
	}
}
