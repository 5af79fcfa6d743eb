package daemon

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Build is what a binary knows of how it was built: the module version
// and the VCS stamp that go build records (-buildvcs, on by default in a
// git checkout), so that --version and the build-info metric name the
// exact commit running.
type Build struct {
	Version   string // the module version, "(devel)" for a build from a checkout
	Revision  string // the commit, "" when not recorded
	Time      string // the commit's time (RFC 3339), "" when not recorded
	Modified  bool   // the work tree had changes on top of Revision
	GoVersion string
}

// version, when set at link time (go build -ldflags "-X
// github.com/symphony-serving/symphony/cmd/internal/daemon.version=v1.2.3",
// as make build VERSION=v1.2.3 and the container image do), is the
// release's name; it wins over the module version, which a build from a
// checkout leaves as "(devel)".
var version string

// ReadBuild reads the running binary's build information.
func ReadBuild() Build {
	b := Build{Version: "(unknown)", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if ok && info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	if version != "" {
		b.Version = version
	}
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the line --version prints: "symphony (devel) commit 1a2b3c4d5e6f
// (2026-11-27T16:00:00Z, modified), go1.26.8 linux/amd64".
func (b Build) String() string {
	s := "symphony " + b.Version
	if b.Revision != "" {
		s += " commit " + b.Revision[:min(12, len(b.Revision))]
		switch {
		case b.Time != "" && b.Modified:
			s += " (" + b.Time + ", modified)"
		case b.Time != "":
			s += " (" + b.Time + ")"
		case b.Modified:
			s += " (modified)"
		}
	}
	return fmt.Sprintf("%s, %s %s/%s", s, b.GoVersion, runtime.GOOS, runtime.GOARCH)
}
