package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
)

// TestRemovedMemberLeaseOutlivesItsMember: after spec.replicas drops from 5 to 3, the Leases of
// etcd-main-3 and etcd-main-4 stay while the leader's member list (status.voters) still has them,
// and etcd-main-4's while its pod still exists; each goes once neither holds. (The operator runs
// without members here: the voters are written as the membership controller records them.)
func TestRemovedMemberLeaseOutlivesItsMember(t *testing.T) {
	t.Parallel() // it mostly waits on its operator (sharedControlPlane)
	env := sharedControlPlane(t)
	ns, name := testNamespace("lease-lifecycle"), "etcd-main"
	ctx := setup(t, env, ns, name)
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true), WatchNamespaces: []string{ns}})
	c := env.Client()

	etcd := framework.NewEtcd(ns, name, 5, framework.EtcdImage("3.6.8"))
	if err := c.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	leaseExists := func(member string) bool {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: member}, &coordinationv1.Lease{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	framework.Eventually(t, timeout, "five member Leases", func(context.Context) (bool, string) {
		return leaseExists("etcd-main-4"), "etcd-main-4's Lease missing"
	})
	setVoters := func(n int) {
		recordVoters(ctx, t, c, etcd, n, func(i int) string { return fmt.Sprintf("etcd-main-%d", i) })
	}
	setVoters(5)
	// The removed member etcd-main-4 still runs.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd-main-4", Labels: resources.SelectorLabels(etcd)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: framework.EtcdImage("3.6.8")}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = 3
	if err := c.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	stays := func(what string, members ...string) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			for _, m := range members {
				if !leaseExists(m) {
					t.Fatalf("%s: the Lease of %s was deleted", what, m)
				}
			}
		}
	}
	stays("both still voters", "etcd-main-3", "etcd-main-4")

	setVoters(3)
	framework.Eventually(t, timeout, "etcd-main-3's Lease deleted once it left the cluster", func(context.Context) (bool, string) {
		return !leaseExists("etcd-main-3"), "still there"
	})
	stays("its pod still runs", "etcd-main-4")

	if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, timeout, "etcd-main-4's Lease deleted once its pod is gone", func(context.Context) (bool, string) {
		return !leaseExists("etcd-main-4"), "still there"
	})
}

// recordVoters writes status.voters as the membership controller would, with the first n members
// (name(i), IDs 1..n): what a test plays when no etcd runs.
func recordVoters(ctx context.Context, t *testing.T, c client.Client, etcd *druidv1alpha1.Etcd, n int, name func(int) string) {
	t.Helper()
	got := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(etcd), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Status.Voters = nil
	for i := range n {
		got.Status.Voters = append(got.Status.Voters, druidv1alpha1.RecordedVoter{Name: name(i), ID: fmt.Sprint(i + 1)})
	}
	if err := c.Status().Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
}
