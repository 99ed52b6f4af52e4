package resources

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberpod"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// Backup defaults, etcd-druid's where it has one.
const (
	DefaultDeltaSnapshotPeriod     = 20 * time.Second
	DefaultGarbageCollectionPeriod = time.Minute
	DefaultMaxBackupsLimitBasedGC  = int32(7)
	// LocalBackupHostPath is etcd-druid's default host directory of the Local provider; each
	// Etcd has its own directory below it (LocalBackupHostDir).
	LocalBackupHostPath = backupstore.DefaultLocalHostPath

	// BackupMetricsPort serves the member-agent's backup metrics on the pod IP.
	BackupMetricsPort = int32(2382)

	ErrInvalidBackup = "ERR_INVALID_BACKUP"

	backupSecretVolume = "backup-secret"
	backupSecretPath   = "/var/etcd/backup-secret"
	backupSpoolVolume  = "backup-spool"
	backupSpoolPath    = "/var/etcd/backup-spool"
	backupLocalVolume  = "backup-local"
	backupLocalPath    = "/var/etcd/backup-local"

	// snapshotLeaseComponent labels the snapshot Leases apart from the member Leases: the
	// reconciler deletes member Leases it no longer wants, and the member Lease admission
	// policy binds each of those to one pod.
	snapshotLeaseComponent = "etcd-snapshot"
)

// BackupEnabled says whether spec.backup names a store provider (etcd-druid's test too).
func BackupEnabled(e *druidv1alpha1.Etcd) bool {
	b := e.Spec.Backup
	return b != nil && b.Store != nil && b.Store.Provider != nil && string(*b.Store.Provider) != ""
}

// SnapshotLeaseLabels are the snapshot Leases' labels.
func SnapshotLeaseLabels(e *druidv1alpha1.Etcd) map[string]string {
	return map[string]string{LabelName: snapshotLeaseComponent, LabelInstance: e.Name, LabelManagedBy: ManagerName}
}

// SnapshotLease is an empty snapshot Lease; the leading member-agent writes holderIdentity (the
// revision) and renewTime.
func SnapshotLease(e *druidv1alpha1.Etcd, name string) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: objectMeta(e, name)}
	lease.Labels = SnapshotLeaseLabels(e)
	return lease
}

// FullSnapshotSchedule is spec.backup.fullSnapshotSchedule or the default.
func FullSnapshotSchedule(e *druidv1alpha1.Etcd) string {
	if b := e.Spec.Backup; b != nil && b.FullSnapshotSchedule != nil && *b.FullSnapshotSchedule != "" {
		return *b.FullSnapshotSchedule
	}
	return memberpod.DefaultFullSnapshotSchedule
}

// DeltaSnapshotPeriod is spec.backup.deltaSnapshotPeriod or the default; 0 turns deltas off.
func DeltaSnapshotPeriod(e *druidv1alpha1.Etcd) time.Duration {
	if b := e.Spec.Backup; b != nil && b.DeltaSnapshotPeriod != nil {
		return b.DeltaSnapshotPeriod.Duration
	}
	return DefaultDeltaSnapshotPeriod
}

func garbageCollectionPeriod(e *druidv1alpha1.Etcd) time.Duration {
	if b := e.Spec.Backup; b != nil && b.GarbageCollectionPeriod != nil {
		return b.GarbageCollectionPeriod.Duration
	}
	return DefaultGarbageCollectionPeriod
}

// DefaultCompressionPolicy is etcd-druid's policy when compression is enabled without one.
const DefaultCompressionPolicy = druidv1alpha1.CompressionPolicy("gzip")

// compressionPolicies are the policies etcd-druid's API allows (etcd-backup-restore's).
var compressionPolicies = []druidv1alpha1.CompressionPolicy{"gzip", "lzw", "zlib"}

// CompressionPolicy is the policy the member-agent compresses snapshots with, "" for none.
// Snapshots are compressed only when spec.backup.compression.enabled is true: etcd-druid also
// compresses when it is unset, but turning that on here would change every existing Etcd's
// backups (and roll its pods) on an operator upgrade.
func CompressionPolicy(e *druidv1alpha1.Etcd) druidv1alpha1.CompressionPolicy {
	b := e.Spec.Backup
	if b == nil || b.SnapshotCompression == nil || !ptr.Deref(b.SnapshotCompression.Enabled, false) {
		return ""
	}
	return ptr.Deref(b.SnapshotCompression.Policy, DefaultCompressionPolicy)
}

func validateBackup(e *druidv1alpha1.Etcd) []Problem {
	if !BackupEnabled(e) {
		return nil
	}
	var problems []Problem
	add := func(format string, args ...any) {
		problems = append(problems, Problem{Code: ErrInvalidBackup, Message: fmt.Sprintf(format, args...)})
	}
	if _, err := memberpod.ParseSchedule(FullSnapshotSchedule(e)); err != nil {
		add("spec.backup.fullSnapshotSchedule: %v (want five fields: minute hour day-of-month month day-of-week)", err)
	}
	b := e.Spec.Backup
	for _, d := range []struct {
		field string
		v     *metav1.Duration
	}{{"deltaSnapshotPeriod", b.DeltaSnapshotPeriod}, {"garbageCollectionPeriod", b.GarbageCollectionPeriod}} {
		if d.v != nil && d.v.Duration < 0 {
			add("spec.backup.%s is %s: it must not be negative", d.field, d.v.Duration)
		}
	}
	if p := b.DeltaSnapshotPeriod; p != nil && p.Duration > 0 && p.Duration < time.Second {
		add("spec.backup.deltaSnapshotPeriod is %s: at least 1s (0 turns delta snapshots off)", p.Duration)
	}
	if m := b.MaxBackupsLimitBasedGC; m != nil && *m < 1 {
		add("spec.backup.maxBackupsLimitBasedGC is %d: it must be at least 1", *m)
	}
	// Checked even while compression is off, so turning it on later cannot start a bad policy.
	if c := b.SnapshotCompression; c != nil && c.Policy != nil && !slices.Contains(compressionPolicies, *c.Policy) {
		add("spec.backup.compression.policy is %q: want gzip, lzw or zlib", *c.Policy)
	}
	return problems
}

