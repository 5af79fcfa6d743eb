// Package wire defines Symphony's network protocol: the messages between
// frontends, the scheduler and backends, and their framing.
//
// A frame is a 4-byte big-endian length, a kind byte, and the message body
// encoded as one msgpack array of the message's fields, in order. Decoding
// is strict: every length is checked against the bytes left before anything
// is allocated, and every message is validated, so hostile bytes give an
// error naming the message and field, never a panic or a huge allocation.
//
// Times on the wire are Unix nanoseconds: the scheduler, backends and
// frontends of one cluster are assumed to share a synchronized clock (PTP or
// NTP within a datacenter, exact on one machine).
//
// Every connection starts with Hello from the dialer; the listener answers
// Welcome or Reject. Who sends what afterwards:
//
//	frontend -> scheduler: Submit
//	scheduler -> frontend: Ended (drops and failures)
//	backend -> scheduler: BackendReady, GPUFree, Heartbeat, Leaving
//	scheduler -> backend: Plan, FrontendUp, FrontendDown, LeaveOK, Retire
//	backend -> frontend (data connection): Read; frontend answers ReadReply
//	backend -> frontend (data connection): Results
//	backend -> frontend (data connection): RDMAConnect; frontend answers
//	  RDMAAccept or RDMARefuse, then sends RDMARegions as it registers
//	  more memory
//	model control (control.go): Control, ControlDone, ModelStates
package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/symphony-serving/symphony/tensor"
)

// Version is the protocol version in Hello. A listener rejects a dialer of
// another version with a Reject that says both. Version 2 added each plan
// task's FinishBy, GPUFree's Ran and Dropped, and the Heartbeat, Leaving,
// LeaveOK and Retire messages. Version 3 added model control (Control,
// ControlDone, ModelStates, Welcome's States) and EndModelNotLoaded.
const Version = 3

// Limits that bound what one message may hold.
const (
	MaxName      = 256
	MaxReason    = 1024
	MaxBatch     = 4096
	MaxModels    = 4096
	MaxGPUs      = 4096
	MaxInputSize = 64 << 20
)

// Kind tags a frame with the message it holds.
type Kind uint8

const (
	KindHello Kind = iota + 1
	KindWelcome
	KindReject
	KindSubmit
	KindEnded
	KindBackendReady
	KindPlan
	KindGPUFree
	KindFrontendUp
	KindFrontendDown
	KindRead
	KindReadReply
	KindResults
	KindRDMAConnect
	KindRDMAAccept
	KindRDMARefuse
	KindRDMARegions
	KindHeartbeat
	KindLeaving
	KindLeaveOK
	KindRetire
	KindControl
	KindControlDone
	KindModelStates
	kindEnd
)

var kindNames = [...]string{"", "Hello", "Welcome", "Reject", "Submit", "Ended", "BackendReady",
	"Plan", "GPUFree", "FrontendUp", "FrontendDown", "Read", "ReadReply", "Results",
	"RDMAConnect", "RDMAAccept", "RDMARefuse", "RDMARegions", "Heartbeat", "Leaving", "LeaveOK", "Retire",
	"Control", "ControlDone", "ModelStates"}

// Known reports whether k is a message kind of this version.
func (k Kind) Known() bool { return k >= KindHello && k < kindEnd }

