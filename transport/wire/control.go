package wire

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// Model control: loading and unloading models while the cluster runs, in
// the spirit of Triton's explicit model control. Who sends what:
//
//	frontend -> scheduler: Control (load or unload a model), answered by
//	  ControlDone once the model is READY or UNAVAILABLE, or the op failed
//	scheduler -> frontend: ModelStates, whenever a model's state changes
//	scheduler -> backend: Control (load or unload one model's session),
//	  answered by ControlDone (with the memory a load took)
//
// A Welcome lists every model the listener knows; its States name those
// that are not READY, so that a backend opens sessions only for the others.

// ModelState is a model's state in the scheduler: whether it takes
// requests. The names are Triton's repository index states.
type ModelState uint8

const (
	ModelReady       ModelState = iota + 1 // loaded: requests are accepted
	ModelUnavailable                       // unloaded: requests end at once as "not loaded"
	ModelLoading                           // backends are loading it; requests end as "not loaded"
	ModelUnloading                         // draining: new requests end as "not loaded", queued ones run
	modelStateEnd
)

var modelStateNames = [...]string{"", "READY", "UNAVAILABLE", "LOADING", "UNLOADING"}

func (s ModelState) String() string {
	if s >= 1 && s < modelStateEnd {
		return modelStateNames[s]
	}
	return fmt.Sprintf("ModelState(%d)", uint8(s))
}

// Loaded reports whether a backend must hold the model's session in this
// state: every state but UNAVAILABLE, since an UNLOADING model's queued
// requests still run and a LOADING one is about to.
func (s ModelState) Loaded() bool { return s != ModelUnavailable }

// ModelStatus is one model's state, and why it is in it (a failed load's
// error, say).
type ModelStatus struct {
	Model  uint32
	State  ModelState
	Reason string
}

// ControlOp is what a Control asks for.
type ControlOp uint8

const (
	OpLoad   ControlOp = iota + 1 // load the model: READY when done
	OpUnload                      // unload it: UNAVAILABLE when done
	controlOpEnd
)

func (o ControlOp) String() string {
	switch o {
	case OpLoad:
		return "load"
	case OpUnload:
		return "unload"
	}
	return fmt.Sprintf("ControlOp(%d)", uint8(o))
}

// Control asks for a model to be loaded or unloaded: from a frontend, the
// scheduler's whole cluster; from the scheduler, one backend. Seq pairs it
// with its ControlDone.
type Control struct {
	Seq   uint64
	Op    ControlOp
	Model uint32
}

// ControlDone answers a Control of the same Seq: Error is empty on
// success. Memory is, from a backend that loaded a model, the bytes the
// load took (a measurement, 0 where the executor cannot tell).
type ControlDone struct {
	Seq    uint64
	Memory uint64
	Error  string
}

// ModelStates tells frontends that models changed state.
type ModelStates struct{ States []ModelStatus }

func (*Control) Kind() Kind     { return KindControl }
func (*ControlDone) Kind() Kind { return KindControlDone }
func (*ModelStates) Kind() Kind { return KindModelStates }

// Validate checks Control's op.
func (m *Control) Validate() error {
	if m.Op < OpLoad || m.Op >= controlOpEnd {
		return fmt.Errorf("op: unknown %d", m.Op)
	}
	return nil
}

// Validate accepts any ControlDone.
func (m *ControlDone) Validate() error { return nil }

// Validate checks ModelStates' states.
func (m *ModelStates) Validate() error { return validStates("states", m.States) }

func validStates(field string, ss []ModelStatus) error {
	for i := range ss {
		if s := ss[i].State; s < ModelReady || s >= modelStateEnd {
			return fmt.Errorf("%s[%d].state: unknown %d", field, i, s)
		}
	}
	return nil
}

func (m *Control) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(3)
	_ = e.EncodeUint64(m.Seq)
	_ = e.EncodeUint8(uint8(m.Op))
	return e.EncodeUint32(m.Model)
}

func (m *Control) decode(d *decoder) {
	n := d.fields("control", 3)
	m.Seq = d.u64("seq")
	m.Op = ControlOp(d.u8("op"))
	m.Model = d.u32("model")
	d.rest("control", n, 3)
}

func (m *ControlDone) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(3)
	_ = e.EncodeUint64(m.Seq)
	_ = e.EncodeUint64(m.Memory)
	return e.EncodeString(m.Error)
}

func (m *ControlDone) decode(d *decoder) {
	n := d.fields("control_done", 3)
	m.Seq = d.u64("seq")
	m.Memory = d.u64("memory")
	m.Error = d.str("error", MaxReason)
	d.rest("control_done", n, 3)
}

func (m *ModelStates) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	encodeStates(e, m.States)
	return nil
}

func (m *ModelStates) decode(d *decoder) {
	n := d.fields("model_states", 1)
	m.States = decodeStates(d, "states")
	d.rest("model_states", n, 1)
}

func encodeStates(e *msgpack.Encoder, ss []ModelStatus) {
	_ = e.EncodeArrayLen(len(ss))
	for i := range ss {
		s := &ss[i]
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeUint32(s.Model)
		_ = e.EncodeUint8(uint8(s.State))
		_ = e.EncodeString(s.Reason)
	}
}

// decodeStates reads a list of states; an empty list is nil.
func decodeStates(d *decoder, field string) []ModelStatus {
	k := d.list(field)
	if k > MaxModels {
		d.fail(field, errTooMany(k, MaxModels))
		return nil
	}
	if k == 0 {
		return nil
	}
	ss := make([]ModelStatus, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		ss = append(ss, ModelStatus{})
		s := &ss[i]
		sn := d.fields(field+"[]", 3)
		s.Model = d.u32(field + "[].model")
		s.State = ModelState(d.u8(field + "[].state"))
		s.Reason = d.str(field+"[].reason", MaxReason)
		d.rest(field+"[]", sn, 3)
	}
	return ss
}
