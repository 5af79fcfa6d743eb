package transporttest

import (
	"fmt"
	"sync"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// InputSource is where a test's data address finds the inputs backends
// read.
type InputSource interface {
	// Input returns the bytes of the input ref names, or ok false if ref
	// names none (another key, or a ref that does not match the input's
	// in every field): a read of it is answered as missing, never with
	// other bytes. A non-nil wait is closed once an input still being
	// written is ready; the read waits for it and asks again.
	Input(ref wire.InputRef) (data []byte, wait <-chan struct{}, ok bool)
}

// RDMAPeer brings up the RDMA path over a data connection: the
// frontend's half of the exchange (rdma.Exporter does it).
type RDMAPeer interface {
	Connect(c transport.Conn, m *wire.RDMAConnect)
	Disconnect(c transport.Conn)
}

// ServeInputs serves a frontend's data address without a frontend: it
// answers backends' one-sided reads (wire.Read, answered by a
// wire.ReadReply with the bytes of each input src holds, and the others
// missing) on addr of n, as the frontend's input server does, so that
// backend tests pull real bytes without importing the frontend (backend
// and frontend never import each other, tests included). With rdma it
// also answers RDMAConnect, and says so in its Welcome; without, it
// refuses RDMA.
func ServeInputs(n transport.Network, addr string, src InputSource, rdma RDMAPeer) (transport.Listener, error) {
	s := &inputServer{src: src, rdma: rdma}
	return n.Listen(addr, s.accept)
}

type inputServer struct {
	src  InputSource
	rdma RDMAPeer
}

func (s *inputServer) accept(_ transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
	if h.Role != wire.RolePuller {
		return nil, nil, fmt.Errorf("a data address takes pullers, not %v", h.Role)
	}
	w := &wire.Welcome{Version: wire.Version}
	handler := transport.HandlerFuncs{Message: s.onMessage}
	if s.rdma != nil {
		w.Features = wire.FeatureRDMA
		handler.Closed = func(c transport.Conn, _ error) { s.rdma.Disconnect(c) }
	}
	return w, handler, nil
}

func (s *inputServer) onMessage(c transport.Conn, m wire.Message) {
	switch m := m.(type) {
	case *wire.Read:
		s.read(c, m)
	case *wire.RDMAConnect:
		if s.rdma == nil {
			_ = c.Send(&wire.RDMARefuse{ForQPN: m.Endpoint.QPN, Reason: "test data address serves TCP only"})
			return
		}
		s.rdma.Connect(c, m)
	case *wire.Results:
		// Results are the frontend's business, not the data path's.
	default:
		c.Close(fmt.Errorf("unexpected %v on a data connection", m.Kind()))
	}
}

// read answers rd once every input it names is ready, off the
// connection's goroutine if it must wait.
func (s *inputServer) read(c transport.Conn, rd *wire.Read) {
	var waits []<-chan struct{}
	for _, op := range rd.Ops {
		if _, w, ok := s.src.Input(op); ok && w != nil {
			waits = append(waits, w)
		}
	}
	reply := func() {
		rep := &wire.ReadReply{Seq: rd.Seq, Data: make([][]byte, len(rd.Ops))}
		for i, op := range rd.Ops {
			if b, _, ok := s.src.Input(op); ok {
				rep.Data[i] = b
			} else {
				rep.Missing = append(rep.Missing, uint32(i))
			}
		}
		_ = c.Send(rep) // copies the bytes (the Send contract)
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

// MemInputs is an InputSource of inputs in Go memory, all ready.
type MemInputs struct {
	mu     sync.Mutex
	inputs map[uint64]memInput // by key
	next   uint64              // the next input's offset in region 1
}

type memInput struct {
	ref  wire.InputRef
	data []byte
}

// NewMemInputs returns an empty MemInputs.
func NewMemInputs() *MemInputs { return &MemInputs{inputs: map[uint64]memInput{}} }

// Put keeps data (not a copy) as the input of key and returns its ref.
func (s *MemInputs) Put(key uint64, data []byte) wire.InputRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := wire.InputRef{Region: 1, Offset: s.next, Length: uint32(len(data)), Key: key}
	s.next += uint64(len(data))
	s.inputs[key] = memInput{ref: ref, data: data}
	return ref
}

// Input implements InputSource.
func (s *MemInputs) Input(ref wire.InputRef) ([]byte, <-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inputs[ref.Key]
	if !ok || in.ref != ref {
		return nil, nil, false
	}
	return in.data, nil, true
}
