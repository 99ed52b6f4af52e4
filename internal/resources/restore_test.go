package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestApplyRestore(t *testing.T) {
	pod := func(agentArgs ...string) *corev1.PodSpec {
		return &corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: MemberInitContainerName, Args: []string{"init", "--lease=x", "--", "--name=etcd-0"}}},
			Containers: []corev1.Container{{Name: EtcdContainerName}, {Name: MemberAgentContainerName, Args: agentArgs,
				VolumeMounts: []corev1.VolumeMount{{Name: "backup-secret", MountPath: "/var/etcd/backup-secret"}, {Name: "backup-spool", MountPath: "/var/etcd/backup-spool"}}}},
		}
	}
	t.Run("no backups: nothing", func(t *testing.T) {
		p := pod("--lease=x")
		applyRestore(p)
		if got := p.InitContainers[0].Args; !slices.Equal(got, []string{"init", "--lease=x", "--", "--name=etcd-0"}) || len(p.InitContainers[0].VolumeMounts) != 0 {
			t.Errorf("init changed without backups: %v %v", got, p.InitContainers[0].VolumeMounts)
		}
	})
	t.Run("the store flags and their volumes, before the etcd flags", func(t *testing.T) {
		p := pod("--backup-provider=S3", "--backup-container=b", "--backup-prefix=p", "--backup-secret-dir=/var/etcd/backup-secret",
			"--backup-spool-dir=/var/etcd/backup-spool", "--delta-snapshot-period=20s")
		applyRestore(p)
		want := []string{"init", "--lease=x", "--backup-provider=S3", "--backup-container=b", "--backup-prefix=p", "--backup-secret-dir=/var/etcd/backup-secret", "--", "--name=etcd-0"}
		if got := p.InitContainers[0].Args; !slices.Equal(got, want) {
			t.Errorf("args %v, want %v", got, want)
		}
		mounts := p.InitContainers[0].VolumeMounts
		if len(mounts) != 1 || mounts[0].Name != "backup-secret" || !mounts[0].ReadOnly {
			t.Errorf("mounts %+v, want only backup-secret, read-only", mounts)
		}
	})
}
