package rdma

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrNotBuilt: this binary was built without the rdma build tag, so it has
// no libibverbs bindings.
var ErrNotBuilt = errors.New("built without RDMA support (build with -tags rdma, which needs libibverbs-dev)")

// ErrNoDevice: libibverbs found no RDMA device, or none with an active port.
var ErrNoDevice = errors.New("no RDMA device with an active port")

// VerbsError is a failed ibv_* call. It unwraps to its syscall.Errno, so
// that errors.Is(err, syscall.ENOMEM) works.
type VerbsError struct {
	// Op is the verbs call, e.g. "ibv_reg_mr".
	Op    string
	Errno syscall.Errno
}

func (e *VerbsError) Error() string {
	msg := fmt.Sprintf("rdma: %s: %v", e.Op, e.Errno)
	if h := e.hint(); h != "" {
		msg += " (" + h + ")"
	}
	return msg
}

// Unwrap returns the errno.
func (e *VerbsError) Unwrap() error { return e.Errno }

// hint says what usually causes an errno from a given call.
func (e *VerbsError) hint() string {
	switch {
	case e.Errno == syscall.ENOMEM && e.Op == "ibv_reg_mr":
		return "cannot pin the memory: raise the locked-memory limit (ulimit -l, LimitMEMLOCK) or grant CAP_IPC_LOCK"
	case e.Errno == syscall.ENOMEM && e.Op == "ibv_post_send":
		return "send queue full"
	case e.Errno == syscall.ENOMEM:
		return "the device or the kernel is out of resources"
	case e.Errno == syscall.EINVAL && e.Op == "ibv_modify_qp":
		return "a queue pair attribute was refused: mismatched port, GID index, MTU or read depth"
	case e.Errno == syscall.EINVAL:
		return "an argument was refused by the device"
	case e.Errno == syscall.EPERM || e.Errno == syscall.EACCES:
		return "no permission to use the device: check /dev/infiniband/uverbs*"
	case e.Errno == syscall.ENODEV || e.Errno == syscall.ENXIO:
		return "the device is gone"
	case e.Errno == syscall.EAGAIN:
		return "try again"
	}
	return ""
}

// verbsError maps an ibv_* call's failure to a Go error. ret is what the
// call returned: libibverbs returns an errno itself from ibv_modify_qp,
// ibv_post_send and ibv_req_notify_cq, and NULL or -1 with errno set from
// most others (pass that errno as ret); ibv_poll_cq returns some negative
// number with no defined meaning, which maps to EIO. ret 0 is success and
// gives nil.
func verbsError(op string, ret int) error {
	switch {
	case ret == 0:
		return nil
	case op == "ibv_poll_cq" && ret < 0:
		ret = int(syscall.EIO)
	case ret < 0:
		ret = -ret
	}
	return &VerbsError{Op: op, Errno: syscall.Errno(ret)}
}

// WCStatus is a work completion's status: enum ibv_wc_status, whose
// values the rdma build checks against verbs.h (checkABI).
type WCStatus uint32

// The work completion statuses of libibverbs, in its order.
const (
	WCSuccess WCStatus = iota
	WCLocLenErr
	WCLocQPOpErr
	WCLocEECOpErr
	WCLocProtErr
	WCWRFlushErr
	WCMWBindErr
	WCBadRespErr
	WCLocAccessErr
	WCRemInvReqErr
	WCRemAccessErr
	WCRemOpErr
	WCRetryExcErr
	WCRNRRetryExcErr
	WCLocRDDViolErr
	WCRemInvRDReqErr
	WCRemAbortErr
	WCInvEECNErr
	WCInvEECStateErr
	WCFatalErr
	WCRespTimeoutErr
	WCGeneralErr
	WCTMErr
	WCTMRndvIncomplete
	wcStatusEnd
)

// wcStatusNames follow ibv_wc_status_str, with what each means for a READ.
var wcStatusNames = [...]string{
	"success",
	"local length error: the receive buffer is shorter than the read",
	"local QP operation error",
	"local EE context operation error",
	"local protection error: the receive buffer is not registered",
	"work request flushed: the queue pair was in the error state",
	"memory window bind error",
	"bad response",
	"local access error",
	"remote invalid request error",
	"remote access error: the rkey or the address range is not the frontend's registered memory",
	"remote operation error",
	"transport retry counter exceeded: the frontend did not answer",
	"RNR retry counter exceeded",
	"local RDD violation error",
	"remote invalid RD request",
	"remote abort error",
	"invalid EE context number",
	"invalid EE context state",
	"fatal error",
	"response timeout error",
	"general error",
	"tag matching error",
	"tag matching rendezvous incomplete",
}

func (s WCStatus) String() string {
	if s < wcStatusEnd {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("WCStatus(%d)", uint32(s))
}

// CompletionError is a work request that completed with an error status.
// Any error status but a flush moves an RC queue pair to the error state:
// every later request on it is flushed, and it must be brought up anew.
type CompletionError struct {
	Status WCStatus
	// Vendor is the device's own error code (ibv_wc.vendor_err).
	Vendor uint32
}

func (e *CompletionError) Error() string {
	if e.Vendor != 0 {
		return fmt.Sprintf("rdma: read failed: %v (vendor error %#x)", e.Status, e.Vendor)
	}
	return fmt.Sprintf("rdma: read failed: %v", e.Status)
}

// Flushed reports whether the request failed only because its queue pair
// had already failed or was being torn down.
func (e *CompletionError) Flushed() bool { return e.Status == WCWRFlushErr }

// completionError returns nil for success, or the status as an error.
func completionError(s WCStatus, vendor uint32) error {
	if s == WCSuccess {
		return nil
	}
	return &CompletionError{Status: s, Vendor: vendor}
}

// DeviceError: the device stopped delivering completions for good (its
// completion channel, or a completion queue, failed). Every queue pair on
// it is broken, none is made any more, and reads go over TCP.
type DeviceError struct {
	Device string
	Err    error
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("rdma: device %s stopped delivering completions: %v", e.Device, e.Err)
}

// Unwrap returns the failure.
func (e *DeviceError) Unwrap() error { return e.Err }
