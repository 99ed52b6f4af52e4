package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/specgate"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestDruidReconcileAnnotations: with etcd-druid's enableEtcdSpecAutoReconcile false, a new Etcd
// comes up, a spec change waits (and says so) until druid.gardener.cloud/operation=reconcile
// orders it, and the order is removed once carried out; suspend-etcd-spec-reconcile holds even an
// order until it is removed.
func TestDruidReconcileAnnotations(t *testing.T) {
	t.Parallel() // it mostly waits on its operator (sharedControlPlane)
	env := sharedControlPlane(t)
	ns, name := testNamespace("spec-gate"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), SpecAutoReconcile: ptr.To(false), WatchNamespaces: []string{ns}})
	c := env.Client()

	etcd := framework.NewEtcd(ns, name, 1, framework.EtcdImage("3.6.8"))
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	podAnnotation := func(want string) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			sts, err := getStatefulSet(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			got := sts.Spec.Template.Annotations["team"]
			return got == want, fmt.Sprintf("pod template annotation team=%q", got)
		}
	}
	framework.Eventually(t, timeout, "the new Etcd's StatefulSet, without an order", podAnnotation(""))

	edit := func(f func(*druidv1alpha1.Etcd)) {
		t.Helper()
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(got.DeepCopy())
		f(got)
		if err := c.Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
	}
	annotationGone := func(key string) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			got := &druidv1alpha1.Etcd{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
				return false, err.Error()
			}
			v, ok := got.Annotations[key]
			return !ok, fmt.Sprintf("%s=%q still set", key, v)
		}
	}
	stays := func(what string, check func(context.Context) (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if ok, msg := check(ctx); !ok {
				t.Fatalf("%s: %s", what, msg)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	edit(func(e *druidv1alpha1.Etcd) { e.Spec.Annotations = map[string]string{"team": "a"} })
	waitForEvent(t, c, etcd, specgate.RuleWaitForOrdering.CamelCase(), "waits for annotation "+specgate.AnnotationOperation)
	stays("a spec change without an order", podAnnotation(""))

	edit(func(e *druidv1alpha1.Etcd) {
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, specgate.AnnotationOperation, specgate.OperationReconcile)
	})
	framework.Eventually(t, timeout, "the ordered change applied", podAnnotation("a"))
	framework.Eventually(t, timeout, "the order removed", annotationGone(specgate.AnnotationOperation))

	// Suspended: not even an order applies the spec; lifting the suspension carries out the order.
	edit(func(e *druidv1alpha1.Etcd) {
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, specgate.AnnotationSuspend, "")
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, specgate.AnnotationOperation, specgate.OperationReconcile)
		e.Spec.Annotations = map[string]string{"team": "b"}
	})
	waitForEvent(t, c, etcd, specgate.RuleSuspended.CamelCase(), specgate.AnnotationSuspend)
	stays("a suspended Etcd", podAnnotation("a"))
	edit(func(e *druidv1alpha1.Etcd) { delete(e.Annotations, specgate.AnnotationSuspend) })
	framework.Eventually(t, timeout, "the order carried out once the suspension is lifted", podAnnotation("b"))

	// Gardener's name for the order works the same, and is removed the same.
	edit(func(e *druidv1alpha1.Etcd) {
		e.Spec.Annotations = map[string]string{"team": "c"}
		metav1.SetMetaDataAnnotation(&e.ObjectMeta, specgate.AnnotationGardenerOperation, specgate.OperationReconcile)
	})
	framework.Eventually(t, timeout, "the change ordered with gardener.cloud/operation applied", podAnnotation("c"))
	framework.Eventually(t, timeout, "gardener.cloud/operation removed", annotationGone(specgate.AnnotationGardenerOperation))
}
