package wire

import (
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/symphony-serving/symphony/tensor"
)

// Each message is a msgpack array of its fields in declaration order;
// nested structs are arrays too. Encoders write into a bytes.Buffer, which
// cannot fail, so their errors are only returned for form.

func (m *Hello) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(5)
	_ = e.EncodeUint32(m.Version)
	_ = e.EncodeUint8(uint8(m.Role))
	_ = e.EncodeString(m.Name)
	_ = e.EncodeString(m.DataAddr)
	return e.EncodeUint32(m.GPUs)
}

func (m *Hello) decode(d *decoder) {
	n := d.fields("hello", 5)
	m.Version = d.u32("version")
	m.Role = Role(d.u8("role"))
	m.Name = d.str("name", MaxName)
	m.DataAddr = d.str("data_addr", MaxName)
	m.GPUs = d.u32("gpus")
	d.rest("hello", n, 5)
}

func (m *Welcome) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(6)
	_ = e.EncodeUint32(m.Version)
	_ = e.EncodeUint32(m.ID)
	_ = e.EncodeArrayLen(len(m.Models))
	for i := range m.Models {
		s := &m.Models[i]
		_ = e.EncodeArrayLen(8)
		_ = e.EncodeUint32(s.ID)
		_ = e.EncodeString(s.Name)
		_ = e.EncodeInt64(int64(s.SLO))
		_ = e.EncodeArrayLen(len(s.Latency))
		for _, l := range s.Latency {
			_ = e.EncodeInt64(int64(l))
		}
		encodeTensors(e, s.Inputs)
		encodeTensors(e, s.Outputs)
		_ = e.EncodeInt64(s.StaticMemory)
		_ = e.EncodeInt64(s.DynamicMemory)
	}
	_ = e.EncodeArrayLen(len(m.Frontends))
	for i := range m.Frontends {
		_ = m.Frontends[i].encode(e)
	}
	_ = e.EncodeUint32(m.Features)
	encodeStates(e, m.States)
	return nil
}

func (m *Welcome) decode(d *decoder) {
	n := d.fields("welcome", 4)
	m.Version = d.u32("version")
	m.ID = d.u32("id")
	k := d.list("models")
	if k > MaxModels {
		d.fail("models", errTooMany(k, MaxModels))
		return
	}
	m.Models = make([]ModelSpec, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Models = append(m.Models, ModelSpec{})
		s := &m.Models[i]
		sn := d.fields("models[]", 4)
		s.ID = d.u32("models[].id")
		s.Name = d.str("models[].name", MaxName)
		s.SLO = time.Duration(d.i64("models[].slo"))
		l := d.list("models[].latency")
		if l > MaxBatch {
			d.fail("models[].latency", errTooMany(l, MaxBatch))
			return
		}
		s.Latency = make([]time.Duration, 0, capped(l))
		for j := 0; j < l && d.err == nil; j++ {
			s.Latency = append(s.Latency, time.Duration(d.i64("models[].latency[]")))
		}
		// An older scheduler sends no tensors (four fields), or no memory
		// (six): those it lacks stay nil and 0 (unknown).
		read := 4
		if sn >= 6 {
			s.Inputs = d.tensors("models[].inputs")
			s.Outputs = d.tensors("models[].outputs")
			read = 6
		}
		if sn >= 8 {
			s.StaticMemory = d.i64("models[].static_memory")
			s.DynamicMemory = d.i64("models[].dynamic_memory")
			read = 8
		}
		d.rest("models[]", sn, read)
	}
	k = d.list("frontends")
	m.Frontends = make([]FrontendUp, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Frontends = append(m.Frontends, FrontendUp{})
		m.Frontends[i].decode(d)
	}
	if n < 5 {
		return // an older listener: no features
	}
	m.Features = d.u32("features")
	if n < 6 {
		return // an older listener: every model READY
	}
	m.States = decodeStates(d, "states")
	d.rest("welcome", n, 6)
}

// encodeTensors writes a model's tensor specs: [[name, datatype, [dims]]].
func encodeTensors(e *msgpack.Encoder, specs []tensor.Spec) {
	_ = e.EncodeArrayLen(len(specs))
	for _, t := range specs {
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeString(t.Name)
		_ = e.EncodeString(t.Datatype)
		_ = e.EncodeArrayLen(len(t.Shape))
		for _, x := range t.Shape {
			_ = e.EncodeInt64(x)
		}
	}
}

