//go:build rdma

package rdma

/*
#cgo LDFLAGS: -libverbs
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

// The helpers take and return scalars and C pointers only: no Go pointer
// is kept by C, and no Go memory is ever given to the device.

static struct ibv_device **sym_devices(int *n, int *err) {
	struct ibv_device **l = ibv_get_device_list(n);
	*err = l == NULL ? errno : 0;
	return l;
}

static struct ibv_device *sym_device_at(struct ibv_device **l, int i) { return l[i]; }

static struct ibv_context *sym_open(struct ibv_device *d, int *err) {
	struct ibv_context *c = ibv_open_device(d);
	*err = c == NULL ? errno : 0;
	return c;
}

static int sym_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
	return ibv_query_port(c, port, a);
}

static int sym_query_gid(struct ibv_context *c, uint8_t port, int index, uint8_t out[16]) {
	union ibv_gid g;
	int r = ibv_query_gid(c, port, index, &g);
	memcpy(out, g.raw, 16);
	return r;
}

static struct ibv_pd *sym_alloc_pd(struct ibv_context *c, int *err) {
	struct ibv_pd *p = ibv_alloc_pd(c);
	*err = p == NULL ? errno : 0;
	return p;
}

static struct ibv_comp_channel *sym_channel(struct ibv_context *c, int *dupfd, int *err) {
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c);
	if (ch == NULL) { *err = errno; return NULL; }
	int flags = fcntl(ch->fd, F_GETFL);
	if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		*err = errno;
		ibv_destroy_comp_channel(ch);
		return NULL;
	}
	*dupfd = fcntl(ch->fd, F_DUPFD_CLOEXEC, 0);
	if (*dupfd < 0) {
		*err = errno;
		ibv_destroy_comp_channel(ch);
		return NULL;
	}
	*err = 0;
	return ch;
}

static struct ibv_mr *sym_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int remote_read, int *err) {
	int access = IBV_ACCESS_LOCAL_WRITE | (remote_read ? IBV_ACCESS_REMOTE_READ : 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);
	*err = mr == NULL ? errno : 0;
	return mr;
}

static struct ibv_cq *sym_create_cq(struct ibv_context *c, int n, struct ibv_comp_channel *ch, int *err) {
	struct ibv_cq *cq = ibv_create_cq(c, n, NULL, ch, 0);
	if (cq == NULL) { *err = errno; return NULL; }
	*err = ibv_req_notify_cq(cq, 0);
	if (*err != 0) { ibv_destroy_cq(cq); return NULL; }
	return cq;
}

static struct ibv_qp *sym_create_qp(struct ibv_pd *pd, struct ibv_cq *cq, int depth, int *err) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = cq;
	a.recv_cq = cq;
	a.cap.max_send_wr = depth;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	*err = qp == NULL ? errno : 0;
	return qp;
}

static uint32_t sym_qp_num(struct ibv_qp *qp) { return qp->qp_num; }

static int sym_qp_init(struct ibv_qp *qp, uint8_t port) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int sym_qp_rtr(struct ibv_qp *qp, uint8_t port, uint32_t dqpn, uint32_t rpsn, uint16_t dlid,
		uint64_t gid_hi, uint64_t gid_lo, int use_grh, int sgid_index, int mtu, int dest_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = rpsn;
	a.max_dest_rd_atomic = dest_rd_atomic;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = dlid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = port;
	if (use_grh) {
		a.ah_attr.is_global = 1;
		for (int i = 0; i < 8; i++) {
			a.ah_attr.grh.dgid.raw[i] = (uint8_t)(gid_hi >> (56 - 8 * i));
			a.ah_attr.grh.dgid.raw[8 + i] = (uint8_t)(gid_lo >> (56 - 8 * i));
		}
		a.ah_attr.grh.sgid_index = sgid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.flow_label = 0;
		a.ah_attr.grh.traffic_class = 0;
	}
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

// timeout and retry: qpAckTimeout and qpRetryCount (device.go says why).
static int sym_qp_rts(struct ibv_qp *qp, uint32_t psn, int rd_atomic, uint8_t timeout, uint8_t retry) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = 7;
	a.sq_psn = psn;
	a.max_rd_atomic = rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int sym_qp_err(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int sym_post_read(struct ibv_qp *qp, uint64_t wr_id, uint64_t laddr, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey) {
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	sge.addr = laddr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static struct ibv_cq *sym_get_cq_event(struct ibv_comp_channel *ch, int *err) {
	struct ibv_cq *cq = NULL;
	void *ctx = NULL;
	if (ibv_get_cq_event(ch, &cq, &ctx) != 0) {
		*err = errno;
		return NULL;
	}
	*err = 0;
	return cq;
}

static int sym_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n) { return ibv_poll_cq(cq, n, wc); }

static int sym_rearm(struct ibv_cq *cq) { return ibv_req_notify_cq(cq, 0); }

static struct ibv_wc *sym_wc_at(struct ibv_wc *wc, int i) { return &wc[i]; }

static int sym_wc_status(int i) {
	static const int s[] = {IBV_WC_SUCCESS, IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_EEC_OP_ERR,
		IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_MW_BIND_ERR, IBV_WC_BAD_RESP_ERR,
		IBV_WC_LOC_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR,
		IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_LOC_RDD_VIOL_ERR, IBV_WC_REM_INV_RD_REQ_ERR,
		IBV_WC_REM_ABORT_ERR, IBV_WC_INV_EECN_ERR, IBV_WC_INV_EEC_STATE_ERR, IBV_WC_FATAL_ERR,
		IBV_WC_RESP_TIMEOUT_ERR, IBV_WC_GENERAL_ERR, IBV_WC_TM_ERR, IBV_WC_TM_RNDV_INCOMPLETE};
	return i >= 0 && i < (int)(sizeof s / sizeof s[0]) ? s[i] : -1;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Built reports whether this binary has the libibverbs bindings.
const Built = true

// checkABI checks that WCStatus numbers completions as verbs.h does.
func checkABI() error {
	for s := WCSuccess; s < wcStatusEnd; s++ {
		if got := int(C.sym_wc_status(C.int(s))); got != int(s) {
			return fmt.Errorf("rdma: WCStatus %d (%v) is %d in verbs.h", s, s, got)
		}
	}
	return nil
}

// port is a device's port as a queue pair uses it.
type port struct {
	num      int
	lid      uint16
	mtu      uint8
	ethernet bool
	gidIndex int
	gid      [16]byte
}

// findDevice opens the device cfg names (or the first one with an active
// port) and picks its port and GID. The caller closes the context.
func findDevice(cfg DeviceConfig) (*C.struct_ibv_context, string, port, error) {
	if err := checkABI(); err != nil {
		return nil, "", port{}, err
	}
	var n, errno C.int
	list := C.sym_devices(&n, &errno)
	if list == nil {
		if errno == C.ENOSYS || errno == 0 {
			return nil, "", port{}, fmt.Errorf("%w (no RDMA kernel support)", ErrNoDevice)
		}
		return nil, "", port{}, verbsError("ibv_get_device_list", int(errno))
	}
	defer C.ibv_free_device_list(list)
	var tried []string
	for i := 0; i < int(n); i++ {
		dev := C.sym_device_at(list, C.int(i))
		name := C.GoString(C.ibv_get_device_name(dev))
		if cfg.Name != "" && name != cfg.Name {
			continue
		}
		ctx := C.sym_open(dev, &errno)
		if ctx == nil {
			tried = append(tried, fmt.Sprintf("%s: %v", name, verbsError("ibv_open_device", int(errno))))
			continue
		}
		p, err := pickPort(ctx, name, cfg)
		if err != nil {
			C.ibv_close_device(ctx)
			tried = append(tried, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		return ctx, name, p, nil
	}
	switch {
	case cfg.Name != "" && len(tried) == 0:
		return nil, "", port{}, fmt.Errorf("%w: no device named %q among %d", ErrNoDevice, cfg.Name, int(n))
	case len(tried) > 0:
		return nil, "", port{}, fmt.Errorf("%w: %v", ErrNoDevice, tried)
	}
	return nil, "", port{}, ErrNoDevice
}

// pickPort finds cfg's port (or the first active one) and its GID.
func pickPort(ctx *C.struct_ibv_context, name string, cfg DeviceConfig) (port, error) {
	var da C.struct_ibv_device_attr
	if r := C.ibv_query_device(ctx, &da); r != 0 {
		return port{}, verbsError("ibv_query_device", int(r))
	}
	for num := 1; num <= int(da.phys_port_cnt); num++ {
		if cfg.Port != 0 && num != cfg.Port {
			continue
		}
		var pa C.struct_ibv_port_attr
		if r := C.sym_query_port(ctx, C.uint8_t(num), &pa); r != 0 {
			return port{}, verbsError("ibv_query_port", int(r))
		}
		if pa.state != C.IBV_PORT_ACTIVE {
			continue
		}
		p := port{num: num, lid: uint16(pa.lid), mtu: uint8(pa.active_mtu), ethernet: pa.link_layer == C.IBV_LINK_LAYER_ETHERNET}
		n := int(pa.gid_tbl_len)
		gids := make([][16]byte, n)
		types := make([]string, n)
		for i := 0; i < n; i++ {
			var raw [16]C.uint8_t
			if C.sym_query_gid(ctx, C.uint8_t(num), C.int(i), &raw[0]) != 0 {
				continue
			}
			for k := range raw {
				gids[i][k] = byte(raw[k])
			}
			types[i] = gidType("/sys", name, num, i)
		}
		p.gidIndex = cfg.GIDIndex
		if p.gidIndex < 0 {
			p.gidIndex = pickGID(gids, types)
		}
		if p.gidIndex >= 0 && p.gidIndex < n {
			p.gid = gids[p.gidIndex]
		}
		if p.ethernet && p.gid == [16]byte{} {
			return port{}, fmt.Errorf("port %d is Ethernet (RoCE) but has no usable GID", num)
		}
		if p.gidIndex < 0 {
			p.gidIndex = 0
		}
		return p, nil
	}
	return port{}, errors.New("no active port")
}

// Available says whether cfg's device can be used here: nil, or why not.
// It returns the device's name.
func Available(cfg DeviceConfig) (string, error) {
	ctx, name, _, err := findDevice(cfg)
	if err != nil {
		return "", err
	}
	C.ibv_close_device(ctx)
	return name, nil
}

// verbsFabric is a Fabric over libibverbs: one device context, one
// protection domain, one completion channel watched by one goroutine, and
// a completion queue per queue pair. If that goroutine cannot go on (the
// channel fails, or a completion queue cannot be re-armed or polled), no
// completion would ever come again and every READ posted would wait for
// its batch's deadline: the device is marked failed (health), which breaks
// every session on it (their owners go to TCP) and refuses new queue
// pairs.
type verbsFabric struct {
	name    string
	ctx     *C.struct_ibv_context
	pd      *C.struct_ibv_pd
	ch      *C.struct_ibv_comp_channel
	port    port
	maxInit int // max_qp_init_rd_atom
	maxDest int // max_qp_rd_atom
	maxWR   int
	maxCQE  int

	events   *os.File // a nonblocking dup of the channel's fd, for Go's poller
	pollDone chan struct{}
	// wc is the poller's array of pollBatch completions: C memory, from
	// Open until Close frees it after the poller has stopped.
	wc     *C.struct_ibv_wc
	health *health

	mu  sync.Mutex
	cqs map[*C.struct_ibv_cq]*verbsQP
	// nqp and nmr count the queue pairs and memory regions from the start
	// of their creation to the end of their destruction: Close refuses
	// while either is not zero, so that no verbs call on the device's
	// objects runs during or after ibv_close_device.
	nqp, nmr int
	closed   bool
}

const pollBatch = 32

// Open opens cfg's device: its protection domain and completion channel,
// and the goroutine that delivers completions.
func Open(cfg DeviceConfig) (Fabric, error) {
	ctx, name, p, err := findDevice(cfg)
	if err != nil {
		return nil, err
	}
	f := &verbsFabric{name: name, ctx: ctx, port: p, cqs: map[*C.struct_ibv_cq]*verbsQP{}, pollDone: make(chan struct{}),
		health: newHealth()}
	fail := func(e error) (Fabric, error) {
		if f.ch != nil {
			C.ibv_destroy_comp_channel(f.ch)
		}
		if f.pd != nil {
			C.ibv_dealloc_pd(f.pd)
		}
		C.ibv_close_device(ctx)
		return nil, e
	}
	var da C.struct_ibv_device_attr
	if r := C.ibv_query_device(ctx, &da); r != 0 {
		return fail(verbsError("ibv_query_device", int(r)))
	}
	f.maxInit, f.maxDest = int(da.max_qp_init_rd_atom), int(da.max_qp_rd_atom)
	f.maxWR, f.maxCQE = int(da.max_qp_wr), int(da.max_cqe)
	var errno C.int
	if f.pd = C.sym_alloc_pd(ctx, &errno); f.pd == nil {
		return fail(verbsError("ibv_alloc_pd", int(errno)))
	}
	var dupfd C.int
	if f.ch = C.sym_channel(ctx, &dupfd, &errno); f.ch == nil {
		return fail(verbsError("ibv_create_comp_channel", int(errno)))
	}
	f.events = os.NewFile(uintptr(dupfd), "ibv-comp-channel")
	if f.wc = (*C.struct_ibv_wc)(C.calloc(pollBatch, C.size_t(unsafe.Sizeof(C.struct_ibv_wc{})))); f.wc == nil {
		_ = f.events.Close()
		return fail(fmt.Errorf("rdma: no memory for %d work completions", pollBatch))
	}
	go f.poll()
	return f, nil
}

func (f *verbsFabric) Device() string { return f.name }

// poll delivers completions: it waits on the channel's fd in Go's poller
// (no thread blocked in C), takes each completion event, re-arms the CQ
// and drains it. It stops when Close closes the fd, or, failing the
// device, when completions can no longer be had.
func (f *verbsFabric) poll() {
	defer close(f.pollDone)
	rc, err := f.events.SyscallConn()
	if err != nil {
		f.fail(fmt.Errorf("watching the completion channel: %w", err))
		return
	}
	var done []Completion
	var owners []*verbsQP
	var failure error // set once completions stopped for good
	for {
		err := rc.Read(func(uintptr) bool {
			for {
				var errno C.int
				cq := C.sym_get_cq_event(f.ch, &errno)
				if cq == nil {
					switch what, err := cqEventErrno(syscall.Errno(errno)); what {
					case cqEventRetry:
						continue
					case cqEventWait:
						return false // wait for the fd
					default:
						failure = err
						return true
					}
				}
				done, owners, failure = f.drain(cq, done[:0], owners[:0])
				for i, c := range done {
					owners[i].complete(c)
				}
				if failure != nil {
					return true
				}
			}
		})
		if f.isClosed() {
			return // Close closed the fd
		}
		if err != nil && failure == nil {
			failure = fmt.Errorf("waiting on the completion channel: %w", err)
		}
		if failure != nil {
			f.fail(failure)
			return
		}
	}
}

// fail marks the device failed: every queue pair's owner hears of it (its
// session breaks, and reads go to TCP), and no queue pair is made any
// more. Outside f.mu.
func (f *verbsFabric) fail(err error) {
	f.health.fail(&DeviceError{Device: f.name, Err: err})
}

func (f *verbsFabric) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// drain acknowledges one event of cq, re-arms it and polls it empty. A CQ
// being destroyed is only acknowledged (ibv_destroy_cq waits for that).
// A CQ that cannot be re-armed (no event would come for it again) or
// polled returns the error, after what could be polled.
func (f *verbsFabric) drain(cq *C.struct_ibv_cq, done []Completion, owners []*verbsQP) ([]Completion, []*verbsQP, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	C.ibv_ack_cq_events(cq, 1)
	q := f.cqs[cq]
	if q == nil {
		return done, owners, nil
	}
	var failure error
	if r := C.sym_rearm(cq); r != 0 {
		failure = verbsError("ibv_req_notify_cq", int(r))
	}
	for {
		n := int(C.sym_poll(cq, f.wc, pollBatch))
		if n < 0 {
			return done, owners, verbsError("ibv_poll_cq", n)
		}
		for i := 0; i < n; i++ {
			wc := C.sym_wc_at(f.wc, C.int(i))
			done = append(done, Completion{WRID: uint64(wc.wr_id), Err: completionError(WCStatus(wc.status), uint32(wc.vendor_err))})
			owners = append(owners, q)
		}
		if n < pollBatch {
			return done, owners, failure
		}
	}
}

func (f *verbsFabric) Register(a *Arena, remoteRead bool) (MemoryRegion, error) {
	b := a.Bytes()
	if len(b) == 0 {
		return nil, errUnmapped
	}
	rr := C.int(0)
	if remoteRead {
		rr = 1
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, verbsError("ibv_reg_mr", int(syscall.ENODEV))
	}
	f.nmr++
	f.mu.Unlock()
	var errno C.int
	mr := C.sym_reg_mr(f.pd, unsafe.Pointer(&b[0]), C.size_t(len(b)), rr, &errno)
	if mr == nil {
		f.mu.Lock()
		f.nmr--
		f.mu.Unlock()
		return nil, verbsError("ibv_reg_mr", int(errno))
	}
	return &verbsMR{f: f, mr: mr, lkey: uint32(mr.lkey), rkey: uint32(mr.rkey)}, nil
}

type verbsMR struct {
	f          *verbsFabric
	lkey, rkey uint32 // copied: mr is freed by Deregister
	mu         sync.Mutex
	mr         *C.struct_ibv_mr
}

func (m *verbsMR) LKey() uint32 { return m.lkey }
func (m *verbsMR) RKey() uint32 { return m.rkey }

func (m *verbsMR) Deregister() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mr == nil {
		return errors.New("rdma: memory region already deregistered")
	}
	if r := C.ibv_dereg_mr(m.mr); r != 0 {
		return verbsError("ibv_dereg_mr", int(r))
	}
	m.mr = nil
	m.f.mu.Lock()
	m.f.nmr--
	m.f.mu.Unlock()
	return nil
}

func (f *verbsFabric) NewQueuePair(depth int, onComplete func(Completion), onFail func(error)) (QueuePair, error) {
	if depth < 1 {
		return nil, verbsError("ibv_create_qp", int(syscall.EINVAL))
	}
	if err := f.health.Err(); err != nil {
		return nil, err
	}
	depth = min(depth, f.maxWR, f.maxCQE)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, verbsError("ibv_create_qp", int(syscall.ENODEV))
	}
	f.nqp++
	f.mu.Unlock()
	fail := func(err error) (QueuePair, error) {
		f.mu.Lock()
		f.nqp--
		f.mu.Unlock()
		return nil, err
	}
	var errno C.int
	cq := C.sym_create_cq(f.ctx, C.int(depth), f.ch, &errno)
	if cq == nil {
		return fail(verbsError("ibv_create_cq", int(errno)))
	}
	qp := C.sym_create_qp(f.pd, cq, C.int(depth), &errno)
	if qp == nil {
		C.ibv_destroy_cq(cq)
		return fail(verbsError("ibv_create_qp", int(errno)))
	}
	if r := C.sym_qp_init(qp, C.uint8_t(f.port.num)); r != 0 {
		C.ibv_destroy_qp(qp)
		C.ibv_destroy_cq(cq)
		return fail(verbsError("ibv_modify_qp", int(r)))
	}
	q := &verbsQP{f: f, qp: qp, cq: cq, qpn: uint32(C.sym_qp_num(qp)), psn: rand.Uint32() & (1<<24 - 1),
		onComplete: onComplete, posted: map[uint64]struct{}{}}
	f.mu.Lock()
	// Under f.mu with the registration, so that a failure of the device
	// either reaches onFail or is seen here.
	unwatch, err := f.health.watch(onFail)
	if err != nil {
		f.mu.Unlock()
		C.ibv_destroy_qp(qp)
		C.ibv_destroy_cq(cq)
		return fail(err)
	}
	q.unwatch = unwatch
	f.cqs[cq] = q
	f.mu.Unlock()
	return q, nil
}

func (f *verbsFabric) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errors.New("rdma: device already closed")
	}
	if f.nqp > 0 || f.nmr > 0 {
		n, m := f.nqp, f.nmr
		f.mu.Unlock()
		return fmt.Errorf("rdma: closing device %s with %d queue pairs and %d memory regions open", f.name, n, m)
	}
	f.closed = true
	f.mu.Unlock()
	_ = f.events.Close() // stops the poller
	<-f.pollDone
	C.free(unsafe.Pointer(f.wc))
	var err error
	if r := C.ibv_destroy_comp_channel(f.ch); r != 0 {
		err = verbsError("ibv_destroy_comp_channel", int(r))
	}
	if r := C.ibv_dealloc_pd(f.pd); r != 0 && err == nil {
		err = verbsError("ibv_dealloc_pd", int(r))
	}
	if r := C.ibv_close_device(f.ctx); r != 0 && err == nil {
		err = verbsError("ibv_close_device", int(r))
	}
	return err
}

type verbsQP struct {
	f          *verbsFabric
	qp         *C.struct_ibv_qp
	cq         *C.struct_ibv_cq
	qpn, psn   uint32 // qpn copied: qp is freed by Close
	onComplete func(Completion)
	unwatch    func() // ends onFail

	mu      sync.Mutex
	posted  map[uint64]struct{} // READs not yet completed
	closing bool
	drained chan struct{} // closed by complete once closing and nothing is posted
}

func (q *verbsQP) Endpoint() wire.RDMAEndpoint {
	p := q.f.port
	return wire.RDMAEndpoint{QPN: q.qpn, PSN: q.psn, LID: p.lid, GID: p.gid, MTU: p.mtu,
		ReadDepth: localReadDepth(q.f.maxInit, q.f.maxDest)}
}

func (q *verbsQP) Connect(remote wire.RDMAEndpoint) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return verbsError("ibv_modify_qp", int(syscall.EINVAL))
	}
	p := q.f.port
	mtu := min(p.mtu, remote.MTU)
	// Our READs in flight to the peer (max_rd_atomic) must not exceed what
	// the peer serves at once (its max_dest_rd_atomic): both sides use the
	// smaller of the two advertised depths, each within both of its own
	// device's limits.
	rdAtomic := pairReadDepth(localReadDepth(q.f.maxInit, q.f.maxDest), remote.ReadDepth)
	destAtomic := rdAtomic
	useGRH := C.int(0)
	if p.ethernet || remote.LID == 0 {
		useGRH = 1
	}
	hi, lo := binary.BigEndian.Uint64(remote.GID[:8]), binary.BigEndian.Uint64(remote.GID[8:])
	if r := C.sym_qp_rtr(q.qp, C.uint8_t(p.num), C.uint32_t(remote.QPN), C.uint32_t(remote.PSN), C.uint16_t(remote.LID),
		C.uint64_t(hi), C.uint64_t(lo), useGRH, C.int(p.gidIndex), C.int(mtu), C.int(destAtomic)); r != 0 {
		return verbsError("ibv_modify_qp", int(r))
	}
	if r := C.sym_qp_rts(q.qp, C.uint32_t(q.psn), C.int(rdAtomic), C.uint8_t(qpAckTimeout), C.uint8_t(qpRetryCount)); r != 0 {
		return verbsError("ibv_modify_qp", int(r))
	}
	return nil
}

func (q *verbsQP) PostRead(wrID uint64, local Span, remoteAddr uint64, rkey uint32) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return verbsError("ibv_post_send", int(syscall.EINVAL))
	}
	if err := q.f.health.Err(); err != nil {
		return err // its completion would never be delivered
	}
	if r := C.sym_post_read(q.qp, C.uint64_t(wrID), C.uint64_t(local.Addr), C.uint32_t(local.Len), C.uint32_t(local.LKey),
		C.uint64_t(remoteAddr), C.uint32_t(rkey)); r != 0 {
		return verbsError("ibv_post_send", int(r))
	}
	q.posted[wrID] = struct{}{}
	return nil
}

// complete delivers one completion, on the poller's goroutine.
func (q *verbsQP) complete(c Completion) {
	q.mu.Lock()
	_, ok := q.posted[c.WRID]
	delete(q.posted, c.WRID)
	if q.closing && len(q.posted) == 0 && q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
	q.mu.Unlock()
	if ok && q.onComplete != nil {
		q.onComplete(c)
	}
}

// flushTimeout bounds how long Close waits for the device to flush a
// queue pair's READs before destroying it anyway.
const flushTimeout = 5 * time.Second

func (q *verbsQP) Close() error {
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		return errors.New("rdma: queue pair already closed")
	}
	q.closing = true
	var drained chan struct{}
	if len(q.posted) > 0 {
		drained = make(chan struct{})
		q.drained = drained
	}
	q.mu.Unlock()
	q.unwatch()
	err := verbsError("ibv_modify_qp", int(C.sym_qp_err(q.qp)))
	if drained != nil && err == nil {
		t := time.NewTimer(flushTimeout)
		select {
		case <-drained:
		case <-q.f.health.Dead(): // no flush will be delivered: destroying ends the READs
		case <-t.C:
		}
		t.Stop()
	}
	q.f.mu.Lock()
	delete(q.f.cqs, q.cq) // the poller now only acknowledges its events
	q.f.mu.Unlock()
	var destroyErr error
	if r := C.ibv_destroy_qp(q.qp); r != 0 {
		destroyErr = verbsError("ibv_destroy_qp", int(r))
		if err == nil {
			err = destroyErr
		}
	}
	destroyed := destroyErr == nil
	// The queue pair still uses its CQ if it was not destroyed: the CQ
	// stays too.
	if destroyed {
		if r := C.ibv_destroy_cq(q.cq); r != 0 {
			destroyed = false
			if err == nil {
				err = verbsError("ibv_destroy_cq", int(r))
			}
		}
	}
	if destroyed {
		// Otherwise the device keeps counting it, and is never closed.
		q.f.mu.Lock()
		q.f.nqp--
		q.f.mu.Unlock()
	}
	// READs that did not complete end here. If the queue pair was
	// destroyed the device no longer processes it, and they are flushed,
	// so that their buffers are returned; if not, the NIC may still write
	// their buffers, and they are stranded, so that those are kept out of
	// use for good.
	q.mu.Lock()
	left := takePosted(q.posted)
	q.mu.Unlock()
	if q.onComplete != nil {
		for _, c := range teardownCompletions(left, destroyErr) {
			q.onComplete(c)
		}
	}
	return err
}
