package rdma

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestVerbsErrorMapping(t *testing.T) {
	if err := verbsError("ibv_modify_qp", 0); err != nil {
		t.Fatalf("ret 0: %v", err)
	}
	for _, tc := range []struct {
		op    string
		ret   int
		errno syscall.Errno
		text  string
	}{
		// ibv_modify_qp and ibv_post_send return the errno itself.
		{"ibv_modify_qp", int(syscall.EINVAL), syscall.EINVAL, "mismatched port, GID index, MTU or read depth"},
		{"ibv_post_send", int(syscall.ENOMEM), syscall.ENOMEM, "send queue full"},
		// Calls that set errno: the caller passes it.
		{"ibv_reg_mr", int(syscall.ENOMEM), syscall.ENOMEM, "ulimit -l"},
		{"ibv_reg_mr", int(syscall.EFAULT), syscall.EFAULT, "ibv_reg_mr: bad address"},
		{"ibv_open_device", int(syscall.EACCES), syscall.EACCES, "/dev/infiniband/uverbs"},
		{"ibv_create_qp", int(syscall.ENOMEM), syscall.ENOMEM, "out of resources"},
		// A negative errno, as some calls return.
		{"ibv_destroy_qp", -int(syscall.EBUSY), syscall.EBUSY, "device or resource busy"},
		// ibv_poll_cq's negative returns carry no errno.
		{"ibv_poll_cq", -2, syscall.EIO, "ibv_poll_cq: input/output error"},
	} {
		err := verbsError(tc.op, tc.ret)
		var ve *VerbsError
		if !errors.As(err, &ve) || ve.Op != tc.op || !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("verbsError(%s, %d) = %v; want %v, text %q", tc.op, tc.ret, err, tc.errno, tc.text)
		}
	}
}

func TestCompletionErrors(t *testing.T) {
	if err := completionError(WCSuccess, 0); err != nil {
		t.Fatalf("success: %v", err)
	}
	err := completionError(WCRemAccessErr, 0x22)
	var ce *CompletionError
	if !errors.As(err, &ce) || ce.Flushed() || !strings.Contains(err.Error(), "rkey or the address range") || !strings.Contains(err.Error(), "vendor error 0x22") {
		t.Errorf("remote access error: %v", err)
	}
	if err := completionError(WCWRFlushErr, 0); !errors.As(err, &ce) || !ce.Flushed() {
		t.Errorf("flush: %v", err)
	}
	if WCRetryExcErr.String() != "transport retry counter exceeded: the frontend did not answer" || WCStatus(99).String() != "WCStatus(99)" {
		t.Errorf("names: %q %q", WCRetryExcErr, WCStatus(99))
	}
	if len(wcStatusNames) != int(wcStatusEnd) {
		t.Errorf("%d names for %d statuses", len(wcStatusNames), wcStatusEnd)
	}
	// In the rdma build this compares every status with verbs.h.
	if err := checkABI(); err != nil {
		t.Error(err)
	}
}
