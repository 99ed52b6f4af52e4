package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
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

// TestInitStepGetsEveryStoreFlag builds the StatefulSet of Etcds that set every store field: the
// init container gets each store flag the member-agent gets (among them the endpoint override,
// which it once lacked and restored from the Secret's endpoint instead), and the volumes they name.
func TestInitStepGetsEveryStoreFlag(t *testing.T) {
	tests := []struct {
		name  string
		store druidv1alpha1.StoreSpec
		// want are the store flags the agent must get, by name.
		want []string
	}{
		{"S3 with an endpoint override", druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("aws")), Container: ptr.To("bucket"),
			Prefix: "shoot/etcd-main", EndpointOverride: ptr.To("https://s3.example:9000"), SecretRef: &corev1.SecretReference{Name: "backup"}},
			[]string{"backup-provider", "backup-container", "backup-prefix", "backup-endpoint-override", "backup-secret-dir"}},
		{"Local", druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To("dir"), Prefix: "p"},
			[]string{"backup-provider", "backup-container", "backup-prefix", "backup-local-root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := testEtcd(3)
			e.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &tt.store}
			sts, err := StatefulSet(e, Settings{MemberAgentImage: "img"})
			if err != nil {
				t.Fatal(err)
			}
			pod := sts.Spec.Template.Spec
			agent, init := containerNamed(pod.Containers, MemberAgentContainerName), containerNamed(pod.InitContainers, MemberInitContainerName)
			storeFlag := func(arg string) (string, bool) {
				name, _, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				return name, ok && slices.Contains(backupstore.FlagNames(), name)
			}
			var agentStore []string
			for _, a := range agent.Args {
				if name, ok := storeFlag(a); ok {
					agentStore = append(agentStore, name)
					if !slices.Contains(init.Args, a) {
						t.Errorf("the agent has %s, the init step does not: %v", a, init.Args)
					}
				}
			}
			for _, name := range tt.want {
				if !slices.Contains(agentStore, name) {
					t.Errorf("the agent lacks --%s: %v", name, agent.Args)
				}
			}
			if at := slices.Index(init.Args, "--"); at < 0 || slices.ContainsFunc(init.Args[at:], func(a string) bool { _, ok := storeFlag(a); return ok }) {
				t.Errorf("store flags must come before \"--\" (etcd's flags): %v", init.Args)
			}
			for _, a := range init.Args {
				_, value, _ := strings.Cut(a, "=")
				if _, ok := storeFlag(a); !ok || !strings.HasPrefix(value, "/") {
					continue
				}
				if !slices.ContainsFunc(init.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == value && m.ReadOnly }) {
					t.Errorf("%s names a directory the init step does not mount read-only: %+v", a, init.VolumeMounts)
				}
			}
		})
	}
}
