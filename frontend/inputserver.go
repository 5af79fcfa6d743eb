package frontend

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/rdma"
	"github.com/symphony-serving/symphony/transport/wire"
)

// ServeInputs serves backends' one-sided reads of store's inputs on addr:
// each wire.Read is answered by a wire.ReadReply holding the bytes of every
// input still held (and preprocessed), in order. Results that backends send
// on the same connections go to onResults. It is the TCP data path, the
// fallback of the RDMA one, and the frontend client's data listener; with
// WithRDMA it also brings up RDMA queue pairs for backends that ask.
func ServeInputs(n transport.Network, addr string, store *InputStore, onResults func(transport.Conn, *wire.Results), log zerolog.Logger, opts ...ServeOption) (transport.Listener, error) {
	s := &inputServer{store: store, onResults: onResults, log: log, noRDMA: "frontend serves inputs over TCP only"}
	for _, o := range opts {
		o(s)
	}
	return n.Listen(addr, s.accept)
}

// ServeOption adjusts ServeInputs.
type ServeOption func(*inputServer)

// WithRDMA answers backends' RDMAConnect with queue pairs of exp, which
// must be the allocator of store's regions: backends then READ the
// inputs, and fall back to this server's TCP reads.
func WithRDMA(exp *rdma.Exporter) ServeOption { return func(s *inputServer) { s.rdma = exp } }

// RefuseRDMA gives the reason backends' RDMAConnect is refused, such as
// the frontend's data-path choice.
func RefuseRDMA(why string) ServeOption { return func(s *inputServer) { s.noRDMA = why } }

type inputServer struct {
	store     *InputStore
	onResults func(transport.Conn, *wire.Results)
	log       zerolog.Logger
	rdma      *rdma.Exporter // nil: RDMAConnect is refused with noRDMA
	noRDMA    string
}

func (s *inputServer) accept(conn transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
	if h.Role != wire.RolePuller {
		return nil, nil, fmt.Errorf("a frontend's data address takes pullers, not %v", h.Role)
	}
	s.log.Debug().Str("backend", h.Name).Msg("backend connected for data")
	// Every frontend of this version answers RDMAConnect (with a refusal
	// when it has no RDMA), so it may be sent one.
	return &wire.Welcome{Version: wire.Version, Features: wire.FeatureRDMA}, transport.HandlerFuncs{Message: s.onMessage, Closed: s.onClose}, nil
}

func (s *inputServer) onClose(conn transport.Conn, _ error) {
	if s.rdma != nil {
		s.rdma.Disconnect(conn)
	}
}

func (s *inputServer) onMessage(conn transport.Conn, m wire.Message) {
	switch m := m.(type) {
	case *wire.Read:
		s.serveRead(conn, m)
	case *wire.Results:
		if s.onResults != nil {
			s.onResults(conn, m)
		}
	case *wire.RDMAConnect:
		if s.rdma == nil {
			_ = conn.Send(&wire.RDMARefuse{ForQPN: m.Endpoint.QPN, Reason: s.noRDMA})
			return
		}
		s.rdma.Connect(conn, m)
	default:
		conn.Close(fmt.Errorf("unexpected %v on a data connection", m.Kind()))
	}
}

// serveRead answers a read. Inputs still being preprocessed are waited
// for, off the connection's goroutine.
func (s *inputServer) serveRead(conn transport.Conn, rd *wire.Read) {
	var waits []chan struct{}
	for _, op := range rd.Ops {
		if in, err := s.store.lookup(op); err == nil && in.ready != nil {
			waits = append(waits, in.ready)
		}
	}
	reply := func() {
		rep := &wire.ReadReply{Seq: rd.Seq, Data: make([][]byte, len(rd.Ops))}
		unpins := make([]func(), 0, len(rd.Ops))
		for i, op := range rd.Ops {
			b, unpin, err := s.store.pin(op)
			if err != nil {
				rep.Missing = append(rep.Missing, uint32(i))
				continue
			}
			rep.Data[i] = b
			unpins = append(unpins, unpin)
		}
		// Send is done with the reply when it returns (the contract of
		// transport.Conn.Send), so the bytes may be unpinned right after.
		if err := conn.Send(rep); err != nil {
			s.log.Debug().Err(err).Msg("read reply not sent")
		}
		for _, u := range unpins {
			u()
		}
	}
	if len(waits) == 0 {
		reply()
		return
	}
	go func() {
		for _, w := range waits {
			<-w
		}
		reply()
	}()
}
