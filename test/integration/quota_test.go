package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-conductor/etcd-conductor/etcdclient"
	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	etcdcontroller "github.com/etcd-conductor/etcd-conductor/internal/operator/controller/etcd"
)

// TestQuotaBelowTheDatabaseIsRefused lowers spec.etcd.quota below the members' database size
// (real members, about 10 MB each): the Etcd reconciler must refuse it with
// ERR_QUOTA_BELOW_DB_SIZE and keep the members' quota; a quota above the data goes through.
func TestQuotaBelowTheDatabaseIsRefused(t *testing.T) {
	env := sharedControlPlane(t)
	ctx := context.Background()
	ns := testNamespace("quota")
	etcd, cluster := startRealMembers(t, env, ns, func(*druidv1alpha1.Etcd) {})
	makeGarbage(t, cluster)

	pool := etcdclient.NewPool(etcdclient.Options{})
	t.Cleanup(pool.Close)
	r := etcdcontroller.NewReconciler(env.Client(), eventRecorder(t, env), etcdcontroller.Config{
		SecretReader:     env.Client(),
		MemberAgentImage: "agent",
		Members:          pool,
	})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(etcd)}
	reconcileWithQuota := func(quota string) (*druidv1alpha1.Etcd, string) {
		t.Helper()
		e := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, req.NamespacedName, e); err != nil {
			t.Fatal(err)
		}
		if quota != "" {
			q := resource.MustParse(quota)
			e.Spec.Etcd.Quota = &q
			if err := env.Client().Update(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := env.Client().Get(ctx, req.NamespacedName, e); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main-config"}, cm); err != nil {
			t.Fatal(err)
		}
		return e, cm.Data["ETCD_QUOTA_BACKEND_BYTES"]
	}

	if _, quota := reconcileWithQuota(""); quota != "8589934592" {
		t.Fatalf("initial quota %s, want the 8Gi default", quota)
	}
	e, quota := reconcileWithQuota("4Mi")
	if quota != "8589934592" {
		t.Errorf("quota 4Mi below a ~10 MB database reached the ConfigMap (%s)", quota)
	}
	refused := 0
	for _, le := range e.Status.LastErrors {
		if le.Code == etcdcontroller.ErrQuotaBelowDBSize {
			refused++
			t.Logf("lastError: %s", le.Description)
		}
	}
	if refused != 3 {
		t.Errorf("lastErrors %+v: want ERR_QUOTA_BELOW_DB_SIZE for each of the 3 members", e.Status.LastErrors)
	}
	e, quota = reconcileWithQuota("64Mi")
	if quota != "67108864" || len(e.Status.LastErrors) != 0 {
		t.Errorf("quota 64Mi above the data: ConfigMap %s, lastErrors %+v; want 67108864 and none", quota, e.Status.LastErrors)
	}
}
