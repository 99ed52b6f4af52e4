package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/takeover"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestDruidManagedEtcdLeftAlone: an Etcd etcd-druid reconciled (its finalizer on it), with druid's
// objects controlled by it under the names etcd-conductor would use (StatefulSet, ConfigMap,
// Services, member Lease), is left exactly as it is by every controller of a running operator:
// no object changed, none created, no status written; the Etcd reconciler says why in a
// Warning. Without the hold, the operator takes druid's objects for its own: it rewrites the
// ConfigMap druid's members read their configuration from and the Services' selectors (the peer
// Service then selects none of druid's pods, whose DNS names go), and sizes druid's StatefulSet.
func TestDruidManagedEtcdLeftAlone(t *testing.T) {
	env := sharedControlPlane(t)
	ns := testNamespace("druid-held")
	ctx := setup(t, env, ns, "etcd-main")
	c := env.Client()

	etcd := framework.NewEtcd(ns, "etcd-main", 3, framework.EtcdImage("3.6.8"))
	etcd.Finalizers = []string{takeover.DruidFinalizer}
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The finalizer is druid's: without druid nobody removes it, so the test does.
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(etcd), got); err == nil {
			got.Finalizers = nil
			_ = c.Update(context.Background(), got)
		}
	})
	// Druid's objects, as druid labels them, controlled by the Etcd as druid sets them.
	druidLabels := map[string]string{"app.kubernetes.io/managed-by": "etcd-druid", "app.kubernetes.io/part-of": etcd.Name}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: druidLabels}
	}
	sts := &appsv1.StatefulSet{ObjectMeta: meta(resources.StatefulSetName(etcd)), Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(int32(3)), ServiceName: resources.PeerServiceName(etcd),
		Selector: &metav1.LabelSelector{MatchLabels: druidLabels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: druidLabels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.6.2"}}}},
	}}
	objects := []client.Object{
		sts,
		&corev1.ConfigMap{ObjectMeta: meta(resources.ConfigMapName(etcd)), Data: map[string]string{"etcd.conf.yaml": "name: etcd-config\n"}},
		&corev1.Service{ObjectMeta: meta(resources.PeerServiceName(etcd)), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: druidLabels,
			Ports: []corev1.ServicePort{{Name: "peer", Port: 2380}}}},
		&corev1.Service{ObjectMeta: meta(resources.ClientServiceName(etcd)), Spec: corev1.ServiceSpec{Selector: druidLabels,
			Ports: []corev1.ServicePort{{Name: "client", Port: 2379}}}},
		&coordinationv1.Lease{ObjectMeta: meta(resources.PodName(etcd, 0))},
	}
	for _, obj := range objects {
		if err := controllerutil.SetControllerReference(etcd, obj, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	versions := map[string]string{}
	key := func(obj client.Object) string { return fmt.Sprintf("%T %s", obj, obj.GetName()) }
	for _, obj := range objects {
		versions[key(obj)] = obj.GetResourceVersion()
	}

	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	// The Etcd reconciler says why it holds; whether it does or not, every controller has had its
	// passes a few seconds later (their requeues are 1–3 s in tests), and what they wrote shows.
	held := false
	for deadline := time.Now().Add(20 * time.Second); !held && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		e, _, err := findEvent(ctx, c, etcd, takeover.RuleHoldDruidManaged.CamelCase())
		if err != nil {
			t.Fatal(err)
		}
		held = e != nil && e.Type == corev1.EventTypeWarning
	}
	if !held {
		t.Errorf("no Warning %s on the Etcd within 20s", takeover.RuleHoldDruidManaged.CamelCase())
	}
	time.Sleep(5 * time.Second)

	for _, obj := range objects {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%s: %v", key(obj), err)
			continue
		}
		if obj.GetResourceVersion() != versions[key(obj)] {
			t.Errorf("%s was written (resourceVersion %s → %s): labels %v", key(obj), versions[key(obj)], obj.GetResourceVersion(), obj.GetLabels())
		}
	}
	for _, list := range []client.ObjectList{&corev1.ServiceAccountList{}, &corev1.ConfigMapList{}, &coordinationv1.LeaseList{}, &appsv1.StatefulSetList{}} {
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{resources.LabelManagedBy: resources.ManagerName}); err != nil {
			t.Fatal(err)
		}
		if n := apimeta.LenList(list); n > 0 {
			t.Errorf("%T: %d objects of etcd-conductor's created beside druid's", list, n)
		}
	}
	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) > 0 || got.Status.ObservedGeneration != nil || len(got.Status.LastErrors) > 0 {
		t.Errorf("status written on a druid-managed Etcd: %+v", got.Status)
	}
}
