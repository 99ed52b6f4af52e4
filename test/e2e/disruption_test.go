package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-conductor/etcd-conductor/internal/operator/resources"
	"github.com/etcd-conductor/etcd-conductor/test/framework"
	"github.com/etcd-conductor/etcd-conductor/test/stack"
)

// TestEvictionFollowsTheBudget: evictions, as a node drain asks for them, against the PDB the
// operator keeps from the members' health (DEP-01), with kube-controller-manager's disruption
// controller. Three healthy members allow one eviction: the first is granted, a second right
// after is refused while the evicted member is away, and once it is back and Ready the budget
// allows one again. The writer and the auditor run throughout: no quorum loss, no acknowledged
// write lost, the history linearizable.
func TestEvictionFollowsTheBudget(t *testing.T) {
	namespace, _ := inParallel(t, "e2e-evict-", operatorDefaults)
	s := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := &env{t: t, stack: s}
	cluster := createCluster(ctx, e, namespace, 3)
	rec := startRecorder(ctx, t, cluster, 3)
	waitDisruptionsAllowed(ctx, e, 1)

	first, err := memberPod(ctx, cluster, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := evict(ctx, s, cluster, 1); err != nil {
		t.Fatalf("evicting %s with three healthy members: %v", first.Name, err)
	}
	evicted := time.Now()
	err = evict(ctx, s, cluster, 2)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting a second member while %s is away: %v, want it refused (429) by the budget", first.Name, err)
	}
	t.Logf("second eviction refused: %v", err)

	e.waitFor(ctx, "the evicted member back and Ready", func(ctx context.Context) (bool, error) {
		p, err := memberPod(ctx, cluster, 1)
		return err == nil && p.UID != first.UID && framework.PodReady(p), err
	})
	backAfter := time.Since(evicted)
	waitDisruptionsAllowed(ctx, e, 1)
	if err := evict(ctx, s, cluster, 2); err != nil {
		t.Fatalf("evicting a member once all three are healthy again: %v", err)
	}
	e.waitFor(ctx, "the second evicted member back and Ready", func(ctx context.Context) (bool, error) {
		st, err := cluster.State(ctx)
		return err == nil && st.Ready == 3, err
	})
	time.Sleep(2 * time.Second)
	report, recErr := rec.Stop(ctx)
	fmt.Printf("e2e %-28s backAfter=%-6s quorumLossMs=%-6d ackedWrites=%-5d lost=%d\n",
		"eviction-follows-budget", backAfter.Round(100*time.Millisecond), report.QuorumLossMs, report.AckedWrites, report.LostAckedWrites)
	checkWrites(t, report, recErr)
	if report.LinearizabilityError != "" {
		t.Errorf("history not linearizable: %s", report.LinearizabilityError)
	}
	if report.QuorumLossMs > 0 {
		t.Errorf("quorum lost for %d ms: evictions went beyond the budget", report.QuorumLossMs)
	}
}

// evict asks for member i's eviction through the Eviction API, as kubectl drain does.
func evict(ctx context.Context, s *stack.Stack, cluster *stack.EtcdCluster, i int) error {
	return s.Kube.PolicyV1().Evictions(cluster.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.PodName(i)},
	})
}

// waitDisruptionsAllowed waits until the Etcd's PDB, as the disruption controller last computed
// it, allows n disruptions.
func waitDisruptionsAllowed(ctx context.Context, e *env, n int32) {
	e.t.Helper()
	e.waitFor(ctx, fmt.Sprintf("the PDB allowing %d disruption(s)", n), func(ctx context.Context) (bool, error) {
		etcd, err := e.cluster.Get(ctx)
		if err != nil {
			return false, err
		}
		pdb, err := e.stack.Kube.PolicyV1().PodDisruptionBudgets(e.cluster.Namespace).Get(ctx, resources.PodDisruptionBudgetName(etcd), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pdb.Status.DisruptionsAllowed == n, fmt.Errorf("disruptionsAllowed %d (minAvailable %s, %d healthy)",
			pdb.Status.DisruptionsAllowed, pdb.Spec.MinAvailable, pdb.Status.CurrentHealthy)
	})
}
