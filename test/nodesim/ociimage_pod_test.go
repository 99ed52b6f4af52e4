package nodesim_test

import (
	"archive/tar"
	"bytes"
	"io"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-conductor/etcd-conductor/test/nodesim"
)

const ociHelperImage = "nodesim.test/oci-helper:v1"

// helperLayout writes an OCI layout of one image for the host platform: this test binary at
// /bin/helper as the entrypoint, switched into the helper by the image's Env (not the pod's),
// run as user 65532. Its directory is returned.
func helperLayout(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/helper", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write(bin); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: runtime.GOOS, Architecture: runtime.GOARCH, Config: v1.Config{
		Entrypoint: []string{"/bin/helper"},
		Cmd:        []string{"--from-cmd"},
		Env:        []string{"NODESIM_TEST_HELPER=1", "PORT=8080"},
		User:       "65532:65532",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img})
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOCIImagePods runs pods from an OCI image on the simulator: the image's entrypoint with the
// pod's args, as the image's user, with its env; and a command the image does not hold fails the
// container's start, visibly in the pod's status, as kubelet's "executable file not found".
func TestOCIImagePods(t *testing.T) {
	e := newEnv(t, func(o *nodesim.Options) {
		o.OCIImages = map[string]string{ociHelperImage: helperLayout(t)}
	})
	ns := e.namespace(t)

	t.Run("entrypoint, args, user and env from the image", func(t *testing.T) {
		pod := helperPod(ns, "oci")
		c := &pod.Spec.Containers[0]
		c.Image, c.Command, c.Args = ociHelperImage, nil, []string{"--from-args=$(POD_NAME)"}
		c.Env = c.Env[2:] // NODESIM_TEST_HELPER and PORT come from the image
		e.createPod(t, pod)
		got := e.waitReady(t, ns, "oci")
		ip := got.Status.PodIP
		if _, args := get(t, ip, "/args", nil); args != `["--from-args=oci"]`+"\n" {
			t.Errorf("args %s: want the pod's args in place of the image's Cmd", args)
		}
		if status := readFile(t, ip, "/proc/self/status"); !strings.Contains(status, "Uid:\t65532\t") || !strings.Contains(status, "Gid:\t65532\t") {
			t.Errorf("not running as the image's user 65532:65532:\n%s", status)
		}
		if _, env := get(t, ip, "/env", url.Values{}); !strings.Contains(env, `"NODESIM_TEST_HELPER=1"`) || !strings.Contains(env, `"PORT=8080"`) {
			t.Errorf("env lacks the image's: %s", env)
		}
		if id := got.Status.ContainerStatuses[0].ImageID; !strings.HasPrefix(id, "nodesim.test/oci-helper@sha256:") {
			t.Errorf("imageID %q, want the image's manifest digest", id)
		}
	})

	t.Run("a command not in the image fails the start", func(t *testing.T) {
		pod := helperPod(ns, "oci-missing")
		c := &pod.Spec.Containers[0]
		c.Image, c.Command, c.Args = ociHelperImage, []string{"/etcd-conductor", "member-agent"}, nil
		e.createPod(t, pod)
		e.waitPod(t, ns, "oci-missing", "start failed", func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
				if term := st.Terminated; term != nil && term.Reason == "StartError" && term.ExitCode == 128 &&
					strings.Contains(term.Message, `exec: "/etcd-conductor": stat /etcd-conductor: no such file or directory`) {
					return true
				}
			}
			return false
		})
	})
}
