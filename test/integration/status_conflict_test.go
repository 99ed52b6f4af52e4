package integration

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/controller/status"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/etcdstatus"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// laggingReader serves one Etcd as it was read earlier, as the manager's cache does until the
// watch event of a newer write arrives; everything else goes to the apiserver.
type laggingReader struct {
	client.Client
	etcd *druidv1alpha1.Etcd
}

func (l laggingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if e, ok := obj.(*druidv1alpha1.Etcd); ok && key == client.ObjectKeyFromObject(l.etcd) {
		l.etcd.DeepCopyInto(e)
		return nil
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// TestStatusWriteOnAStaleCopyIsARequeue: the status controller reads the Etcd from the cache,
// which lags the other status writers; its write then conflicts. During a rollout that happened
// dozens of times a minute, each logged as a reconcile error. It is expected, so it is a requeue,
// and the write on the fresh copy keeps the other writer's condition.
func TestStatusWriteOnAStaleCopyIsARequeue(t *testing.T) {
	ns, name := testNamespace("status-conflict"), "etcd-main"
	env := sharedControlPlane(t)
	ctx := setup(t, env, ns, name)
	c := env.Client()
	if err := c.Create(ctx, framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))); err != nil {
		t.Fatal(err)
	}
	stale := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, stale); err != nil {
		t.Fatal(err)
	}
	// Another writer's patch after the cached copy was read.
	other := stale.DeepCopy()
	scaling := druidv1alpha1.Condition{Type: druidv1alpha1.ConditionTypeScaleOperationInProgress, Status: druidv1alpha1.ConditionFalse,
		Reason: "Settled", Message: "written by the membership controller", LastUpdateTime: metav1.NewTime(time.Now())}
	if err := etcdstatus.Patch(ctx, c, other, etcdstatus.WriterMembership, func(s *druidv1alpha1.EtcdStatus) {
		s.Conditions = etcdstatus.SetCondition(s.Conditions, scaling)
	}); err != nil {
		t.Fatal(err)
	}

	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(stale)}
	res, err := status.NewReconciler(laggingReader{Client: c, etcd: stale}, nil).Reconcile(ctx, req)
	if err != nil || !res.Requeue {
		t.Fatalf("reconcile on a stale copy: result %+v, err %v; want a requeue and no error", res, err)
	}
	if _, err := status.NewReconciler(c, nil).Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile on the fresh copy: %v", err)
	}
	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []druidv1alpha1.ConditionType{druidv1alpha1.ConditionTypeScaleOperationInProgress, druidv1alpha1.ConditionTypeReady} {
		if druidv1alpha1.FindCondition(got.Status.Conditions, want) == nil {
			t.Errorf("condition %s missing after the write on the fresh copy: %+v", want, got.Status.Conditions)
		}
	}
}
