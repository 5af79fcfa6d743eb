package frontend

import (
	"errors"
	"strings"
	"testing"

	"github.com/symphony-serving/symphony/transport/wire"
)

// Every end code a scheduler or backend sends becomes the typed error its
// doc promises, naming the request's model.
func TestEndCodesBecomeTypedErrors(t *testing.T) {
	c := &Client{pending: map[uint64]*Call{7: {Model: "resnet"}}}
	drop := func(r DropReason) func(error) bool {
		return func(err error) bool { got, ok := IsDrop(err); return ok && got == r }
	}
	backend := func(err error) bool { var b *BackendError; return errors.As(err, &b) && b.Backend == "gpu-host" }
	for _, tc := range []struct {
		code wire.EndCode
		is   func(error) bool
	}{
		{wire.EndDropDeadline, drop(DropDeadline)},
		{wire.EndDropOverload, drop(DropOverload)},
		{wire.EndDropShutdown, drop(DropShutdown)},
		{wire.EndUnknownModel, func(err error) bool { return errors.Is(err, ErrUnknownModel) }},
		{wire.EndBadRequest, func(err error) bool { return errors.Is(err, ErrRefused) && strings.Contains(err.Error(), "the detail") }},
		{wire.EndBackendLost, backend},
		{wire.EndInputUnavailable, backend},
		{wire.EndExecutorFailed, backend},
	} {
		err := c.endError(7, tc.code, "the detail", "gpu-host")
		if !tc.is(err) {
			t.Errorf("%v: %T %v, not the documented error", tc.code, err, err)
		}
		if !strings.Contains(err.Error(), "resnet") {
			t.Errorf("%v: %q does not name the model", tc.code, err)
		}
	}
}