// tensors reads a model's tensor specs, nil for none; Validate checks them.
func (d *decoder) tensors(field string) []tensor.Spec {
	k := d.list(field)
	if k > tensor.MaxTensors {
		d.fail(field, errTooMany(k, tensor.MaxTensors))
		return nil
	}
	if k == 0 {
		return nil
	}
	specs := make([]tensor.Spec, 0, k)
	for i := 0; i < k && d.err == nil; i++ {
		n := d.fields(field+"[]", 3)
		t := tensor.Spec{Name: d.str(field+"[].name", tensor.MaxName), Datatype: d.str(field+"[].datatype", maxDatatype)}
		l := d.list(field + "[].shape")
		if l > tensor.MaxDims {
			d.fail(field+"[].shape", errTooMany(l, tensor.MaxDims))
			return nil
		}
		t.Shape = make([]int64, 0, l)
		for j := 0; j < l && d.err == nil; j++ {
			t.Shape = append(t.Shape, d.i64(field+"[].shape[]"))
		}
		d.rest(field+"[]", n, 3)
		specs = append(specs, t)
	}
	return specs
}

// maxDatatype bounds a datatype's name: the longest KServe name is 6 bytes.
const maxDatatype = 16

func (m *Reject) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	return e.EncodeString(m.Reason)
}

func (m *Reject) decode(d *decoder) {
	n := d.fields("reject", 1)
	m.Reason = d.str("reason", MaxReason)
	d.rest("reject", n, 1)
}

func (r *InputRef) encode(e *msgpack.Encoder) {
	_ = e.EncodeArrayLen(4)
	_ = e.EncodeUint32(r.Region)
	_ = e.EncodeUint64(r.Offset)
	_ = e.EncodeUint32(r.Length)
	_ = e.EncodeUint64(r.Key)
}

func (r *InputRef) decode(d *decoder) {
	n := d.fields("input", 4)
	r.Region = d.u32("input.region")
	r.Offset = d.u64("input.offset")
	r.Length = d.u32("input.length")
	r.Key = d.u64("input.key")
	d.rest("input", n, 4)
}

func (m *Submit) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(len(m.Tasks))
	for i := range m.Tasks {
		t := &m.Tasks[i]
		if t.Priority == 0 {
			_ = e.EncodeArrayLen(4)
		} else {
			_ = e.EncodeArrayLen(5)
		}
		_ = e.EncodeUint64(t.ID)
		_ = e.EncodeUint32(t.Model)
		_ = e.EncodeInt64(t.Deadline)
		t.Input.encode(e)
		if t.Priority != 0 {
			_ = e.EncodeUint8(t.Priority)
		}
	}
	return nil
}

func (m *Submit) decode(d *decoder) {
	n := d.fields("submit", 1)
	k := d.list("tasks")
	m.Tasks = make([]Task, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Tasks = append(m.Tasks, Task{})
		t := &m.Tasks[i]
		tn := d.fields("tasks[]", 4)
		t.ID = d.u64("tasks[].id")
		t.Model = d.u32("tasks[].model")
		t.Deadline = d.i64("tasks[].deadline")
		t.Input.decode(d)
		read := 4
		if tn > 4 {
			t.Priority, read = d.u8("tasks[].priority"), 5
		}
		d.rest("tasks[]", tn, read)
	}
	d.rest("submit", n, 1)
}

func (m *Ended) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(len(m.Ends))
	for i := range m.Ends {
		x := &m.Ends[i]
		_ = e.EncodeArrayLen(3)
		_ = e.EncodeUint64(x.ID)
		_ = e.EncodeUint8(uint8(x.Code))
		_ = e.EncodeString(x.Detail)
	}
	return nil
}

func (m *Ended) decode(d *decoder) {
	n := d.fields("ended", 1)
	k := d.list("ends")
	m.Ends = make([]End, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Ends = append(m.Ends, End{})
		x := &m.Ends[i]
		xn := d.fields("ends[]", 3)
		x.ID = d.u64("ends[].id")
		x.Code = EndCode(d.u8("ends[].code"))
		x.Detail = d.str("ends[].detail", MaxReason)
		d.rest("ends[]", xn, 3)
	}
	d.rest("ended", n, 1)
}

