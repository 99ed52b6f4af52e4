package integration

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestForeignObjectsAreNotAdopted: objects that carry an Etcd's names but were not created for it
// (here a ConfigMap and a member Lease someone else wrote) used to be taken over by
// CreateOrUpdate + SetControllerReference, overwritten, and later deleted by garbage collection
// with the Etcd. The operator must leave them as they are, say so, and create no StatefulSet;
// once they are gone, the Etcd converges.
func TestForeignObjectsAreNotAdopted(t *testing.T) {
	t.Parallel() // it mostly waits on its operator (sharedControlPlane)
	ns, name := testNamespace("foreign"), "etcd-main"
	env := sharedControlPlane(t)
	ctx := setup(t, env, ns, name)

	foreignConfig := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-config"},
		Data:       map[string]string{"owner": "someone else", "ETCD_INITIAL_CLUSTER": "not-ours=https://example.invalid:2380"},
	}
	// The Lease has a controller of its own (a made-up one: no garbage collector runs here).
	otherOwner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other-owner", UID: "0e0e0e0e-other-owner", Controller: ptr.To(true)}
	foreignLease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-1", OwnerReferences: []metav1.OwnerReference{otherOwner}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-controller"), LeaseDurationSeconds: ptr.To(int32(60))},
	}
	for _, obj := range []client.Object{foreignConfig, foreignLease} {
		if err := env.Client().Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	etcd := framework.NewEtcd(ns, name, 3, framework.EtcdImage("3.6.8"))
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}

	waitForLastErrors(t, env.Client(), etcd, resources.ErrForeignObject,
		[]string{"ConfigMap " + ns + "/etcd-main-config", "no controller"}, []string{"Lease " + ns + "/etcd-main-1", "controlled by ConfigMap other-owner (uid 0e0e0e0e-other-owner)"})
	waitForEvent(t, env.Client(), etcd, "ForeignObject", "etcd-main-config")

	// Give later reconciles (retries with backoff) a chance to do what they must not.
	time.Sleep(2 * time.Second)
	gotConfig := &corev1.ConfigMap{}
	if err := env.Client().Get(ctx, client.ObjectKeyFromObject(foreignConfig), gotConfig); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(gotConfig.Data, foreignConfig.Data) || len(gotConfig.OwnerReferences) != 0 {
		t.Errorf("the foreign ConfigMap was changed: data %v, owners %v", gotConfig.Data, gotConfig.OwnerReferences)
	}
	gotLease := &coordinationv1.Lease{}
	if err := env.Client().Get(ctx, client.ObjectKeyFromObject(foreignLease), gotLease); err != nil {
		t.Fatal(err)
	}
	if len(gotLease.OwnerReferences) != 1 || gotLease.OwnerReferences[0].UID != otherOwner.UID || ptr.Deref(gotLease.Spec.HolderIdentity, "") != "another-controller" ||
		ptr.Deref(gotLease.Spec.LeaseDurationSeconds, 0) != 60 || len(gotLease.Labels) != 0 {
		t.Errorf("the foreign Lease was changed: %+v", gotLease)
	}
	if _, err := getStatefulSet(ctx, env.Client(), ns, name); !apierrors.IsNotFound(err) {
		t.Fatalf("StatefulSet: err = %v, want NotFound while its ConfigMap belongs to something else", err)
	}
	// The objects that are not in conflict are still ours.
	sa := &corev1.ServiceAccount{}
	if err := env.Client().Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sa); err != nil || !metav1.IsControlledBy(sa, etcd) {
		t.Errorf("ServiceAccount: err %v, controlled by the Etcd: %v", err, err == nil && metav1.IsControlledBy(sa, etcd))
	}

	for _, obj := range []client.Object{foreignConfig, foreignLease} {
		if err := env.Client().Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, timeout, "the Etcd converges once the foreign objects are gone", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := env.Client().Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
			return false, err.Error()
		}
		if len(got.Status.LastErrors) != 0 || got.Status.ObservedGeneration == nil || *got.Status.ObservedGeneration != got.Generation {
			return false, fmt.Sprintf("lastErrors %+v, observedGeneration %v", got.Status.LastErrors, got.Status.ObservedGeneration)
		}
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &coordinationv1.Lease{}} {
			key := client.ObjectKeyFromObject(foreignConfig)
			if _, ok := obj.(*coordinationv1.Lease); ok {
				key = client.ObjectKeyFromObject(foreignLease)
			}
			if err := env.Client().Get(ctx, key, obj); err != nil {
				return false, err.Error()
			}
			if !metav1.IsControlledBy(obj, got) {
				return false, fmt.Sprintf("%s is not controlled by the Etcd", key)
			}
		}
		if _, err := getStatefulSet(ctx, env.Client(), ns, name); err != nil {
			return false, "StatefulSet: " + err.Error()
		}
		return true, ""
	})
}
