package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
)

// ErrBackupStore is a backup store the members cannot use: an unknown provider, a missing or
// unusable Secret. It is reported, not blocking: the cluster is reconciled and keeps serving,
// only its backups fail (and BackupReady says so).
const ErrBackupStore = "ERR_BACKUP_STORE"

// EventReasonInvalidBackupStore marks the Warning Event of an ErrBackupStore problem.
const EventReasonInvalidBackupStore = "InvalidBackupStore"

// syncSnapshotLeases creates the full and delta snapshot Leases the leading member-agent
// writes, and hands an on-demand full snapshot request (the Etcd's
// etcd-conductor.io/full-snapshot annotation) on to the full snapshot Lease, each value once.
func (r *Reconciler) syncSnapshotLeases(ctx context.Context, etcd *druidv1alpha1.Etcd) error {
	if !resources.BackupEnabled(etcd) {
		return nil
	}
	request := etcd.Annotations[resources.AnnotationFullSnapshot]
	for _, name := range []string{memberlease.FullSnapshotLeaseName(etcd), memberlease.DeltaSnapshotLeaseName(etcd)} {
		desired := resources.SnapshotLease(etcd, name)
		obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: desired.Name, Namespace: desired.Namespace}}
		full := name == memberlease.FullSnapshotLeaseName(etcd)
		if err := r.apply(ctx, etcd, obj, desired, func() {
			obj.Labels = desired.Labels
			// Each value of the annotation is handed on once (remembered on the Lease): a
			// request written since by an EtcdOpsTask is not overwritten by an old value.
			if full && request != "" && obj.Annotations[memberlease.AnnotationFullSnapshotFromEtcd] != request {
				if obj.Annotations == nil {
					obj.Annotations = map[string]string{}
				}
				// A Lease written before the value was remembered: one it already holds or
				// answered is not asked again (nor written over another pending request).
				known := obj.Annotations[memberlease.AnnotationFullSnapshotFromEtcd] == "" &&
					(obj.Annotations[memberlease.AnnotationFullSnapshotRequest] == request || obj.Annotations[memberlease.AnnotationFullSnapshotHandled] == request)
				if !known {
					obj.Annotations[memberlease.AnnotationFullSnapshotRequest] = request
				}
				obj.Annotations[memberlease.AnnotationFullSnapshotFromEtcd] = request
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// checkBackupStore says what keeps the members from using the backup store, as far as the
// operator can tell without contacting it: the provider, and the Secret's keys.
func (r *Reconciler) checkBackupStore(ctx context.Context, etcd *druidv1alpha1.Etcd) []resources.Problem {
	if !resources.BackupEnabled(etcd) {
		return nil
	}
	store := etcd.Spec.Backup.Store
	problem := func(format string, args ...any) []resources.Problem {
		return []resources.Problem{{Code: ErrBackupStore, Message: fmt.Sprintf(format, args...)}}
	}
	provider, err := backupstore.ParseProvider(string(*store.Provider))
	if err != nil {
		return problem("spec.backup.store.provider: %v; backups are not taken, the cluster is unaffected", err)
	}
	if store.Container == nil || *store.Container == "" {
		return problem("spec.backup.store.container is not set: the %s store needs a bucket or directory", provider)
	}
	if provider == backupstore.ProviderLocal {
		return r.checkLocalHostPath(ctx, etcd)
	}
	if store.SecretRef == nil || store.SecretRef.Name == "" {
		return problem("spec.backup.store.secretRef is not set: the %s store needs credentials (%s, %s)", provider, backupstore.KeyAccessKeyID, backupstore.KeySecretAccessKey)
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: etcd.Namespace, Name: store.SecretRef.Name}
	if err := r.apiReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return problem("backup Secret %s named in spec.backup.store.secretRef does not exist", key)
		}
		return problem("reading backup Secret %s: %v", key, err)
	}
	settings, err := backupstore.ParseS3Secret(backupstore.WithEndpointOverride(secret.Data, ptr.Deref(store.EndpointOverride, "")))
	if err == nil {
		err = r.settings.BackupReach.CheckEndpoint(settings)
	}
	if err != nil {
		var serr *backupstore.SecretError
		if errors.As(err, &serr) {
			return problem("backup Secret %s: key %s: %s", key, serr.Key, serr.Reason)
		}
		return problem("backup Secret %s: %v", key, err)
	}
	if other := r.sharingStore(ctx, etcd, s3Location(settings.Endpoint, etcd)); other != "" {
		return problem("spec.backup.store: bucket %s, prefix %q on %s is also Etcd %s's: the first to back up there keeps it, this Etcd takes no backups there and never restores from it (both keep serving); give each Etcd its own bucket or prefix",
			*store.Container, store.Prefix, settings.Endpoint, other)
	}
	return nil
}

// s3Location names the objects an Etcd's backups are: endpoint, bucket and prefix.
func s3Location(endpoint string, etcd *druidv1alpha1.Etcd) string {
	store := etcd.Spec.Backup.Store
	return endpoint + "/" + ptr.Deref(store.Container, "") + "/" + strings.Trim(store.Prefix, "/")
}

// sharingStore names another Etcd (namespace/name) whose S3 backups are at location too; "" when
// none. It is the operator's view of what the member-agents enforce on the store itself
// (internal/member/backup.Claim): this one also covers Etcds of other Kubernetes clusters, and says which.
func (r *Reconciler) sharingStore(ctx context.Context, etcd *druidv1alpha1.Etcd, location string) string {
	var list druidv1alpha1.EtcdList
	if err := r.client.List(ctx, &list); err != nil {
		return ""
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == etcd.UID || !resources.BackupEnabled(other) || other.Spec.Backup.Store.SecretRef == nil ||
			ptr.Deref(other.Spec.Backup.Store.Container, "") != ptr.Deref(etcd.Spec.Backup.Store.Container, "") {
			continue
		}
		if p, err := backupstore.ParseProvider(string(*other.Spec.Backup.Store.Provider)); err != nil || p != backupstore.ProviderS3 {
			continue
		}
		secret := &corev1.Secret{}
		if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: other.Namespace, Name: other.Spec.Backup.Store.SecretRef.Name}, secret); err != nil {
			continue
		}
		settings, err := backupstore.ParseS3Secret(backupstore.WithEndpointOverride(secret.Data, ptr.Deref(other.Spec.Backup.Store.EndpointOverride, "")))
		if err == nil && s3Location(settings.Endpoint, other) == location {
			return other.Namespace + "/" + other.Name
		}
	}
	return ""
}

