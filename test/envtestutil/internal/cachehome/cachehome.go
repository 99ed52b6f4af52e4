// Package cachehome points XDG_CACHE_HOME at a temp dir before envtest reads
// it. controller-runtime's port allocator creates its cache dir in a package
// init (os.UserCacheDir()/kubebuilder-envtest), so setting the variable in
// Start would be too late. Go initialises packages in import-path order once
// their imports are ready; this package imports only the standard library and
// sorts before sigs.k8s.io/..., so its init runs first.
package cachehome

import (
	"os"
	"path/filepath"
)

// Dir is the cache dir envtest uses in this process (the caller's
// XDG_CACHE_HOME when it was already set).
var Dir string

func init() {
	if dir := os.Getenv("XDG_CACHE_HOME"); dir != "" {
		Dir = dir
		return
	}
	// Child processes inherit the environment; without this a `go build`
	// started by a test would use a cold build cache under the new dir.
	if os.Getenv("GOCACHE") == "" {
		if home, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(home, "go-build"))
		}
	}
	// Shared by all test binaries on purpose: envtest's port reservations
	// live there and only work across processes that see the same dir.
	Dir = filepath.Join(os.TempDir(), "etcd-conductor-xdg-cache")
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return
	}
	os.Setenv("XDG_CACHE_HOME", Dir)
}