// LocalBackupHostDir is the host directory an Etcd's Local store is mounted from:
// <root>/<namespace>/<name>, root being the backup Secret's hostPath (etcd-druid's key) or
// LocalBackupHostPath, and one of the operator's allowed roots (backupstore.Reach: exactly one,
// never a directory below one, and no allowed root inside another). The pods mount this directory
// alone, so they reach no other Etcd's snapshots: every Etcd's directory is two names below the
// same roots, names and namespaces hold no "/" and none is "." or "..", so no two Etcds share one
// and none lies inside another's; etcd-druid's layout, <container>/<prefix>, is kept below it.
func LocalBackupHostDir(e *druidv1alpha1.Etcd, root string) string {
	return path.Join(cmp.Or(root, LocalBackupHostPath), e.Namespace, e.Name)
}

// applyBackup gives the member-agent its backup flags, the backup Secret (mounted into it alone;
// optional, so a missing Secret never keeps a member from starting: the agent reports it), a
// scratch volume for full snapshots and, for the Local provider, the Etcd's own host directory
// (LocalBackupHostDir of localRoot). A localRoot reach does not allow (reported as
// ERR_BACKUP_STORE) mounts nothing: the agent then reports the store unusable, and no host
// directory is exposed.
func applyBackup(pod *corev1.PodSpec, e *druidv1alpha1.Etcd, localRoot string, reach backupstore.Reach) {
	if !BackupEnabled(e) {
		return
	}
	b := e.Spec.Backup
	store := b.Store
	agent := &pod.Containers[len(pod.Containers)-1]
	// The store flags are backupstore.Flags; applyRestore hands every one of them to the init step.
	flags := backupstore.Flags{
		Provider: string(*store.Provider), Container: ptr.Deref(store.Container, ""), Prefix: store.Prefix,
		EndpointOverride: ptr.Deref(store.EndpointOverride, ""),
		Etcd:             e.Namespace + "/" + e.Name, EtcdUID: string(e.UID),
	}
	if p, _ := backupstore.ParseProvider(string(*store.Provider)); p == backupstore.ProviderS3 {
		// The members read the endpoint from the Secret as mounted now: they check it too.
		flags.Reach = reach.EndpointsFlag()
	}
	args := []string{
		"--backup-spool-dir=" + backupSpoolPath,
		"--full-snapshot-schedule=" + FullSnapshotSchedule(e),
		"--delta-snapshot-period=" + DeltaSnapshotPeriod(e).String(),
		"--garbage-collection-period=" + garbageCollectionPeriod(e).String(),
		"--full-snapshot-lease=" + memberlease.FullSnapshotLeaseName(e),
		"--delta-snapshot-lease=" + memberlease.DeltaSnapshotLeaseName(e),
		fmt.Sprintf("--metrics-address=$(POD_IP):%d", BackupMetricsPort),
	}
	if b.GarbageCollectionPolicy != nil && *b.GarbageCollectionPolicy == druidv1alpha1.GarbageCollectionPolicy("Exponential") {
		args = append(args, "--garbage-collection-policy=Exponential")
	} else {
		args = append(args, "--garbage-collection-policy=LimitBased",
			fmt.Sprintf("--max-backups=%d", ptr.Deref(b.MaxBackupsLimitBasedGC, DefaultMaxBackupsLimitBasedGC)))
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: backupSpoolVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: backupSpoolVolume, MountPath: backupSpoolPath})
	// Only when compressing: an Etcd that does not keeps its pod template (and is not rolled).
	if p := CompressionPolicy(e); p != "" {
		args = append(args, "--compression-policy="+string(p))
	}
	if store.SecretRef != nil && store.SecretRef.Name != "" {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: backupSecretVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: store.SecretRef.Name, DefaultMode: ptr.To(int32(0o440)), Optional: ptr.To(true),
		}}})
		agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: backupSecretVolume, MountPath: backupSecretPath, ReadOnly: true})
		flags.SecretDir = backupSecretPath
	}
	if p, _ := backupstore.ParseProvider(string(*store.Provider)); p == backupstore.ProviderLocal &&
		reach.CheckLocalRoot(cmp.Or(localRoot, LocalBackupHostPath)) == nil {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: backupLocalVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: LocalBackupHostDir(e, localRoot), Type: ptr.To(corev1.HostPathDirectoryOrCreate),
		}}})
		agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: backupLocalVolume, MountPath: backupLocalPath})
		flags.LocalRoot = backupLocalPath
	}
	agent.Args = slices.Concat(agent.Args, flags.Args(), args)
	agent.Ports = append(agent.Ports, corev1.ContainerPort{Name: portNameBackupMetrics, ContainerPort: BackupMetricsPort, Protocol: corev1.ProtocolTCP})
}

// snapshotLeaseRule lets the member-agents read and patch the two snapshot Leases (the leading
// one writes them; get, because the write is conditional on what it read).
func snapshotLeaseRule(e *druidv1alpha1.Etcd) []rbacv1.PolicyRule {
	if !BackupEnabled(e) {
		return nil
	}
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{coordinationv1.GroupName},
		Resources:     []string{"leases"},
		ResourceNames: []string{memberlease.FullSnapshotLeaseName(e), memberlease.DeltaSnapshotLeaseName(e)},
		Verbs:         []string{"get", "patch"},
	}}
}
