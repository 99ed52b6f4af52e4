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

// backedUp is testEtcd with an S3 store and spec.backup.compression as given.
func backedUp(compression *druidv1alpha1.CompressionSpec) *druidv1alpha1.Etcd {
	e := testEtcd(3)
	e.Spec.Backup = &druidv1alpha1.BackupSpec{
		Store:               &druidv1alpha1.StoreSpec{Provider: ptr.To(druidv1alpha1.StorageProvider("S3")), Container: ptr.To("bucket"), Prefix: "p"},
		SnapshotCompression: compression,
	}
	return e
}

func policy(p string) *druidv1alpha1.CompressionPolicy {
	return ptr.To(druidv1alpha1.CompressionPolicy(p))
}

func TestCompressionReachesTheMemberAgent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		compression *druidv1alpha1.CompressionSpec
		want        string // the --compression-policy value, "" for no flag
	}{
		{name: "unset: none", compression: nil},
		{name: "enabled unset: none (etcd-druid would gzip)", compression: &druidv1alpha1.CompressionSpec{Policy: policy("lzw")}},
		{name: "disabled", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(false), Policy: policy("zlib")}},
		{name: "enabled without a policy: gzip, etcd-druid's default", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true)}, want: "gzip"},
		{name: "gzip", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("gzip")}, want: "gzip"},
		{name: "lzw", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("lzw")}, want: "lzw"},
		{name: "zlib", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("zlib")}, want: "zlib"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts, err := StatefulSet(backedUp(tc.compression), Settings{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range sts.Spec.Template.Spec.Containers {
				if c.Name != MemberAgentContainerName {
					continue
				}
				for _, a := range c.Args {
					if v, ok := strings.CutPrefix(a, "--compression-policy="); ok {
						got = append(got, v)
					}
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("member-agent has --compression-policy=%v, want no flag", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Errorf("member-agent has --compression-policy=%v, want %s", got, tc.want)
			}
		})
	}
}

func TestValidateCompression(t *testing.T) {
	for _, tc := range []struct {
		name        string
		compression *druidv1alpha1.CompressionSpec
		bad         bool
	}{
		{name: "unset", compression: nil},
		{name: "empty", compression: &druidv1alpha1.CompressionSpec{}},
		{name: "each policy", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("zlib")}},
		{name: "unknown policy", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("bzip2")}, bad: true},
		{name: "unknown policy while disabled", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(false), Policy: policy("xz")}, bad: true},
		{name: "policies are lower case", compression: &druidv1alpha1.CompressionSpec{Enabled: ptr.To(true), Policy: policy("GZIP")}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := ValidateSpec(backedUp(tc.compression))
			switch {
			case !tc.bad && len(problems) > 0:
				t.Errorf("unexpected problems: %v", problems)
			case tc.bad && (len(problems) != 1 || problems[0].Code != ErrInvalidBackup || !strings.Contains(problems[0].Message, "spec.backup.compression.policy")):
				t.Errorf("problems %v, want one %s naming spec.backup.compression.policy", problems, ErrInvalidBackup)
			}
		})
	}
}

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
func localHostDir(t *testing.T, e *druidv1alpha1.Etcd, root string, reach backupstore.Reach) (string, bool) {
	t.Helper()
	sts, err := StatefulSet(e, Settings{MemberAgentImage: "img", LocalBackupRoot: root, BackupReach: reach})
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
// root to another the operator allows; a root the operator does not allow mounts nothing, nor
// does one below an allowed root, which would compose into another Etcd's directory (namespace
// "team", name "shoot-a" below root /var/backups is /var/backups/team/shoot-a, where an Etcd
// "etcd-main" of namespace "shoot-a" below root /var/backups/team would have had its).
func TestLocalStoresAreIsolatedPerEtcd(t *testing.T) {
	allowed := backupstore.Reach{LocalRoots: []string{"/var/backups", backupstore.DefaultLocalHostPath}}
	tests := []struct {
		name      string
		etcd      *druidv1alpha1.Etcd
		root      string
		reach     backupstore.Reach
		wantDir   string
		wantMount bool
	}{
		{"default root", localEtcd("shoot-a", "etcd-main"), "", backupstore.Reach{}, "/etc/gardener/local-backupbuffer/shoot-a/etcd-main", true},
		{"another Etcd of the namespace", localEtcd("shoot-a", "etcd-events"), "", backupstore.Reach{}, "/etc/gardener/local-backupbuffer/shoot-a/etcd-events", true},
		{"the same name in another namespace", localEtcd("shoot-b", "etcd-main"), "", backupstore.Reach{}, "/etc/gardener/local-backupbuffer/shoot-b/etcd-main", true},
		{"the Secret's hostPath, allowed", localEtcd("shoot-a", "etcd-main"), "/var/backups", allowed, "/var/backups/shoot-a/etcd-main", true},
		{"the Secret's hostPath, not allowed, mounts nothing", localEtcd("shoot-a", "etcd-main"), "/var/backups", backupstore.Reach{}, "", false},
		{"below an allowed root mounts nothing", localEtcd("shoot-a", "etcd-main"), "/var/backups/team", allowed, "", false},
		{"a relative hostPath mounts nothing", localEtcd("shoot-a", "etcd-main"), "var/backups", allowed, "", false},
		{"a hostPath inside the default root mounts nothing", localEtcd("shoot-a", "etcd-main"), "/etc/gardener/local-backupbuffer/shoot-b/etcd-main", allowed, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, flag := localHostDir(t, tt.etcd, tt.root, tt.reach)
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
