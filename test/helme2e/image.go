package helme2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/version"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// The chart installs its default image, ghcr.io/etcd-conductor/etcd-conductor:<appVersion>,
// and the node simulator runs that reference from make image's archive: the manager, and the
// member-init and member-agent containers the manager gives the same image, start from the
// image's entrypoint in its unpacked layers, as a real node would run them. Only this exact
// reference is mapped; the project repository's other tags stay on the host binary.
const (
	imageRepository = "ghcr.io/etcd-conductor/etcd-conductor"
	// ImageRef is the reference the chart installs and the archive is named by.
	ImageRef = imageRepository + ":" + version.Version
)

// ImageArchivePath is make image's archive: $ETCD_CONDUCTOR_BIN_DIR (set by make) or bin/ of
// the repository.
func ImageArchivePath() (string, error) {
	dir := os.Getenv("ETCD_CONDUCTOR_BIN_DIR")
	if dir == "" {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Join(dir, "etcd-conductor-image.tar"), nil
}

// OCIImages is the stack option that runs the chart's image from make image's archive, or an
// error saying to run make image when the archive is missing. The archive is not built here:
// it takes a cross-compilation, and a stale one would be as misleading as none.
func OCIImages() (map[string]string, error) {
	p, err := ImageArchivePath()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("the operator image %s: %w; run `make image` first (the chart's pods run from its archive)", p, err)
	}
	return map[string]string{ImageRef: p}, nil
}

// CheckRunsFromImage fails unless the container of pod runs the image unpacked from the archive
// (the simulator reports its manifest digest as the imageID), not the host binary.
func CheckRunsFromImage(pod *corev1.Pod, container string) error {
	for _, st := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if st.Name != container {
			continue
		}
		if !strings.HasPrefix(st.ImageID, imageRepository+"@sha256:") {
			return fmt.Errorf("pod %s container %s: imageID %q, want %s from the OCI archive", pod.Name, container, st.ImageID, ImageRef)
		}
		return nil
	}
	return fmt.Errorf("pod %s has no status for container %s", pod.Name, container)
}