// checkLocalHostPath reports a Local store's backup Secret that is named but missing, or a host
// root (its hostPath, else the default) the operator does not allow (backupStores.localRoots):
// the members then get no host directory.
func (r *Reconciler) checkLocalHostPath(ctx context.Context, etcd *druidv1alpha1.Etcd) []resources.Problem {
	store := etcd.Spec.Backup.Store
	var data map[string][]byte
	from := "no backup Secret is named, so the host directory is the default"
	if store.SecretRef != nil && store.SecretRef.Name != "" {
		key := types.NamespacedName{Namespace: etcd.Namespace, Name: store.SecretRef.Name}
		secret := &corev1.Secret{}
		err := r.apiReader.Get(ctx, key, secret)
		switch {
		case err == nil:
			data, from = secret.Data, fmt.Sprintf("backup Secret %s", key)
		case !apierrors.IsNotFound(err):
			return []resources.Problem{{Code: ErrBackupStore, Message: fmt.Sprintf("reading backup Secret %s: %v", key, err)}}
		case r.settings.BackupReach.CheckLocalRoot(resources.LocalBackupHostPath) == nil:
			return []resources.Problem{{Code: ErrBackupStore, Message: fmt.Sprintf(
				"backup Secret %s named in spec.backup.store.secretRef does not exist: the Local store is kept below %s", key, resources.LocalBackupHostPath)}}
		default:
			from = fmt.Sprintf("backup Secret %s named in spec.backup.store.secretRef does not exist, so the host directory is the default", key)
		}
	}
	if _, err := r.settings.BackupReach.LocalRoot(data); err != nil {
		return []resources.Problem{{Code: ErrBackupStore, Message: fmt.Sprintf("%s: %v; the members get no host directory, backups are not taken", from, err)}}
	}
	return nil
}

// localBackupRoot is the host root of an Etcd's Local store: its backup Secret's hostPath key, as
// etcd-druid reads it, "" for the default (no Secret named, none there, or no key). An unusable
// value is passed on as it is: the StatefulSet then mounts nothing and checkLocalHostPath reports
// it. Read uncached at every sync of an Etcd with the Local provider (a development store), never
// for another provider.
func (r *Reconciler) localBackupRoot(ctx context.Context, etcd *druidv1alpha1.Etcd) (string, error) {
	if !resources.BackupEnabled(etcd) {
		return "", nil
	}
	store := etcd.Spec.Backup.Store
	if p, err := backupstore.ParseProvider(string(*store.Provider)); err != nil || p != backupstore.ProviderLocal || store.SecretRef == nil || store.SecretRef.Name == "" {
		return "", nil
	}
	secret := &corev1.Secret{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: etcd.Namespace, Name: store.SecretRef.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading the Local backup store's hostPath from Secret %s: %w", store.SecretRef.Name, err)
	}
	return strings.TrimSpace(string(secret.Data[backupstore.KeyHostPath])), nil
}