func (m *BackendReady) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	return e.EncodeUint32(m.GPUs)
}

func (m *BackendReady) decode(d *decoder) {
	n := d.fields("backend_ready", 1)
	m.GPUs = d.u32("gpus")
	d.rest("backend_ready", n, 1)
}

func (m *Plan) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(6)
	_ = e.EncodeUint64(m.ID)
	_ = e.EncodeUint32(m.GPU)
	_ = e.EncodeUint32(m.Model)
	_ = e.EncodeInt64(m.ExecAt)
	_ = e.EncodeInt64(m.Deadline)
	_ = e.EncodeArrayLen(len(m.Tasks))
	for i := range m.Tasks {
		t := &m.Tasks[i]
		_ = e.EncodeArrayLen(4)
		_ = e.EncodeUint64(t.ID)
		_ = e.EncodeUint32(t.Frontend)
		t.Input.encode(e)
		_ = e.EncodeInt64(t.FinishBy)
	}
	return nil
}

func (m *Plan) decode(d *decoder) {
	n := d.fields("plan", 6)
	m.ID = d.u64("id")
	m.GPU = d.u32("gpu")
	m.Model = d.u32("model")
	m.ExecAt = d.i64("exec_at")
	m.Deadline = d.i64("deadline")
	k := d.list("tasks")
	if k > MaxBatch {
		d.fail("tasks", errTooMany(k, MaxBatch))
		return
	}
	m.Tasks = make([]PlanTask, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Tasks = append(m.Tasks, PlanTask{})
		t := &m.Tasks[i]
		tn := d.fields("tasks[]", 4)
		t.ID = d.u64("tasks[].id")
		t.Frontend = d.u32("tasks[].frontend")
		t.Input.decode(d)
		t.FinishBy = d.i64("tasks[].finish_by")
		d.rest("tasks[]", tn, 4)
	}
	d.rest("plan", n, 6)
}

func (m *GPUFree) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(7)
	_ = e.EncodeUint32(m.GPU)
	_ = e.EncodeUint64(m.Plan)
	_ = e.EncodeInt64(m.StartedAt)
	_ = e.EncodeInt64(m.FinishedAt)
	_ = e.EncodeUint32(m.Failed)
	_ = e.EncodeUint32(m.Ran)
	return e.EncodeUint32(m.Dropped)
}

func (m *GPUFree) decode(d *decoder) {
	n := d.fields("gpu_free", 7)
	m.GPU = d.u32("gpu")
	m.Plan = d.u64("plan")
	m.StartedAt = d.i64("started_at")
	m.FinishedAt = d.i64("finished_at")
	m.Failed = d.u32("failed")
	m.Ran = d.u32("ran")
	m.Dropped = d.u32("dropped")
	d.rest("gpu_free", n, 7)
}

// The empty messages are empty arrays, so that a later version can add
// fields.

func (m *Heartbeat) encode(e *msgpack.Encoder) error { return e.EncodeArrayLen(0) }

func (m *Heartbeat) decode(d *decoder) { d.rest("heartbeat", d.fields("heartbeat", 0), 0) }

func (m *Leaving) encode(e *msgpack.Encoder) error { return e.EncodeArrayLen(0) }

func (m *Leaving) decode(d *decoder) { d.rest("leaving", d.fields("leaving", 0), 0) }

func (m *LeaveOK) encode(e *msgpack.Encoder) error { return e.EncodeArrayLen(0) }

func (m *LeaveOK) decode(d *decoder) { d.rest("leave_ok", d.fields("leave_ok", 0), 0) }

func (m *Retire) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(len(m.Plans))
	for _, id := range m.Plans {
		_ = e.EncodeUint64(id)
	}
	return nil
}

func (m *Retire) decode(d *decoder) {
	n := d.fields("retire", 1)
	k := d.list("plans")
	if k > MaxRetired {
		d.fail("plans", errTooMany(k, MaxRetired))
		return
	}
	m.Plans = make([]uint64, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Plans = append(m.Plans, d.u64("plans[]"))
	}
	d.rest("retire", n, 1)
}

