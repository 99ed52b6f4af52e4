package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
)

// localEtcd is an Etcd with the Local backup provider.
func localEtcd(namespace, name string) *druidv1alpha1.Etcd {
	e := testEtcd(3)
	e.Namespace, e.Name = namespace, name
	e.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{
		Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To("backups"), Prefix: "etcd",
	}}
	return e
}

// localHostDir is the host directory of the Local store volume and whether the agent is told to
// use it.
func localHostDir(t *testing.T, e *druidv1alpha1.Etcd, root string) (string, bool) {
	t.Helper()
	sts, err := StatefulSet(e, Settings{MemberAgentImage: "img", LocalBackupRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	pod := sts.Spec.Template.Spec
	agent := containerNamed(pod.Containers, MemberAgentContainerName)
	flag := slices.ContainsFunc(agent.Args, func(a string) bool { return strings.HasPrefix(a, "--backup-local-root=") })
	var hostPaths []string
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
			if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
				t.Errorf("host path %s of type %v, want DirectoryOrCreate", v.HostPath.Path, v.HostPath.Type)
			}
		}
	}
	switch len(hostPaths) {
	case 0:
		return "", flag
	case 1:
		return hostPaths[0], flag
	}
	t.Fatalf("host paths %v, want one", hostPaths)
	return "", false
}

// TestLocalStoresAreIsolatedPerEtcd: each Etcd's pods mount their own directory below the root,
// never the root or another Etcd's; the backup Secret's hostPath (etcd-druid's key) moves the
// root; a root the operator refuses mounts nothing.
func TestLocalStoresAreIsolatedPerEtcd(t *testing.T) {
	tests := []struct {
		name      string
		etcd      *druidv1alpha1.Etcd
		root      string
		wantDir   string
		wantMount bool
	}{
		{"default root", localEtcd("shoot-a", "etcd-main"), "", "/etc/gardener/local-backupbuffer/shoot-a/etcd-main", true},
		{"another Etcd of the namespace", localEtcd("shoot-a", "etcd-events"), "", "/etc/gardener/local-backupbuffer/shoot-a/etcd-events", true},
		{"the same name in another namespace", localEtcd("shoot-b", "etcd-main"), "", "/etc/gardener/local-backupbuffer/shoot-b/etcd-main", true},
		{"the Secret's hostPath", localEtcd("shoot-a", "etcd-main"), "/var/backups", "/var/backups/shoot-a/etcd-main", true},
		{"a relative hostPath mounts nothing", localEtcd("shoot-a", "etcd-main"), "var/backups", "", false},
		{"a hostPath inside the default root mounts nothing", localEtcd("shoot-a", "etcd-main"), "/etc/gardener/local-backupbuffer/shoot-b/etcd-main", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, flag := localHostDir(t, tt.etcd, tt.root)
			if dir != tt.wantDir || flag != tt.wantMount {
				t.Errorf("host directory %q (agent told: %v), want %q (%v)", dir, flag, tt.wantDir, tt.wantMount)
			}
		})
	}

	t.Run("the init step mounts the same directory, read-only", func(t *testing.T) {
		sts, err := StatefulSet(localEtcd("shoot-a", "etcd-main"), Settings{MemberAgentImage: "img"})
		if err != nil {
			t.Fatal(err)
		}
		init := containerNamed(sts.Spec.Template.Spec.InitContainers, MemberInitContainerName)
		i := slices.IndexFunc(init.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == backupLocalVolume })
		if i < 0 || !init.VolumeMounts[i].ReadOnly || !slices.Contains(init.Args, "--backup-local-root="+init.VolumeMounts[i].MountPath) {
			t.Errorf("init step mounts %+v with args %v, want the Local volume read-only at --backup-local-root", init.VolumeMounts, init.Args)
		}
	})
}
