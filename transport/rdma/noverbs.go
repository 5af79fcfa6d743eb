//go:build !rdma

package rdma

// Built reports whether this binary has the libibverbs bindings: it does
// not, and Open and Available say so.
const Built = false

// Open fails: this build has no libibverbs bindings.
func Open(DeviceConfig) (Fabric, error) { return nil, ErrNotBuilt }

// Available reports why RDMA cannot be used here: ErrNotBuilt.
func Available(DeviceConfig) (string, error) { return "", ErrNotBuilt }

// checkABI has nothing to check without verbs.h.
func checkABI() error { return nil }
