package integration

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/recovery"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
)

// TestIncompleteRestoreStaysUntilAcknowledged: a restore that started the cluster without every
// revision of its backup (a damaged delta) is shown by RestoreIncomplete until a person
// acknowledges it for that cluster: nothing else clears it, an acknowledgement of another cluster
// (an earlier restore) does not count.
func TestIncompleteRestoreStaysUntilAcknowledged(t *testing.T) {
	ns := testNamespace("recovery-incomplete")
	r, _, _ := newRecoveryRig(t, ns)
	etcd := r.get()
	incomplete := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeRestoreIncomplete, Status: druidv1alpha1.ConditionTrue,
		Reason: recovery.ReasonRestoreStoppedEarly, Message: "the restore that started cluster " + etcd.Status.ClusterID + " stopped before the end of the backup: revisions 52..76 are not restored"}
	if err := etcdstatus.Patch(context.Background(), r.env.Client(), etcd, etcdstatus.WriterRecovery, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, incomplete)
	}); err != nil {
		t.Fatal(err)
	}
	acknowledge := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, recovery.AnnotationAcknowledgeIncompleteRestore, value)
		if err := r.env.Client().Patch(context.Background(), r.get(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	condition := func() *druidv1alpha1.Condition {
		return druidv1alpha1.FindCondition(r.get().Status.Conditions, druidv1alpha1.ConditionTypeRestoreIncomplete)
	}

	t.Run("reconciles and an acknowledgement of another cluster leave it True", func(t *testing.T) {
		acknowledge("an-earlier-cluster")
		for range 3 {
			if _, err := r.recovery.Reconcile(context.Background(), r.request()); err != nil {
				t.Fatal(err)
			}
		}
		if c := condition(); c == nil || c.Status != druidv1alpha1.ConditionTrue {
			t.Fatalf("RestoreIncomplete %+v, want it True until acknowledged", c)
		}
	})
	t.Run("the acknowledgement of this cluster turns it False and says what was acknowledged", func(t *testing.T) {
		acknowledge(etcd.Status.ClusterID)
		r.reconcileUntil(t, "RestoreIncomplete acknowledged", func(got *druidv1alpha1.Etcd) (bool, string) {
			c := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeRestoreIncomplete)
			if c == nil || c.Status != druidv1alpha1.ConditionFalse || c.Reason != recovery.ReasonIncompleteRestoreAcknowledged {
				return false, fmt.Sprintf("RestoreIncomplete %+v", c)
			}
			return true, ""
		})
		eventWithReason(t, r.env, ns, etcd.Name, recovery.ReasonIncompleteRestoreAcknowledged, "revisions 52..76 are not restored")
	})
}
