package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	druidv1alpha1 "github.com/etcd-conductor/etcd-conductor/internal/api/druid/v1alpha1"
	"github.com/etcd-conductor/etcd-conductor/internal/decide/specgate"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/localcluster"
)

// TestPodDisruptionBudgetFollowsHealth: on a real apiserver with kube-controller-manager's
// disruption controller, the PDB of a 5-member Etcd has minAvailable 3 while all members are
// ready, 4 (the Ready members) once one is not ready — a ready member can then not be evicted,
// the one that is not ready still can —, 3 again once it is ready (also while the Etcd's spec is
// suspended), and 5 while BackupReady is False (nothing can be evicted).
// The test plays kubelet (pod readiness) and member-agents (Lease renewals); evictions are dry
// runs, which the apiserver checks against the budget like real ones.
func TestPodDisruptionBudgetFollowsHealth(t *testing.T) {
	// The disruption controller computes the PDB's status, which evictions are checked against.
	controllers := append(slices.Clone(localcluster.DefaultControllers), "disruption")
	env := localcluster.StartForTest(t, localcluster.Options{CRDs: true, Controllers: controllers})
	framework.StartOperator(t, env.RESTConfig(), framework.OperatorOptions{FeatureGates: gate(true)})
	c := env.Client()

	const ns = "disruption"
	startHealthyMembers(t, env, ns, nil)
	waitForBudget(t, c, ns, "all members ready", druidv1alpha1.ConditionTrue, 3, 5)
	evict(t, c, ns, "etcd-main-4", true, "a ready member while all are ready")

	// etcd-main-4's readiness probe fails: AllMembersReady False, the four Ready members stay.
	ctx := context.Background()
	p := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main-4"}, p); err != nil {
		t.Fatal(err)
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Ready = false
	}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitForBudget(t, c, ns, "one member not ready", druidv1alpha1.ConditionFalse, 4, 4)
	evict(t, c, ns, "etcd-main-1", false, "a ready member while another is not ready")
	evict(t, c, ns, "etcd-main-4", true, "the member that is not ready")

	// The spec suspended (druid.gardener.cloud/suspend-etcd-spec-reconcile): the PDB still
	// follows health. etcd-main-4 becomes ready again: back to a quorum.
	etcd := &druidv1alpha1.Etcd{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main"}, etcd); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(etcd.DeepCopy())
	metav1.SetMetaDataAnnotation(&etcd.ObjectMeta, specgate.AnnotationSuspend, "true")
	if err := c.Patch(ctx, etcd, patch); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main-4"}, p); err != nil {
		t.Fatal(err)
	}
	if err := kubeletMarkReady(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	waitForBudget(t, c, ns, "all ready again, spec suspended", druidv1alpha1.ConditionTrue, 3, 5)

	// An Etcd whose BackupReady is False (a store no member-agent can build: StoreInvalid at
	// once), all members ready: no eviction. Its own namespace, so no spec change starts a
	// rollout under the first one.
	const nsBackup = "disruption-backup"
	provider := druidv1alpha1.StorageProvider("NoSuchProvider")
	startHealthyMembers(t, env, nsBackup, &druidv1alpha1.BackupSpec{Store: &druidv1alpha1.StoreSpec{Provider: &provider, Container: ptrString("b"), Prefix: "etcd-main"}})
	framework.Eventually(t, timeout, "BackupReady False", func(ctx context.Context) (bool, string) {
		got := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: nsBackup, Name: "etcd-main"}, got); err != nil {
			return false, err.Error()
		}
		cond := druidv1alpha1.FindCondition(got.Status.Conditions, druidv1alpha1.ConditionTypeBackupReady)
		if cond == nil {
			return false, "no BackupReady"
		}
		return cond.Status == druidv1alpha1.ConditionFalse, fmt.Sprintf("%s %s", cond.Status, cond.Reason)
	})
	waitForBudget(t, c, nsBackup, "backup not ready", druidv1alpha1.ConditionTrue, 5, 5)
	evict(t, c, nsBackup, "etcd-main-4", false, "a ready member while BackupReady is False")
}

// startHealthyMembers creates a 5-member Etcd etcd-main in ns (with backup, when set), plays
// kubelet for its pods (all ready) and its member-agents (Leases renewed every second until the
// test ends).
func startHealthyMembers(t *testing.T, env *localcluster.Cluster, ns string, backup *druidv1alpha1.BackupSpec) {
	t.Helper()
	ctx := setup(t, env, ns, "etcd-main")
	etcd := framework.NewEtcd(ns, "etcd-main", 5, framework.EtcdImage("3.6.8"))
	etcd.Spec.Backup = backup
	if err := env.Client().Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	pods := waitForPods(t, env.Client(), ns, 5)
	for name := range pods {
		p := pods[name]
		if err := kubeletMarkReady(ctx, env.Client(), &p); err != nil {
			t.Fatal(err)
		}
	}
	renewCtx, stopRenewing := context.WithCancel(ctx)
	t.Cleanup(stopRenewing)
	go func() {
		for renewCtx.Err() == nil {
			for i := 0; i < 5; i++ {
				role := "Member"
				if i == 0 {
					role = "Leader"
				}
				_ = renewLease(renewCtx, env.Client(), ns, fmt.Sprintf("etcd-main-%d", i), role, i)
			}
			select {
			case <-renewCtx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

func ptrString(s string) *string { return &s }

// waitForBudget waits until AllMembersReady is allReady ("" any), the PDB's minAvailable is want
// and the disruption controller has counted healthy pods for this generation.
func waitForBudget(t *testing.T, c client.Client, ns, what string, allReady druidv1alpha1.ConditionStatus, want int, healthy int32) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("%s: PDB minAvailable %d, %d healthy", what, want, healthy), func(ctx context.Context) (bool, string) {
		etcd := &druidv1alpha1.Etcd{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main"}, etcd); err != nil {
			return false, err.Error()
		}
		cond := druidv1alpha1.FindCondition(etcd.Status.Conditions, druidv1alpha1.ConditionTypeAllMembersReady)
		if allReady != "" && (cond == nil || cond.Status != allReady) {
			return false, fmt.Sprintf("AllMembersReady %v", cond)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "etcd-main"}, pdb); err != nil {
			return false, err.Error()
		}
		got := pdb.Spec.MinAvailable.IntValue()
		return got == want && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == healthy,
			fmt.Sprintf("minAvailable %d, observed generation %d of %d, %d healthy, %d disruptions allowed",
				got, pdb.Status.ObservedGeneration, pdb.Generation, pdb.Status.CurrentHealthy, pdb.Status.DisruptionsAllowed)
	})
}

// evict asks for a dry-run eviction of pod and checks it is allowed or refused by the budget.
func evict(t *testing.T, c client.Client, ns, pod string, allowed bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}}
	err := c.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: pod},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
	})
	var status apierrors.APIStatus
	switch {
	case allowed && err != nil:
		t.Fatalf("evicting %s (%s): %v, want allowed", pod, what, err)
	case !allowed && err == nil:
		t.Fatalf("evicting %s (%s) was allowed, want refused by the disruption budget", pod, what)
	case !allowed && !(errors.As(err, &status) && apierrors.IsTooManyRequests(err)):
		t.Fatalf("evicting %s (%s): %v, want 429 from the disruption budget", pod, what, err)
	}
	t.Logf("evicting %s (%s): allowed=%v (%v)", pod, what, err == nil, err)
}
