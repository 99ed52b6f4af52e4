package opstask

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/contract/memberlease"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/opstask"
)

// TestReconcileCarriesOutTheDecisions walks one full snapshot task through the controller with a
// fake client: accepted, admitted, the request written on the full snapshot Lease, succeeded
// once the Lease records it handled, and deleted when its TTL is over.
func TestReconcileCarriesOutTheDecisions(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := druidv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	etcd := &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "main"},
		Spec: druidv1alpha1.EtcdSpec{Backup: &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{
			Provider: ptr.To(druidv1alpha1.StorageProvider("Local")), Container: ptr.To("c")}}}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: memberlease.FullSnapshotLeaseName(etcd)}}
	task := &druidv1alpha1.EtcdOpsTask{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", UID: "uid-t"},
		Spec: druidv1alpha1.EtcdOpsTaskSpec{EtcdName: ptr.To("main"), TTLSecondsAfterFinished: ptr.To(int32(60)),
			Config: druidv1alpha1.EtcdOpsTaskConfig{OnDemandSnapshot: &druidv1alpha1.OnDemandSnapshotConfig{Type: druidv1alpha1.OnDemandSnapshotTypeFull}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(etcd, lease, task).WithStatusSubresource(task).Build()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	r := NewReconciler(Config{Client: c, Now: func() time.Time { return now }})
	key := types.NamespacedName{Namespace: "ns", Name: "t"}
	step := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	state := func() druidv1alpha1.TaskState {
		t.Helper()
		got := &druidv1alpha1.EtcdOpsTask{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(got.Status.State, "")
	}

	step()
	if s := state(); s != druidv1alpha1.TaskStatePending {
		t.Fatalf("after one step: %q, want Pending", s)
	}
	step()
	if s := state(); s != druidv1alpha1.TaskStateInProgress {
		t.Fatalf("after two steps: %q, want InProgress", s)
	}
	step()
	if err := c.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	request := lease.Annotations[memberlease.AnnotationFullSnapshotRequest]
	if request != opstask.RequestValue(task) {
		t.Fatalf("Lease annotations %v, want the task's request", lease.Annotations)
	}
	step()
	if s := state(); s != druidv1alpha1.TaskStateInProgress {
		t.Fatalf("before the agent answered: %q, want InProgress", s)
	}
	lease.Annotations[memberlease.AnnotationFullSnapshotHandled] = request
	lease.Annotations[memberlease.AnnotationSnapshotKey] = "v2/Full-00000000-00000009-1"
	lease.Spec.HolderIdentity = ptr.To("9")
	if err := c.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	step()
	if s := state(); s != druidv1alpha1.TaskStateSucceeded {
		t.Fatalf("after the agent answered: %q, want Succeeded", s)
	}
	now = now.Add(time.Minute)
	step()
	if err := c.Get(ctx, key, &druidv1alpha1.EtcdOpsTask{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the TTL: %v, want the task deleted", err)
	}
}
