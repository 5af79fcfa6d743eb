package transporttest

import (
	"fmt"
	"sync"

	"github.com/symphony-serving/symphony/transport"
	"github.com/symphony-serving/symphony/transport/wire"
)

// Inputs is a frontend's data address without a frontend: a listener that
// answers backends' one-sided reads (wire.Read, answered by a
// wire.ReadReply) from inputs a test put there, and refuses RDMA. It lets
// backend tests pull real bytes over any network without importing the
// frontend (backend and frontend never import each other, tests
// included). Like the real server, a read of an input that is not there,
// or of a ref that does not match the input's in every field, is answered
// as missing rather than with other bytes.
type Inputs struct {
	ln transport.Listener

	mu     sync.Mutex
	inputs map[uint64]input // by key
	next   uint64           // the next input's offset in region 1
}

type input struct {
	ref  wire.InputRef
	data []byte
}

// ServeInputs listens on addr of n for pullers.
func ServeInputs(n transport.Network, addr string) (*Inputs, error) {
	s := &Inputs{inputs: map[uint64]input{}}
	ln, err := n.Listen(addr, s.accept)
	if err != nil {
		return nil, err
	}
	s.ln = ln
	return s, nil
}

// Addr is the data address backends dial.
func (s *Inputs) Addr() string { return s.ln.Addr() }

// Close stops serving and closes every connection.
func (s *Inputs) Close() error { return s.ln.Close() }

// Put keeps data (not a copy) as the input of key and returns its ref.
func (s *Inputs) Put(key uint64, data []byte) wire.InputRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := wire.InputRef{Region: 1, Offset: s.next, Length: uint32(len(data)), Key: key}
	s.next += uint64(len(data))
	s.inputs[key] = input{ref: ref, data: data}
	return ref
}

// Remove forgets key's input, as a frontend does once its request ended.
func (s *Inputs) Remove(key uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inputs, key)
}

func (s *Inputs) accept(_ transport.Conn, h *wire.Hello) (*wire.Welcome, transport.Handler, error) {
	if h.Role != wire.RolePuller {
		return nil, nil, fmt.Errorf("a data address takes pullers, not %v", h.Role)
	}
	return &wire.Welcome{Version: wire.Version}, transport.HandlerFuncs{Message: s.onMessage}, nil
}

func (s *Inputs) onMessage(c transport.Conn, m wire.Message) {
	switch m := m.(type) {
	case *wire.Read:
		rep := &wire.ReadReply{Seq: m.Seq, Data: make([][]byte, len(m.Ops))}
		s.mu.Lock()
		for i, op := range m.Ops {
			if in, ok := s.inputs[op.Key]; ok && in.ref == op {
				rep.Data[i] = in.data
			} else {
				rep.Missing = append(rep.Missing, uint32(i))
			}
		}
		s.mu.Unlock()
		_ = c.Send(rep)
	case *wire.RDMAConnect:
		_ = c.Send(&wire.RDMARefuse{ForQPN: m.Endpoint.QPN, Reason: "test data address serves TCP only"})
	case *wire.Results:
		// Results are the frontend's business, not the data path's.
	default:
		c.Close(fmt.Errorf("unexpected %v on a data connection", m.Kind()))
	}
}
