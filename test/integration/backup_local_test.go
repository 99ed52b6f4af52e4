package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/config/v1alpha1"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestLocalBackupHostPathFromTheSecret: the Local provider's host root is the backup Secret's
// hostPath key (etcd-druid's) when the operator allows it (backupStores.localRoots), and the pods
// mount only their Etcd's directory below it. A hostPath inside an allowed root (it would compose
// into another Etcd's directory) or one the operator does not list is reported and mounts
// nothing; an allowed one mounts the Etcd's own directory.
func TestLocalBackupHostPathFromTheSecret(t *testing.T) {
	t.Parallel() // it mostly waits on its operator (sharedControlPlane)
	env := sharedControlPlane(t)
	ns, name := testNamespace("backup-local"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns},
		BackupStores: &configv1alpha1.BackupStoresConfiguration{LocalRoots: []string{backupstore.DefaultLocalHostPath, "/var/backups"}},
		// Secrets are not watched: a fixed one is seen on the next retry.
		InvalidInputRetry: 2 * time.Second})
	c := env.Client()

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-backup"},
		Data: map[string][]byte{backupstore.KeyHostPath: []byte(backupstore.DefaultLocalHostPath + "/other-namespace/etcd-main")}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	etcd := framework.NewEtcd(ns, name, 1, framework.EtcdImage("3.6.8"))
	etcd.Spec.Backup = &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{
		Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To("backups"), Prefix: "etcd-main",
		SecretRef: &corev1.SecretReference{Name: "etcd-backup"},
	}}
	if err := c.Create(ctx, etcd, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	waitForLastErrors(t, c, etcd, "ERR_BACKUP_STORE", []string{"etcd-backup", backupstore.KeyHostPath, "is not one of the host directories the operator allows"})
	localVolume := func(want string) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			sts, err := getStatefulSet(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for _, v := range sts.Spec.Template.Spec.Volumes {
				if v.HostPath != nil {
					got = append(got, v.HostPath.Path)
				}
			}
			if want == "" {
				return len(got) == 0 && sts.Spec.Template.Spec.Volumes != nil, fmt.Sprintf("host paths %v, want none", got)
			}
			return len(got) == 1 && got[0] == want, fmt.Sprintf("host paths %v, want %s", got, want)
		}
	}
	framework.Eventually(t, timeout, "no host directory for a refused hostPath", localVolume(""))

	secret.Data[backupstore.KeyHostPath] = []byte("/srv/not-listed")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitForLastErrors(t, c, etcd, "ERR_BACKUP_STORE", []string{`"/srv/not-listed" is not one of the host directories the operator allows`, "/var/backups"})
	framework.Eventually(t, timeout, "no host directory for a root the operator does not list", localVolume(""))

	secret.Data[backupstore.KeyHostPath] = []byte("/var/backups")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "the Etcd's own directory below the Secret's hostPath", localVolume("/var/backups/"+ns+"/"+name))
	framework.Eventually(t, timeout, "lastErrors cleared by a good Secret", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		return len(got.Status.LastErrors) == 0, fmt.Sprintf("lastErrors %+v", got.Status.LastErrors)
	})
}
