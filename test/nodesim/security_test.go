package nodesim_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// procStatus reads fields of /proc/self/status as the container's process sees them.
func procStatus(t *testing.T, ip string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(readFile(t, ip, "/proc/self/status"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

func TestSecurityContext(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()

	t.Run("runs as the pod's user with fsGroup-owned volumes and a read-only root", func(t *testing.T) {
		ns := e.namespace(t)
		if _, err := e.client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: ns},
			Data:       map[string][]byte{"tls.key": []byte("private")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Data a root-running predecessor left: private to root until fsGroup takes it over.
		claimDir, err := e.sim.ClaimDir(ctx, ns+"/data")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(claimDir, "old"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(claimDir, "old", "wal"), []byte("root-written"), 0o600); err != nil {
			t.Fatal(err)
		}

		pod := helperPod(ns, "restricted")
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:        ptr(true),
			RunAsUser:           ptr(int64(65532)),
			RunAsGroup:          ptr(int64(65533)),
			FSGroup:             ptr(int64(2000)),
			FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch),
			SupplementalGroups:  []int64{3000},
		}
		c := &pod.Spec.Containers[0]
		c.SecurityContext = &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr(false),
			ReadOnlyRootFilesystem:   ptr(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: "key", MountPath: "/etc/nodesim-test/key", ReadOnly: true},
			{Name: "data", MountPath: "/var/nodesim-test/data"},
			{Name: "scratch", MountPath: "/nodesim-test/scratch"},
		}
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "key", DefaultMode: ptr(int32(0o600))}}},
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		}
		e.createPod(t, pod)
		ip := e.waitReady(t, ns, "restricted").Status.PodIP

		status := procStatus(t, ip)
		for field, want := range map[string]string{
			"Uid":        "65532 65532 65532 65532",
			"Gid":        "65533 65533 65533 65533",
			"Groups":     "2000 3000",
			"NoNewPrivs": "1",
			"CapEff":     "0000000000000000",
			"CapBnd":     "0000000000000000",
		} {
			if status[field] != want {
				t.Errorf("/proc/self/status %s = %q, want %q", field, status[field], want)
			}
		}
		if _, env := get(t, ip, "/env", nil); !strings.Contains(env, `"HOME=/"`) {
			t.Errorf("HOME of a user without a passwd entry is not /: %s", env)
		}
		// Readable only through fsGroup: the Secret's mode is 0600 and the file belongs to root.
		if got := readFile(t, ip, "/etc/nodesim-test/key/tls.key"); got != "private" {
			t.Errorf("secret through fsGroup = %q", got)
		}
		if got := readFile(t, ip, "/var/run/secrets/kubernetes.io/serviceaccount/token"); strings.Count(got, ".") != 2 {
			t.Errorf("service account token not readable: %q", got)
		}
		if got := readFile(t, ip, "/var/nodesim-test/data/old/wal"); got != "root-written" {
			t.Errorf("root-owned claim data not taken over by fsGroup: %q", got)
		}
		for _, dir := range []string{"/var/nodesim-test/data/member", "/nodesim-test/scratch"} {
			if code, body := get(t, ip, "/write", url.Values{"path": {dir + "/x"}, "data": {"1"}}); code != http.StatusOK {
				t.Errorf("writing %s as the pod's user: %s", dir, body)
			}
		}
		if code, body := get(t, ip, "/write", url.Values{"path": {"/tmp/nodesim-test-rootfs"}, "data": {"1"}}); code == http.StatusOK || !strings.Contains(body, "read-only file system") {
			t.Errorf("writing the root filesystem: %d %s, want read-only file system", code, body)
		}
		// kubectl exec runs as the container's user too.
		out, err := e.sim.Exec(ctx, ns+"/restricted", "main", "id", "-u")
		if err != nil || strings.TrimSpace(string(out)) != "65532" {
			t.Errorf("exec id -u = %q, %v; want 65532", out, err)
		}
	})

	t.Run("runAsNonRoot without a user is refused like kubelet", func(t *testing.T) {
		ns := e.namespace(t)
		pod := helperPod(ns, "rootless")
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true)}
		e.createPod(t, pod)
		got := e.waitPod(t, ns, "rootless", "refused", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
				p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
		})
		msg := got.Status.ContainerStatuses[0].State.Waiting.Message
		if !strings.Contains(msg, "container has runAsNonRoot and image will run as root") || !strings.Contains(msg, "container: main") {
			t.Errorf("message %q", msg)
		}
		if got.Status.ContainerStatuses[0].RestartCount != 0 || got.Status.ContainerStatuses[0].ContainerID != "" {
			t.Errorf("a refused container was started: %s", describe(got))
		}
	})
}