func (k Kind) String() string {
	if k.Known() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Kinds lists every message kind, for tests and fuzzing.
func Kinds() []Kind {
	var ks []Kind
	for k := KindHello; k < kindEnd; k++ {
		ks = append(ks, k)
	}
	return ks
}

func (k Kind) new() Message {
	switch k {
	case KindHello:
		return &Hello{}
	case KindWelcome:
		return &Welcome{}
	case KindReject:
		return &Reject{}
	case KindSubmit:
		return &Submit{}
	case KindEnded:
		return &Ended{}
	case KindBackendReady:
		return &BackendReady{}
	case KindPlan:
		return &Plan{}
	case KindGPUFree:
		return &GPUFree{}
	case KindFrontendUp:
		return &FrontendUp{}
	case KindFrontendDown:
		return &FrontendDown{}
	case KindRead:
		return &Read{}
	case KindReadReply:
		return &ReadReply{}
	case KindResults:
		return &Results{}
	case KindRDMAConnect:
		return &RDMAConnect{}
	case KindRDMAAccept:
		return &RDMAAccept{}
	case KindRDMARefuse:
		return &RDMARefuse{}
	case KindRDMARegions:
		return &RDMARegions{}
	case KindHeartbeat:
		return &Heartbeat{}
	case KindLeaving:
		return &Leaving{}
	case KindLeaveOK:
		return &LeaveOK{}
	case KindRetire:
		return &Retire{}
	case KindControl:
		return &Control{}
	case KindControlDone:
		return &ControlDone{}
	case KindModelStates:
		return &ModelStates{}
	}
	return nil
}

// Message is one protocol message.
type Message interface {
	Kind() Kind
	// Validate checks the fields' ranges after decoding.
	Validate() error
	encode(e *msgpack.Encoder) error
	decode(d *decoder)
}

// Role is what a dialer is.
type Role uint8

const (
	RoleFrontend Role = iota + 1 // a frontend, dialing the scheduler
	RoleBackend                  // a backend, dialing the scheduler
	RolePuller                   // a backend, dialing a frontend's data address
)

func (r Role) String() string {
	switch r {
	case RoleFrontend:
		return "frontend"
	case RoleBackend:
		return "backend"
	case RolePuller:
		return "puller"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Hello is the dialer's first frame.
type Hello struct {
	Version uint32
	Role    Role
	// Name identifies the process in logs.
	Name string
	// DataAddr is where a frontend serves reads of its inputs.
	DataAddr string
	// GPUs is how many GPUs a backend brings.
	GPUs uint32
}

// ModelSpec is a served model as the scheduler announces it.
type ModelSpec struct {
	ID   uint32
	Name string
	SLO  time.Duration
	// Latency[b-1] is the latency of a batch of b: the profile, as a table.
	Latency []time.Duration
	// Inputs and Outputs are the model's named tensors, one sample each,
	// when the scheduler knows them (a repository model's): frontends
	// check requests against them, and a request's bytes are its inputs'
	// in this order (package tensor). Both are nil for a model of opaque
	// bytes. They are optional trailing fields: a scheduler that predates
	// them sends none, and a peer that predates them skips them.
	Inputs, Outputs []tensor.Spec
	// StaticMemory and DynamicMemory are the model's GPU memory in bytes,
	// as the serving configuration declares it (serving.Model) and the
	// epoch job's placement packs GPUs by (partition, Eq. 6): static is
	// what the loaded model occupies on each GPU, dynamic the extra a
	// running batch needs, so that a GPU holding a set of models needs the
	// sum of their static memory plus the largest of their dynamic memory.
	// Both 0 is unknown: an executor checks no load of it. They are optional
	// trailing fields like Inputs and Outputs: a scheduler that predates
	// them sends none (both read as 0), and a peer that predates them
	// skips them. Neither may be negative.
	StaticMemory, DynamicMemory int64
}

// Welcome accepts a dialer.
type Welcome struct {
	Version uint32
	// ID is the frontend's FrontendID, or the backend's first GPU ID.
	ID     uint32
	Models []ModelSpec
	// Frontends are the live frontends, for a backend.
	Frontends []FrontendUp
	// Features are what the listener understands beyond this version's
	// base protocol (FeatureRDMA). It is an optional trailing field: a
	// listener that predates it sends none and reads as 0, and one that
	// predates it skips it, so either side may be the older one.
	Features uint32
	// States are the models that are not READY (model control): a
	// backend opens no session for an UNAVAILABLE one, and a frontend
	// reports them. Optional and trailing like Features; none means
	// every model is READY.
	States []ModelStatus
}

// FeatureRDMA in a frontend's data-connection Welcome says that it
// understands the RDMA bring-up messages (RDMAConnect, answered by
// RDMAAccept or RDMARefuse). A backend sends RDMAConnect only to such a
// frontend: an older one would take the unknown kind as a protocol error
// and close the connection, again on every reconnect.
const FeatureRDMA uint32 = 1 << 0

// Reject refuses a dialer, just before the listener closes the connection.
type Reject struct{ Reason string }

// InputRef locates an input: a one-sided read of Length bytes at Offset in
// the frontend's registered Region. Key is the request ID the bytes belong
// to, so a read of a slot that has since been reused fails instead of
// returning another request's input.
type InputRef struct {
	Region uint32
	Offset uint64
	Length uint32
	Key    uint64
}

// Task is a request's descriptor: never its input, only where it lives.
type Task struct {
	ID       uint64
	Model    uint32
	Deadline int64 // Unix ns
	Input    InputRef
	// Priority is the request's level in its model's queue
	// (scheduler.Request.Priority). It travels as an optional fifth field,
	// sent only when not 0, so that a version 3 peer that predates it
	// reads the task as before (at level 0).
	Priority uint8
}

// Submit hands tasks to the scheduler.
type Submit struct{ Tasks []Task }

// EndCode says how a request ended without a result.
type EndCode uint8

const (
	EndDropDeadline     EndCode = iota + 1 // no GPU could meet its deadline
	EndDropOverload                        // shed so that its batch kept its size
	EndDropShutdown                        // the scheduler stopped
	EndUnknownModel                        // the scheduler serves no such model
	EndBackendLost                         // its backend was lost mid-batch
	EndInputUnavailable                    // its input could not be pulled
	EndExecutorFailed                      // the executor failed the batch
	EndBadRequest                          // the descriptor was invalid
	EndBackendStalled                      // its GPU stopped answering and left rotation
	EndModelNotLoaded                      // its model is not loaded (unloaded, loading or unloading)
	endCodeEnd
)

var endNames = [...]string{"", "deadline", "overload", "shutdown", "unknown model", "backend lost",
	"input unavailable", "executor failed", "bad request", "backend stalled", "model not loaded"}

func (c EndCode) String() string {
	if c >= 1 && c < endCodeEnd {
		return endNames[c]
	}
	return fmt.Sprintf("EndCode(%d)", uint8(c))
}

// IsDrop reports whether the code is a scheduling drop rather than a failure.
func (c EndCode) IsDrop() bool { return c >= EndDropDeadline && c <= EndDropShutdown }

// End is one request that ended without a result.
type End struct {
	ID     uint64
	Code   EndCode
	Detail string
}

// Ended tells a frontend that requests ended without results.
type Ended struct{ Ends []End }

// BackendReady says a backend has loaded every model and its GPUs may be
// granted.
type BackendReady struct{ GPUs uint32 }

// PlanTask is one request of a batch plan.
type PlanTask struct {
	ID       uint64
	Frontend uint32
	Input    InputRef
	// FinishBy is when the batch must have finished for this request's
	// result to reach its frontend by its deadline (Unix ns): the
	// deadline less the scheduler's budget for the result's trip. A
	// backend whose GPU runs late checks it before it starts a batch, and
	// drops the requests it can no longer serve in time instead of
	// answering them late.
	FinishBy int64
}

// Plan tells a backend to run a batch on one of its GPUs.
type Plan struct {
	ID    uint64
	GPU   uint32 // the GPU's cluster-wide ID
	Model uint32
	// ExecAt is the earliest time the batch may start (Unix ns).
	ExecAt int64
	// Deadline is the batch's earliest request deadline (Unix ns).
	Deadline int64
	// Tasks are in the order of their deadlines, earliest first.
	Tasks []PlanTask
}

// GPUFree reports what a GPU did with a plan, so the scheduler can follow
// the GPU's real timeline (scheduler/gpuwatch).
type GPUFree struct {
	GPU  uint32
	Plan uint64
	// StartedAt and FinishedAt are when the batch ran (Unix ns). For a
	// plan the GPU did not run, both are when it gave the plan up (the
	// GPU was free from then), or 0 if the plan never reached the GPU.
	StartedAt  int64
	FinishedAt int64
	Failed     uint32 // requests of the plan that ended with an error
	// Ran is the number of requests the batch ran with (0: it did not
	// run), so that the scheduler can tell a GPU that ran late from one
	// that ran a smaller batch.
	Ran uint32
	// Dropped counts the plan's requests the backend dropped before
	// running them, because they could no longer finish in time.
	Dropped uint32
}

// Heartbeat tells the scheduler that a backend is alive, so that it can
// tell a backend that stopped (a hung or paused process) from one that is
// only idle.
type Heartbeat struct{}

// Leaving tells the scheduler that a backend is draining: it will take no
// new plans once the scheduler says LeaveOK, and it finishes the plans it
// holds first.
type Leaving struct{}

// LeaveOK answers Leaving once the backend holds no unfinished plan and
// the scheduler will send it no more: the backend may close.
type LeaveOK struct{}

// Retire tells a backend that the scheduler has ended the requests of
// these plans (their GPU stalled): it should not run them, nor keep
// places in its GPUs' queues for them. It follows the plans on the same
// connection, so a backend that was paused reads it right after them.
type Retire struct{ Plans []uint64 }

// MaxRetired bounds the plans one Retire names.
const MaxRetired = 1 << 16

// FrontendUp announces a frontend's data address to backends.
type FrontendUp struct {
	ID       uint32
	DataAddr string
}

// FrontendDown says a frontend is gone.
type FrontendDown struct{ ID uint32 }

// Read asks a frontend for inputs: one-sided reads of registered regions.
type Read struct {
	Seq uint64
	Ops []InputRef
}

// ReadReply answers a Read: Data[i] holds Ops[i]'s bytes, or is nil when
// the input is no longer there (Missing says why).
type ReadReply struct {
	Seq     uint64
	Data    [][]byte
	Missing []uint32 // indexes into Ops of inputs not returned
}

// Result is one request's output, or how it failed.
type Result struct {
	ID        uint64
	Code      EndCode // 0 for success
	Detail    string
	Output    []byte
	BatchSize uint32
	// StartedAt and FinishedAt are when its batch ran (Unix ns).
	StartedAt  int64
	FinishedAt int64
}

// Results carries results from a backend to a frontend.
type Results struct{ Results []Result }

func (*Hello) Kind() Kind        { return KindHello }
func (*Welcome) Kind() Kind      { return KindWelcome }
func (*Reject) Kind() Kind       { return KindReject }
func (*Submit) Kind() Kind       { return KindSubmit }
func (*Ended) Kind() Kind        { return KindEnded }
func (*BackendReady) Kind() Kind { return KindBackendReady }
func (*Plan) Kind() Kind         { return KindPlan }
func (*GPUFree) Kind() Kind      { return KindGPUFree }
func (*FrontendUp) Kind() Kind   { return KindFrontendUp }
func (*FrontendDown) Kind() Kind { return KindFrontendDown }
func (*Read) Kind() Kind         { return KindRead }
func (*ReadReply) Kind() Kind    { return KindReadReply }
func (*Results) Kind() Kind      { return KindResults }
func (*RDMAConnect) Kind() Kind  { return KindRDMAConnect }
func (*RDMAAccept) Kind() Kind   { return KindRDMAAccept }
func (*RDMARefuse) Kind() Kind   { return KindRDMARefuse }
func (*RDMARegions) Kind() Kind  { return KindRDMARegions }
func (*Heartbeat) Kind() Kind    { return KindHeartbeat }
func (*Leaving) Kind() Kind      { return KindLeaving }
func (*LeaveOK) Kind() Kind      { return KindLeaveOK }
func (*Retire) Kind() Kind       { return KindRetire }

// Validate checks Hello's fields.
func (m *Hello) Validate() error {
	switch {
	case m.Role < RoleFrontend || m.Role > RolePuller:
		return fmt.Errorf("role: unknown %d", m.Role)
	case m.Role == RoleBackend && (m.GPUs == 0 || m.GPUs > MaxGPUs):
		return fmt.Errorf("gpus: %d not in 1..%d", m.GPUs, MaxGPUs)
	}
	return nil
}

// Validate checks Welcome's fields.
func (m *Welcome) Validate() error {
	if err := validStates("states", m.States); err != nil {
		return err
	}
	for i := range m.Models {
		s := &m.Models[i]
		if s.SLO <= 0 {
			return fmt.Errorf("models[%d].slo: %v not positive", i, s.SLO)
		}
		if len(s.Latency) == 0 {
			return fmt.Errorf("models[%d].latency: empty profile", i)
		}
		for j, l := range s.Latency {
			if l <= 0 {
				return fmt.Errorf("models[%d].latency[%d]: %v not positive", i, j, l)
			}
		}
		if s.StaticMemory < 0 {
			return fmt.Errorf("models[%d].static_memory: %d bytes negative", i, s.StaticMemory)
		}
		if s.DynamicMemory < 0 {
			return fmt.Errorf("models[%d].dynamic_memory: %d bytes negative", i, s.DynamicMemory)
		}
		if (s.Inputs == nil) != (s.Outputs == nil) {
			return fmt.Errorf("models[%d]: %d input and %d output tensors: both or neither", i, len(s.Inputs), len(s.Outputs))
		}
		if err := tensor.ValidateSpecs("input", s.Inputs); err != nil {
			return fmt.Errorf("models[%d].inputs: %w", i, err)
		}
		if err := tensor.ValidateSpecs("output", s.Outputs); err != nil {
			return fmt.Errorf("models[%d].outputs: %w", i, err)
		}
	}
	return nil
}

// Validate accepts any Reject.
func (m *Reject) Validate() error { return nil }

// Validate checks Submit's tasks.
func (m *Submit) Validate() error {
	for i := range m.Tasks {
		if m.Tasks[i].Input.Length > MaxInputSize {
			return fmt.Errorf("tasks[%d].input.length: %d over %d", i, m.Tasks[i].Input.Length, MaxInputSize)
		}
	}
	return nil
}

// Validate checks Ended's codes.
func (m *Ended) Validate() error {
	for i := range m.Ends {
		if c := m.Ends[i].Code; c == 0 || c >= endCodeEnd {
			return fmt.Errorf("ends[%d].code: unknown %d", i, c)
		}
	}
	return nil
}

// Validate checks BackendReady.
func (m *BackendReady) Validate() error { return nil }

// Validate checks Plan's size.
func (m *Plan) Validate() error {
	if len(m.Tasks) == 0 || len(m.Tasks) > MaxBatch {
		return fmt.Errorf("tasks: %d not in 1..%d", len(m.Tasks), MaxBatch)
	}
	return nil
}

// Validate checks GPUFree's times.
func (m *GPUFree) Validate() error {
	switch {
	case m.FinishedAt < m.StartedAt:
		return errors.New("finished_at: before started_at")
	case m.Ran > MaxBatch:
		return fmt.Errorf("ran: %d over %d", m.Ran, MaxBatch)
	case m.Dropped > MaxBatch || m.Failed > MaxBatch:
		return fmt.Errorf("dropped %d or failed %d over %d", m.Dropped, m.Failed, MaxBatch)
	}
	return nil
}

// Validate accepts any Heartbeat.
func (m *Heartbeat) Validate() error { return nil }

// Validate accepts any Leaving.
func (m *Leaving) Validate() error { return nil }

// Validate accepts any LeaveOK.
func (m *LeaveOK) Validate() error { return nil }

// Validate checks Retire's size.
func (m *Retire) Validate() error {
	if len(m.Plans) > MaxRetired {
		return fmt.Errorf("plans: %d over %d", len(m.Plans), MaxRetired)
	}
	return nil
}

// Validate checks FrontendUp.
func (m *FrontendUp) Validate() error {
	if m.DataAddr == "" {
		return errors.New("data_addr: empty")
	}
	return nil
}

// Validate checks FrontendDown.
func (m *FrontendDown) Validate() error { return nil }

// Validate checks Read's size.
func (m *Read) Validate() error {
	if len(m.Ops) > MaxBatch {
		return fmt.Errorf("ops: %d over %d", len(m.Ops), MaxBatch)
	}
	for i := range m.Ops {
		if m.Ops[i].Length > MaxInputSize {
			return fmt.Errorf("ops[%d].length: %d over %d", i, m.Ops[i].Length, MaxInputSize)
		}
	}
	return nil
}

// Validate checks ReadReply's indexes.
func (m *ReadReply) Validate() error {
	for i, x := range m.Missing {
		if int(x) >= len(m.Data) {
			return fmt.Errorf("missing[%d]: index %d out of %d", i, x, len(m.Data))
		}
	}
	return nil
}

// Validate checks Results' codes.
func (m *Results) Validate() error {
	for i := range m.Results {
		if c := m.Results[i].Code; c >= endCodeEnd {
			return fmt.Errorf("results[%d].code: unknown %d", i, c)
		}
	}
	return nil
}
