package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/symphony-serving/symphony/backend"
	"github.com/symphony-serving/symphony/frontend"
	"github.com/symphony-serving/symphony/transport/inproc"
	"github.com/symphony-serving/symphony/transport/wire"
)

// upper is a preprocessing hook: the model input is the raw input in upper
// case, produced while the request waits in the scheduler's queue.
type upper struct{ runs atomic.Int64 }

func (u *upper) OutputSize(_ string, raw []byte) int { return len(raw) }

func (u *upper) Run(_ context.Context, _ string, raw, dst []byte) error {
	u.runs.Add(1)
	if bytes.HasPrefix(raw, []byte("bad")) {
		return errors.New("cannot decode")
	}
	copy(dst, bytes.ToUpper(raw))
	return nil
}

func TestPreprocessingRunsBeforeTheBackendReads(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 1, 1)
	pre := &upper{}
	cfg.Preprocess = pre
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	out, err := f.Infer(context.Background(), "fast", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if want := backend.EmulatedOutput(0, []byte("HELLO")); !bytes.Equal(out, want) {
		t.Fatalf("output %x, want the digest of the preprocessed input %x", out, want)
	}
	// A failed preprocessing fails the request, with the backend's word.
	_, err = f.Infer(context.Background(), "fast", []byte("bad input"))
	var be *frontend.BackendError
	if !errors.As(err, &be) || !strings.Contains(be.Cause, "input unavailable") {
		t.Fatalf("failed preprocessing: %v", err)
	}
	if pre.runs.Load() != 2 {
		t.Errorf("preprocessing ran %d times, want 2", pre.runs.Load())
	}
}

// failing fails every batch of model 1.
type failing struct{ *backend.Emulated }

func (e failing) Execute(ctx context.Context, gpu int, model uint32, in [][]byte) ([][]byte, error) {
	if model == 1 {
		return nil, errors.New("CUDA error: out of memory")
	}
	return e.Emulated.Execute(ctx, gpu, model, in)
}

func TestExecutorFailureEndsTheBatchAndFreesTheGPU(t *testing.T) {
	cfg := testConfig(inproc.New(), "", 1, 1)
	cfg.Executor = func() backend.Executor { return failing{backend.NewEmulated()} }
	c := startCluster(t, cfg)
	f := c.Frontends[0]
	l := newLedger(t, cfg.Models)
	for range 3 {
		failed := l.issue(f, "slow")
		<-failed.Done()
		var be *frontend.BackendError
		if !errors.As(failed.Err, &be) || !strings.Contains(be.Cause, wire.EndExecutorFailed.String()) || !strings.Contains(be.Cause, "out of memory") {
			t.Fatalf("request on a failing executor: %v", failed.Err)
		}
		// The GPU was freed: the other model still runs on it.
		fast := l.issue(f, "fast")
		if <-fast.Done(); fast.Err != nil {
			t.Fatalf("after an executor failure: %v", fast.Err)
		}
	}
	l.check(t) // and each answer is its own request's
}