func (m *FrontendUp) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(2)
	_ = e.EncodeUint32(m.ID)
	return e.EncodeString(m.DataAddr)
}

func (m *FrontendUp) decode(d *decoder) {
	n := d.fields("frontend_up", 2)
	m.ID = d.u32("id")
	m.DataAddr = d.str("data_addr", MaxName)
	d.rest("frontend_up", n, 2)
}

func (m *FrontendDown) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	return e.EncodeUint32(m.ID)
}

func (m *FrontendDown) decode(d *decoder) {
	n := d.fields("frontend_down", 1)
	m.ID = d.u32("id")
	d.rest("frontend_down", n, 1)
}

func (m *Read) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(2)
	_ = e.EncodeUint64(m.Seq)
	_ = e.EncodeArrayLen(len(m.Ops))
	for i := range m.Ops {
		m.Ops[i].encode(e)
	}
	return nil
}

func (m *Read) decode(d *decoder) {
	n := d.fields("read", 2)
	m.Seq = d.u64("seq")
	k := d.list("ops")
	if k > MaxBatch {
		d.fail("ops", errTooMany(k, MaxBatch))
		return
	}
	m.Ops = make([]InputRef, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Ops = append(m.Ops, InputRef{})
		m.Ops[i].decode(d)
	}
	d.rest("read", n, 2)
}

func (m *ReadReply) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(3)
	_ = e.EncodeUint64(m.Seq)
	_ = e.EncodeArrayLen(len(m.Data))
	for _, b := range m.Data {
		_ = e.EncodeBytes(b)
	}
	_ = e.EncodeArrayLen(len(m.Missing))
	for _, x := range m.Missing {
		_ = e.EncodeUint32(x)
	}
	return nil
}

func (m *ReadReply) decode(d *decoder) {
	n := d.fields("read_reply", 3)
	m.Seq = d.u64("seq")
	k := d.list("data")
	if k > MaxBatch {
		d.fail("data", errTooMany(k, MaxBatch))
		return
	}
	m.Data = make([][]byte, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Data = append(m.Data, d.bytes("data[]"))
	}
	k = d.list("missing")
	m.Missing = make([]uint32, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Missing = append(m.Missing, d.u32("missing[]"))
	}
	d.rest("read_reply", n, 3)
}

func (m *Results) encode(e *msgpack.Encoder) error {
	_ = e.EncodeArrayLen(1)
	_ = e.EncodeArrayLen(len(m.Results))
	for i := range m.Results {
		r := &m.Results[i]
		_ = e.EncodeArrayLen(7)
		_ = e.EncodeUint64(r.ID)
		_ = e.EncodeUint8(uint8(r.Code))
		_ = e.EncodeString(r.Detail)
		_ = e.EncodeBytes(r.Output)
		_ = e.EncodeUint32(r.BatchSize)
		_ = e.EncodeInt64(r.StartedAt)
		_ = e.EncodeInt64(r.FinishedAt)
	}
	return nil
}

func (m *Results) decode(d *decoder) {
	n := d.fields("results", 1)
	k := d.list("results")
	m.Results = make([]Result, 0, capped(k))
	for i := 0; i < k && d.err == nil; i++ {
		m.Results = append(m.Results, Result{})
		r := &m.Results[i]
		rn := d.fields("results[]", 7)
		r.ID = d.u64("results[].id")
		r.Code = EndCode(d.u8("results[].code"))
		r.Detail = d.str("results[].detail", MaxReason)
		r.Output = d.bytes("results[].output")
		r.BatchSize = d.u32("results[].batch_size")
		r.StartedAt = d.i64("results[].started_at")
		r.FinishedAt = d.i64("results[].finished_at")
		d.rest("results[]", rn, 7)
	}
	d.rest("results", n, 1)
}

func errTooMany(n, max int) error { return fmt.Errorf("%d elements, limit %d", n, max) }

// capped bounds a slice's initial capacity: lengths are checked against the
// bytes left, but an element decodes into more memory than its bytes, so
// slices grow as elements actually arrive.
func capped(n int) int { return min(n, 64) }
