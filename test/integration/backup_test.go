package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/internal/store/backupstore"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestBackupWiringAndBadStoresReported: an Etcd with spec.backup gets its member-agents wired
// (flags, the Secret mounted into the agent and the init step alone, the snapshot Leases and the Role's rule on
// them). A missing Secret, a Secret without credentials and an unknown provider are each
// reported (lastErrors, Event; BackupReady False for the provider) while the Etcd is still
// reconciled; a good Secret clears them; an on-demand request reaches the full snapshot Lease.
func TestBackupWiringAndBadStoresReported(t *testing.T) {
	t.Parallel() // it mostly waits on its operator (sharedControlPlane)
	env := sharedControlPlane(t)
	ns, name := testNamespace("backup-wiring"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns},
		// Secrets are not watched: a fixed one is seen on the next retry.
		InvalidInputRetry: 2 * time.Second})
	c := env.Client()

	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	etcd.Spec.Backup = &druidv1alpha1.BackupSpec{
		Store: &druidv1alpha1.StoreSpec{
			Provider: ptr.To(druidv1alpha1.StorageProvider("aws")), Container: ptr.To("bucket"), Prefix: "shoot/etcd-main",
			SecretRef: &corev1.SecretReference{Name: "etcd-backup"},
		},
		DeltaSnapshotPeriod: &metav1.Duration{Duration: 10 * time.Second},
	}
	if err := c.Create(ctx, etcd, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}

	framework.Eventually(t, timeout, "member-agent wired for backups", func(ctx context.Context) (bool, string) {
		sts, err := getStatefulSet(ctx, c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		pod := sts.Spec.Template.Spec
		var agentMounts []string
		for _, ct := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
			for _, m := range ct.VolumeMounts {
				if m.Name == "backup-secret" {
					agentMounts = append(agentMounts, ct.Name)
				}
			}
			if ct.Name == resources.MemberAgentContainerName {
				args := strings.Join(ct.Args, " ")
				for _, want := range []string{"--backup-provider=aws", "--backup-container=bucket", "--backup-prefix=shoot/etcd-main",
					"--delta-snapshot-period=10s", "--full-snapshot-lease=" + name + "-full-snap", "--backup-secret-dir="} {
					if !strings.Contains(args, want) {
						return false, fmt.Sprintf("member-agent args %s lack %s", args, want)
					}
				}
			}
		}
		// The init step restores from the store when asked to (it reads the same Secret,
		// read-only); the etcd container never sees it.
		if want := resources.MemberInitContainerName + "," + resources.MemberAgentContainerName; strings.Join(agentMounts, ",") != want {
			return false, fmt.Sprintf("backup Secret mounted into %v, want the member-init and member-agent alone", agentMounts)
		}
		for _, v := range pod.Volumes {
			if v.Name == "backup-secret" && (v.Secret == nil || v.Secret.Optional == nil || !*v.Secret.Optional) {
				return false, "backup Secret volume is not optional: a missing Secret would keep members from starting"
			}
		}
		for _, l := range []string{name + "-full-snap", name + "-delta-snap"} {
			lease := &coordinationv1.Lease{}
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: l}, lease); err != nil {
				return false, err.Error()
			}
			if lease.Labels[resources.LabelName] != "etcd-snapshot" || !metav1.IsControlledBy(lease, etcd) {
				return false, fmt.Sprintf("lease %s labels %v owners %v", l, lease.Labels, lease.OwnerReferences)
			}
		}
		role := &rbacv1.Role{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: resources.MemberAgentRoleName(etcd)}, role); err != nil {
			return false, err.Error()
		}
		for _, r := range role.Rules {
			if strings.Join(r.ResourceNames, ",") == name+"-full-snap,"+name+"-delta-snap" && strings.Join(r.Verbs, ",") == "get,patch" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("member-agent Role rules %+v lack get,patch on the snapshot Leases", role.Rules)
	})

	// No Secret yet: reported, and the Etcd converged all the same.
	waitForLastErrors(t, c, etcd, "ERR_BACKUP_STORE", []string{"etcd-backup", "does not exist"})
	waitForEvent(t, c, etcd, "InvalidBackupStore", "does not exist")
	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	if g := got.Status.ObservedGeneration; g == nil || *g != got.Generation {
		t.Errorf("observedGeneration %v, want %d: a bad backup store must not block the reconcile", g, got.Generation)
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-backup"}, Data: map[string][]byte{"region": []byte("eu-west-1")}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitForLastErrors(t, c, etcd, "ERR_BACKUP_STORE", []string{"etcd-backup", backupstore.KeyAccessKeyID})

	secret.Data[backupstore.KeyAccessKeyID] = []byte("AKIA")
	secret.Data[backupstore.KeySecretAccessKey] = []byte("secret")
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "lastErrors cleared by a good Secret", func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		return len(got.Status.LastErrors) == 0, fmt.Sprintf("lastErrors %+v", got.Status.LastErrors)
	})

	// A second Etcd on the same bucket and prefix: reported on it, with an Event; it converges
	// (serves) all the same.
	if _, err := framework.CreateTLSSecrets(ctx, c, ns, "etcd-other"); err != nil {
		t.Fatal(err)
	}
	other := framework.NewEtcd(ns, "etcd-other", 1, framework.EtcdImage("3.6.8"))
	other.Spec.Backup = etcd.Spec.Backup.DeepCopy()
	if err := c.Create(ctx, other, client.FieldValidation("Strict")); err != nil {
		t.Fatal(err)
	}
	waitForLastErrors(t, c, other, "ERR_BACKUP_STORE", []string{"is also Etcd " + ns + "/" + name, "own bucket or prefix"})
	waitForEvent(t, c, other, "InvalidBackupStore", "is also Etcd "+ns+"/"+name)
	if err := c.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}

	// On demand: the annotation reaches the full snapshot Lease.
	patch := client.MergeFrom(got.DeepCopy())
	metav1.SetMetaDataAnnotation(&got.ObjectMeta, resources.AnnotationFullSnapshot, "request-1")
	if err := c.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "on-demand request on the full snapshot Lease", func(ctx context.Context) (bool, string) {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-full-snap"}, lease); err != nil {
			return false, err.Error()
		}
		return lease.Annotations[memberlease.AnnotationFullSnapshotRequest] == "request-1", fmt.Sprintf("annotations %v", lease.Annotations)
	})

	// An unknown provider: reported, and BackupReady says so without any agent.
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Backup.Store.Provider = ptr.To(druidv1alpha1.StorageProvider("floppy"))
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitForLastErrors(t, c, etcd, "ERR_BACKUP_STORE", []string{"unknown backup store provider", "floppy"})
	framework.Eventually(t, timeout, "BackupReady False (StoreInvalid)", func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		cond := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeBackupReady)
		if cond == nil {
			return false, "no BackupReady condition"
		}
		return cond.Status == druidv1alpha1.ConditionFalse && cond.Reason == memberlease.ReasonStoreInvalid && strings.Contains(cond.Message, "floppy"),
			fmt.Sprintf("BackupReady %s %s: %s", cond.Status, cond.Reason, cond.Message)
	})
}
