package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release. It equals charts/etcd-conductor/Chart.yaml's appVersion (a test holds
// them together), so the image the manager names for member-agents by default is the one the
// chart installs.
const Version = "0.1.0"

// commit and modified are stamped by make build (-ldflags -X): Go records the revision itself
// only when VCS stamping is on, which a GOFLAGS of -buildvcs=false (as on CI machines) turns off.
var commit, modified string

// Build is what `etcd-conductor version` prints and the manager logs at start-up.
type Build struct {
	Version string
	// Commit is the VCS revision the binary was built from, "" when Go did not record one (a
	// build outside a git checkout); Modified: the checkout had uncommitted changes.
	Commit   string
	Modified bool
	Go       string
	Platform string
}

// Current is this binary's build.
func Current() Build {
	b := Build{Version: Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if commit != "" {
		b.Commit, b.Modified = commit, modified == "true"
		return b
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func (b Build) String() string {
	commit := "unknown commit"
	if b.Commit != "" {
		commit = "commit " + b.Commit
		if b.Modified {
			commit += " (modified)"
		}
	}
	return fmt.Sprintf("etcd-conductor %s, %s, %s %s", b.Version, commit, b.Go, b.Platform)
}
