package nodesim

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// tarEntry is one entry of a test layer.
type tarEntry struct {
	name, link string
	typ        byte
	mode       int64
	data       string
}

func layerOf(t *testing.T, entries ...tarEntry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.data))}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeLayout writes an OCI layout holding one image per platform (all built from layers and
// cfg) under an index, as make image does, and returns its directory.
func writeLayout(t *testing.T, cfg v1.Config, platforms []string, layers ...v1.Layer) string {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		osName, arch, _ := strings.Cut(p, "/")
		img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{OS: osName, Architecture: arch, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layers...); err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}}})
	}
	dir := t.TempDir()
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: idx})
	if _, err := layout.Write(dir, top); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tarDir writes dir as a tar archive (an OCI archive of a layout) and returns its path.
func tarDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

var hostPlatform = runtime.GOOS + "/" + runtime.GOARCH

// appImage is an image laid out as make image lays out the operator's: the binary at the root
// as the entrypoint, a passwd naming the nonroot user, a symlinked tool, and a second layer
// that whites out a file of the first.
func appImage(t *testing.T, cfg v1.Config) string {
	base := layerOf(t,
		tarEntry{name: "etc/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "etc/passwd", mode: 0o644, data: "root:x:0:0::/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n"},
		tarEntry{name: "etc/group", mode: 0o644, data: "root:x:0:\nnonroot:x:65532:\n"},
		tarEntry{name: "app", mode: 0o755, data: "#!/bin/sh\n"},
		tarEntry{name: "usr/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "usr/bin/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "usr/bin/tool", typ: tar.TypeSymlink, link: "/app"},
		tarEntry{name: "usr/bin/notexec", mode: 0o644, data: "x"},
		tarEntry{name: "old", mode: 0o755, data: "removed by the next layer"},
	)
	top := layerOf(t, tarEntry{name: ".wh.old", mode: 0o644})
	return writeLayout(t, cfg, []string{"linux/s390x", hostPlatform}, base, top)
}

// TestOCIImageUnpack: the host platform's image unpacks into a root with the layers stacked
// (a whiteout removes a lower file), from an archive and from a layout directory alike.
func TestOCIImageUnpack(t *testing.T) {
	cfg := v1.Config{Entrypoint: []string{"/app"}, User: "65532:65532"}
	dir := appImage(t, cfg)
	for _, tc := range []struct{ name, source string }{
		{"layout directory", dir},
		{"archive", tarDir(t, dir)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := unpackOCI(tc.source, t.TempDir(), runtime.GOOS, runtime.GOARCH)
			if err != nil {
				t.Fatal(err)
			}
			if data, err := os.ReadFile(filepath.Join(img.rootfs, "app")); err != nil || string(data) != "#!/bin/sh\n" {
				t.Errorf("app: %q, %v", data, err)
			}
			if _, err := os.Lstat(filepath.Join(img.rootfs, "old")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a whited-out file is in the root: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(img.rootfs, ".wh.old")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the whiteout marker is in the root: %v", err)
			}
			if !slices.Equal(img.config.Entrypoint, []string{"/app"}) || !strings.HasPrefix(img.id, "sha256:") {
				t.Errorf("config %+v id %q", img.config, img.id)
			}
		})
	}
	t.Run("no image for the platform", func(t *testing.T) {
		_, err := unpackOCI(dir, t.TempDir(), "linux", "riscv64")
		if err == nil || !strings.Contains(err.Error(), "no image for linux/riscv64") {
			t.Fatalf("want a missing-platform error, got %v", err)
		}
	})
	t.Run("unpacked once", func(t *testing.T) {
		st := newOCIStore(t.TempDir())
		a, err := st.image(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := st.image(dir)
		if err != nil || a != b {
			t.Fatalf("second use unpacked again (%p, %p) or failed: %v", a, b, err)
		}
	})
}

// TestUnpackRootfsRefuses: entries that would be written outside the root, or that nodesim
// cannot make, stop the unpack with a message naming them.
func TestUnpackRootfsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"dot-dot", []tarEntry{{name: "../escape", mode: 0o644}}, "leaves the root"},
		{"through a symlink", []tarEntry{{name: "etc", typ: tar.TypeSymlink, link: "/etc"}, {name: "etc/passwd", mode: 0o644}}, "is not a directory"},
		{"device", []tarEntry{{name: "dev/null", typ: tar.TypeChar, mode: 0o666}}, "directories, files and links only"},
		{"leftover whiteout", []tarEntry{{name: "a/.wh.b", mode: 0o644}}, "whiteout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range tc.entries {
				typ := e.typ
				if typ == 0 {
					typ = tar.TypeReg
				}
				if err := tw.WriteHeader(&tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: e.mode}); err != nil {
					t.Fatal(err)
				}
			}
			_ = tw.Close()
			err := unpackRootfs(&buf, t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

// TestOCIProcess: what runs follows Kubernetes' rules over the image's Entrypoint and Cmd, and
// the executable is found inside the image or the start fails as runc's does.
func TestOCIProcess(t *testing.T) {
	img, err := unpackOCI(appImage(t, v1.Config{Entrypoint: []string{"/app"}, Cmd: []string{"serve", "--default"}}), t.TempDir(), runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(img.rootfs, "app")
	const path = "/usr/local/bin:/usr/bin"
	for _, tc := range []struct {
		name          string
		command, args []string
		wantBin       string
		wantArgv      []string
		wantErr       string
	}{
		{name: "neither: entrypoint and cmd", wantBin: app, wantArgv: []string{"serve", "--default"}},
		{name: "args replace cmd", args: []string{"member-agent", "--x"}, wantBin: app, wantArgv: []string{"member-agent", "--x"}},
		{name: "command replaces entrypoint and drops cmd", command: []string{"/app"}, wantBin: app, wantArgv: []string{}},
		{name: "command and args", command: []string{"/app", "a"}, args: []string{"b"}, wantBin: app, wantArgv: []string{"a", "b"}},
		{name: "bare name on PATH through a symlink", command: []string{"tool"}, wantBin: app, wantArgv: []string{}},
		{name: "path not in the image", command: []string{"/etcd-conductor", "member-agent"},
			wantErr: `exec: "/etcd-conductor": stat /etcd-conductor: no such file or directory`},
		{name: "host path not in the image", command: []string{"/bin/sh"}, wantErr: `stat /bin/sh: no such file or directory`},
		{name: "bare name not on PATH", command: []string{"sh"}, wantErr: `exec: "sh": executable file not found in $PATH`},
		{name: "not executable", command: []string{"/usr/bin/notexec"}, wantErr: "permission denied"},
		{name: "a directory", command: []string{"/etc"}, wantErr: "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, argv, err := img.process(tc.command, tc.args, path)
			if tc.wantErr != "" {
				var se *startError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want a start error with %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if bin != tc.wantBin || !slices.Equal(argv, tc.wantArgv) {
				t.Errorf("got %s %q, want %s %q", bin, argv, tc.wantBin, tc.wantArgv)
			}
		})
	}
	t.Run("no entrypoint, no cmd, no command", func(t *testing.T) {
		bare := &ociImage{rootfs: img.rootfs}
		if _, _, err := bare.process(nil, nil, path); err == nil || !strings.Contains(err.Error(), "no command specified") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestOCIImageUserAndEnv: the image's USER applies unless the securityContext names a user,
// and runAsNonRoot sees it; the image's Env lies under the container's.
func TestOCIImageUserAndEnv(t *testing.T) {
	img, err := unpackOCI(appImage(t, v1.Config{Entrypoint: []string{"/app"}}), t.TempDir(), runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user             string
		wantUID, wantGID int64
		wantErr          string
	}{
		{user: "65532:65532", wantUID: 65532, wantGID: 65532},
		{user: "nonroot", wantUID: 65532, wantGID: 65532},
		{user: "nonroot:root", wantUID: 65532, wantGID: 0},
		{user: "1000", wantUID: 1000, wantGID: 0},
		{user: "nobody", wantErr: `"nobody" not found in /etc/passwd`},
	} {
		t.Run("user "+tc.user, func(t *testing.T) {
			img.config.User = tc.user
			uid, gid, ok, err := img.user()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil || !ok || uid != tc.wantUID || gid != tc.wantGID {
				t.Fatalf("got %d:%d ok=%v err=%v, want %d:%d", uid, gid, ok, err, tc.wantUID, tc.wantGID)
			}
		})
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	nonRoot := &corev1.Pod{ObjectMeta: pod.ObjectMeta, Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}}}
	for _, tc := range []struct {
		name             string
		pod              *corev1.Pod
		container        *corev1.SecurityContext
		image            imageIdentity
		wantUID, wantGID int64
		wantErr          string
	}{
		{name: "image user applies", pod: pod, image: imageIdentity{65532, 65532}, wantUID: 65532, wantGID: 65532},
		{name: "runAsUser wins", pod: pod, container: &corev1.SecurityContext{RunAsUser: ptr.To(int64(1000))}, image: imageIdentity{65532, 65532}, wantUID: 1000},
		{name: "runAsNonRoot accepts a nonroot image user", pod: nonRoot, image: imageIdentity{65532, 65532}, wantUID: 65532, wantGID: 65532},
		{name: "runAsNonRoot refuses a root image", pod: nonRoot, wantErr: "image will run as root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := securityFor(tc.pod, &corev1.Container{Name: "c", SecurityContext: tc.container}, tc.image)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil || sec.uid != tc.wantUID || sec.gid != tc.wantGID || !sec.changeUser {
				t.Fatalf("got %+v, %v; want %d:%d with the user changed", sec, err, tc.wantUID, tc.wantGID)
			}
		})
	}

	t.Run("env", func(t *testing.T) {
		ec := envContext{pod: pod, imageEnv: []string{"PATH=/image/bin", "FROM_IMAGE=1", "BOTH=image"}}
		env, err := containerEnv(&corev1.Container{Env: []corev1.EnvVar{{Name: "BOTH", Value: "container"}}}, ec)
		if err != nil {
			t.Fatal(err)
		}
		got := envMap(env)
		if got["PATH"] != "/image/bin" || got["FROM_IMAGE"] != "1" || got["BOTH"] != "container" {
			t.Errorf("env %v: want the image's PATH and FROM_IMAGE, the container's BOTH", got)
		}
	})
}
