//go:build rdma

package rdma

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// gidType reads a GID entry's type ("RoCE v2", "IB/RoCE v1") from sysfs,
// where every rdma-core version exposes it; "" if it cannot.
func gidType(sysfs, device string, port, index int) string {
	b, err := os.ReadFile(filepath.Join(sysfs, "class/infiniband", device, "ports", strconv.Itoa(port), "gid_attrs/types", strconv.Itoa(index)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
